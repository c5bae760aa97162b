"""Fencing tokens: the Sequencer a lock holder carries, and FencedResource, the check a
resource makes (accept a token only if it is at least the highest accepted so far)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar
from urllib.parse import quote

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.retry import ForceRetryError, KazooRetry

from zkcompat.recipes.errors import StaleTokenError, WrongLockError

T = TypeVar("T")

# The text form of a Sequencer: "<token>@<lock path>" (a token never contains "@").
SEQUENCER_SEPARATOR = "@"


@dataclass(frozen=True, order=True)
class Sequencer:
    """What a lock holder passes to a resource with each write (Chubby's sequencer).

    token is the czxid of the holder's lock node: zxids only grow, and a lock passes to
    contenders in the order their nodes were created, so every acquisition of a lock gets
    a larger token than the one before. node is the holder's child name, for logs.
    """

    token: int
    lock_path: str
    node: str = ""

    def __str__(self) -> str:
        return f"{self.token}{SEQUENCER_SEPARATOR}{self.lock_path}"

    @classmethod
    def parse(cls, text: str) -> Sequencer:
        """The inverse of str(): "<token>@<lock path>"."""
        token, sep, lock_path = text.partition(SEQUENCER_SEPARATOR)
        if not sep or not lock_path.startswith("/"):
            raise ValueError(f"not a sequencer: {text!r} (expected '<token>@/lock/path')")
        return cls(int(token), lock_path)


class TokenStore(Protocol):
    """Where a FencedResource keeps the highest token accepted per object."""

    def advance(self, key: str, token: int) -> int:
        """Record token for key if it is >= the highest so far and return the new highest;
        raise StaleTokenError (leaving the state unchanged) if it is lower."""
        ...

    def highest(self, key: str) -> int | None:
        """The highest token accepted for key, or None if none was."""
        ...


class MemoryTokenStore:
    """Highest tokens in this process's memory: one resource replica, or a test."""

    def __init__(self) -> None:
        self._highest: dict[str, int] = {}
        self._mutex = threading.Lock()

    def advance(self, key: str, token: int) -> int:
        with self._mutex:
            highest = self._highest.get(key)
            if highest is not None and token < highest:
                raise StaleTokenError(key, token, highest)
            self._highest[key] = token
            return token

    def highest(self, key: str) -> int | None:
        with self._mutex:
            return self._highest.get(key)


class ZnodeTokenStore:
    """Highest tokens in znodes under `path`, one per object, so several replicas agree.

    Each advance is a compare-and-set (setData with the version just read), even when the
    token equals the stored one: a successful versioned write proves the read was current,
    which a read alone does not (a follower may serve a stale value).
    """

    def __init__(self, client: KazooClient, path: str, retry_deadline_s: float = 30.0) -> None:
        self.client = client
        self.path = path.rstrip("/")
        self.retry_deadline_s = retry_deadline_s
        self._ensured = False

    def _node(self, key: str) -> str:
        if not key:
            raise ValueError("a fenced object needs a non-empty key")
        return f"{self.path}/{quote(key, safe='')}"

    def advance(self, key: str, token: int) -> int:
        if not self._ensured:
            self.client.retry(self.client.ensure_path, self.path)
            self._ensured = True
        # The whole read-compare-write is retried on connection loss: it is idempotent (a
        # CAS applied before the loss fails the next time with BadVersion, and the re-read
        # then finds our own token, which is accepted again).
        retry = KazooRetry(max_tries=-1, deadline=self.retry_deadline_s, ignore_expire=True)
        return retry(self._advance_once, self._node(key), key, token)

    def _advance_once(self, node: str, key: str, token: int) -> int:
        try:
            data, stat = self.client.get(node)
        except NoNodeError:
            try:
                self.client.create(node, str(token).encode("ascii"))
                return token
            except NodeExistsError:
                raise ForceRetryError() from None  # another replica was first: compare with it
        highest = int(data.decode("ascii"))
        if token < highest:
            raise StaleTokenError(key, token, highest)
        try:
            self.client.set(node, str(token).encode("ascii"), version=stat.version)
        except BadVersionError:
            raise ForceRetryError() from None
        return token

    def highest(self, key: str) -> int | None:
        try:
            data, _ = self.client.retry(self.client.get, self._node(key))
        except NoNodeError:
            return None
        return int(data.decode("ascii"))


class FencedResource:
    """The resource side of fencing, for any service to embed.

    `write(key, sequencer, apply)` runs `apply()` only if the sequencer's token is at least
    the highest one accepted for `key`; otherwise it raises StaleTokenError and `apply` does
    not run. The check and `apply` run under one mutex per resource, so in this process no
    older write can slip in between a check and its write. With a ZnodeTokenStore several
    replicas share the highest tokens; each replica still applies its own writes under its
    own mutex.
    """

    def __init__(self, store: TokenStore | None = None, lock_path: str | None = None) -> None:
        self.store: TokenStore = store if store is not None else MemoryTokenStore()
        self.lock_path = lock_path
        self._mutex = threading.RLock()

    def _token(self, sequencer: Sequencer | int) -> int:
        if isinstance(sequencer, Sequencer):
            if self.lock_path is not None and sequencer.lock_path != self.lock_path:
                raise WrongLockError(
                    f"sequencer is for lock {sequencer.lock_path!r}, "
                    f"this resource is guarded by {self.lock_path!r}"
                )
            return sequencer.token
        if isinstance(sequencer, bool) or not isinstance(sequencer, int):
            raise TypeError(f"a fencing token is a Sequencer or an int, not {sequencer!r}")
        return sequencer

    def check(self, key: str, sequencer: Sequencer | int) -> int:
        """Accept the token for key (recording it if it is the highest) or raise StaleTokenError."""
        token = self._token(sequencer)
        with self._mutex:
            try:
                return self.store.advance(key, token)
            except StaleTokenError as e:
                raise StaleTokenError(key, token, e.highest, self.lock_path) from None

    def write(self, key: str, sequencer: Sequencer | int, apply: Callable[[], T]) -> T:
        """Check the token, then run apply() under the same mutex and return its result."""
        with self._mutex:
            self.check(key, sequencer)
            return apply()

    def highest(self, key: str) -> int | None:
        """The highest token accepted for key so far, or None."""
        return self.store.highest(key)
