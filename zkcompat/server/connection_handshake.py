"""A client connection's handshake: its ConnectRequest, the session it creates or reopens,
the ConnectResponse, and the requests pipelined behind it meanwhile."""

import asyncio
import logging

from zkcompat.jute import records as r
from zkcompat.jute.errors import JuteError
from zkcompat.jute.framing import frame
from zkcompat.server.connection_state import CLOSED, OPEN, WAITING
from zkcompat.server.sessions import PASSWD_BYTES, session_password

log = logging.getLogger("zkcompat.server.connection")  # one logger for a connection's events


class Handshake:
    """Connection's handshake methods: a mixin with no state of its own (the state is
    Connection's attributes, which stay within the shared-key instance dict)."""

    __slots__ = ()

    def _on_connect(self, payload) -> None:
        try:
            req = r.ConnectRequest.from_bytes(payload)
        except JuteError as e:
            self.close(f"malformed ConnectRequest: {e}")
            return
        if not self.server.limits.session_allowed(renew=req.sessionId != 0):
            # processConnectRequest's ClientCnxnLimitException: closed, with no response.
            self.close("Connection throttle rejected connection")
            return
        pipeline = self.pipeline
        cfg = self.server.config
        self._client_readonly_byte = req.readOnly is not None
        if req.lastZxidSeen > pipeline.tree.last_processed_zxid:
            self.close(
                f"client has seen zxid 0x{req.lastZxidSeen:x}, ours is "
                f"0x{pipeline.tree.last_processed_zxid:x}: client must try another server"
            )
            return
        if pipeline.read_only and not req.readOnly:
            # ZooKeeperServer.processConnectRequest on a ReadOnlyZooKeeperServer.
            self.close("Refusing session request for not-read-only client")
            return
        timeout = min(max(req.timeOut, cfg.min_session_timeout_ms), cfg.max_session_timeout_ms)
        if req.sessionId == 0:
            self._become(WAITING)
            self.session = pipeline.create_session(self, timeout)
            return
        session = pipeline.session_for_reconnect(req.sessionId)
        # ZooKeeper drops the session's current connection before it checks the password
        # (processConnectRequest: closeSession, then reopenSession), so a wrong password
        # still disconnects the owner; its client reconnects with the right one.
        if session is not None and session.cnxn is not None and session.cnxn is not self:
            session.cnxn.close_after_flush("client reconnecting with this session id")
            session.cnxn = None
        passwd = req.passwd or b""
        if session is None or session.closing or passwd != session_password(req.sessionId):
            self._refuse_reopen(req.sessionId)
            return
        self._become(WAITING)
        pipeline.reopen(session, timeout, lambda valid: self._reopened(session, timeout, valid))

    def _refuse_reopen(self, session_id: int) -> None:
        log.info("event=session_reopen_refused session=0x%x remote=%s", session_id, self.remote)
        if self.transport is None or self._state is CLOSED:
            return
        self.transport.write(self._connect_response_bytes(0, 0, bytes(PASSWD_BYTES)))
        self._close_after_flush = True
        self._become(CLOSED)
        self.transport.close()

    def _reopened(self, session, timeout: int, valid: bool) -> None:
        """The session may be resumed here (on a learner, the leader said so)."""
        if self._state is not WAITING:
            return  # the client went away meanwhile
        if not valid:
            self._refuse_reopen(session.session_id)
            return
        if session.cnxn is not None and session.cnxn is not self:
            session.cnxn.close_after_flush("client reconnecting with this session id")
        session.cnxn = self
        self.pipeline.tracker.set_timeout(session, timeout, self.server.clock.mono_ms())
        self.session = session
        self._become(OPEN)
        self.send(self._connect_response_bytes(session.session_id, timeout,
                                               session_password(session.session_id)))
        if self._pending_frames:
            asyncio.get_running_loop().call_soon(self._drain_pending)

    def connect_response(self, session_id: int, timeout_ms: int) -> bytes:
        """The reply to our createSession txn once applied: the session is open (unless the
        client went away meanwhile: then the reply is dropped, as every reply of a closed
        connection is)."""
        if self._state is WAITING:
            self._become(OPEN)
        if self._pending_frames:
            asyncio.get_running_loop().call_soon(self._drain_pending)
        return self._connect_response_bytes(session_id, timeout_ms, session_password(session_id))

    def _connect_response_bytes(self, session_id, timeout_ms, passwd) -> bytes:
        readonly = self.pipeline.read_only if self._client_readonly_byte else None
        return frame(r.ConnectResponse(0, timeout_ms, session_id, passwd, readonly).to_bytes())

    def _drain_pending(self) -> None:
        frames, self._pending_frames = self._pending_frames, []
        for f in frames:
            if self._state is not OPEN:
                return
            self._on_request(f, self._now_ms())
        if self._state is OPEN:
            self._count_received()
