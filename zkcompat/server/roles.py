"""The pipelines of the roles that are not the leader: what differs is where writes go.

A learner sends writes, session changes and sync to the leader and answers them when the
committed txn (or the SYNC) comes back; it revalidates resumed sessions with the leader
and reports its sessions' touches. A read-only server (readonlymode, no quorum) answers
writes and sync with NOTREADONLY and keeps sessions of its own. Everything else (apply,
reads, watches, replies in session order) is the leader's Pipeline, unchanged.
"""

from __future__ import annotations

from collections import deque

from zkcompat.jute import records as r
from zkcompat.jute.constants import Code, OpCode
from zkcompat.jute.reply import encode_reply
from zkcompat.server.pipeline import Pipeline, _mono_ms, request_body
from zkcompat.server.request import Request
from zkcompat.server.sessions import Session
from zkcompat.zab.leader import Leader

_SYNC, _CLOSE_SESSION = OpCode.SYNC, OpCode.CLOSE_SESSION


class LearnerPipeline(Pipeline):
    leading = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._syncs: deque[Request] = deque()  # forwarded syncs the leader has not answered
        self._revalidating: dict[int, list] = {}  # reconnects waiting for the leader's word
        self._touch_reported_ms = 0

    def submit(self, session: Session, req: Request) -> None:
        if req.is_write or req.type == _SYNC:
            self._forward(session, req)
        else:
            super().submit(session, req)

    def _forward(self, session: Session, req: Request) -> None:
        """A write or sync waits in its session's queue for the leader's answer: the
        committed txn (matched by session and cxid), or a SYNC."""
        req.is_write = True  # it holds back the session's later reads, as a write does
        session.queue.append(req)
        if req.type == _SYNC:
            self._syncs.append(req)
        auth = [r.Id(scheme, ident) for scheme, ident in req.auth_ids]
        self.obey(self.peer.forward(req.session_id, req.xid, req.type, request_body(req), auth))

    def expire_sessions(self) -> None:
        """Only the leader decides expiry; a learner reports touches with its PINGs."""

    def session_for_reconnect(self, session_id: int) -> Session | None:
        """Every live session is in the replicated table; one is tracked here once a
        client of it is."""
        session = self.tracker.sessions.get(session_id)
        if session is None:
            timeout = self.tree.sessions.get(session_id)
            if timeout is not None:
                session = Session(session_id, timeout)
                self.tracker.add(session, _mono_ms())
        return session

    def reopen(self, session: Session, timeout_ms: int, done) -> None:
        """Ask the leader first (REVALIDATE), which makes this server the owner."""
        self._revalidating.setdefault(session.session_id, []).append(done)
        self.obey(self.peer.revalidate(session.session_id, timeout_ms))

    def _revalidated(self, session_id: int, valid: bool) -> None:
        for done in self._revalidating.pop(session_id, ()):
            done(valid)

    def _synced(self) -> None:
        """The leader answered our oldest sync: everything committed before it is applied."""
        if not self._syncs:
            # A SYNC for a request this connection never sent: the leader's bug, not ours.
            return
        req = self._syncs.popleft()
        req.is_write = False
        session = self.tracker.sessions.get(req.session_id)
        if session is not None and session.queue and session.queue[0] is req:
            self._drain(session)

    def touched(self) -> list[tuple[int, int]]:
        """Sessions active since the last report: the PING reply carries them."""
        since = self._touch_reported_ms
        self._touch_reported_ms = _mono_ms()
        return [(s.session_id, s.timeout_ms) for s in self.tracker.sessions.values()
                if s.last_active_ms >= since and not s.closing]


class ReadOnlyPipeline(Pipeline):
    leading = False
    read_only = True

    def create_session(self, cnxn, timeout_ms: int) -> Session:
        """A local session: no txn, answered at once."""
        session = Session(self.tracker.next_session_id(), timeout_ms)
        session.cnxn = cnxn
        self.tracker.add(session, _mono_ms())
        cnxn.send(cnxn.connect_response(session.session_id, timeout_ms))
        return session

    def submit(self, session: Session, req: Request) -> None:
        if req.is_write or req.type == _SYNC:
            self._refuse_write(session, req)
        else:
            super().submit(session, req)

    def _refuse_write(self, session: Session, req: Request) -> None:
        """Writes and sync get NOTREADONLY (ReadOnlyRequestProcessor); closing a session
        ends it here, where it lives."""
        zxid = self.tree.last_processed_zxid
        if req.type == _CLOSE_SESSION:
            self.tracker.remove(req.session_id)
            session.queue.clear()
            if req.cnxn is not None:
                req.cnxn.send(encode_reply(req.xid, zxid, 0, None))
                req.cnxn.close_after_flush("client closed session")
            return
        # Nothing waits in a read-only server's queues (no write is ever pending), so the
        # answer is in the session's order as it stands.
        self._answer(req, encode_reply(req.xid, zxid, Code.NOTREADONLY, None))


def pipeline_class(peer) -> type[Pipeline]:
    """The pipeline of the role `peer` plays: a Leader's, a Learner's, or none (read-only)."""
    if peer is None:
        return ReadOnlyPipeline
    return Pipeline if isinstance(peer, Leader) else LearnerPipeline
