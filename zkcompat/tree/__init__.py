"""The znode tree: deterministic apply(txn), Stat bookkeeping, ACL checks. Imports jute only."""
