"""Replication proven on real processes: zkcompat ensembles (and mixed ones with ZooKeeper
3.8) under kill -9, SIGSTOP, restarts and lost quorums, loaded by real clients."""
