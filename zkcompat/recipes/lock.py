"""FencedLock and the fenced read/write lock: fair locks that hand each acquisition a growing
token, with Chubby's lock-delay and the holder's jeopardy (SUSPENDED) and loss (LOST)."""

from __future__ import annotations

import enum
import json
import logging
import threading
import time
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.protocol.states import Callback, EventType, KazooState

from zkcompat.recipes._contenders import (
    LOCK_KIND,
    READ_KIND,
    ContenderQueue,
    NodeVanished,
    contender_identifiers,
)
from zkcompat.recipes.errors import (
    LockCancelled,
    LockInJeopardy,
    LockLost,
    LockTimeout,
)
from zkcompat.recipes.fencing import Sequencer

log = logging.getLogger(__name__)

RETRY_DELAY_MIN_S = 0.05
RETRY_DELAY_MAX_S = 1.0
LOCK_DELAY_MAX_S = 60.0  # Chubby caps lock-delay at one minute
RELEASE_RETRY_MAX_S = 30.0  # past this the session's own end releases the lock
_RETRYABLE = (ConnectionLoss, OperationTimeoutError, SessionExpiredError, NodeVanished)


class LockState(enum.Enum):
    UNLOCKED = "unlocked"
    WAITING = "waiting"
    HELD = "held"
    JEOPARDY = "jeopardy"  # connection suspended: the lock may be gone; pause the work
    LOST = "lost"  # session expired or our node vanished: stop, the token is stale


StateListener = Callable[["FencedLock", LockState], None]


class _Again(Exception):
    """Redo the claim at once (a concurrent change was seen), without backing off."""


def _marker(state: str, holder: str) -> bytes:
    """The lock node's data: who holds it, or who last released it.

    A holder writes "held" when it is told it holds the lock and "released" atomically with
    deleting its node; a node that vanished while the marker still says "held" therefore
    belonged to a holder whose session died, which is when Chubby's lock-delay applies.
    """
    return json.dumps({"state": state, "holder": holder}, sort_keys=True).encode()


def _died_holder(data: bytes, our_node: str) -> str | None:
    """The holder named by a "held" marker that is not us, else None."""
    try:
        marker = json.loads(data.decode())
    except (UnicodeDecodeError, ValueError):
        return None  # not our marker (a plain kazoo lock path): nothing to go by
    if not isinstance(marker, dict) or marker.get("state") != "held":
        return None
    holder = marker.get("holder")
    return holder if isinstance(holder, str) and holder != our_node else None


class FencedLock:
    """A fair, exclusive lock that hands each holder a Sequencer to fence its writes with.

    Contenders queue as ephemeral-sequential children of `path` and each watches only its
    predecessor. `acquire()` returns the holder's Sequencer; its token (the czxid of the
    holder's node) is larger for every later acquisition of this lock, so a resource that
    keeps the highest token it has seen (FencedResource) rejects a paused, former holder.

    `lock_delay_s` (Chubby's lock-delay): when the previous holder's session died instead
    of releasing, the next holder waits this long after noticing before it is told it holds
    the lock, so the dead holder's in-flight writes can drain. A clean release never delays.

    The holder's connection is surfaced as `state`: JEOPARDY while kazoo is SUSPENDED (pause
    the work: the lock may be gone), HELD again once the connection is back and our node is
    still there, LOST when the session expired or the node vanished (stop: the token is
    stale). kazoo learns of an expiry only when it reconnects, so JEOPARDY also turns into
    LOST after `jeopardy_timeout_s` (default: the requested session timeout) without a
    connection: by then the server has expired the session (Chubby's grace period). `check()` raises LockInJeopardy or LockLost; `on_state_change(lock, state)` is
    called on kazoo's callback thread after every change. Not re-entrant; one acquisition
    at a time per object.
    """

    kind = LOCK_KIND
    blocking_kinds: tuple[str, ...] = (LOCK_KIND,)
    writes_marker = True

    def __init__(
        self,
        client: KazooClient,
        path: str,
        identifier: str = "",
        lock_delay_s: float = 0.0,
        on_state_change: StateListener | None = None,
        jeopardy_timeout_s: float | None = None,
    ) -> None:
        if not 0 <= lock_delay_s <= LOCK_DELAY_MAX_S:
            raise ValueError(f"lock_delay_s must be within 0..{LOCK_DELAY_MAX_S}")
        self.client = client
        self.path = path.rstrip("/")
        self.identifier = identifier
        self.lock_delay_s = lock_delay_s
        # kazoo keeps the requested timeout, not the negotiated one; either way, SUSPENDED
        # comes 2/3 of a timeout after the server last heard from us, so this timer ends
        # after the server's expiry unless the server granted a longer timeout.
        self.jeopardy_timeout_s = (
            jeopardy_timeout_s if jeopardy_timeout_s is not None
            else client._session_timeout / 1000.0
        )
        self._jeopardy_generation = 0
        self._listeners: list[StateListener] = [on_state_change] if on_state_change else []
        self._queue = ContenderQueue(
            client, self.path, self.kind, self.blocking_kinds, identifier.encode("utf-8")
        )
        self._state = LockState.UNLOCKED
        self._sequencer: Sequencer | None = None
        self._session_id: int | None = None
        self._cancelled = False
        self._acquire_mutex = threading.Lock()
        self._state_mutex = threading.Lock()
        self.lock_delays_applied = 0  # how many acquisitions waited out a lock-delay

    # ------------------------------------------------------------------ public

    @property
    def state(self) -> LockState:
        return self._state

    @property
    def sequencer(self) -> Sequencer | None:
        """The current holder's Sequencer (also while in jeopardy or lost), else None."""
        return self._sequencer

    @property
    def is_held(self) -> bool:
        """True only while HELD: in jeopardy the work must pause."""
        return self._state is LockState.HELD

    def add_state_listener(self, listener: StateListener) -> None:
        self._listeners.append(listener)

    def check(self) -> Sequencer:
        """The Sequencer if the lock is HELD; else raise LockInJeopardy or LockLost."""
        state, sequencer = self._state, self._sequencer
        if state is LockState.HELD and sequencer is not None:
            return sequencer
        if state is LockState.JEOPARDY:
            raise LockInJeopardy(f"{self.path}: connection suspended, lock may be gone")
        if state is LockState.LOST:
            raise LockLost(f"{self.path}: lock lost (session expired or node deleted)")
        raise LockLost(f"{self.path}: not held (state {state.value})")

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> Sequencer | None:
        """Wait for the lock and return the holder's Sequencer.

        blocking=False returns None at once if another contender is ahead. With a timeout,
        LockTimeout is raised when it passes; cancel() from another thread raises
        LockCancelled. Connection loss is retried until the timeout; if our session expires
        while we wait we queue again (at the back).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._acquire_mutex.acquire(timeout=-1 if timeout is None else timeout):
            raise LockTimeout(f"{self.path}: another acquire() on this object is running")
        try:
            if self._state in (LockState.HELD, LockState.JEOPARDY):
                raise RuntimeError(f"{self.path}: already held by this object (not re-entrant)")
            if self._state is LockState.LOST:  # lost and never released: start afresh
                self.client.remove_listener(self._on_connection_state)
                self._queue.forget()
                self._sequencer = None
            self._cancelled = False
            self._set_state(LockState.WAITING)
            try:
                sequencer = self._retrying(lambda: self._acquire_once(blocking, deadline), deadline)
            except BaseException:
                self._best_effort_leave()
                self._set_state(LockState.UNLOCKED)
                raise
            if sequencer is None:
                self._best_effort_leave()
                self._set_state(LockState.UNLOCKED)
                return None
            self._become_holder(sequencer)
            return sequencer
        finally:
            self._acquire_mutex.release()

    def release(self) -> bool:
        """Give the lock up; True if our node was still there to delete."""
        with self._state_mutex:
            if self._state not in (LockState.HELD, LockState.JEOPARDY, LockState.LOST):
                return False
            # Before the delete: our own node's DELETED event must not look like a loss.
            self._state = LockState.UNLOCKED
            self._sequencer = None
        self.client.remove_listener(self._on_connection_state)
        try:
            # After a session expiry kazoo reconnects with a new session; the release then
            # finds our node gone, which is the answer.
            return self._retrying(self._release_once, time.monotonic() + RELEASE_RETRY_MAX_S)
        finally:
            self._queue.forget()
            self._dispatch(LockState.UNLOCKED)

    def cancel(self) -> None:
        """Make a pending acquire() in another thread raise LockCancelled."""
        self._cancelled = True
        self._queue.wake()

    def contenders(self) -> list[str]:
        """Identifiers of every contender (holder first), as kazoo's Lock.contenders()."""
        return contender_identifiers(self.client, self.path)

    def __enter__(self) -> Sequencer:
        sequencer = self.acquire()
        assert sequencer is not None
        return sequencer

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    # ---------------------------------------------------------- acquisition

    def _retrying(self, attempt: Callable[[], object], deadline: float | None):
        """Run attempt() until it returns, backing off on connection trouble, until deadline."""
        delay = RETRY_DELAY_MIN_S
        while True:
            try:
                return attempt()
            except _Again:
                continue
            except ConnectionClosedError:
                raise  # the client was stopped: nothing to wait for
            except _RETRYABLE:
                if self._cancelled:
                    raise LockCancelled(f"acquisition of {self.path} cancelled") from None
                if deadline is not None and time.monotonic() + delay > deadline:
                    raise LockTimeout(f"{self.path}: gave up retrying at the timeout") from None
                time.sleep(delay)
                delay = min(delay * 2, RETRY_DELAY_MAX_S)

    def _acquire_once(self, blocking: bool, deadline: float | None) -> Sequencer | None:
        self._queue.ensure_entered()
        turn_deadline = time.monotonic() if not blocking else deadline
        if not self._queue.wait_turn(turn_deadline, lambda: self._cancelled):
            if not blocking:
                return None
            raise LockTimeout(f"{self.path}: not acquired within the timeout")
        return self._claim(deadline)

    def _claim(self, deadline: float | None) -> Sequencer:
        """We are first in line: wait out a lock-delay if the last holder died, then mark
        ourselves the holder (atomically with a check that our node still exists)."""
        node, node_path, stat = self._queue.node, self._queue.node_path, self._queue.stat
        assert node is not None and node_path is not None and stat is not None
        data, lock_stat = self.client.get(self.path)
        died = _died_holder(data, node)
        if died is not None and self.lock_delay_s > 0:
            self._sleep(self.lock_delay_s, deadline)
            self.lock_delays_applied += 1
        if self.writes_marker:
            txn = self.client.transaction()
            txn.check(node_path, -1)
            txn.set_data(self.path, _marker("held", node), version=lock_stat.version)
            results = txn.commit()
            if isinstance(results[0], NoNodeError):
                self._queue.forget()
                raise NodeVanished(node_path)
            if isinstance(results[1], BadVersionError):
                raise _Again()  # the marker moved under us: read it again
            for result in results:
                if isinstance(result, Exception):
                    raise result
        elif self.client.exists(node_path) is None:
            self._queue.forget()
            raise NodeVanished(node_path)
        return Sequencer(stat.czxid, self.path, node)

    def _sleep(self, delay_s: float, deadline: float | None) -> None:
        until = time.monotonic() + delay_s
        if deadline is not None and until > deadline:
            raise LockTimeout(f"{self.path}: lock-delay of {delay_s}s outlasts the timeout")
        while (left := until - time.monotonic()) > 0:
            if self._cancelled:
                raise LockCancelled(f"acquisition of {self.path} cancelled")
            time.sleep(min(left, 0.05))

    def _release_once(self) -> bool:
        node_path = self._queue.node_path
        if node_path is None:
            return False
        if not self.writes_marker:
            return self._queue.leave()
        txn = self.client.transaction()
        txn.set_data(self.path, _marker("released", self._queue.node or ""))
        txn.delete(node_path)
        results = txn.commit()
        return not any(isinstance(r, Exception) for r in results)

    def _best_effort_leave(self) -> None:
        try:
            self._queue.leave()
        except Exception:  # noqa: BLE001 - the session's end removes the node anyway
            self._queue.forget()

    # ------------------------------------------------------------- holding

    def _become_holder(self, sequencer: Sequencer) -> None:
        with self._state_mutex:
            self._sequencer = sequencer
            assert self._queue.stat is not None
            self._session_id = self._queue.stat.ephemeralOwner  # the session that owns the lock
            self._state = LockState.HELD
        self.client.add_listener(self._on_connection_state)
        self._dispatch(LockState.HELD)
        self._watch_own_node()

    def _watch_own_node(self) -> None:
        node_path = self._queue.node_path
        try:
            stat = None if node_path is None else self.client.exists(
                node_path, watch=self._on_own_node_event
            )
        except (ConnectionLoss, OperationTimeoutError):
            return  # the connection listener takes over (SUSPENDED, then verify)
        except SessionExpiredError:
            stat = None
        if stat is None:
            self._transition({LockState.HELD, LockState.JEOPARDY}, LockState.LOST)

    def _on_own_node_event(self, event) -> None:
        if event.path != self._queue.node_path:
            return  # a watch left over from an earlier acquisition by this object
        if event.type == EventType.DELETED:
            self._transition({LockState.HELD, LockState.JEOPARDY}, LockState.LOST)
        elif self._state in (LockState.HELD, LockState.JEOPARDY):
            self._watch_own_node()  # a data change: keep watching

    def _on_connection_state(self, state: str) -> bool | None:
        # Runs on kazoo's connection thread: change state, never block.
        if state == KazooState.SUSPENDED:
            if self._transition({LockState.HELD}, LockState.JEOPARDY):
                self._start_jeopardy_timer()
        elif state == KazooState.LOST:
            self._transition({LockState.HELD, LockState.JEOPARDY}, LockState.LOST)
            return True  # the listener is done
        elif state == KazooState.CONNECTED and self._state is LockState.JEOPARDY:
            self.client.handler.dispatch_callback(Callback("lock", self._verify_after_reconnect, ()))
        return None

    def _start_jeopardy_timer(self) -> None:
        self._jeopardy_generation += 1
        timer = threading.Timer(
            self.jeopardy_timeout_s, self._jeopardy_expired, (self._jeopardy_generation,)
        )
        timer.daemon = True
        timer.start()

    def _jeopardy_expired(self, generation: int) -> None:
        if generation == self._jeopardy_generation:  # not a timer from an earlier jeopardy
            self._transition({LockState.JEOPARDY}, LockState.LOST)

    def _verify_after_reconnect(self) -> None:
        """Back from SUSPENDED with, kazoo says, the same session: HELD if our node is still
        ours, else LOST."""
        node_path = self._queue.node_path
        try:
            stat = None if node_path is None else self.client.exists(
                node_path, watch=self._on_own_node_event
            )
        except (ConnectionLoss, OperationTimeoutError):
            return  # still in jeopardy; the next CONNECTED tries again
        except SessionExpiredError:
            stat = None
        if stat is not None and stat.ephemeralOwner == self._session_id:
            self._transition({LockState.JEOPARDY}, LockState.HELD)
        else:
            self._transition({LockState.HELD, LockState.JEOPARDY}, LockState.LOST)

    # ---------------------------------------------------------------- state

    def _set_state(self, state: LockState) -> None:
        with self._state_mutex:
            self._state = state

    def _transition(self, from_states: set[LockState], to: LockState) -> bool:
        with self._state_mutex:
            if self._state not in from_states:
                return False
            self._state = to
        self._dispatch(to)
        return True

    def _dispatch(self, state: LockState) -> None:
        # Listeners run on kazoo's single callback thread, so they see changes in order.
        if self._listeners:
            self.client.handler.dispatch_callback(Callback("lock", self._notify, (state,)))

    def _notify(self, state: LockState) -> None:
        for listener in list(self._listeners):
            try:
                listener(self, state)
            except Exception:  # noqa: BLE001 - a listener's bug must not break the lock
                log.exception("event=lock_listener_failed path=%s state=%s", self.path, state.value)


class FencedWriteLock(FencedLock):
    """The write side of a fenced read/write lock: excludes readers and writers on `path`.

    Same as FencedLock (tokens, lock-delay, jeopardy) but it also waits for readers ahead;
    interoperates with kazoo's WriteLock/ReadLock on the same path.
    """

    blocking_kinds = (LOCK_KIND, READ_KIND)


class FencedReadLock(FencedLock):
    """The read side of a fenced read/write lock: shared with other readers, excluded by
    writers ahead of it. Each reader waits only for the nearest writer ahead of it.

    Readers get a Sequencer too (their node's czxid); they honour a lock-delay after a
    writer whose session died, but do not write the holder marker (there may be many).
    """

    kind = READ_KIND
    blocking_kinds = (LOCK_KIND,)
    writes_marker = False
