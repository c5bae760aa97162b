"""LeaderElection with an epoch: the leader is the first contender in line, and its epoch is
its node's czxid, a Sequencer that fences everything the leader writes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from kazoo.client import KazooClient

from zkcompat.recipes._contenders import contender_identifiers
from zkcompat.recipes.fencing import Sequencer
from zkcompat.recipes.lock import FencedLock, LockState, StateListener

T = TypeVar("T")


class LeaderElection:
    """Leader election where each term has an epoch that only grows.

    Contenders queue exactly as FencedLock's (followers watch only their predecessor, so a
    leader's departure wakes one follower); the leader is the holder. `campaign()` blocks
    until we lead and returns our Sequencer: `epoch` is its token, larger than every earlier
    leader's, so resources that keep the highest epoch (FencedResource) reject a deposed
    leader that has not noticed yet. Leadership is lost exactly as a lock is: `state` goes
    to JEOPARDY on SUSPENDED and LOST on session expiry; `check()` raises.
    Interoperates with kazoo's Election on the same path (same node names).
    """

    def __init__(
        self,
        client: KazooClient,
        path: str,
        identifier: str = "",
        lock_delay_s: float = 0.0,
        on_state_change: StateListener | None = None,
        jeopardy_timeout_s: float | None = None,
    ) -> None:
        self.client = client
        self.path = path.rstrip("/")
        self.identifier = identifier
        self._lock = FencedLock(client, self.path, identifier, lock_delay_s, on_state_change,
                                jeopardy_timeout_s)

    @property
    def state(self) -> LockState:
        return self._lock.state

    @property
    def is_leader(self) -> bool:
        return self._lock.is_held

    @property
    def epoch(self) -> int | None:
        """Our epoch while we lead (also in jeopardy or lost), else None."""
        sequencer = self._lock.sequencer
        return None if sequencer is None else sequencer.token

    @property
    def sequencer(self) -> Sequencer | None:
        return self._lock.sequencer

    def add_state_listener(self, listener: StateListener) -> None:
        self._lock.add_state_listener(listener)

    def campaign(self, timeout: float | None = None) -> Sequencer:
        """Block until we are the leader; return our Sequencer (token = epoch).

        Raises LockTimeout when the timeout passes, LockCancelled after cancel().
        """
        sequencer = self._lock.acquire(timeout=timeout)
        assert sequencer is not None
        return sequencer

    def resign(self) -> bool:
        """Step down (or leave the line); the next follower becomes leader."""
        return self._lock.release()

    def cancel(self) -> None:
        """Make a campaign() in another thread raise LockCancelled."""
        self._lock.cancel()

    def check(self) -> Sequencer:
        """Our Sequencer if we lead; raise LockInJeopardy or LockLost otherwise."""
        return self._lock.check()

    def run(self, func: Callable[[Sequencer], T], timeout: float | None = None) -> T:
        """Campaign, call func(sequencer) as leader, resign when it returns or raises."""
        sequencer = self.campaign(timeout)
        try:
            return func(sequencer)
        finally:
            self.resign()

    def leader(self) -> str | None:
        """The current leader's identifier, or None if nobody is in line."""
        contenders = self.contenders()
        return contenders[0] if contenders else None

    def contenders(self) -> list[str]:
        """Identifiers of the leader and then the followers, in line order."""
        return contender_identifiers(self.client, self.path)
