"""The one codec error: every malformed or truncated input raises JuteError and nothing else."""


class JuteError(Exception):
    """Bytes that ZooKeeper's BinaryInputArchive would refuse with an IOException.

    Raised for truncated records, impossible lengths and counts, unknown multi op
    types and bad frames. A server answers it by closing the one connection.
    """
