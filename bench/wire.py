"""The client side of the ZooKeeper protocol, as much as a load generator needs: session
handshake, framed requests from zkcompat.jute records, reply headers. Blocking helpers
for setup and probes; the load generator does its own non-blocking I/O."""

from __future__ import annotations

import socket
import struct
import time

from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode, Perms
from zkcompat.jute.framing import FrameReader, frame

OPEN_ACL = [r.ACL(int(Perms.ALL), r.Id("world", "anyone"))]
REPLY_HEADER = struct.Struct(">iqi")  # xid, zxid, err
NOTIFICATION_XID = -1  # ClientCnxn: a watch event, not a reply
PING_XID = -2
SESSION_TIMEOUT_MS = 30_000
MAX_FRAME_BYTES = 16 << 20  # replies the bench reads are small; a bound against garbage
IP_BIND_ADDRESS_NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)  # linux/in.h


class WireError(Exception):
    pass


def connect_request(timeout_ms: int = SESSION_TIMEOUT_MS, session_id: int = 0,
                    passwd: bytes = b"\0" * 16, last_zxid: int = 0) -> bytes:
    """A new session's ConnectRequest, or with session_id and passwd an existing one's, as
    a client sends it to another server after losing its connection."""
    return frame(r.ConnectRequest(0, last_zxid, timeout_ms, session_id, passwd,
                                  False).to_bytes())


def connect(host: str, port: int, source: str | None = None,
            timeout_s: float | None = 10.0) -> socket.socket:
    """A TCP connection with TCP_NODELAY, from `source` if given. Its local port is chosen
    at connect (IP_BIND_ADDRESS_NO_PORT), so one source address reaches each server port
    with its own range of ephemeral ports; timeout_s None: non-blocking, still
    connecting."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if source is not None:
            sock.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
            sock.bind((source, 0))
        if timeout_s is None:
            sock.setblocking(False)
            sock.connect_ex((host, port))
        else:
            sock.settimeout(timeout_s)
            sock.connect((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


def request(xid: int, op: int, record) -> bytes:
    """One framed request: RequestHeader then the op's record (none for a few ops)."""
    out = bytearray()
    r.RequestHeader(xid, op).encode(out)
    if record is not None:
        record.encode(out)
    return frame(out)


class SyncSession:
    """A blocking session for setup, checks and readiness probes (one request at a time)."""

    def __init__(self, host: str, port: int, timeout_s: float = 10.0,
                 session_timeout_ms: int = SESSION_TIMEOUT_MS, handshake: bool = True,
                 source: str | None = None) -> None:
        """Connects (from `source`, a loopback address of its own, if given) and sends the
        ConnectRequest; with handshake=False the caller reads the ConnectResponse later
        (`finish_handshake`), so many sessions can open at once."""
        self.sock = connect(host, port, source, timeout_s)
        self.reader = FrameReader(MAX_FRAME_BYTES)
        self.frames: list[bytes] = []
        self.xid = 0
        self.session_id = 0
        self.passwd = b""
        self.last_zxid = 0  # the highest zxid a reply carried: a reconnect names it
        try:
            self.sock.sendall(connect_request(session_timeout_ms))
            if handshake:
                self.finish_handshake()
        except BaseException:
            self.sock.close()
            raise

    def finish_handshake(self) -> None:
        resp, _ = r.ConnectResponse.decode(self._recv_frame(), 0)
        if resp.sessionId == 0:
            raise WireError("the server refused the session")
        self.session_id = resp.sessionId
        self.passwd = resp.passwd or b""

    def _recv_frame(self) -> bytes:
        while not self.frames:
            data = self.sock.recv(1 << 16)
            if not data:
                raise WireError("connection closed by the server")
            self.frames.extend(self.reader.feed(data))
        return self.frames.pop(0)

    def call(self, op: int, record) -> tuple[int, bytes]:
        """(err, reply body after the header)."""
        self.xid += 1
        self.sock.sendall(request(self.xid, op, record))
        while True:
            body = self._recv_frame()
            xid, _, err = REPLY_HEADER.unpack_from(body)
            if xid == self.xid:
                return err, body[REPLY_HEADER.size :]
            if xid not in (NOTIFICATION_XID, PING_XID):
                raise WireError(f"reply xid {xid}, expected {self.xid}")

    def call_many(self, calls, window: int = 256) -> list[int]:
        """(op, record) pairs pipelined, up to `window` in flight; their error codes, in
        order. The server applies one session's requests in order, so a create may name a
        parent created earlier in the same call."""
        errs: list[int] = []
        first = self.xid + 1
        pending = 0
        for op, record in calls:
            self.xid += 1
            self.sock.sendall(request(self.xid, op, record))
            pending += 1
            while pending >= window:
                errs.append(self._reply(first + len(errs)))
                pending -= 1
        while pending:
            errs.append(self._reply(first + len(errs)))
            pending -= 1
        return errs

    def _reply(self, xid: int) -> int:
        while True:
            got, _, err = REPLY_HEADER.unpack_from(self._recv_frame())
            if got == xid:
                return err
            if got not in (NOTIFICATION_XID, PING_XID):
                raise WireError(f"reply xid {got}, expected {xid}")

    def create(self, path: str, data: bytes = b"") -> int:
        return self.call(OpCode.CREATE, r.CreateRequest(path, data, OPEN_ACL, 0))[0]

    def stat(self, path: str) -> r.Stat | None:
        err, body = self.call(OpCode.EXISTS, r.ExistsRequest(path, False))
        return None if err else r.Stat.decode(body, 0)[0]

    def get_data(self, path: str) -> tuple[int, bytes | None]:
        err, body = self.call(OpCode.GET_DATA, r.GetDataRequest(path, False))
        return err, (None if err else r.GetDataResponse.decode(body, 0)[0].data)

    def close(self) -> None:
        try:
            self.xid += 1
            self.sock.sendall(request(self.xid, OpCode.CLOSE_SESSION, None))
            self.sock.settimeout(2.0)
            self._recv_frame()
        except (OSError, WireError):
            pass
        finally:
            self.sock.close()


def four_letter_word(host: str, port: int, word: str, timeout_s: float = 2.0) -> str | None:
    """A four-letter word's answer (the server closes the connection after it), or None if
    the server does not answer."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as s:
            s.sendall(word.encode())
            out = b""
            while chunk := s.recv(4096):
                out += chunk
    except OSError:
        return None
    return out.decode("utf-8", "replace")


def mntr(host: str, port: int, timeout_s: float = 10.0) -> dict[str, str]:
    """`mntr` as {name: value}, names as ZooKeeper prints them (zk_znode_count); empty if
    the server does not answer."""
    text = four_letter_word(host, port, "mntr", timeout_s) or ""
    return dict(line.split("\t", 1) for line in text.splitlines() if "\t" in line)


def wait_serving(host: str, port: int, path: str, timeout_s: float, alive=lambda: True,
                 interval_s: float = 0.05) -> float:
    """Poll until a session can read `path`; returns the monotonic time it first could."""
    deadline = time.monotonic() + timeout_s
    last = "never connected"
    while time.monotonic() < deadline:
        if not alive():
            raise WireError(f"the server exited before serving ({last})")
        try:
            s = SyncSession(host, port, timeout_s=2.0)
            try:
                err, _ = s.get_data(path)
                if err == 0:
                    return time.monotonic()
                last = f"getData {path}: err {err}"
            finally:
                s.close()
        except (OSError, WireError) as e:
            last = f"{type(e).__name__}: {e}"
        time.sleep(interval_s)
    raise WireError(f"not serving {path} within {timeout_s}s: {last}")
