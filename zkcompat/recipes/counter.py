"""A shared integer in one znode, changed only by compare-and-set on the znode's version."""

# Unlike kazoo's Counter, an increment is never retried blindly after a connection loss
# (that can apply it twice): the outcome is worked out from the znode, and reported as
# IndeterminateOutcome when it cannot be.

from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    OperationTimeoutError,
)

from zkcompat.recipes.errors import IndeterminateOutcome

ADD_ATTEMPTS_MAX = 1000  # CAS rounds lost to other writers before add() gives up


class Counter:
    """An integer at `path`, stored as ASCII decimal (the format of kazoo's Counter, so both
    can share a path). `get()` returns (value, version); `compare_and_set(version, value)`
    writes only if nobody wrote since that version; `add(delta)` loops on it.
    """

    def __init__(self, client: KazooClient, path: str, default: int = 0) -> None:
        self.client = client
        self.path = path
        self.default = default
        self._ensured = False

    def _ensure(self) -> None:
        if self._ensured:
            return
        try:
            self.client.retry(self.client.create, self.path, str(self.default).encode("ascii"),
                              makepath=True)
        except NodeExistsError:
            pass
        self._ensured = True

    def get(self) -> tuple[int, int]:
        """(value, version) as of now; an empty znode reads as the default."""
        self._ensure()
        data, stat = self.client.retry(self.client.get, self.path)
        value = int(data.decode("ascii")) if data else self.default
        return value, stat.version

    @property
    def value(self) -> int:
        return self.get()[0]

    def compare_and_set(self, expected_version: int, value: int) -> bool:
        """Write value if the znode is still at expected_version; False if someone wrote first.

        If the connection drops before the reply, the znode tells: still at expected_version
        means not applied (and it is tried again); at expected_version + 1 with another value
        means someone else won (False); anything else raises IndeterminateOutcome.
        """
        self._ensure()
        data = str(value).encode("ascii")
        lost = False  # a connection loss happened: an earlier send may still land
        while True:
            try:
                self.client.set(self.path, data, version=expected_version)
                return True
            except BadVersionError:
                if lost:
                    self._settle(expected_version, value)  # raises if the winner may be us
                return False
            except (ConnectionLoss, OperationTimeoutError):
                lost = True
                if self._settle(expected_version, value) is False:
                    return False
                # Not landed (yet): send it again. Should the first send land after all,
                # this one fails with BadVersion and _settle reports the ambiguity.

    def _settle(self, expected_version: int, value: int) -> bool | None:
        """After a connection loss, read the znode: None if the write has not landed, False
        if another writer surely won; raise IndeterminateOutcome if a write that landed may
        have been ours."""
        now, version = self.get()  # retried until the connection is back
        if version == expected_version:
            return None
        if version == expected_version + 1 and now != value:
            return False
        raise IndeterminateOutcome(
            f"{self.path}: connection lost during compare_and_set "
            f"({expected_version} -> {value}); the znode is now at version {version}"
        )

    def add(self, delta: int) -> int:
        """Add delta atomically and return the new value."""
        for _ in range(ADD_ATTEMPTS_MAX):
            value, version = self.get()
            if self.compare_and_set(version, value + delta):
                return value + delta
        raise RuntimeError(f"{self.path}: lost {ADD_ATTEMPTS_MAX} compare-and-set rounds in a row")
