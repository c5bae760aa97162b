"""The first stage of a read-only server (readonlymode.enabled, no quorum): reads as
anywhere, writes and sync answered NOTREADONLY (ReadOnlyRequestProcessor); its sessions
are local, created and closed here without a txn."""

import logging

from zkcompat.jute.constants import Code, OpCode
from zkcompat.jute.reply import encode_reply
from zkcompat.server.clock import Clock
from zkcompat.server.request import Request
from zkcompat.server.sessions import Session

log = logging.getLogger(__name__)

_CLOSE_SESSION, _SYNC = OpCode.CLOSE_SESSION, OpCode.SYNC


class ReadOnlyRequests:
    leading = False
    read_only = True
    peer = None

    def __init__(self, apply, clock: Clock):
        self.apply = apply
        self.tracker = apply.tracker
        self.clock = clock

    def create_session(self, cnxn, timeout_ms: int) -> Session:
        """A local session: no txn, answered at once."""
        session = Session(self.tracker.next_session_id(), timeout_ms)
        session.cnxn = cnxn
        self.tracker.add(session, self.clock.mono_ms())
        cnxn.send(cnxn.connect_response(session.session_id, timeout_ms))
        return session

    def submit(self, session: Session, req: Request) -> None:
        if req.is_write or req.type == _SYNC:
            self._refuse_write(session, req)
        else:
            self.apply.read(session, req)

    def _refuse_write(self, session: Session, req: Request) -> None:
        """Writes and sync get NOTREADONLY; closing a session ends it here, where it lives."""
        zxid = self.apply.tree.last_processed_zxid
        if req.type == _CLOSE_SESSION:
            self.tracker.remove(req.session_id)
            session.queue.clear()
            if req.cnxn is not None:
                req.cnxn.send(encode_reply(req.xid, zxid, 0, None))
                req.cnxn.close_after_flush("client closed session")
            return
        # Nothing waits in a read-only server's queues (no write is ever pending), so the
        # answer is in the session's order as it stands.
        self.apply.answer(req, encode_reply(req.xid, zxid, Code.NOTREADONLY, None))

    def reopen(self, session: Session, timeout_ms: int, done) -> None:
        session.owner = None
        done(True)

    def session_for_reconnect(self, session_id: int) -> Session | None:
        return self.tracker.sessions.get(session_id)

    def expire_sessions(self) -> None:
        """A read-only server expires its local sessions itself: closed here, no txn."""
        now = self.clock.mono_ms()
        for session in self.tracker.expired(now):
            log.info("event=session_expired session=0x%x timeout_ms=%d",
                     session.session_id, session.timeout_ms)
            self.submit(session, Request(session.session_id, 0, _CLOSE_SESSION, None,
                                         None, [], now))
