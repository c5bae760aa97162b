"""The first stage on a follower or observer: writes, session changes and syncs travel to
the leader as the bytes their client sent (REQUEST); reads go to apply in their session's
order. ZooKeeper's FollowerRequestProcessor and ObserverRequestProcessor.

A forwarded request waits in its session's queue until the committed txn comes back and
apply matches it by (session, cxid), or, for a sync, until the leader's SYNC. A client
resuming a session here is first revalidated with the leader, which makes this server its
owner; the sessions its clients keep alive are reported in the answers to the leader's PINGs.
"""

from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.server.clock import Clock
from zkcompat.server.request import CREATE_SESSION_BODY, REQUEST_HEADER_BYTES, Request
from zkcompat.server.sessions import Session
from zkcompat.server.sync import PendingSyncs

# module globals: enum attribute lookups are slow on the hot path (docs/measurements.md)
_CREATE_SESSION, _SYNC = OpCode.CREATE_SESSION, OpCode.SYNC


def _nothing_to_obey(effects) -> None:
    pass


class LearnerRequests:
    """What a learner does with each request; `obey` carries out the Learner's effects."""

    leading = False
    read_only = False

    def __init__(self, apply, peer, clock: Clock, syncs: PendingSyncs):
        self.apply = apply
        self.tracker = apply.tracker
        self.peer = peer  # the Learner state machine
        self.clock = clock
        self.syncs = syncs
        self.obey = _nothing_to_obey  # set by the role's wiring: the shell's
        self._revalidating: dict[int, list] = {}  # reconnects waiting for the leader's word
        self._touch_reported_ms = 0

    def create_session(self, cnxn, timeout_ms: int) -> Session:
        session = Session(self.tracker.next_session_id(), timeout_ms)
        session.cnxn = cnxn
        now = self.clock.mono_ms()
        self.tracker.add(session, now)
        req = Request(session.session_id, 0, _CREATE_SESSION, r.CreateSessionTxn(timeout_ms),
                      cnxn, [], now)
        self.submit(session, req)
        return session

    def submit(self, session: Session, req: Request) -> None:
        if req.is_write or req.type == _SYNC:
            self._forward(session, req)
        else:
            self.apply.read(session, req)

    def _forward(self, session: Session, req: Request) -> None:
        """A write or sync waits in its session's queue for the leader's answer."""
        if req.type == _SYNC:
            self.syncs.wait(session, req)
        else:
            req.is_write = True  # a forwarded session change holds back later reads too
            session.queue.append(req)
        auth = [r.Id(scheme, ident) for scheme, ident in req.auth_ids]
        self.obey(self.peer.forward(req.session_id, req.xid, req.type, forwarded_body(req),
                                    auth))

    def expire_sessions(self) -> None:
        """Only the leader decides expiry; a learner reports touches with its PINGs."""

    def session_for_reconnect(self, session_id: int) -> Session | None:
        """Every live session is in the replicated table; one is tracked here once a
        client of it is."""
        session = self.tracker.sessions.get(session_id)
        if session is None:
            timeout = self.apply.tree.sessions.get(session_id)
            if timeout is not None:
                session = Session(session_id, timeout)
                self.tracker.add(session, self.clock.mono_ms())
        return session

    def reopen(self, session: Session, timeout_ms: int, done) -> None:
        """Ask the leader first (REVALIDATE), which makes this server the owner."""
        self._revalidating.setdefault(session.session_id, []).append(done)
        self.obey(self.peer.revalidate(session.session_id, timeout_ms))

    def revalidated(self, session_id: int, valid: bool) -> None:
        for done in self._revalidating.pop(session_id, ()):
            done(valid)

    def touched(self) -> list[tuple[int, int]]:
        """Sessions active since the last report: the PING reply carries them."""
        since = self._touch_reported_ms
        self._touch_reported_ms = self.clock.mono_ms()
        return [(s.session_id, s.timeout_ms) for s in self.tracker.sessions.values()
                if s.last_active_ms >= since and not s.closing]


def forwarded_body(req: Request) -> bytes:
    """The request's body as ZooKeeper forwards it (Learner.request): the bytes its client
    sent after the RequestHeader, never encoded again. A body that did not decode goes as
    nothing, so that the leader answers MARSHALLINGERROR as this server decided;
    createSession, which no client sends, carries its timeout."""
    if req.type == _CREATE_SESSION:
        return CREATE_SESSION_BODY.pack(req.record.timeOut)
    if req.record is None or req.payload is None:
        return b""
    return memoryview(req.payload)[REQUEST_HEADER_BYTES:]
