"""One client connection: framing, pings, auth packets, and each request decoded once.

Everything a client sends is decoded here exactly once and handed to the pipeline as a
Request. The handshake is connection_handshake's, the replies' way out (queued, written with
one transport.write per flush of the outbox) connection_output's: both are mixins of the one
Connection object. A protocol violation closes this connection (with a logged reason) and
nothing else. What an auth or SASL packet grants, and who must authenticate, client_auth
decides.
"""

import asyncio
import logging
import struct

from zkcompat.jute import records as r
from zkcompat.jute.constants import Code, OpCode
from zkcompat.jute.errors import JuteError
from zkcompat.jute.framing import FrameError, FrameReader
from zkcompat.jute.multi import decode_multi_request
from zkcompat.jute.ops import REQUEST_RECORD as JUTE_REQUEST_RECORD
from zkcompat.jute.reply import encode_reply
from zkcompat.server import client_auth
from zkcompat.server.admin import ARGUMENT_BYTES as FOUR_LETTER_ARGUMENT_BYTES
from zkcompat.server.connection_handshake import Handshake
from zkcompat.server.connection_output import OUT_SPILL_BYTES, Output
from zkcompat.server.connection_state import (
    CLOSED,
    CONNECTION_TRANSITIONS,
    HANDSHAKE,
    OPEN,
    REFUSED,
    WAITING,
    ConnState,
)
from zkcompat.server.request import MULTI_OPS, REQUEST_RECORD, Request
from zkcompat.server.stats import ConnectionStats

log = logging.getLogger(__name__)

NO_BODY_OPS = frozenset(op for op, cls in JUTE_REQUEST_RECORD.items() if cls is None)
# Writes whose unparseable body still becomes an ErrorTxn with a zxid of its own.
MARSHALLED_WRITES = frozenset((
    OpCode.CREATE, OpCode.CREATE2, OpCode.CREATE_CONTAINER, OpCode.CREATE_TTL, OpCode.DELETE,
    OpCode.DELETE_CONTAINER, OpCode.SET_DATA, OpCode.SET_ACL, OpCode.CHECK, OpCode.MULTI,
))
MULTI_READ_OPS = frozenset((OpCode.GET_DATA, OpCode.GET_CHILDREN))
MULTI_WRITE_OPS = frozenset((
    OpCode.CREATE, OpCode.CREATE2, OpCode.CREATE_CONTAINER, OpCode.CREATE_TTL, OpCode.DELETE,
    OpCode.SET_DATA, OpCode.CHECK,
))

# module globals: enum attribute lookups are slow on the hot path (docs/measurements.md)
_CLOSE_SESSION, _CHECK = OpCode.CLOSE_SESSION, OpCode.CHECK

_REQUEST_HEADER = struct.Struct(">ii")  # RequestHeader{int xid; int type}

# Frames a client may pipeline after its ConnectRequest, before the session exists.
PRE_SESSION_FRAMES_MAX = 1000
# zookeeper.nio.sessionlessCnxnTimeout: a connection that has not completed its handshake
# by then is closed, so half-open sockets cannot pile up until descriptors run out.
SESSIONLESS_CNXN_TIMEOUT_S = 10.0

# Imported from here by the rest of the server, the tests and the benchmark.
__all__ = [
    "CLOSED", "CONNECTION_TRANSITIONS", "HANDSHAKE", "OPEN", "OUT_SPILL_BYTES",
    "PRE_SESSION_FRAMES_MAX", "REFUSED", "SESSIONLESS_CNXN_TIMEOUT_S", "WAITING",
    "Connection", "ConnState",
]


class Connection(Handshake, Output, asyncio.Protocol):
    """One client connection, one object: its handshake (Handshake) and its output (Output)
    are mixins, so the request path makes no call through another object."""

    def __init__(self, server):
        self.server = server  # the ServerContext: pipeline, config, admin, connections
        self.pipeline = server.pipeline
        self.outbox = server.pipeline.outbox
        self.transport = None
        self.remote = "?"
        self.auth_ids: list[tuple[str, str]] = []
        # The ids a verified TLS client certificate gives (x509, and super for the x509
        # superUser), set by the secure port's handshake; addauth x509 asks for them again.
        self.certificate_ids: list[tuple[str, str]] = []
        self._sasl = None  # this connection's SASL exchange, from its first SASL packet
        self.session = None
        self.watched_paths: dict[str, int] = {}  # path -> watch tables holding a watch
        self.reader = FrameReader(server.config.jute_maxbuffer)
        # The server's limits (server/limits.py) count this connection's requests in flight
        # and say when it must stop reading; requests go to the pipeline, or to the request
        # throttler when there is one. (Connection has at most 30 instance attributes: past
        # that, Python 3.11 gives up the shared-key instance dict, and every attribute read
        # on the hot path slows down.)
        self._submit = server.limits.submitter(server.pipeline)
        self.outstanding_counted = 0  # the session's queue length, as limits counted it
        self._state = HANDSHAKE  # changed by _become only
        self._client_readonly_byte = False
        self._pending_frames: list = []
        self._first4: bytearray | None = bytearray()
        self._out: list[bytes] = []
        # The replies queued since the last flush, for their statistics, which the flush
        # accounts for at once: each one's start time, and the last one's request and zxid.
        self._replied_t0: list[int] = []
        self._write_t0: list[int] = []  # the writes among them
        self._last_req = None
        self._last_zxid = -1
        self._queued = False  # in the outbox, to be flushed
        self._close_after_flush = False
        self._paused = False
        self._out_bytes = 0  # the size of _out, less its first reply
        # Not None while the transport holds more than its high-water mark (pause_writing):
        # the frames read meanwhile, answered once it drains.
        self._unread: list | None = None
        self._deadline: asyncio.TimerHandle | None = None  # the handshake's
        self.stats = ConnectionStats()

    # -- asyncio.Protocol ---------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        host = peer[0] if peer else "0.0.0.0"
        self.remote = f"{host}:{peer[1]}" if peer else "?"
        # Every connection is authenticated by its address (NIOServerCnxn adds ("ip", addr)).
        self.auth_ids.append(("ip", host))
        self.server.connections.add(self)
        self._deadline = asyncio.get_running_loop().call_later(
            SESSIONLESS_CNXN_TIMEOUT_S, self._handshake_deadline)

    def _handshake_deadline(self) -> None:
        if self._state is HANDSHAKE:
            self.close("no session established within the sessionless connection timeout")

    def connection_lost(self, exc) -> None:
        if self._state is not CLOSED:
            self._become(CLOSED)
        if self._deadline is not None:
            self._deadline.cancel()  # its callback would hold this connection for seconds
            self._deadline = None
        self.server.connections.discard(self)
        self.server.limits.closed(self)
        self.pipeline.watches.remove_watcher(self)
        if self.session is not None and self.session.cnxn is self:
            self.session.cnxn = None

    def data_received(self, data: bytes) -> None:
        self._received(data)
        self.outbox.flush()  # the replies to reads leave now, not one loop turn later

    def _received(self, data: bytes) -> None:
        if self._state is CLOSED:
            return
        if self._first4 is not None:
            # The first 4 bytes are a frame length or a four-letter word; they may arrive
            # in pieces, so decide only once all four are here (NIOServerCnxn.readLength).
            self._first4 += data
            if len(self._first4) < 4:
                return
            data = bytes(self._first4)
            if self.server.admin.is_four_letter_word(data[:4]):
                word = data[:4].decode("ascii")
                end = 4 + FOUR_LETTER_ARGUMENT_BYTES.get(word, 0)  # stmk's mask follows it
                if len(data) >= end:
                    self._four_letter_word(word, data[4:end])
                return
            self._first4 = None
        try:
            frames = self.reader.feed(data)
        except FrameError as e:
            for f in e.frames:
                self._on_frame(f)
            self.close(f"bad frame: {e}")
            return
        if self._state is OPEN:  # the usual case: requests of an open session
            n = len(frames)
            self.stats.received += n
            self.server.stats.packets_received += n
            # Every frame of one read arrived at once: one clock read.
            t0_ms = self.server.clock.mono_ms()
            if self._unread is not None:
                self._unread += frames  # after those still waiting for the client to read
                return
            on_request = self._on_request
            rest = iter(frames)
            for f in rest:
                on_request(f, t0_ms)
                if self._state is not OPEN:
                    return
                if self._unread is not None:
                    # The client is not reading its replies: the rest of this batch waits
                    # until the transport drains (resume_writing).
                    self._unread += rest
                    break
            # _count_received, inlined: a 1x1 client's every write comes through here.
            queued = len(self.session.queue)
            counted = self.outstanding_counted
            if queued != counted:
                limits = self.server.limits
                limits.in_process += queued - counted
                self.outstanding_counted = queued
                if queued >= limits.session_outstanding_max or limits.in_process > \
                        limits.outstanding_limit and limits.must_stop_reading(self, queued):
                    self._pause_reading()
            return
        for f in frames:
            self._on_frame(f)
            if self._state is CLOSED:
                return
        if self._state is OPEN:
            self._count_received()

    def pause_writing(self) -> None:
        if self._unread is None:
            self._unread = []
        self._pause_reading()

    def resume_writing(self) -> None:
        frames, self._unread = self._unread, None
        if frames and self._state is OPEN:
            self._read_unread(frames)
        self._maybe_resume_reading()

    # -- closing, and reading stopped and resumed ----------------------------------------

    def close(self, reason: str) -> None:
        if self._state is CLOSED:
            return
        log.warning("event=connection_close remote=%s reason=%r", self.remote, reason)
        self._become(CLOSED)
        if self.transport is not None:
            self.transport.close()

    def _become(self, state: ConnState) -> None:
        """Every change of _state: one CONNECTION_TRANSITIONS allows, or our bug."""
        assert state in CONNECTION_TRANSITIONS[self._state], \
            f"connection {self.remote}: {self._state.name} -> {state.name}"
        self._state = state

    def _pause_reading(self) -> None:
        if not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

    def _resume_reading(self) -> None:
        if self._paused and self.transport is not None and self._state is not CLOSED:
            self._paused = False
            self.transport.resume_reading()

    def _maybe_resume_reading(self) -> None:
        """Read again unless a reason to stop holds: the transport is full, frames wait
        unread, or the session or the server is at its bound of requests in flight."""
        if self._unread is not None:
            return
        session = self.session
        if session is None or self.server.limits.may_read(self, len(session.queue)):
            self._resume_reading()

    def _count_received(self) -> None:
        """After requests were read: the limits count them (inline: this runs for every
        write), and may stop this reading."""
        queued = len(self.session.queue)
        counted = self.outstanding_counted
        if queued == counted:
            return
        limits = self.server.limits
        limits.in_process += queued - counted
        self.outstanding_counted = queued
        if queued >= limits.session_outstanding_max or limits.in_process > \
                limits.outstanding_limit and limits.must_stop_reading(self, queued):
            self._pause_reading()

    stop_reading = _pause_reading  # for the request throttler, when it holds too many

    def _read_unread(self, frames: list) -> None:
        """The requests left unread while the client was not reading its replies."""
        t0_ms = self._now_ms()
        for i, f in enumerate(frames):
            self._on_request(f, t0_ms)
            if self._state is not OPEN:
                return
            if self._unread is not None:  # full again
                self._unread += frames[i + 1:]
                break
        self._count_received()
        self.outbox.flush()

    # -- input ----------------------------------------------------------------------

    def _on_frame(self, payload) -> None:
        self.stats.received += 1
        self.server.stats.packets_received += 1
        state = self._state
        if state is OPEN:
            self._on_request(payload, self._now_ms())
        elif state is HANDSHAKE:
            self._on_connect(payload)
        elif state is WAITING:
            if len(self._pending_frames) >= PRE_SESSION_FRAMES_MAX:
                self.close("too many requests before the session was established")
                return
            self._pending_frames.append(payload)

    def _now_ms(self) -> int:
        return self.server.clock.mono_ms()

    def _on_request(self, payload, t0_ms: int) -> None:
        """One request of the open session, received at t0_ms. What ZooKeeper submits
        touches the session (keeps it alive); auth and SASL packets, and requests refused
        for want of authentication, do not (ZooKeeperServer.processPacket touches only in
        submitRequest)."""
        session = self.session
        if len(payload) < _REQUEST_HEADER.size:
            self.close(f"RequestHeader needs 8 bytes, frame has {len(payload)}")
            return
        xid, op = _REQUEST_HEADER.unpack_from(payload)
        enforcement = self.server.config.auth_enforcement
        if enforcement is not None and self._refused_unauthenticated(enforcement, xid, op):
            return
        off = _REQUEST_HEADER.size
        cls = REQUEST_RECORD.get(op)
        record = None
        is_write = None
        try:
            if cls is not None:
                record, _ = cls.decode(payload, off)
            elif op in MULTI_OPS:
                record, _ = decode_multi_request(payload, off)
                allowed = MULTI_READ_OPS if op == OpCode.MULTI_READ else MULTI_WRITE_OPS
                if any(t not in allowed for t, _ in record):
                    # MultiOperationRecord refuses the wrong kind of op: an IOException.
                    raise JuteError("op of the wrong kind for this multi")
            elif op == OpCode.AUTH:
                self._on_auth(xid, payload, off)
                return
            elif op == OpCode.SASL:
                self._on_sasl(xid, payload, off)
                return
            elif op == OpCode.CREATE_SESSION:
                # Only the handshake creates sessions; ZooKeeper's prep cannot parse this.
                raise JuteError("createSession is not a client request")
            elif op not in NO_BODY_OPS:
                session.last_active_ms = t0_ms
                self._unimplemented(xid, op)
                return
        except JuteError as e:
            # An unparseable body gets MARSHALLINGERROR in the session's order, as ZooKeeper's
            # processors answer an IOException; the connection lives on. A write still takes a
            # zxid (ZooKeeper 3.8's prep assigns it before it deserialises), reconfig does not.
            log.info("event=marshalling_error session=0x%x op=%d reason=%r",
                     session.session_id, op, str(e))
            record = None
            is_write = op in MARSHALLED_WRITES
        session.last_active_ms = t0_ms
        if op == _CLOSE_SESSION and session.closing:
            return
        req = Request(session.session_id, xid, op, record, self, self.auth_ids, t0_ms, payload)
        if is_write is not None:
            req.is_write = is_write
        elif op == _CHECK:
            req.is_write = False  # alone it is refused (3.9.3, ZOOKEEPER-2623): see reads
        self._submit(session, req)

    def _refused_unauthenticated(self, enforcement, xid: int, op: int) -> bool:
        """A session client_auth refuses (it has no id of an enforced scheme) gets
        SESSIONCLOSEDREQUIRESASLAUTH, whatever the scheme, with no body, and its connection
        closes. The session itself lives on until it expires, as in ZooKeeper."""
        if not client_auth.refuses_unauthenticated(enforcement, op, self.auth_ids):
            return False
        log.warning("event=auth_required remote=%s session=0x%x op=%d schemes=%s ids=%s",
                    self.remote, self.session.session_id, op,
                    ",".join(sorted(enforcement.schemes)),
                    ",".join(sorted({scheme for scheme, _ in self.auth_ids})))
        self.send(encode_reply(xid, 0, Code.SESSIONCLOSEDREQUIRESASLAUTH, None))
        self.close_after_flush("authentication required (enforce.auth.schemes)")
        # ZooKeeper also disables receiving: the frames read behind this one go unanswered.
        self._become(REFUSED)
        self._pause_reading()
        return True

    def _on_auth(self, xid: int, payload, off: int) -> None:
        try:
            packet, _ = r.AuthPacket.decode(payload, off)
        except JuteError as e:
            self.close(f"malformed AuthPacket: {e}")
            return
        err = client_auth.add_auth(self.server.config, packet.scheme, packet.auth,
                                   self.auth_ids, self.certificate_ids)
        if err != Code.OK:
            log.warning("event=auth_failed scheme=%r remote=%s", packet.scheme, self.remote)
            self.send(encode_reply(xid, 0, err, None))
            self.close_after_flush("authentication failed")
            return
        req = Request(self.session.session_id, xid, OpCode.AUTH, err, self, self.auth_ids)
        self._submit(self.session, req)

    def _on_sasl(self, xid: int, payload, off: int) -> None:
        """ZooKeeperServer.processSasl: the token goes to this connection's SASL exchange,
        whose answer is the reply; its ids join the session's at once, as addAuthInfo's
        do; a failed one may close the connection (client_auth.sasl_failure_code). Without
        SASL configured ZooKeeper answers a null token and the session goes on; a packet it
        cannot parse drops the connection."""
        try:
            packet, _ = r.GetSASLRequest.decode(payload, off)
        except JuteError as e:
            self.close(f"malformed SASL packet: {e}")
            return
        response = r.SetSASLResponse(None)
        sasl = getattr(self.server, "sasl", None)
        if sasl is not None:
            if self._sasl is None:
                self._sasl = sasl.start()
            step = self._sasl.step(packet.token or b"")
            if step.error is not None:
                if self._sasl_failure_closes(xid, step.error):
                    return
                step = step._replace(token=None)  # allowSaslFailedClients: an OK, no token
            client_auth.add_ids(self.auth_ids, step.ids)
            if step.ids:
                log.info("event=sasl_authenticated remote=%s ids=%r", self.remote, step.ids)
            response = r.SetSASLResponse(step.token)
        req = Request(self.session.session_id, xid, OpCode.SASL, response, self, self.auth_ids)
        self._submit(self.session, req)

    def _sasl_failure_closes(self, xid: int, reason: str) -> bool:
        """A failed SASL step: answered with client_auth's error and a null token, and the
        connection closes; unless client_auth keeps it open (allowSaslFailedClients)."""
        err = client_auth.sasl_failure_code(self.server.config.auth_enforcement)
        log.warning("event=sasl_auth_failed remote=%s reason=%r action=%s", self.remote,
                    reason, "keep" if err is None else "close")
        if err is None:
            return False
        self.send(encode_reply(xid, 0, err, r.SetSASLResponse(None)))
        self.close_after_flush("SASL authentication failed")
        return True

    def _unimplemented(self, xid: int, op: int) -> None:
        log.warning("event=unknown_op op=%d remote=%s action=close", op, self.remote)
        # UnimplementedRequestProcessor answers with the request's zxid, which is unset (-1).
        self.send(encode_reply(xid, -1, Code.UNIMPLEMENTED, None))
        self.close_after_flush(f"unknown op code {op}")

    def _four_letter_word(self, cmd: str, argument: bytes) -> None:
        text = self.server.admin.four_letter_word(cmd, self, argument)
        self.transport.write(text.encode("utf-8"))
        self._become(CLOSED)
        self.transport.close()
