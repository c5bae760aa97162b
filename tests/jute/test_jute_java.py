"""zkcompat's codec against the real ZooKeeper classes (Debian's zookeeper 3.8.0 jars),
through tests/jute/JuteOracle.java: constants, record layouts, golden frames, and
differential fuzzing of decode, including malformed bytes and Java's UTF-8 quirks."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from java_oracle import JavaOracle
from jute_strategies import record, value

from zkcompat.jute import constants as c
from zkcompat.jute import records as r
from zkcompat.jute.constants import CreateMode, KeeperState, OpCode, Perms
from zkcompat.jute.errors import JuteError
from zkcompat.jute.framing import frame
from zkcompat.jute.multi import (
    decode_multi_request,
    decode_multi_response,
    encode_multi_request,
    encode_multi_response,
    multi_op_type,
)
from zkcompat.jute.reply import encode_notification, encode_reply
from zkcompat.jute.schema import RECORDS, element_type

NAMES = [rec.name for rec in RECORDS]
FQCN = {rec.name: f"{rec.module}.{rec.name}" for rec in RECORDS}
SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ZooKeeper 3.9 constants the 3.8.0 jar predates.
NEWER_THAN_JAR = {"WatcherType.PERSISTENT": 4, "WatcherType.PERSISTENT_RECURSIVE": 5}


def _snake(java_name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", java_name).upper()


def test_constants_match_zookeeper(java: JavaOracle) -> None:
    theirs = dict(word.split("=") for word in java.ok("consts"))
    ours: dict[str, int] = {}
    for enum in (c.OpCode, c.Code, c.EventType, c.KeeperState, c.CreateMode, c.Perms,
                 c.AddWatchMode, c.WatcherType):
        for name, member in enum.__members__.items():  # includes Perms.ALL, a composite flag
            ours[f"{enum.__name__}.{name}"] = int(member)
    expected = {}
    for key, val in theirs.items():
        cls, name = key.split(".")
        if cls in ("OpCode", "EventType", "KeeperState", "WatcherType"):
            name = _snake(name)
        if cls in ("ClientCnxn", "BinaryInputArchive"):
            continue
        expected[f"{cls}.{name}"] = int(val)
    assert {k: v for k, v in ours.items() if k not in NEWER_THAN_JAR} == expected
    assert theirs["ClientCnxn.NOTIFICATION_XID"] == str(c.NOTIFICATION_XID)
    assert theirs["ClientCnxn.PING_XID"] == str(c.PING_XID)
    assert theirs["ClientCnxn.AUTHPACKET_XID"] == str(c.AUTH_XID)
    assert theirs["ClientCnxn.SET_WATCHES_XID"] == str(c.SET_WATCHES_XID)
    assert theirs["BinaryInputArchive.maxBuffer"] == str(c.JUTE_MAXBUFFER_DEFAULT_BYTES)


def _java_type(type_: str) -> str:
    prim = {"int": "int", "long": "long", "boolean": "boolean", "ustring": "java.lang.String",
            "buffer": "byte[]", "byte": "byte", "float": "float", "double": "double"}
    if type_ in prim:
        return prim[type_]
    elem = element_type(type_)
    if elem is not None:
        return f"java.util.List<{_java_type(elem)}>"
    return FQCN[type_]


@pytest.mark.parametrize("name", NAMES)
def test_schema_matches_the_java_record(java: JavaOracle, name: str) -> None:
    reply = java.call("fields", FQCN[name])
    assert reply.startswith("ok "), reply
    fields = [f for f in reply[3:].split(";") if f]
    schema = next(rec for rec in RECORDS if rec.name == name)
    # In 3.8 readOnly is written beside ConnectRequest/Response, in 3.9 inside them.
    ours = [f"{_java_type(f.type)} {f.name}" for f in schema.fields if not f.optional_trailing]
    assert fields == ours


def _mutated(raw: bytes, data: st.DataObject, min_damage: int = 0) -> bytes:
    buf = bytearray(raw)
    for _ in range(data.draw(st.integers(min_damage, 3))):
        op = data.draw(st.sampled_from(["flip", "int", "cut", "insert"]))
        at = data.draw(st.integers(0, len(buf)))
        if op == "flip" and at < len(buf):
            buf[at] = data.draw(st.integers(0, 255))
        elif op == "int":
            n = data.draw(st.sampled_from([-1, -2, 0, 1, 3, 0x7FFFFFFF, -(2**31), 200]))
            buf[at:at + 4] = n.to_bytes(4, "big", signed=True)
        elif op == "cut":
            del buf[at:]
        else:
            buf[at:at] = data.draw(st.binary(min_size=1, max_size=4))
    return bytes(buf)


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(data=st.data())
def test_decode_agrees_with_java(java: JavaOracle, name: str, data: st.DataObject) -> None:
    """Java reads exactly what we write; and on damaged encodings we make the same
    accept/refuse decision as BinaryInputArchive, consume the same bytes and read the same
    values (compared by re-serialising on both sides)."""
    written = data.draw(record(name)).to_bytes()
    out, consumed = java.ok("rt", FQCN[name], written.hex())
    assert (bytes.fromhex(out), int(consumed)) == (written, len(written))
    raw = _mutated(written, data, min_damage=1)
    reply = java.call("rt", FQCN[name], raw.hex())
    cls = getattr(r, name)
    try:
        rec, end = cls.decode(raw, 0)
    except JuteError as e:
        assert reply.startswith("err"), f"we refused what Java read ({e}): {reply}"
        return
    assert reply.startswith("ok"), f"we read {rec!r} where Java failed: {reply}"
    _, out, consumed = reply.split(" ")
    assert (rec.to_bytes().hex(), end) == (out, int(consumed))


@SETTINGS
@given(raw=st.binary(max_size=24))
@example(raw=bytes.fromhex("eda080"))          # an encoded surrogate: one U+FFFD in Java
@example(raw=bytes.fromhex("e282"))            # truncated at the end
@example(raw=bytes.fromhex("e28241"))
@example(raw=bytes.fromhex("f0908080"))        # U+10000
@example(raw=bytes.fromhex("f09080"))
@example(raw=bytes.fromhex("f0908041"))
@example(raw=bytes.fromhex("f4908080"))        # above U+10FFFF
@example(raw=bytes.fromhex("f88080808041"))
@example(raw=bytes.fromhex("c0afe080bfeda0bdedb880"))
@example(raw=bytes.fromhex("c2"))
@example(raw=bytes.fromhex("f5"))
def test_strings_decode_and_encode_like_java(java: JavaOracle, raw: bytes) -> None:
    utf16, written = java.ok("string", raw.hex())
    rec = r.SyncRequest.from_bytes(len(raw).to_bytes(4, "big") + raw)
    assert rec.path.encode("utf-16-be", "surrogatepass").hex() == utf16
    assert rec.to_bytes()[4:].hex() == written


@SETTINGS
@given(text=st.text(max_size=8))
def test_strings_encode_like_java_for_any_text(java: JavaOracle, text: str) -> None:
    ours = r.SyncRequest(text).to_bytes()[4:]
    # Java's String for this text is its UTF-16 form; hand Java the UTF-8 of the BMP text
    # and compare the bytes writeString makes for the same characters.
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in text):
        return  # lone surrogates cannot be sent through new String(UTF-8 bytes)
    utf16, written = java.ok("string", text.encode("utf-8").hex())
    assert written == ours.hex()


# -- golden frames, made by the real client and server classes -----------------------

OPEN_ACL = [r.ACL(Perms.ALL, r.Id("world", "anyone"))]


def test_golden_connect_requests(java: JavaOracle) -> None:
    fresh = r.ConnectRequest(0, 0, 30000, 0, b"\x00" * 16, False)
    assert frame(fresh.to_bytes()) == java.golden("connect_request")
    pw = bytes(range(0xA0, 0xB0))
    again = r.ConnectRequest(0, 0x100000002, 10000, 0x1234567890ABCDEF, pw, True)
    assert frame(again.to_bytes()) == java.golden("connect_request_reconnect")
    old = r.ConnectRequest(0, 0, 30000, 0, b"\x00" * 16, None)
    assert frame(old.to_bytes()) == java.golden("connect_request_old_client")
    assert r.ConnectRequest.from_bytes(java.golden("connect_request_old_client")[4:]) == old
    # the literal bytes, derived by hand from BinaryOutputArchive, for the reader's benefit
    assert java.golden("connect_request") == bytes.fromhex(
        "0000002d" "00000000" "0000000000000000" "00007530" "0000000000000000"
        "00000010" + "00" * 16 + "00"
    )


def test_golden_create_request(java: JavaOracle) -> None:
    acl = OPEN_ACL + [r.ACL(Perms.READ | Perms.ADMIN, r.Id("digest", "bob:Xk2/h="))]
    body = r.CreateRequest("/app/lock-", b"hello", acl, CreateMode.EPHEMERAL_SEQUENTIAL)
    ours = frame(r.RequestHeader(5, OpCode.CREATE).to_bytes() + body.to_bytes())
    assert ours == java.golden("create_request")
    payload = java.golden("create_request")[4:]
    header, off = r.RequestHeader.decode(payload, 0)
    assert (header.xid, header.type) == (5, OpCode.CREATE)
    assert r.CreateRequest.decode(payload, off) == (body, len(payload))


def test_golden_multi_request(java: JavaOracle) -> None:
    ops = [
        (OpCode.CREATE, r.CreateRequest("/m/a", b"\x01\x02\x03", OPEN_ACL, CreateMode.PERSISTENT)),
        (OpCode.DELETE, r.DeleteRequest("/m/b", 4)),
        (OpCode.CHECK, r.CheckVersionRequest("/m", -1)),
    ]
    out = bytearray(r.RequestHeader(9, OpCode.MULTI).to_bytes())
    encode_multi_request(out, ops)
    golden = java.golden("multi_request")
    assert frame(out) == golden
    assert decode_multi_request(golden, 12) == (ops, len(golden))


def _stat(base: int) -> r.Stat:
    return r.Stat(base + 1, base + 2, base + 3, base + 4, 5, 6, 7, base + 8, 9, 10, base + 11)


def test_golden_multi_response(java: JavaOracle) -> None:
    results = [
        (OpCode.CREATE, r.CreateResponse("/m/a")),
        (OpCode.CREATE_CONTAINER, r.Create2Response("/m/c", _stat(100))),  # sent as create2
        (OpCode.SET_DATA, r.SetDataResponse(_stat(200))),
        (OpCode.DELETE, None),
        (OpCode.CHECK, None),
        (OpCode.ERROR, r.ErrorResponse(-101)),
    ]
    body = bytearray()
    encode_multi_response(body, results)
    golden = java.golden("multi_response")
    assert encode_reply(9, 0x300000007, 0, _Raw(bytes(body))) == golden
    decoded, end = decode_multi_response(golden, 20)
    assert end == len(golden)
    assert [t for t, _ in decoded] == [1, 15, 5, 2, 13, -1]
    # MultiResponse.serialize: MultiHeader(type, false, 0), errors MultiHeader(-1, false, err)
    assert bytes.fromhex("ffffffff00ffffff9b" "ffffff9b" "ffffffff01ffffffff") in golden


class _Raw:
    def __init__(self, raw: bytes) -> None:
        self.raw = raw

    def encode(self, out: bytearray) -> None:
        out += self.raw


def test_golden_replies(java: JavaOracle) -> None:
    assert encode_reply(7, 0x100000005, -101, None) == java.golden("reply_header")
    assert java.golden("reply_header") == bytes.fromhex("00000010" "00000007" "0000000100000005" "ffffff9b")
    body = r.GetDataResponse(b"some data", _stat(0x500000000))
    assert encode_reply(12, 0x500000001, 0, body) == java.golden("get_data_reply")
    note = encode_notification(c.EventType.NODE_DATA_CHANGED, KeeperState.SYNC_CONNECTED, "/a/b")
    assert note == java.golden("notification")
    ping = java.golden("ping")
    assert ping == frame(r.RequestHeader(c.PING_XID, OpCode.PING).to_bytes())


# -- multi against MultiOperationRecord / MultiResponse ------------------------------

_MULTI_OPS = {
    OpCode.CREATE: "CreateRequest", OpCode.CREATE2: "CreateRequest",
    OpCode.CREATE_CONTAINER: "CreateRequest", OpCode.CREATE_TTL: "CreateTTLRequest",
    OpCode.DELETE: "DeleteRequest", OpCode.SET_DATA: "SetDataRequest",
    OpCode.CHECK: "CheckVersionRequest", OpCode.GET_CHILDREN: "GetChildrenRequest",
    OpCode.GET_DATA: "GetDataRequest",
}


@st.composite
def _multi_op(draw: st.DrawFn) -> tuple[int, object]:
    op = draw(st.sampled_from(sorted(_MULTI_OPS)))
    rec = draw(record(_MULTI_OPS[op]))
    if hasattr(rec, "flags"):
        rec.flags = draw(st.one_of(st.integers(0, 6), value("int")))
    if hasattr(rec, "acl") and draw(st.booleans()):
        rec.acl = OPEN_ACL
    return op, rec


def _java_view(op: int, rec: object) -> tuple[int, object]:
    """What the 3.8 MultiOperationRecord.serialize writes back for a decoded op: the Op's
    type and toRequestRecord() (a multiRead op drops its watch flag; createTTL without a
    TTL mode becomes a plain CreateRequest). 3.8 also decays create2 and createContainer
    headers to create before the flags decide, where 3.9 keeps the header's type
    (ZOOKEEPER-4026); multi_op_type is 3.9's rule."""
    kind = multi_op_type(OpCode.CREATE if op in (OpCode.CREATE2, OpCode.CREATE_CONTAINER) else op, rec)
    if isinstance(rec, r.GetDataRequest | r.GetChildrenRequest):
        return kind, type(rec)(rec.path, False)
    if isinstance(rec, r.CreateTTLRequest) and kind != OpCode.CREATE_TTL:
        return kind, r.CreateRequest(rec.path, rec.data, rec.acl, rec.flags)
    return kind, rec


_REFUSED_SINCE_3_9 = re.compile("invalid flag|without an ACL")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(_multi_op(), max_size=4), data=st.data())
def test_multi_request_agrees_with_java(java: JavaOracle, ops: list, data: st.DataObject) -> None:
    out = bytearray()
    encode_multi_request(out, ops)
    raw = _mutated(bytes(out), data) if data.draw(st.booleans()) else bytes(out)
    reply = java.call("multireq", raw.hex())
    try:
        decoded, end = decode_multi_request(raw, 0)
    except JuteError as e:
        if reply.startswith("ok") and _REFUSED_SINCE_3_9.search(str(e)):
            return  # 3.9 validates create flags and ACLs while decoding; the 3.8 jar does not
        assert reply.startswith("err"), f"we refused what Java read ({e}): {reply}"
        return
    assert reply.startswith("ok"), f"we read {decoded!r} where Java failed: {reply}"
    _, java_out, consumed, types = reply.split(" ")
    assert end == int(consumed)
    view = [_java_view(op, rec) for op, rec in decoded]
    assert [str(t) for t, _ in view] == [t for t in types.split(",") if t]
    again = bytearray()
    encode_multi_request(again, view)
    assert again.hex() == java_out


_RESULTS = {
    OpCode.CREATE: "CreateResponse", OpCode.CREATE2: "Create2Response",
    OpCode.SET_DATA: "SetDataResponse", OpCode.GET_DATA: "GetDataResponse",
    OpCode.GET_CHILDREN: "GetChildrenResponse", OpCode.ERROR: "ErrorResponse",
    OpCode.DELETE: None, OpCode.CHECK: None,
}


@st.composite
def _result(draw: st.DrawFn) -> tuple[int, object]:
    op = draw(st.sampled_from(sorted(_RESULTS)))
    name = _RESULTS[op]
    return op, (None if name is None else draw(record(name)))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(results=st.lists(_result(), max_size=4), data=st.data())
def test_multi_response_agrees_with_java(java: JavaOracle, results: list, data: st.DataObject) -> None:
    out = bytearray()
    encode_multi_response(out, results)
    reply = java.call("multiresp", out.hex())
    assert reply == f"ok {out.hex()} {len(out)}"
    raw = _mutated(bytes(out), data)
    reply = java.call("multiresp", raw.hex())
    try:
        decoded, end = decode_multi_response(raw, 0)
    except JuteError as e:
        assert reply.startswith("err"), f"we refused what Java read ({e}): {reply}"
        return
    assert reply.startswith("ok"), f"we read {decoded!r} where Java failed: {reply}"
    again = bytearray()
    encode_multi_response(again, decoded)
    assert reply == f"ok {again.hex()} {end}"
