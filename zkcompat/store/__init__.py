"""Durability: the txn log and snapshots."""
