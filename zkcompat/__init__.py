"""zkcompat: a coordination server that speaks the Apache ZooKeeper client protocol."""

__version__ = "0.1.0"
