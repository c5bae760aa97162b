"""Security on the client port: TLS (ZooKeeper's ssl.* settings, its key and trust stores)
and the x509 auth scheme. Imports nothing of zkcompat but itself."""
