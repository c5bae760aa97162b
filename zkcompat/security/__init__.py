"""Security on the client port and between servers: TLS (ZooKeeper's ssl.* and ssl.quorum.*
settings, its key and trust stores), the x509 auth scheme, SASL (DIGEST-MD5 and Kerberos
GSSAPI, from a JAAS file) and which sessions must authenticate. Imports nothing of zkcompat
but itself."""
