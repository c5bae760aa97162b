"""multi.py: MultiOperationRecord / MultiResponse layout and what ZooKeeper 3.9 refuses."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zkcompat.jute import records as r
from zkcompat.jute.constants import Code, CreateMode, OpCode, Perms
from zkcompat.jute.errors import JuteError
from zkcompat.jute.multi import (
    MultiRequest,
    MultiResponse,
    decode_multi_request,
    decode_multi_response,
    encode_multi_request,
    encode_multi_response,
    multi_op_type,
)

ACL = [r.ACL(Perms.ALL, r.Id("world", "anyone"))]
END = bytes.fromhex("ffffffff01ffffffff")  # MultiHeader(-1, true, -1)


def header(op: int, done: bool, err: int) -> bytes:
    return r.MultiHeader(op, done, err).to_bytes()


def test_request_layout_and_round_trip() -> None:
    ops = [
        (OpCode.CREATE2, r.CreateRequest("/a", b"", ACL, CreateMode.EPHEMERAL)),
        (OpCode.CREATE_TTL, r.CreateTTLRequest("/t", None, ACL, CreateMode.PERSISTENT_WITH_TTL, 5000)),
        (OpCode.SET_DATA, r.SetDataRequest("/a", b"x", 3)),
        (OpCode.DELETE, r.DeleteRequest("/b", -1)),
        (OpCode.CHECK, r.CheckVersionRequest("/c", 0)),
    ]
    out = bytearray(b"prefix")
    encode_multi_request(out, ops)
    expected = b"prefix" + b"".join(header(op, False, -1) + rec.to_bytes() for op, rec in ops) + END
    assert bytes(out) == expected
    assert decode_multi_request(bytes(out) + b"trailing", 6) == (ops, len(expected))
    assert MultiRequest.from_bytes(bytes(out)[6:]) == MultiRequest(ops)
    assert decode_multi_request(END) == ([], 9)


def test_read_only_multi() -> None:
    ops = [(OpCode.GET_DATA, r.GetDataRequest("/a", False)),
           (OpCode.GET_CHILDREN, r.GetChildrenRequest("/", False))]
    out = bytearray()
    encode_multi_request(out, ops)
    assert decode_multi_request(out)[0] == ops


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ([(OpCode.GET_DATA, r.GetDataRequest("/a", False)), (OpCode.DELETE, r.DeleteRequest("/a", 0))],
         "mixing read and write"),
        ([(OpCode.CREATE, r.CreateRequest("/a", b"", ACL, 7))], "invalid flag 7"),
        ([(OpCode.CREATE, r.CreateRequest("/a", b"", ACL, -1))], "invalid flag -1"),
        # a TTL mode in a plain create fails CreateOptions' validateTTL (no ttl)
        ([(OpCode.CREATE2, r.CreateRequest("/a", b"", ACL, CreateMode.PERSISTENT_WITH_TTL))], "invalid flag 5"),
        ([(OpCode.CREATE_CONTAINER, r.CreateRequest("/a", b"", None, CreateMode.CONTAINER))], "without an ACL"),
    ],
)
def test_what_multi_operation_record_refuses(ops: list, message: str) -> None:
    out = bytearray()
    encode_multi_request(out, ops)
    with pytest.raises(JuteError, match=message):
        decode_multi_request(out)


def test_unknown_op_type_is_refused() -> None:
    raw = header(OpCode.EXISTS, False, -1) + r.ExistsRequest("/a", False).to_bytes() + END
    with pytest.raises(JuteError, match="invalid type of op 3"):
        decode_multi_request(raw)
    with pytest.raises(ValueError):
        encode_multi_request(bytearray(), [(OpCode.EXISTS, r.ExistsRequest("/a", False))])
    with pytest.raises(TypeError):
        encode_multi_request(bytearray(), [(OpCode.DELETE, r.CheckVersionRequest("/a", 0))])


def test_done_ends_the_list_whatever_its_type() -> None:
    assert decode_multi_request(header(OpCode.CREATE, True, 0)) == ([], 9)


def test_multi_op_type_follows_op_create_get_opcode() -> None:
    def create(flags: int) -> r.CreateRequest:
        return r.CreateRequest("/a", b"", ACL, flags)

    assert multi_op_type(OpCode.CREATE, create(CreateMode.EPHEMERAL)) == OpCode.CREATE
    assert multi_op_type(OpCode.CREATE2, create(CreateMode.PERSISTENT)) == OpCode.CREATE2
    assert multi_op_type(OpCode.CREATE, create(CreateMode.CONTAINER)) == OpCode.CREATE_CONTAINER
    assert multi_op_type(OpCode.CREATE_CONTAINER, create(CreateMode.PERSISTENT)) == OpCode.CREATE_CONTAINER
    ttl = r.CreateTTLRequest("/a", b"", ACL, CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL, 10)
    assert multi_op_type(OpCode.CREATE_TTL, ttl) == OpCode.CREATE_TTL
    ttl.flags = CreateMode.EPHEMERAL
    assert multi_op_type(OpCode.CREATE_TTL, ttl) == OpCode.CREATE
    assert multi_op_type(OpCode.DELETE, r.DeleteRequest("/a", 0)) == OpCode.DELETE


def test_response_headers_match_multi_response_serialize() -> None:
    stat = r.Stat(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
    results = [
        (OpCode.CREATE, r.CreateResponse("/a")),
        (OpCode.CREATE2, r.Create2Response("/b", stat)),
        (OpCode.CREATE_TTL, r.Create2Response("/c", stat)),
        (OpCode.CREATE_CONTAINER, r.Create2Response("/d", stat)),
        (OpCode.DELETE, None),
        (OpCode.DELETE_CONTAINER, None),
        (OpCode.CHECK, None),
        (OpCode.SET_DATA, r.SetDataResponse(stat)),
        (OpCode.GET_DATA, r.GetDataResponse(b"d", stat)),
        (OpCode.GET_CHILDREN, r.GetChildrenResponse(["x"])),
        (OpCode.ERROR, r.ErrorResponse(Code.NONODE)),
        (OpCode.ERROR, r.ErrorResponse(Code.RUNTIMEINCONSISTENCY)),
    ]
    out = bytearray()
    encode_multi_response(out, results)
    expected = (
        header(1, False, 0) + r.CreateResponse("/a").to_bytes()
        + header(15, False, 0) + r.Create2Response("/b", stat).to_bytes()
        + header(15, False, 0) + r.Create2Response("/c", stat).to_bytes()
        + header(15, False, 0) + r.Create2Response("/d", stat).to_bytes()
        + header(2, False, 0) + header(2, False, 0) + header(13, False, 0)
        + header(5, False, 0) + stat.to_bytes()
        + header(4, False, 0) + r.GetDataResponse(b"d", stat).to_bytes()
        + header(8, False, 0) + r.GetChildrenResponse(["x"]).to_bytes()
        + header(-1, False, -101) + (-101).to_bytes(4, "big", signed=True)
        + header(-1, False, -2) + (-2).to_bytes(4, "big", signed=True)
        + END
    )
    assert bytes(out) == expected
    decoded, end = decode_multi_response(out)
    assert end == len(out)
    assert [t for t, _ in decoded] == [1, 15, 15, 15, 2, 2, 13, 5, 4, 8, -1, -1]
    assert MultiResponse.from_bytes(out).results == decoded


def test_response_misuse_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        encode_multi_response(bytearray(), [(OpCode.EXISTS, None)])
    with pytest.raises(TypeError):
        encode_multi_response(bytearray(), [(OpCode.CREATE, r.Create2Response("/a", r.Stat()))])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blob=st.binary(max_size=120), valid=st.booleans())
def test_random_bytes_raise_nothing_but_jute_error(blob: bytes, valid: bool) -> None:
    if valid:  # a real header in front, so that the op decoders get exercised too
        blob = header(OpCode.CREATE, False, -1) + blob
    for decode in (decode_multi_request, decode_multi_response):
        try:
            decode(blob, 0)
        except JuteError:
            pass


def test_every_truncation_raises_jute_error() -> None:
    out = bytearray()
    encode_multi_request(out, [(OpCode.CREATE, r.CreateRequest("/a", b"x", ACL, 0)),
                               (OpCode.DELETE, r.DeleteRequest("/a", 1))])
    for cut in range(len(out)):
        with pytest.raises(JuteError):
            decode_multi_request(bytes(out[:cut]))
    res = bytearray()
    encode_multi_response(res, [(OpCode.CREATE2, r.Create2Response("/a", r.Stat())), (OpCode.CHECK, None)])
    for cut in range(len(res)):
        with pytest.raises(JuteError):
            decode_multi_response(bytes(res[:cut]))
