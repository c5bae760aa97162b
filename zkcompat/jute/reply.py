"""Complete framed replies and notifications in one bytes object: the server's hot path."""

from __future__ import annotations

from struct import Struct
from typing import Protocol

from zkcompat.jute.constants import NOTIFICATION_XID
from zkcompat.jute.text import java_utf8_encode

# length prefix + ReplyHeader{int xid; long zxid; int err}
_FRAMED_REPLY_HEADER = Struct(">iiqi")
_REPLY_HEADER_BYTES = 16
# length prefix + ReplyHeader + the length of a CreateResponse's path
_FRAMED_PATH_REPLY_HEAD = Struct(">iiqii")
# length prefix + ReplyHeader + WatcherEvent{int type; int state; ustring path} up to the path
_FRAMED_NOTIFICATION_HEAD = Struct(">iiqiiii")
_NOTIFICATION_FIXED_BYTES = _FRAMED_NOTIFICATION_HEAD.size - 4


class Encodable(Protocol):
    """A record, or anything else that appends its bytes (e.g. a multi response body)."""

    def encode(self, out: bytearray) -> None: ...


def encode_reply(xid: int, zxid: int, err: int, body: Encodable | None = None) -> bytes:
    """Length prefix + ReplyHeader(xid, zxid, err) + body (nothing when body is None)."""
    if body is None:
        return _FRAMED_REPLY_HEADER.pack(_REPLY_HEADER_BYTES, xid, zxid, err)
    try:
        to_bytes = body.to_bytes  # type: ignore[attr-defined]
    except AttributeError:
        out = bytearray(_FRAMED_REPLY_HEADER.size)
        body.encode(out)
        _FRAMED_REPLY_HEADER.pack_into(out, 0, len(out) - 4, xid, zxid, err)
        return bytes(out)
    # a generated record: its to_bytes is encode inlined, the fastest way to its bytes
    raw = to_bytes()
    return _FRAMED_REPLY_HEADER.pack(_REPLY_HEADER_BYTES + len(raw), xid, zxid, err) + raw


def encode_reply_raw(xid: int, zxid: int, body: bytes) -> bytes:
    """A successful reply whose body is already serialised."""
    return _FRAMED_REPLY_HEADER.pack(_REPLY_HEADER_BYTES + len(body), xid, zxid, 0) + body


def encode_create_reply(xid: int, zxid: int, path: str, stat: bytes = b"") -> bytes:
    """A successful create's reply: CreateResponse{ustring path}, then the Stat bytes a
    Create2Response adds (none for a plain create)."""
    raw = path.encode() if path.isascii() else java_utf8_encode(path)
    n = len(raw)
    return _FRAMED_PATH_REPLY_HEAD.pack(
        _REPLY_HEADER_BYTES + 4 + n + len(stat), xid, zxid, 0, n) + raw + stat


def encode_notification(event_type: int, state: int, path: str | None, zxid: int = -1) -> bytes:
    """The framed watch notification: ReplyHeader(NOTIFICATION_XID, zxid, 0) + WatcherEvent."""
    if path is None:
        return _FRAMED_NOTIFICATION_HEAD.pack(
            _NOTIFICATION_FIXED_BYTES, NOTIFICATION_XID, zxid, 0, event_type, state, -1
        )
    raw = path.encode() if path.isascii() else java_utf8_encode(path)
    n = len(raw)
    return _FRAMED_NOTIFICATION_HEAD.pack(
        _NOTIFICATION_FIXED_BYTES + n, NOTIFICATION_XID, zxid, 0, event_type, state, n
    ) + raw
