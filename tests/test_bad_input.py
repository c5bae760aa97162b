"""Bad bytes on one raw socket: the server answers or closes exactly as ZooKeeper does,
keeps serving everyone else, and leaves the tree as it was.

Each case sends the same bytes to the real ZooKeeper 3.8 fixture and to zkcompat and
compares what comes back: the replies (xid, err, body), and whether the connection is
then closed or stays open. Around each case `Guard` checks, on zkcompat, that an
already-connected kazoo session saw no disconnect, that a new session can start, that a
few known znodes (data and Stat) are unchanged, and that the server's RSS did not grow
by more than RSS_GROWTH_MAX_BYTES.

Expected ZooKeeper behaviour is also written out next to each case (as observed from
3.8.0 and read in NIOServerCnxn, ZooKeeperServer, PrepRequestProcessor and
FinalRequestProcessor), so a case that ZooKeeper itself answers differently fails too.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

pytestmark = pytest.mark.timeout(60)

# -- protocol constants (ZooDefs.OpCode, KeeperException.Code, ClientCnxn xids) -------

OP_CREATE = 1
OP_DELETE = 2
OP_EXISTS = 3
OP_GET_DATA = 4
OP_SET_DATA = 5
OP_GET_ACL = 6
OP_SET_ACL = 7
OP_GET_CHILDREN = 8
OP_SYNC = 9
OP_PING = 11
OP_GET_CHILDREN2 = 12
OP_CHECK = 13
OP_MULTI = 14
OP_CREATE2 = 15
OP_RECONFIG = 16
OP_CHECK_WATCHES = 17
OP_REMOVE_WATCHES = 18
OP_CREATE_CONTAINER = 19
OP_DELETE_CONTAINER = 20
OP_CREATE_TTL = 21
OP_MULTI_READ = 22
OP_AUTH = 100
OP_SET_WATCHES = 101
OP_SASL = 102
OP_GET_EPHEMERALS = 103
OP_GET_ALL_CHILDREN_NUMBER = 104
OP_SET_WATCHES2 = 105
OP_ADD_WATCH = 106
OP_WHO_AM_I = 107
OP_CREATE_SESSION = -10
OP_CLOSE_SESSION = -11

OK = 0
MARSHALLINGERROR = -5
UNIMPLEMENTED = -6
BADARGUMENTS = -8

NOTIFICATION_XID = -1
PING_XID = -2
SET_WATCHES_XID = -8

JUTE_MAXBUFFER_BYTES = 0xFFFFF  # jute.maxbuffer default, 1,048,575
INT32_MAX = 0x7FFFFFFF
PASSWD_BYTES = 16
CONNECT_RESPONSE_BYTES = 4 + 4 + 8 + 4 + PASSWD_BYTES  # without the readOnly byte
SESSIONLESS_CNXN_TIMEOUT_MS = 10_000  # NIOServerCnxnFactory zookeeper.nio.sessionlessCnxnTimeout

RSS_GROWTH_MAX_BYTES = 50 * 1024 * 1024
REPLY_WAIT_S = 5.0  # a reply or a close must come within this
QUIET_S = 0.6  # no bytes and no close for this long: the server is waiting for more
PERMS_ALL = 31

# -- encoding -------------------------------------------------------------------------

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_REPLY_HEADER = struct.Struct(">iqi")


def i32(v: int) -> bytes:
    return _I32.pack(v)


def i64(v: int) -> bytes:
    return _I64.pack(v)


def ustring(v: str | bytes | None) -> bytes:
    if v is None:
        return i32(-1)
    raw = v.encode("utf-8") if isinstance(v, str) else v
    return i32(len(raw)) + raw


def buffer(v: bytes | None) -> bytes:
    return i32(-1) if v is None else i32(len(v)) + v


def open_acl() -> bytes:
    return i32(1) + i32(PERMS_ALL) + ustring("world") + ustring("anyone")


def framed(payload: bytes) -> bytes:
    return i32(len(payload)) + payload


def connect_request(
    timeout_ms: int = 10_000,
    session_id: int = 0,
    passwd: bytes | None = b"\0" * PASSWD_BYTES,
    last_zxid_seen: int = 0,
    read_only: bool | None = False,
) -> bytes:
    """A ConnectRequest payload; read_only=None is an old client (no trailing byte)."""
    out = i32(0) + i64(last_zxid_seen) + i32(timeout_ms) + i64(session_id) + buffer(passwd)
    if read_only is not None:
        out += b"\x01" if read_only else b"\x00"
    return out


def request(xid: int, op: int, body: bytes = b"") -> bytes:
    return i32(xid) + i32(op) + body


def ping() -> bytes:
    return request(PING_XID, OP_PING)


# -- what came back -------------------------------------------------------------------

CLOSED = ("closed",)
SILENT = ("silent",)


@dataclass
class Session:
    session_id: int
    passwd: bytes
    timeout_ms: int
    payload: bytes


def connect_event(payload: bytes) -> tuple:
    """A ConnectResponse, with the fields that are the same on every server kept."""
    timeout_ms, session_id = struct.unpack_from(">iq", payload, 4)
    (plen,) = _I32.unpack_from(payload, 16)
    passwd = payload[20 : 20 + max(plen, 0)]
    return ("connect", len(payload), timeout_ms, session_id == 0, passwd == b"\0" * len(passwd))


class Wire:
    """One raw socket; every read is bounded by a deadline."""

    def __init__(self, server, timeout_s: float = REPLY_WAIT_S) -> None:
        self.server = server
        self.sock = socket.create_connection((server.host, server.port), timeout=timeout_s)
        self.buf = b""
        self.closed = False

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, data: bytes) -> bool:
        """False when the server has already closed the connection."""
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            self.closed = True
            return False

    def _fill(self, deadline: float) -> bool:
        """Read more bytes; False at the deadline or when the server closed."""
        if self.closed:
            return False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(65536)
        except TimeoutError:
            return False
        except OSError:  # ECONNRESET: closed with our bytes unread
            chunk = b""
        if not chunk:
            self.closed = True
            return False
        self.buf += chunk
        return True

    def read_frame(self, wait_s: float = REPLY_WAIT_S) -> bytes | tuple:
        """One frame payload, or CLOSED, or SILENT if nothing complete came within wait_s."""
        deadline = time.monotonic() + wait_s
        while True:
            if len(self.buf) >= 4:
                (length,) = _I32.unpack_from(self.buf, 0)
                if 0 <= length <= len(self.buf) - 4:
                    payload, self.buf = self.buf[4 : 4 + length], self.buf[4 + length :]
                    return payload
            if not self._fill(deadline):
                return CLOSED if self.closed else SILENT

    def handshake(self, read_only: bool | None = False, **kwargs) -> Session:
        assert self.send(framed(connect_request(read_only=read_only, **kwargs)))
        payload = self.read_frame()
        assert isinstance(payload, bytes), f"{self.server.kind}: no ConnectResponse: {payload}"
        timeout_ms, session_id = struct.unpack_from(">iq", payload, 4)
        passwd = payload[20 : 20 + PASSWD_BYTES]
        return Session(session_id, passwd, timeout_ms, payload)

    def events_until_quiet(self, quiet_s: float = QUIET_S) -> list[tuple]:
        """Every frame until the connection closes or stays quiet for quiet_s."""
        events: list[tuple] = []
        while True:
            got = self.read_frame(quiet_s)
            if got == SILENT and self.buf:
                events.append(("partial", self.buf.hex()))
                self.buf = b""
            if isinstance(got, tuple):
                events.append(got)
                return events
            events.append(reply_event(got))

    def events_until_ping(self) -> list[tuple]:
        """Replies up to the answer to a ping we sent after them (the ping's own reply is
        left out); ends with CLOSED if the server closes first."""
        events: list[tuple] = []
        deadline = time.monotonic() + REPLY_WAIT_S
        while time.monotonic() < deadline:
            got = self.read_frame(max(deadline - time.monotonic(), 0.01))
            if isinstance(got, tuple):
                events.append(got)
                return events
            xid, _zxid, err = _REPLY_HEADER.unpack_from(got, 0)
            if xid == PING_XID and len(got) == _REPLY_HEADER.size and err == OK:
                return events
            events.append(reply_event(got))
        events.append(SILENT)
        return events


def reply_event(payload: bytes) -> tuple:
    if len(payload) < _REPLY_HEADER.size:
        return ("short-frame", payload.hex())
    xid, _zxid, err = _REPLY_HEADER.unpack_from(payload, 0)
    if xid == NOTIFICATION_XID and len(payload) >= _REPLY_HEADER.size + 12:
        event_type, state = struct.unpack_from(">ii", payload, _REPLY_HEADER.size)
        return ("notification", event_type, state, payload[_REPLY_HEADER.size + 8 :].hex())
    return ("reply", xid, err, payload[_REPLY_HEADER.size :].hex())


def reply_zxid(payload: bytes) -> int:
    return _REPLY_HEADER.unpack_from(payload, 0)[1]


# -- one script, two servers ----------------------------------------------------------


def send_then_quiet(server, data: bytes, handshake: bool = False) -> list[tuple]:
    """Send data (after a handshake if asked); what came back until close or quiet."""
    wire = Wire(server)
    try:
        if handshake:
            wire.handshake()
        if not wire.send(data):
            return [CLOSED]
        return wire.events_until_quiet()
    finally:
        wire.close()


def _answer(wire: Wire) -> list[tuple]:
    """The events up to and including one reply (watch notifications come before the
    reply of the request that caused them), or ending in CLOSED or SILENT."""
    events: list[tuple] = []
    while True:
        got = wire.read_frame()
        if isinstance(got, tuple):
            return events + [got]
        event = reply_event(got)
        events.append(event)
        if event[0] != "notification":
            return events


def send_then_ping(server, *payloads: bytes) -> list[tuple]:
    """After a handshake, send each payload as one frame and wait for its answer, then a
    ping; every event but the ping's reply, and CLOSED or SILENT where they happen.

    One frame at a time, so that whether a frame behind a bad one is read before the
    close is never a race.
    """
    wire = Wire(server)
    try:
        wire.handshake()
        events: list[tuple] = []
        for payload in (*payloads, ping()):
            if not wire.send(framed(payload)):
                return events + [CLOSED]
            events += _answer(wire)
            if events[-1] == CLOSED:
                return events
        if events[-1] == ("reply", PING_XID, OK, ""):
            events.pop()
        return events
    finally:
        wire.close()


def both(zookeeper, zkcompat, probe, *args, **kwargs) -> tuple[list, list]:
    return probe(zookeeper, *args, **kwargs), probe(zkcompat, *args, **kwargs)


# -- the guard: zkcompat keeps serving and the tree stays as it was -------------------

BASE = "/badinput"
KNOWN_NODES = ("/", BASE, f"{BASE}/a", f"{BASE}/a/b", f"{BASE}/c")


def make_tree(client: KazooClient) -> None:
    client.ensure_path(BASE)
    for path, data in ((f"{BASE}/a", b"alpha"), (f"{BASE}/a/b", b"beta"), (f"{BASE}/c", b"")):
        if client.exists(path) is None:
            client.create(path, data)


def tree_snapshot(client: KazooClient) -> dict:
    snap = {}
    for path in KNOWN_NODES:
        data, stat = client.get(path)
        snap[path] = (data, tuple(stat), sorted(client.get_children(path)))
    return snap


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


class Bystander:
    """A kazoo session connected before the bad input; records every state change."""

    def __init__(self, server) -> None:
        self.client = KazooClient(hosts=server.connect_string, timeout=10.0)
        self.states: list[str] = []
        self._lock = threading.Lock()
        self.client.add_listener(self._on_state)
        self.client.start(timeout=10)
        make_tree(self.client)

    def _on_state(self, state) -> None:
        with self._lock:
            self.states.append(state)

    def changes_since(self, n: int) -> list[str]:
        with self._lock:
            return self.states[n:]

    def stop(self) -> None:
        self.client.stop()
        self.client.close()


@pytest.fixture(scope="module")
def bystander(zkcompat):
    b = Bystander(zkcompat)
    yield b
    b.stop()


@pytest.fixture(scope="module")
def zk_tree(zookeeper):
    """The same known znodes on the real ZooKeeper, so paths resolve alike on both."""
    client = KazooClient(hosts=zookeeper.connect_string, timeout=10.0)
    client.start(timeout=10)
    make_tree(client)
    yield
    client.stop()
    client.close()


@pytest.fixture
def guard(zkcompat, bystander, zk_tree):
    return Guard(zkcompat, bystander)


class Guard:
    def __init__(self, server, bystander: Bystander) -> None:
        self.server = server
        self.bystander = bystander

    @contextmanager
    def check(self):
        server, b = self.server, self.bystander
        assert server.is_alive(), f"zkcompat is not running:\n{server.log_tail()}"
        session_before = b.client.client_id
        states_before = len(b.states)
        snap_before = tree_snapshot(b.client)
        rss_before = rss_bytes(server.pid)
        yield
        assert server.is_alive(), f"zkcompat died on bad input:\n{server.log_tail()}"
        rss_after = rss_bytes(server.pid)
        assert rss_after - rss_before < RSS_GROWTH_MAX_BYTES, (
            f"RSS grew by {(rss_after - rss_before) / 2**20:.1f} MB on bad input"
        )
        # The session that was already connected is served without a reconnect.
        assert b.client.get(f"{BASE}/a")[0] == b"alpha"
        assert b.changes_since(states_before) == [], "the bystander session was disturbed"
        assert b.client.state == KazooState.CONNECTED
        assert b.client.client_id == session_before
        # A new session can start and read.
        fresh = KazooClient(hosts=server.connect_string, timeout=10.0)
        try:
            fresh.start(timeout=10)
            assert fresh.get(f"{BASE}/a/b")[0] == b"beta"
        finally:
            fresh.stop()
            fresh.close()
        assert tree_snapshot(b.client) == snap_before, "bad input changed the tree"


# -- framing ----------------------------------------------------------------------------


FRAMING_CASES = {
    # NIOServerCnxn.readLength: len < 0 || len > jute.maxbuffer -> IOException -> close.
    "oversize-length-before-handshake": (False, i32(JUTE_MAXBUFFER_BYTES + 1) + b"x" * 64),
    "oversize-length-after-handshake": (True, i32(JUTE_MAXBUFFER_BYTES + 1) + b"x" * 64),
    "int32-max-length-after-handshake": (True, i32(INT32_MAX) + b"x" * 64),
    "negative-length-before-handshake": (False, i32(-1)),
    "negative-length-after-handshake": (True, i32(-1)),
    "int32-min-length-after-handshake": (True, i32(-(2**31)) + b"\0" * 8),
    # Exactly jute.maxbuffer is a legal length: the server waits for the body.
    "maxbuffer-length-is-accepted": (True, i32(JUTE_MAXBUFFER_BYTES) + b"\0" * 1024),
    # Zero-length and header-less frames cannot hold a RequestHeader: close, no reply.
    "empty-frame-after-handshake": (True, i32(0)),
    "3-byte-frame-after-handshake": (True, framed(b"\0\0\0")),
    "empty-frame-before-handshake": (False, i32(0)),
    # A truncated frame: the server waits for the rest.
    "truncated-frame-before-handshake": (False, i32(45) + connect_request()[:20]),
    "truncated-frame-after-handshake": (True, i32(100) + request(5, OP_GET_DATA)[:6]),
    "truncated-length-prefix-after-handshake": (True, b"\0\0"),
}

FRAMING_EXPECTED = {
    "maxbuffer-length-is-accepted": [SILENT],
    "truncated-frame-before-handshake": [SILENT],
    "truncated-frame-after-handshake": [SILENT],
    "truncated-length-prefix-after-handshake": [SILENT],
}


@pytest.mark.parametrize("case", sorted(FRAMING_CASES))
def test_bad_framing(case, zookeeper, zkcompat, guard):
    handshake, data = FRAMING_CASES[case]
    with guard.check():
        zk, ours = both(zookeeper, zkcompat, send_then_quiet, data, handshake=handshake)
    assert zk == FRAMING_EXPECTED.get(case, [CLOSED]), f"ZooKeeper itself answered {zk}"
    assert ours == zk


def connections(server) -> int:
    """srvr's "Connections:" count (it includes the srvr connection itself)."""
    srvr = server.four_letter_word("srvr")
    line = next(x for x in srvr.splitlines() if x.startswith("Connections:"))
    return int(line.split(":")[1])


def test_truncated_frame_then_client_closes(zkcompat, guard):
    """Half a frame, then the client goes away: nothing leaks, the rest carry on."""
    baseline = connections(zkcompat)
    with guard.check():
        for handshake in (False, True):
            for _ in range(20):
                wire = Wire(zkcompat)
                if handshake:
                    wire.handshake()
                wire.send(i32(500) + b"\x01" * 200)
                wire.close()
        # The server noticed every close: the count of connections is back where it was.
        deadline = time.monotonic() + 5
        while connections(zkcompat) > baseline and time.monotonic() < deadline:
            time.sleep(0.1)
        assert connections(zkcompat) <= baseline


def test_idle_connection_without_session_is_closed(zookeeper, zkcompat, guard):
    """A connection that never completes its handshake is closed after
    zookeeper.nio.sessionlessCnxnTimeout (10 s), as NIOServerCnxnFactory's
    cnxnExpiryQueue does; otherwise idle sockets pile up until file descriptors run out."""
    bound_s = 2 * SESSIONLESS_CNXN_TIMEOUT_MS / 1000 + 2
    with guard.check():
        wires = {s.kind: Wire(s) for s in (zookeeper, zkcompat)}
        for wire in wires.values():
            wire.send(i32(45) + connect_request()[:10])
        start = time.monotonic()
        closed_after: dict[str, float] = {}
        while time.monotonic() - start < bound_s and len(closed_after) < len(wires):
            for kind, wire in wires.items():
                if kind not in closed_after and wire.read_frame(0.1) == CLOSED:
                    closed_after[kind] = time.monotonic() - start
        for wire in wires.values():
            wire.close()
    assert "zookeeper" in closed_after, "ZooKeeper kept an idle sessionless connection"
    assert "zkcompat" in closed_after, (
        f"zkcompat kept a sessionless connection open for {bound_s:.0f} s; ZooKeeper "
        f"closed its one after {closed_after['zookeeper']:.1f} s"
    )


# -- the handshake ------------------------------------------------------------------------


PRE_HANDSHAKE_CASES = {
    # The first frame is always read as a ConnectRequest; a request header and body do
    # not parse as one (or claim a lastZxidSeen from the future): close, no reply.
    "getData-first": request(1, OP_GET_DATA, ustring("/") + b"\0"),
    "ping-first": ping(),
    "closeSession-first": request(1, OP_CLOSE_SESSION),
    "create-first": request(1, OP_CREATE, ustring("/x") + buffer(b"") + open_acl() + i32(0)),
    "connect-from-the-future": connect_request(last_zxid_seen=1 << 40),
    "connect-passwd-length-huge": connect_request()[:24] + i32(INT32_MAX) + b"x" * 16,
    "connect-truncated": connect_request()[:10],
}


@pytest.mark.parametrize("case", sorted(PRE_HANDSHAKE_CASES))
def test_request_before_handshake(case, zookeeper, zkcompat, guard):
    data = framed(PRE_HANDSHAKE_CASES[case])
    with guard.check():
        zk, ours = both(zookeeper, zkcompat, send_then_quiet, data)
    assert zk == [CLOSED], f"ZooKeeper itself answered {zk}"
    assert ours == zk


def test_second_connect_request_on_an_open_session(zookeeper, zkcompat, guard):
    """A second ConnectRequest is read as a request header (xid 0, op 0): an unknown op."""
    with guard.check():
        zk, ours = both(zookeeper, zkcompat, send_then_ping, connect_request())
    closes = [("reply", 0, UNIMPLEMENTED, ""), CLOSED]
    # ZooKeeper closes asynchronously (UnimplementedRequestProcessor -> sendCloseSession),
    # so the ping sent right after is sometimes still answered; zkcompat closes once the
    # reply is flushed, every time.
    assert zk in (closes, closes[:1]), f"ZooKeeper answered {zk}"
    assert ours == closes


def _zeros_response(read_only_byte: bool) -> bytes:
    # ZooKeeperServer.finishSessionInit(valid=false): ConnectResponse(0, 0, 0, new byte[16]),
    # plus the readOnly flag unless the client is an old one; then the connection closes.
    payload = i32(0) + i32(0) + i64(0) + buffer(b"\0" * PASSWD_BYTES)
    return payload + (b"\0" if read_only_byte else b"")


def _bad_passwd(kind: str, good: bytes) -> bytes | None:
    return {"wrong": bytes(b ^ 0xFF for b in good), "short": good[:3], "null": None}[kind]


def _bad_password_probe(server, passwd: str, read_only_byte: bool) -> dict:
    """Open a session, try to resume it with a bad password on a second socket; what
    that socket got, whether the session's own connection survived, and whether the
    session can still be resumed with the right password."""
    owner = Wire(server)
    try:
        session = owner.handshake()
        wire = Wire(server)
        try:
            wire.send(framed(connect_request(
                session_id=session.session_id, passwd=_bad_passwd(passwd, session.passwd),
                read_only=False if read_only_byte else None)))
            refused = [wire.read_frame(), wire.read_frame(QUIET_S)]
        finally:
            wire.close()
        owner.send(framed(ping()))
        owner_kept = owner.read_frame() not in (CLOSED, SILENT)
    finally:
        owner.close()
    again = Wire(server)
    try:
        resumed = again.handshake(session_id=session.session_id, passwd=session.passwd)
        resumable = resumed.session_id == session.session_id
    finally:
        again.close()
    return {"refused": refused, "owner_connection_kept": owner_kept, "resumable": resumable}


@pytest.mark.parametrize("read_only_byte", [True, False], ids=["client-sends-readOnly", "old-client"])
@pytest.mark.parametrize("passwd", ["wrong", "short", "null"])
def test_bad_password_for_existing_session(passwd, read_only_byte, zookeeper, zkcompat, guard):
    """ZooKeeperServer.reopenSession -> finishSessionInit(valid=false): a ConnectResponse
    of zeros (timeOut 0, sessionId 0, 16 zero bytes), then close; the session lives on."""
    with guard.check():
        zk, ours = both(zookeeper, zkcompat, _bad_password_probe, passwd, read_only_byte)
    expected = [_zeros_response(read_only_byte), CLOSED]
    assert zk["refused"] == expected, f"ZooKeeper itself answered {zk}"
    assert zk["resumable"], "ZooKeeper lost the session"
    assert ours["refused"] == expected
    assert ours["resumable"], "a bad password attempt killed the session"


def test_bad_password_closes_the_sessions_current_connection(zookeeper, zkcompat, guard):
    """ZooKeeperServer.processConnectRequest closes the connection currently bound to the
    session id (DisconnectReason.CLIENT_RECONNECT) before reopenSession checks the
    password: the rightful client sees a disconnect (and can resume)."""
    with guard.check():
        zk, ours = both(zookeeper, zkcompat, _bad_password_probe, "wrong", True)
    assert zk["owner_connection_kept"] is False, f"ZooKeeper: {zk}"
    assert ours["owner_connection_kept"] == zk["owner_connection_kept"], (
        "ZooKeeper closes the session's current connection on any resume attempt, "
        "even one with a bad password; zkcompat keeps it"
    )


@pytest.mark.parametrize("read_only", [None, False, True], ids=["old-client", "rw-client", "ro-client"])
def test_connect_response_has_readonly_byte_only_if_the_request_had_it(
    read_only, zookeeper, zkcompat, guard
):
    def probe(server):
        wire = Wire(server)
        try:
            session = wire.handshake(read_only=read_only)
            assert wire.send(framed(ping()))
            assert wire.events_until_ping() == [], f"{server.kind}: session not usable"
            return connect_event(session.payload), session.payload[CONNECT_RESPONSE_BYTES:]
        finally:
            wire.close()

    with guard.check():
        zk, ours = both(zookeeper, zkcompat, probe)
    expected_tail = b"" if read_only is None else b"\0"  # a standalone server is never read-only
    assert zk[0][1] == CONNECT_RESPONSE_BYTES + len(expected_tail), f"ZooKeeper: {zk}"
    assert zk[1] == expected_tail
    assert ours == zk


def test_unknown_session_id_gets_zeros(zookeeper, zkcompat, guard):
    def probe(server):
        wire = Wire(server)
        try:
            wire.send(framed(connect_request(session_id=0x0123456789AB, passwd=b"\1" * 16)))
            return [wire.read_frame(), wire.read_frame(QUIET_S)]
        finally:
            wire.close()

    with guard.check():
        zk, ours = both(zookeeper, zkcompat, probe)
    assert zk == [_zeros_response(True), CLOSED], f"ZooKeeper itself answered {zk}"
    assert ours == zk


# -- op codes -------------------------------------------------------------------------


UNKNOWN_OPS = [0, -1, 10, 23, 99, 108, 999, -12, INT32_MAX, -(2**31)]


@pytest.mark.parametrize("op", UNKNOWN_OPS)
def test_unknown_op_gets_unimplemented_then_close(op, zookeeper, zkcompat, guard):
    """ZooKeeperServer.submitRequestNow: !Request.isValid(type) ->
    UnimplementedRequestProcessor: a reply with err UNIMPLEMENTED, then the connection is
    closed (the session itself lives on)."""
    with guard.check():
        zk, ours = both(zookeeper, zkcompat, send_then_ping, request(77, op, b"\0" * 8))
    closes = [("reply", 77, UNIMPLEMENTED, ""), CLOSED]
    # ZooKeeper's close is asynchronous: the ping right after may still be answered.
    assert zk in (closes, closes[:1]), f"ZooKeeper itself answered {zk}"
    assert ours == closes


def test_unknown_op_session_survives_the_close(zookeeper, zkcompat, guard):
    def probe(server):
        wire = Wire(server)
        try:
            session = wire.handshake()
            wire.send(framed(request(3, 999)))
            first = [wire.read_frame(), wire.read_frame(QUIET_S)]
        finally:
            wire.close()
        again = Wire(server)
        try:
            resumed = again.handshake(session_id=session.session_id, passwd=session.passwd)
            return [reply_event(first[0]), first[1], resumed.session_id == session.session_id]
        finally:
            again.close()

    with guard.check():
        zk, ours = both(zookeeper, zkcompat, probe)
    assert zk == [("reply", 3, UNIMPLEMENTED, ""), CLOSED, True], f"ZooKeeper: {zk}"
    assert ours == zk


def test_unknown_op_reply_zxid_is_minus_one(zookeeper, zkcompat, guard):
    """UnimplementedRequestProcessor answers with the Request's zxid, which is -1 for a
    request that never reached a processor that assigns one."""

    def probe(server):
        wire = Wire(server)
        try:
            wire.handshake()
            wire.send(framed(request(9, 999)))
            payload = wire.read_frame()
            assert isinstance(payload, bytes), f"{server.kind}: {payload}"
            return reply_zxid(payload)
        finally:
            wire.close()

    with guard.check():
        zk, ours = both(zookeeper, zkcompat, probe)
    assert zk == -1
    assert ours == zk, f"zkcompat's UNIMPLEMENTED reply carries zxid {ours:#x}, ZooKeeper -1"


def test_ping_reply_xid_is_always_ping_xid(zookeeper, zkcompat, guard):
    """FinalRequestProcessor answers a ping with ReplyHeader(ClientCnxn.PING_XID, ...),
    whatever xid the request carried."""
    with guard.check():
        zk, ours = both(zookeeper, zkcompat, send_then_ping, request(7, OP_PING))
    assert zk == [("reply", PING_XID, OK, "")], f"ZooKeeper answered {zk}"
    assert ours == zk


# -- invalid paths ----------------------------------------------------------------------

# path -> ZooKeeper 3.8's err for (create, delete, setData, exists, getData, getChildren)
# with /badinput, /badinput/a and /badinput/a/b present. PrepRequestProcessor resolves the
# parent before validatePath on create, so a missing parent wins (NONODE) over a bad name;
# delete only rejects no '/', NUL and special paths (getParentPathAndValidate); setData
# validates first. Reads look the path up as given (the root is stored under "").
INVALID_PATHS = {
    "badinput": (-8, -8, -8, -101, -101, -101),  # no leading slash
    "badinput/a": (-101, -101, -8, -101, -101, -101),
    "/badinput/a/": (-8, -101, -8, -101, -101, -101),  # trailing slash
    "//": (-8, -101, -8, -101, -101, -101),
    "/badinput//a": (-101, -101, -8, -101, -101, -101),
    "/badinput/a//b": (-101, -101, -8, -101, -101, -101),
    "/badinput/./a": (-101, -101, -8, -101, -101, -101),
    "/badinput/a/./b": (-101, -101, -8, -101, -101, -101),
    "/badinput/../a": (-101, -101, -8, -101, -101, -101),
    "/badinput/.": (-8, -101, -8, -101, -101, -101),
    "/badinput/..": (-8, -101, -8, -101, -101, -101),
    "/badinput/a\0b": (-8, -8, -8, -8, -101, -101),  # NUL inside
    "/badinput/a\0": (-8, -8, -8, -8, -101, -101),
    "/badinput/a\x01": (-8, -101, -8, -101, -101, -101),  # a control character
    "/badinput/\ufff0": (-8, -101, -8, -101, -101, -101),  # a non-character
    "": (-8, -8, -8, 0, 0, 0),
    None: (-5, -5, -8, -5, -5, -5),  # a null string (length -1)
}
PATH_OPS = ("create", "delete", "setData", "exists", "getData", "getChildren")


def path_request(op: str, xid: int, path: str | None) -> bytes:
    p = ustring(path)
    return {
        "create": lambda: request(xid, OP_CREATE, p + buffer(b"x") + open_acl() + i32(0)),
        "delete": lambda: request(xid, OP_DELETE, p + i32(12345)),
        "setData": lambda: request(xid, OP_SET_DATA, p + buffer(b"x") + i32(12345)),
        "exists": lambda: request(xid, OP_EXISTS, p + b"\0"),
        "getData": lambda: request(xid, OP_GET_DATA, p + b"\0"),
        "getChildren": lambda: request(xid, OP_GET_CHILDREN, p + b"\0"),
    }[op]()


def _path_id(path: str | None) -> str:
    return "null" if path is None else repr(path)


@pytest.mark.parametrize("path", list(INVALID_PATHS), ids=[_path_id(p) for p in INVALID_PATHS])
def test_invalid_path(path, zookeeper, zkcompat, guard):
    """Each op on a bad path gets ZooKeeper's error code and the connection stays usable
    (every reply arrives, then the ping behind them is answered)."""
    frames = [path_request(op, 100 + i, path) for i, op in enumerate(PATH_OPS)]
    with guard.check():
        zk, ours = both(zookeeper, zkcompat, send_then_ping, *frames)

    def errs(events):
        return {op: ev[2] if ev[0] == "reply" else ev for op, ev in zip(PATH_OPS, events, strict=False)}

    expected = dict(zip(PATH_OPS, INVALID_PATHS[path], strict=True))
    assert [e[1] for e in zk] == [100 + i for i in range(len(PATH_OPS))], f"ZooKeeper: {zk}"
    assert errs(zk) == expected, "ZooKeeper itself answered differently"
    assert len(ours) == len(PATH_OPS) and CLOSED not in ours, f"connection not usable: {ours}"
    assert errs(ours) == expected


# -- bodies that do not parse ---------------------------------------------------------

HUGE = INT32_MAX
GARBAGE = b"\xde\xad\xbe\xef" * 5

# name -> (request payload, ZooKeeper's reply events)
MARSHALLING_CASES = {
    # BinaryInputArchive.startVector takes the count as given; the entries run out first:
    # IOException in PrepRequestProcessor -> ErrorTxn(MARSHALLINGERROR), connection kept.
    "create-acl-count-int32-max": (
        request(5, OP_CREATE, ustring(f"{BASE}/x") + buffer(b"") + i32(HUGE) + i32(PERMS_ALL)
                + ustring("world") + ustring("anyone") + i32(0)),
        [("reply", 5, MARSHALLINGERROR, "")],
    ),
    "create2-acl-count-int32-max": (
        request(5, OP_CREATE2, ustring(f"{BASE}/x") + buffer(b"") + i32(HUGE)),
        [("reply", 5, MARSHALLINGERROR, "")],
    ),
    "create-data-length-int32-max": (
        request(5, OP_CREATE, ustring(f"{BASE}/x") + i32(HUGE) + b"\0" * 32),
        [("reply", 5, MARSHALLINGERROR, "")],
    ),
    "create-truncated-body": (
        request(5, OP_CREATE, ustring(f"{BASE}/x")),
        [("reply", 5, MARSHALLINGERROR, "")],
    ),
    "setACL-acl-count-int32-max": (
        request(5, OP_SET_ACL, ustring(f"{BASE}/c") + i32(HUGE) + i32(PERMS_ALL)),
        [("reply", 5, MARSHALLINGERROR, "")],
    ),
    "getData-path-length-int32-max": (
        request(5, OP_GET_DATA, i32(HUGE) + b"/ab"),
        [("reply", 5, MARSHALLINGERROR, "")],
    ),
    "getChildren-path-length-past-the-end": (
        request(5, OP_GET_CHILDREN, i32(50) + b"/ab"),
        [("reply", 5, MARSHALLINGERROR, "")],
    ),
    "sync-without-path": (request(5, OP_SYNC), [("reply", 5, MARSHALLINGERROR, "")]),
    "delete-without-version": (
        request(5, OP_DELETE, ustring(f"{BASE}/c")),
        [("reply", 5, MARSHALLINGERROR, "")],
    ),
    # SetWatches is read in FinalRequestProcessor; an IOException there is MARSHALLINGERROR.
    "setWatches-data-count-int32-max": (
        request(SET_WATCHES_XID, OP_SET_WATCHES, i64(0) + i32(HUGE) + ustring("/")),
        [("reply", SET_WATCHES_XID, MARSHALLINGERROR, "")],
    ),
    "setWatches-child-count-int32-max": (
        request(SET_WATCHES_XID, OP_SET_WATCHES, i64(0) + i32(0) + i32(0) + i32(HUGE)),
        [("reply", SET_WATCHES_XID, MARSHALLINGERROR, "")],
    ),
    # MultiOperationRecord reads MultiHeaders until one says done: the garbage's first
    # header (type 0xdeadbeef, done byte 0xde, so true) ends it, an empty multi whose
    # response is the closing MultiHeader(-1, true, -1) alone.
    "multi-garbage": (
        request(7, OP_MULTI, GARBAGE),
        [("reply", 7, OK, "ffffffff01ffffffff")],
    ),
    "multiRead-garbage": (
        request(7, OP_MULTI_READ, GARBAGE),
        [("reply", 7, OK, "ffffffff01ffffffff")],
    ),
    "multi-no-body": (request(7, OP_MULTI), [("reply", 7, MARSHALLINGERROR, "")]),
    "multi-create-acl-count-int32-max": (
        request(7, OP_MULTI, i32(OP_CREATE) + b"\0" + i32(-1) + ustring(f"{BASE}/x")
                + buffer(b"") + i32(HUGE)),
        [("reply", 7, MARSHALLINGERROR, "")],
    ),
    "multi-header-count-only": (
        request(7, OP_MULTI, i32(OP_CREATE) + b"\0" + i32(-1)),
        [("reply", 7, MARSHALLINGERROR, "")],
    ),
}


@pytest.mark.parametrize("case", sorted(MARSHALLING_CASES))
def test_unparseable_body(case, zookeeper, zkcompat, guard):
    payload, expected = MARSHALLING_CASES[case]
    with guard.check():
        zk, ours = both(zookeeper, zkcompat, send_then_ping, payload)
    assert zk == expected, f"ZooKeeper itself answered {zk}"
    assert ours == zk


def test_huge_vector_counts_do_not_balloon_memory(zkcompat, guard):
    """Many requests whose vector counts claim 2**31-1 entries, back to back on one
    connection: each is refused without allocating for the claim (the guard bounds RSS)."""
    cases = [MARSHALLING_CASES[c][0] for c in sorted(MARSHALLING_CASES) if "int32-max" in c]
    with guard.check():
        wire = Wire(zkcompat)
        try:
            wire.handshake()
            for _ in range(30):
                assert wire.send(b"".join(framed(p) for p in cases) + framed(ping()))
                events = wire.events_until_ping()
                assert len(events) == len(cases) and all(e[0] == "reply" for e in events), events
        finally:
            wire.close()


PROBE_TRIES = 3


def test_unparseable_write_uses_a_zxid(zookeeper, zkcompat, guard):
    """PrepRequestProcessor turns a write whose body does not parse into an ErrorTxn with
    the next zxid, like any failed write: the reply carries it and lastZxid moves on."""
    payload = MARSHALLING_CASES["create-acl-count-int32-max"][0]

    def probe(server):
        wire = Wire(server)
        try:
            wire.handshake()
            wire.send(framed(ping()))
            before = wire.read_frame()
            wire.send(framed(payload))
            bad = wire.read_frame()
            wire.send(framed(ping()))
            after = wire.read_frame()
            assert all(isinstance(f, bytes) for f in (before, bad, after)), server.kind
            base = reply_zxid(before)
            return reply_zxid(bad) - base, reply_zxid(after) - base
        finally:
            wire.close()

    # Other sessions' txns on these shared servers (an earlier test's session expiring)
    # can only add to the differences, never take away: the smallest of a few tries is
    # the probe's own answer.
    with guard.check():
        zk = min(probe(zookeeper) for _ in range(PROBE_TRIES))
        ours = min(probe(zkcompat) for _ in range(PROBE_TRIES))
    assert zk == (1, 1), f"ZooKeeper: {zk}"
    assert ours == zk, f"zkcompat (reply zxid, next zxid) - previous zxid = {ours}, ZooKeeper {zk}"


# Every op code ZooKeeper's Request.isValid accepts from a client, with a body that does
# not parse. ZooKeeper answers each on an open connection (MARSHALLINGERROR, or the op's
# own error before it reads the body), except auth and sasl, which close it.
GARBAGE_BODY_EXPECTED = {
    OP_CREATE: [("reply", 7, MARSHALLINGERROR, "")],
    OP_DELETE: [("reply", 7, MARSHALLINGERROR, "")],
    OP_EXISTS: [("reply", 7, MARSHALLINGERROR, "")],
    OP_GET_DATA: [("reply", 7, MARSHALLINGERROR, "")],
    OP_SET_DATA: [("reply", 7, MARSHALLINGERROR, "")],
    OP_GET_ACL: [("reply", 7, MARSHALLINGERROR, "")],
    OP_SET_ACL: [("reply", 7, MARSHALLINGERROR, "")],
    OP_GET_CHILDREN: [("reply", 7, MARSHALLINGERROR, "")],
    OP_SYNC: [("reply", 7, MARSHALLINGERROR, "")],
    OP_GET_CHILDREN2: [("reply", 7, MARSHALLINGERROR, "")],
    OP_CHECK: [("reply", 7, MARSHALLINGERROR, "")],
    OP_CREATE2: [("reply", 7, MARSHALLINGERROR, "")],
    OP_RECONFIG: [("reply", 7, MARSHALLINGERROR, "")],
    OP_CHECK_WATCHES: [("reply", 7, MARSHALLINGERROR, "")],
    OP_REMOVE_WATCHES: [("reply", 7, MARSHALLINGERROR, "")],
    OP_CREATE_CONTAINER: [("reply", 7, MARSHALLINGERROR, "")],
    OP_DELETE_CONTAINER: [("reply", 7, BADARGUMENTS, "")],  # a server-internal op
    OP_CREATE_TTL: [("reply", 7, MARSHALLINGERROR, "")],
    OP_SET_WATCHES: [("reply", 7, MARSHALLINGERROR, "")],
    OP_GET_EPHEMERALS: [("reply", 7, MARSHALLINGERROR, "")],
    OP_GET_ALL_CHILDREN_NUMBER: [("reply", 7, MARSHALLINGERROR, "")],
    OP_SET_WATCHES2: [("reply", 7, MARSHALLINGERROR, "")],
    OP_ADD_WATCH: [("reply", 7, MARSHALLINGERROR, "")],
    OP_CREATE_SESSION: [("reply", 7, MARSHALLINGERROR, "")],
    OP_AUTH: [CLOSED],
    OP_SASL: [CLOSED],
    # Ops without a request body ignore whatever follows the header.
    OP_WHO_AM_I: [("reply", 7, OK, (i32(1) + ustring("ip") + ustring("127.0.0.1")).hex())],
    OP_CLOSE_SESSION: [("reply", 7, OK, ""), CLOSED],
}
GARBAGE_BODY = b"\xff\xff\xff"


@pytest.mark.parametrize("op", sorted(GARBAGE_BODY_EXPECTED))
def test_known_op_with_garbage_body(op, zookeeper, zkcompat, guard):
    with guard.check():
        zk, ours = both(zookeeper, zkcompat, send_then_ping, request(7, op, GARBAGE_BODY))
    assert zk == GARBAGE_BODY_EXPECTED[op], f"ZooKeeper itself answered {zk}"
    if op == OP_DELETE_CONTAINER:  # deliberate.DELETE_CONTAINER_BUFFER: 3.9's wire format
        assert ours == [("reply", 7, MARSHALLINGERROR, "")]
        return
    assert ours == zk


# -- random bytes ---------------------------------------------------------------------

FUZZ_SEED = 20_240_229
FUZZ_CASES_PER_KIND = 12
FOUR_LETTER_WORDS = {
    b"ruok", b"srvr", b"stat", b"conf", b"envi", b"mntr", b"cons", b"wchs", b"wchc", b"wchp",
    b"dump", b"reqs", b"crst", b"srst", b"dirs", b"isro", b"gtmk", b"stmk", b"hash",
    b"\xff\xf4\xff\xfd",  # telnet close
}
# Ops both servers implement; their bodies are random.
FUZZ_OPS = (OP_CREATE, OP_DELETE, OP_EXISTS, OP_GET_DATA, OP_SET_DATA, OP_GET_ACL, OP_SET_ACL,
            OP_GET_CHILDREN, OP_SYNC, OP_GET_CHILDREN2, OP_CHECK, OP_MULTI, OP_CREATE2,
            OP_MULTI_READ, OP_SET_WATCHES, OP_GET_EPHEMERALS, OP_GET_ALL_CHILDREN_NUMBER)


FUZZ_MISSING = "/zz-fuzz-missing/a\u00e9"  # no prefix of it names an existing znode but "/"


def fuzz_templates() -> list[bytes]:
    """Valid request bodies (after the header) that cannot change the tree as they are."""
    p = ustring(FUZZ_MISSING)
    return [
        p + b"\0",  # exists / getData / getChildren
        p + buffer(b"data") + i32(12345),  # setData at a version that is not there
        p + i32(12345),  # delete / check
        i64(0) + i32(2) + ustring(FUZZ_MISSING) + ustring("/") + i32(1) + ustring("/zz")
        + i32(0),  # setWatches
        i32(OP_CHECK) + b"\0" + i32(-1) + p + i32(12345) + i32(-1) + b"\1" + i32(-1),  # multi
    ]


FUZZ_TEMPLATE_OPS = (
    (OP_EXISTS, OP_GET_DATA, OP_GET_CHILDREN, OP_GET_CHILDREN2),
    (OP_SET_DATA,),
    (OP_DELETE, OP_CHECK),
    (OP_SET_WATCHES,),
    (OP_MULTI,),
)


def mutate(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        action = rng.randrange(3)
        if action == 0 and out:
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
        elif action == 1 and out:
            del out[rng.randrange(len(out)) :]
        else:
            out += rng.randbytes(rng.randint(1, 8))
    return bytes(out)


def fuzz_cases(seed: int) -> list[tuple[str, bool, bytes]]:
    """(name, after a handshake?, bytes): raw bytes as the first thing on a connection,
    mutated ConnectRequests, requests with random bodies and mutated valid requests."""
    rng = random.Random(seed)
    cases: list[tuple[str, bool, bytes]] = []
    for i in range(FUZZ_CASES_PER_KIND):
        data = rng.randbytes(rng.randint(1, 64))
        while data[:4] in FOUR_LETTER_WORDS:
            data = rng.randbytes(len(data))
        cases.append((f"raw-{i}", False, data))
    for i in range(FUZZ_CASES_PER_KIND):
        connect = connect_request(
            timeout_ms=rng.choice((0, -1, 1, 5000, INT32_MAX)),
            session_id=rng.choice((0, 0, rng.getrandbits(63))),
            passwd=rng.choice((b"\0" * PASSWD_BYTES, rng.randbytes(rng.randint(0, 20)), None)),
            last_zxid_seen=rng.choice((0, -1, 1)),
            read_only=rng.choice((None, False, True)),
        )
        cases.append((f"connect-{i}", False, framed(mutate(rng, connect))))
    for i in range(FUZZ_CASES_PER_KIND):
        xid = rng.randint(1, 1 << 20)
        body = rng.randbytes(rng.randint(0, 48))
        cases.append((f"request-{i}", True, request(xid, rng.choice(FUZZ_OPS), body)))
    templates = fuzz_templates()
    for i in range(FUZZ_CASES_PER_KIND):
        k = rng.randrange(len(templates))
        op = rng.choice(FUZZ_TEMPLATE_OPS[k])
        body = mutate(rng, templates[k])
        cases.append((f"mutated-{i}", True, request(rng.randint(1, 1 << 20), op, body)))
    return cases


def fuzz_probe(server, handshake: bool, data: bytes) -> list[tuple]:
    """handshake: data is one request payload (see send_then_ping); otherwise raw bytes
    sent first thing on a new connection, and what came back until close or quiet."""
    if handshake:
        # A read that a mutation points at an existing znode answers with Stat and data
        # that differ between the two servers: compare the error codes only.
        return [e[:3] for e in send_then_ping(server, data)]
    wire = Wire(server)
    try:
        if not wire.send(data):
            return [CLOSED]
        events: list[tuple] = []
        while True:
            got = wire.read_frame(QUIET_S)
            if isinstance(got, tuple):
                return events + [got]
            if len(got) < CONNECT_RESPONSE_BYTES:
                return events + [reply_event(got)]
            events.append(connect_event(got))
            if not events[-1][3]:
                # A session was granted: stop before its (short) timeout can expire it.
                return events
    finally:
        wire.close()


def test_random_bytes(zookeeper, zkcompat, guard):
    """Seeded random bytes (before and after a handshake): same outcome as ZooKeeper."""
    mismatches = []
    with guard.check():
        for name, handshake, data in fuzz_cases(FUZZ_SEED):
            zk, ours = both(zookeeper, zkcompat, fuzz_probe, handshake, data)
            if zk != ours:
                mismatches.append(f"{name}: bytes {data.hex()}\n  ZooKeeper {zk}\n  zkcompat  {ours}")
    assert not mismatches, f"seed {FUZZ_SEED}:\n" + "\n".join(mismatches)


def test_auth_packets_do_not_keep_a_session_alive(zookeeper, zkcompat, guard):
    """ZooKeeperServer.processPacket answers auth (op 100) and SASL (op 102) packets itself
    and touches the session only in submitRequest: a client that sends nothing but auth
    packets is expired like a silent one, and its connection closed."""
    timeout_ms = 800

    def probe(server):
        wire = Wire(server)
        try:
            session = wire.handshake(timeout_ms=timeout_ms)
            auth = request(-4, OP_AUTH, i32(0) + ustring("digest") + buffer(b"u:p"))
            deadline = time.monotonic() + 6 * session.timeout_ms / 1000
            replies = 0
            while time.monotonic() < deadline:
                if not wire.send(framed(auth)):
                    return ["closed", replies > 0]
                got = wire.read_frame(0.15)
                while got not in (SILENT, CLOSED):
                    replies += 1
                    got = wire.read_frame(0.01)
                if got == CLOSED:
                    return ["closed", replies > 0]
            return ["still open after 6 session timeouts", replies > 0]
        finally:
            wire.close()

    with guard.check():
        zk, ours = both(zookeeper, zkcompat, probe)
    assert zk == ["closed", True], f"ZooKeeper: {zk}"
    assert ours == zk
