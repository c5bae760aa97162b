"""Semaphore with N permits: kazoo's recipe, reused as is, behind a typed, documented front."""

# kazoo's Semaphore is correct and herd-free: contenders queue on a fair lock beside the
# lease pool, and only that lock's holder watches the pool's children, so a freed permit
# wakes one contender. A holder's permit is an ephemeral node: it goes with its session.

from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout as KazooLockTimeout
from kazoo.recipe.lock import Semaphore as KazooSemaphore

from zkcompat.recipes.errors import LockTimeout


class Semaphore:
    """At most `permits` holders at a time on `path` (kazoo's Semaphore underneath).

    Every client of one path must agree on `permits` (it is stored in the path's data;
    a mismatch raises ValueError). Permits are not fencing tokens: protect a resource that
    needs exclusion with FencedLock instead.
    """

    def __init__(self, client: KazooClient, path: str, permits: int, identifier: str = "") -> None:
        if permits < 1:
            raise ValueError("a semaphore needs at least one permit")
        self.path = path
        self.permits = permits
        self._semaphore = KazooSemaphore(client, path, identifier, max_leases=permits)

    @property
    def is_acquired(self) -> bool:
        return bool(self._semaphore.is_acquired)

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take a permit; False if blocking=False and none is free, LockTimeout at the timeout."""
        try:
            return bool(self._semaphore.acquire(blocking=blocking, timeout=timeout))
        except KazooLockTimeout as e:
            raise LockTimeout(str(e)) from None

    def release(self) -> bool:
        """Give the permit back; False if we held none."""
        return bool(self._semaphore.release())

    def cancel(self) -> None:
        """Make a pending acquire() in another thread raise kazoo's CancelledError."""
        self._semaphore.cancel()

    def holders(self) -> list[str]:
        """Identifiers of the current permit holders (unordered)."""
        return list(self._semaphore.lease_holders())

    def __enter__(self) -> Semaphore:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()
