"""Sessions on the leader: ids, passwords, and the expiry queue (ZooKeeper's SessionTrackerImpl).

Sessions themselves are replicated state (createSession/closeSession are Txns, kept in
DataTree.sessions); this tracker only decides *when* a session expires, from ticks.
"""

from collections import deque

# ZooKeeperServer.superSecret: the seed mixed into every session's password. Using the
# same derivation as ZooKeeper keeps sessions valid across an import from ZooKeeper.
SUPER_SECRET = 0xB3415C00
PASSWD_BYTES = 16
CONTAINER_EPHEMERAL_OWNER = -0x8000000000000000

_JAVA_MULT = 0x5DEECE66D
_JAVA_MASK = (1 << 48) - 1


def _signed64(v: int) -> int:
    v &= 0xFFFFFFFFFFFFFFFF
    return v - (1 << 64) if v >= 1 << 63 else v


def session_password(session_id: int) -> bytes:
    """ZooKeeperServer.generatePasswd: java.util.Random(sessionId ^ superSecret).nextBytes(16)."""
    seed = ((session_id ^ SUPER_SECRET) ^ _JAVA_MULT) & _JAVA_MASK
    out = bytearray()
    while len(out) < PASSWD_BYTES:
        seed = (seed * _JAVA_MULT + 0xB) & _JAVA_MASK
        rnd = seed >> 16  # next(32)
        for _ in range(min(4, PASSWD_BYTES - len(out))):
            out.append(rnd & 0xFF)
            rnd >>= 8
    return bytes(out)


def initial_session_id(server_id: int, now_ms: int) -> int:
    """SessionTrackerImpl.initializeNextSessionId: time in the middle bits, server id on top."""
    sid = ((now_ms << 24) & 0xFFFFFFFFFFFFFFFF) >> 8
    sid = _signed64(sid | (server_id << 56))
    if sid == CONTAINER_EPHEMERAL_OWNER:
        sid += 1
    return sid


class Session:
    __slots__ = ("session_id", "timeout_ms", "expire_tick", "last_active_ms", "cnxn", "queue",
                 "closing", "owner")

    def __init__(self, session_id: int, timeout_ms: int):
        self.session_id = session_id
        self.timeout_ms = timeout_ms
        self.expire_tick = 0
        self.last_active_ms = 0  # a touch is just this store; expiry re-checks it lazily
        self.cnxn = None  # the connection currently attached, if any
        self.queue: deque = deque()  # requests not yet answered, in arrival order
        self.closing = False
        # On the leader: the learner (sid) whose client holds the session, None for one of
        # ours; a write from anywhere else is SESSIONMOVED (SessionTrackerImpl.checkSession).
        self.owner: int | None = None


class SessionTracker:
    """Expiry buckets of tick_ms width, as ZooKeeper's ExpiryQueue: a session last active at
    time t expires at the first bucket boundary after t + timeout.

    A touch (every request, every ping) only records the time; a session is moved to a
    later bucket when its bucket comes due and it turns out to have been active, so the
    request path pays one attribute store."""

    def __init__(self, tick_ms: int, server_id: int, now_ms: int):
        self.tick_ms = tick_ms
        self.sessions: dict[int, Session] = {}
        self._buckets: dict[int, set[int]] = {}
        self._next_session_id = initial_session_id(server_id, now_ms)

    def next_session_id(self) -> int:
        sid = self._next_session_id
        self._next_session_id += 1
        return sid

    def _bucket(self, now_ms: int, timeout_ms: int) -> int:
        t = now_ms + timeout_ms
        return (t // self.tick_ms + 1) * self.tick_ms

    def _place(self, session: Session) -> None:
        tick = self._bucket(session.last_active_ms, session.timeout_ms)
        if tick == session.expire_tick:
            return
        self._unplace(session)
        session.expire_tick = tick
        self._buckets.setdefault(tick, set()).add(session.session_id)

    def _unplace(self, session: Session) -> None:
        old = self._buckets.get(session.expire_tick)
        if old is not None:
            old.discard(session.session_id)
            if not old:
                del self._buckets[session.expire_tick]

    def add(self, session: Session, now_ms: int) -> None:
        self.sessions[session.session_id] = session
        session.last_active_ms = now_ms
        self._place(session)

    def touch(self, session: Session, now_ms: int) -> None:
        session.last_active_ms = now_ms

    def set_timeout(self, session: Session, timeout_ms: int, now_ms: int) -> None:
        """A reconnect may negotiate a different timeout; the deadline moves with it."""
        session.timeout_ms = timeout_ms
        session.last_active_ms = now_ms
        self._place(session)

    def remove(self, session_id: int) -> Session | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            self._unplace(session)
        return session

    def next_expiration_ms(self) -> int | None:
        """The earliest bucket boundary (monotonic ms) at which a session may expire, or
        None with no sessions: when SessionTrackerImpl.run would next poll its queue."""
        return min(self._buckets) if self._buckets else None

    def expired(self, now_ms: int) -> list[Session]:
        """Sessions whose deadline has passed; they are marked closing and leave the queue.
        Sessions in a due bucket that were active meanwhile move to their new bucket."""
        out = []
        for tick in sorted(t for t in self._buckets if t <= now_ms):
            for sid in self._buckets.pop(tick):
                session = self.sessions.get(sid)
                if session is None or session.closing:
                    continue
                session.expire_tick = 0
                if self._bucket(session.last_active_ms, session.timeout_ms) > now_ms:
                    self._place(session)
                else:
                    session.closing = True
                    out.append(session)
        return out
