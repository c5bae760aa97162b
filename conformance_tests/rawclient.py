"""A minimal blocking ZooKeeper wire client for requests kazoo will not send.

kazoo normalises paths client-side ("//" collapses, a trailing "/" goes, a
missing leading "/" is added, "." and ".." raise ValueError), and it does not
expose the negotiated session timeout. Scenarios that need the server's own
answer to such input speak the protocol directly through this module.
Encodings follow ZooKeeper's zookeeper.jute; op codes are ZooDefs.OpCode.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

# ZooDefs.OpCode
OP_CREATE = 1
OP_DELETE = 2
OP_EXISTS = 3
OP_GET_DATA = 4
OP_SET_DATA = 5
OP_GET_CHILDREN = 8
OP_SYNC = 9
OP_GET_CHILDREN2 = 12
OP_CREATE2 = 15
OP_CLOSE_SESSION = -11

# ZooDefs.Perms.ALL with scheme "world", id "anyone" (Ids.OPEN_ACL_UNSAFE)
PERMS_ALL = 31
OPEN_ACL = ((PERMS_ALL, "world", "anyone"),)

FRAME_LENGTH = struct.Struct(">i")
REPLY_HEADER = struct.Struct(">iqi")  # xid, zxid, err
STAT = struct.Struct(">qqqqiiiqiiq")
STAT_FIELDS = (
    "czxid",
    "mzxid",
    "ctime",
    "mtime",
    "version",
    "cversion",
    "aversion",
    "ephemeralOwner",
    "dataLength",
    "numChildren",
    "pzxid",
)


class ConnectionClosed(Exception):
    """The server closed the connection instead of replying."""


def int32(v: int) -> bytes:
    return struct.pack(">i", v)


def int64(v: int) -> bytes:
    return struct.pack(">q", v)


def boolean(v: bool) -> bytes:
    return b"\x01" if v else b"\x00"


def buffer(v: bytes | None) -> bytes:
    return int32(-1) if v is None else int32(len(v)) + v


def ustring(v: str | bytes | None) -> bytes:
    """A jute ustring; bytes are sent as given so tests can send invalid UTF-8."""
    if v is None:
        return int32(-1)
    raw = v.encode("utf-8") if isinstance(v, str) else v
    return int32(len(raw)) + raw


def acl_vector(acl=OPEN_ACL) -> bytes:
    out = int32(len(acl))
    for perms, scheme, ident in acl:
        out += int32(perms) + ustring(scheme) + ustring(ident)
    return out


def read_stat(body: bytes, offset: int = 0) -> tuple[dict, int]:
    values = STAT.unpack_from(body, offset)
    return dict(zip(STAT_FIELDS, values, strict=True)), offset + STAT.size


def read_ustring(body: bytes, offset: int = 0) -> tuple[str | None, int]:
    (length,) = FRAME_LENGTH.unpack_from(body, offset)
    offset += 4
    if length < 0:
        return None, offset
    return body[offset : offset + length].decode("utf-8", errors="replace"), offset + length


@dataclass
class ConnectResult:
    protocol_version: int
    timeout_ms: int
    session_id: int
    passwd: bytes
    read_only: bool | None  # None when the server omits the flag


@dataclass
class Reply:
    xid: int
    zxid: int
    err: int
    body: bytes


class RawClient:
    """One session over one socket; every call waits for its own reply."""

    def __init__(self, host: str, port: int, timeout_s: float = 5.0) -> None:
        self._sock = socket.create_connection((host, port), timeout=timeout_s)
        self._xid = 0
        self.connect_result: ConnectResult | None = None

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # framing -------------------------------------------------------------

    def send_frame(self, payload: bytes) -> None:
        self._sock.sendall(FRAME_LENGTH.pack(len(payload)) + payload)

    def send_bytes(self, data: bytes) -> None:
        """Bytes as given, no framing: for malformed frames."""
        self._sock.sendall(data)

    def next_xid(self) -> int:
        self._xid += 1
        return self._xid

    def recv_reply(self) -> Reply:
        """The next reply frame (notifications included), decoded."""
        body = self.recv_frame()
        xid, zxid, err = REPLY_HEADER.unpack_from(body, 0)
        return Reply(xid, zxid, err, body[REPLY_HEADER.size :])

    def _recv_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            try:
                chunk = self._sock.recv(n)
            except ConnectionResetError as e:
                raise ConnectionClosed("connection reset") from e
            if not chunk:
                raise ConnectionClosed("connection closed by server")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def recv_frame(self) -> bytes:
        (length,) = FRAME_LENGTH.unpack(self._recv_exact(4))
        return self._recv_exact(length)

    # session -------------------------------------------------------------

    def connect(
        self,
        timeout_ms: int = 10_000,
        session_id: int = 0,
        passwd: bytes = b"\x00" * 16,
        last_zxid_seen: int = 0,
        read_only: bool = False,
    ) -> ConnectResult:
        request = (
            int32(0)
            + int64(last_zxid_seen)
            + int32(timeout_ms)
            + int64(session_id)
            + buffer(passwd)
            + boolean(read_only)
        )
        self.send_frame(request)
        body = self.recv_frame()
        protocol_version, negotiated_ms, sid = struct.unpack_from(">iiq", body, 0)
        offset = 16
        (plen,) = FRAME_LENGTH.unpack_from(body, offset)
        offset += 4
        pw = body[offset : offset + max(plen, 0)]
        offset += max(plen, 0)
        ro = bool(body[offset]) if len(body) > offset else None
        self.connect_result = ConnectResult(protocol_version, negotiated_ms, sid, pw, ro)
        return self.connect_result

    def request(self, op: int, payload: bytes = b"") -> Reply:
        self._xid += 1
        xid = self._xid
        self.send_frame(int32(xid) + int32(op) + payload)
        while True:
            body = self.recv_frame()
            rxid, zxid, err = REPLY_HEADER.unpack_from(body, 0)
            if rxid == -1:  # a watch notification; raw scenarios set no watches
                continue
            return Reply(rxid, zxid, err, body[REPLY_HEADER.size :])

    # ops ---------------------------------------------------------------------

    def create(
        self, path: str | bytes, data: bytes | None = b"", flags: int = 0, acl=OPEN_ACL
    ) -> Reply:
        return self.request(
            OP_CREATE, ustring(path) + buffer(data) + acl_vector(acl) + int32(flags)
        )

    def create2(
        self, path: str | bytes, data: bytes | None = b"", flags: int = 0, acl=OPEN_ACL
    ) -> Reply:
        return self.request(
            OP_CREATE2, ustring(path) + buffer(data) + acl_vector(acl) + int32(flags)
        )

    def delete(self, path: str | bytes, version: int = -1) -> Reply:
        return self.request(OP_DELETE, ustring(path) + int32(version))

    def exists(self, path: str | bytes) -> Reply:
        return self.request(OP_EXISTS, ustring(path) + boolean(False))

    def get_data(self, path: str | bytes) -> Reply:
        return self.request(OP_GET_DATA, ustring(path) + boolean(False))

    def set_data(self, path: str | bytes, data: bytes | None, version: int = -1) -> Reply:
        return self.request(OP_SET_DATA, ustring(path) + buffer(data) + int32(version))

    def get_children(self, path: str | bytes) -> Reply:
        return self.request(OP_GET_CHILDREN, ustring(path) + boolean(False))

    def sync(self, path: str | bytes) -> Reply:
        return self.request(OP_SYNC, ustring(path))

    def close_session(self) -> Reply:
        reply = self.request(OP_CLOSE_SESSION)
        self.connect_result = None
        return reply

    def close_session_quietly(self, timeout_s: float = 2.0) -> None:
        """closeSession if this socket still has a live session; ignore failures."""
        if self.connect_result is None or self.connect_result.session_id == 0:
            return
        try:
            self._sock.settimeout(timeout_s)
            self.close_session()
        except (OSError, ConnectionClosed, struct.error):
            pass
        self.connect_result = None
