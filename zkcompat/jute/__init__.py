"""The ZooKeeper wire format (Jute): records, constants, framing. Imports nothing of zkcompat."""
