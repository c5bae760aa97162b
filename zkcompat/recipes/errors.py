"""The errors every recipe here raises: one base class, one subclass per thing a caller handles."""

from __future__ import annotations

import kazoo.exceptions


class RecipeError(Exception):
    """Base class of every error raised by zkcompat.recipes."""


class LockTimeout(RecipeError, kazoo.exceptions.LockTimeout):
    """A lock, lease or election was not obtained before the caller's timeout.

    Also a kazoo LockTimeout, so code written for kazoo's recipes catches it unchanged.
    """


class LockCancelled(RecipeError, kazoo.exceptions.CancelledError):
    """A pending acquisition was cancelled by cancel()."""


class LockLost(RecipeError):
    """The lock (or leadership) is gone: the session expired or the holder's node vanished.

    Work that needs the lock must stop, and nothing more may be written with its token.
    """


class LockInJeopardy(RecipeError):
    """The connection is suspended: the lock may or may not still be held.

    Work that needs the lock must pause until the connection comes back (or the lock is lost).
    """


class StaleTokenError(RecipeError):
    """A fenced write carried a token lower than one the resource already accepted."""

    def __init__(self, key: str, token: int, highest: int, lock_path: str | None = None) -> None:
        self.key = key
        self.token = token
        self.highest = highest
        self.lock_path = lock_path
        where = f" (lock {lock_path})" if lock_path else ""
        super().__init__(
            f"stale fencing token {token} for {key!r}{where}: "
            f"token {highest} was already accepted; the writer no longer holds the lock"
        )


class WrongLockError(RecipeError):
    """A fenced write carried a sequencer for a different lock than the one guarding the resource."""


class IndeterminateOutcome(RecipeError):
    """The connection dropped after a write was sent: it may or may not have been applied.

    Raised instead of retrying blindly where a retry could apply a change twice.
    """


class BarrierTimeout(RecipeError):
    """A barrier was not passed before the caller's timeout."""


class ClaimLost(RecipeError):
    """A work-queue item's claim is gone (session expired or released): another worker may own it."""
