"""KeeperError: a ZooKeeper error code that becomes the `err` of a reply (never a crash)."""

from zkcompat.jute.constants import Code


class KeeperError(Exception):
    """A request failed with one of ZooKeeper's error codes (KeeperException.Code)."""

    __slots__ = ("code", "path")

    def __init__(self, code: int, path: str | None = None):
        super().__init__(code, path)
        self.code = code
        self.path = path

    def __str__(self) -> str:
        try:
            name = Code(self.code).name
        except ValueError:
            name = str(self.code)
        return f"{name} for {self.path}" if self.path else name
