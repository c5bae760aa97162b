"""reply.py and ops.py: framed replies equal frame(ReplyHeader + body); dispatch tables."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st
from jute_strategies import BMP_TEXT, record

from zkcompat.jute import records as r
from zkcompat.jute.constants import NOTIFICATION_XID, EventType, KeeperState, OpCode
from zkcompat.jute.framing import FrameReader, frame
from zkcompat.jute.multi import MultiRequest, MultiResponse
from zkcompat.jute.ops import REQUEST_RECORD, RESPONSE_RECORD
from zkcompat.jute.reply import encode_create_reply, encode_notification, encode_reply

INT = st.integers(-(2**31), 2**31 - 1)
LONG = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=50, deadline=None)
@given(xid=INT, zxid=LONG, err=INT, body=st.one_of(st.none(), record("GetDataResponse"), record("Create2Response")))
def test_encode_reply_is_the_framed_header_and_body(xid: int, zxid: int, err: int, body: object) -> None:
    payload = r.ReplyHeader(xid, zxid, err).to_bytes() + (b"" if body is None else body.to_bytes())
    got = encode_reply(xid, zxid, err, body)
    assert type(got) is bytes
    assert got == frame(payload)
    (payload_back,) = FrameReader().feed(got)
    header, off = r.ReplyHeader.decode(payload_back, 0)
    assert (header.xid, header.zxid, header.err) == (xid, zxid, err)
    if body is not None:
        assert type(body).decode(payload_back, off) == (body, len(payload_back))


@settings(max_examples=50, deadline=None)
@given(event=st.sampled_from(EventType), state=st.sampled_from(KeeperState),
       path=st.one_of(st.none(), BMP_TEXT, st.text(max_size=5)), zxid=LONG)
def test_encode_notification_is_a_watcher_event_frame(event: int, state: int, path: str | None, zxid: int) -> None:
    if path is not None and any(0xD800 <= ord(c) <= 0xDFFF for c in path):
        path = None
    got = encode_notification(event, state, path, zxid)
    expected = frame(r.ReplyHeader(NOTIFICATION_XID, zxid, 0).to_bytes() + r.WatcherEvent(event, state, path).to_bytes())
    assert got == expected
    assert encode_notification(event, state, "/x") == encode_notification(event, state, "/x", -1)


@settings(max_examples=50, deadline=None)
@given(xid=INT, zxid=LONG, path=st.one_of(BMP_TEXT, st.text(max_size=5)), stat=record("Stat"))
def test_encode_create_reply_is_create_response_then_stat(xid: int, zxid: int, path: str, stat) -> None:
    if any(0xD800 <= ord(c) <= 0xDFFF for c in path):
        path = "/lone-surrogate-free"
    assert encode_create_reply(xid, zxid, path) == encode_reply(xid, zxid, 0, r.CreateResponse(path))
    assert encode_create_reply(xid, zxid, path, stat.to_bytes()) == encode_reply(
        xid, zxid, 0, r.Create2Response(path, stat))


def test_notification_bytes() -> None:
    assert encode_notification(EventType.NODE_CREATED, KeeperState.SYNC_CONNECTED, "/a", 0x100000001) == (
        struct.pack(">iiqiiii", 30, -1, 0x100000001, 0, 1, 3, 2) + b"/a"
    )


def test_dispatch_tables_cover_every_client_op() -> None:
    internal = {OpCode.NOTIFICATION, OpCode.CREATE_SESSION, OpCode.DELETE_CONTAINER, OpCode.ERROR}
    assert set(REQUEST_RECORD) == set(OpCode) - internal
    assert set(RESPONSE_RECORD) == set(REQUEST_RECORD)
    assert REQUEST_RECORD[OpCode.MULTI] is MultiRequest and REQUEST_RECORD[OpCode.MULTI_READ] is MultiRequest
    assert RESPONSE_RECORD[OpCode.MULTI] is MultiResponse
    for op in (OpCode.PING, OpCode.CLOSE_SESSION, OpCode.WHO_AM_I):
        assert REQUEST_RECORD[op] is None
    assert REQUEST_RECORD[OpCode.CREATE2] is r.CreateRequest
    assert RESPONSE_RECORD[OpCode.CREATE2] is r.Create2Response
    assert RESPONSE_RECORD[OpCode.EXISTS] is r.ExistsResponse
    for cls in [*REQUEST_RECORD.values(), *RESPONSE_RECORD.values()]:
        assert cls is None or callable(cls.decode)
