"""multi and multiRead bodies: MultiHeader-separated op records, as MultiOperationRecord
and MultiResponse (de)serialise them, including which inputs Java refuses with IOException.
"""

from __future__ import annotations

from struct import Struct
from struct import error as _struct_error
from typing import Any

from zkcompat.jute import records as r
from zkcompat.jute.constants import CreateMode, OpCode
from zkcompat.jute.errors import JuteError

Record = Any  # any generated record class instance

# MultiHeader{int type; boolean done; int err}
_HEADER = Struct(">i?i")
_HEADER_BYTES = _HEADER.size
# MultiOperationRecord/MultiResponse.serialize end the list with MultiHeader(-1, true, -1).
_END = _HEADER.pack(-1, True, -1)

# MultiOperationRecord.deserialize: header type -> request record.
_REQUEST_RECORD: dict[int, type] = {
    OpCode.CREATE: r.CreateRequest,
    OpCode.CREATE2: r.CreateRequest,
    OpCode.CREATE_CONTAINER: r.CreateRequest,
    OpCode.CREATE_TTL: r.CreateTTLRequest,
    OpCode.DELETE: r.DeleteRequest,
    OpCode.SET_DATA: r.SetDataRequest,
    OpCode.CHECK: r.CheckVersionRequest,
    OpCode.GET_CHILDREN: r.GetChildrenRequest,
    OpCode.GET_DATA: r.GetDataRequest,
}
# Op.OpKind: a multi is all READ (multiRead) or all TRANSACTION (multi).
_READ_OPS = frozenset({OpCode.GET_CHILDREN, OpCode.GET_DATA})
_CREATE_OPS = frozenset({OpCode.CREATE, OpCode.CREATE2, OpCode.CREATE_CONTAINER})
_TTL_MODES = frozenset({CreateMode.PERSISTENT_WITH_TTL, CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL})
_CREATE_MODE_MAX = max(CreateMode)

# MultiResponse.serialize: result type -> (header type, response record or None for no body).
# FinalRequestProcessor reports create2/createTTL/createContainer as CreateResult(path, stat)
# (type create2) and deleteContainer as DeleteResult (type delete).
_RESULT: dict[int, tuple[int, type | None]] = {
    OpCode.CREATE: (OpCode.CREATE, r.CreateResponse),
    OpCode.CREATE2: (OpCode.CREATE2, r.Create2Response),
    OpCode.CREATE_CONTAINER: (OpCode.CREATE2, r.Create2Response),
    OpCode.CREATE_TTL: (OpCode.CREATE2, r.Create2Response),
    OpCode.DELETE: (OpCode.DELETE, None),
    OpCode.DELETE_CONTAINER: (OpCode.DELETE, None),
    OpCode.CHECK: (OpCode.CHECK, None),
    OpCode.SET_DATA: (OpCode.SET_DATA, r.SetDataResponse),
    OpCode.GET_DATA: (OpCode.GET_DATA, r.GetDataResponse),
    OpCode.GET_CHILDREN: (OpCode.GET_CHILDREN, r.GetChildrenResponse),
    OpCode.ERROR: (OpCode.ERROR, r.ErrorResponse),
}
# MultiResponse.deserialize: header type -> response record.
_RESPONSE_RECORD: dict[int, type | None] = {
    OpCode.CREATE: r.CreateResponse,
    OpCode.CREATE2: r.Create2Response,
    OpCode.DELETE: None,
    OpCode.SET_DATA: r.SetDataResponse,
    OpCode.CHECK: None,
    OpCode.GET_CHILDREN: r.GetChildrenResponse,
    OpCode.GET_DATA: r.GetDataResponse,
    OpCode.ERROR: r.ErrorResponse,
}


def _header(buf: bytes | bytearray | memoryview, offset: int, what: str) -> tuple[int, bool, int]:
    try:
        return _HEADER.unpack_from(buf, offset)
    except _struct_error as e:
        raise JuteError(f"{what}: truncated MultiHeader ({e})") from None


def decode_multi_request(
    buf: bytes | bytearray | memoryview, offset: int = 0
) -> tuple[list[tuple[int, Record]], int]:
    """The (header type, request record) pairs of a multi or multiRead request.

    Raises JuteError wherever MultiOperationRecord.deserialize throws IOException: an op
    type it does not know, create/create2/createContainer flags that are no CreateMode or
    a TTL mode (validateTTL fails without a ttl), and read ops mixed with write ops. A null
    ACL vector in a create is refused too (Java fails on it with a NullPointerException).
    ZooKeeper's PrepRequestProcessor answers all of these with MARSHALLINGERROR. The flag
    and ACL checks are 3.9's (ZOOKEEPER-4026); 3.8 let them through to prep.
    The type is the header's; see multi_op_type for the type ZooKeeper goes on to use.
    """
    ops: list[tuple[int, Record]] = []
    reads = writes = 0
    o = offset
    while True:
        op_type, done, _err = _header(buf, o, "multi request")
        o += _HEADER_BYTES
        if done:
            return ops, o
        cls = _REQUEST_RECORD.get(op_type)
        if cls is None:
            raise JuteError(f"multi request: invalid type of op {op_type}")
        rec, o = cls.decode(buf, o)
        if op_type in _CREATE_OPS:
            if not 0 <= rec.flags <= _CREATE_MODE_MAX or rec.flags in _TTL_MODES:
                raise JuteError(f"multi request: invalid flag {rec.flags} for create mode")
            if rec.acl is None:
                raise JuteError("multi request: create without an ACL vector")
        if op_type in _READ_OPS:
            reads += 1
        else:
            writes += 1
        if reads and writes:
            raise JuteError("multi request: mixing read and write operations is not allowed")
        ops.append((op_type, rec))


def multi_op_type(header_type: int, rec: Record) -> int:
    """The type ZooKeeper's Op carries for a decoded multi op (Op.Create.getOpcode): a
    create's mode overrides the header, so a TTL mode makes createTTL and CONTAINER makes
    createContainer; a createTTL whose flags are no TTL mode becomes a plain create."""
    if header_type in _CREATE_OPS or header_type == OpCode.CREATE_TTL:
        flags = rec.flags
        if flags in _TTL_MODES:
            return OpCode.CREATE_TTL
        if flags == CreateMode.CONTAINER:
            return OpCode.CREATE_CONTAINER
        if header_type == OpCode.CREATE_TTL:
            return OpCode.CREATE
    return header_type


def encode_multi_request(out: bytearray, ops: list[tuple[int, Record]]) -> None:
    """Appends ops as MultiOperationRecord.serialize does: MultiHeader(type, false, -1) each."""
    for op_type, rec in ops:
        cls = _REQUEST_RECORD.get(op_type)
        if cls is None:
            raise ValueError(f"invalid type of op {op_type} in a multi request")
        if type(rec) is not cls:
            raise TypeError(f"op {op_type} needs a {cls.__name__}, not {type(rec).__name__}")
        out += _HEADER.pack(op_type, False, -1)
        rec.encode(out)
    out += _END


def encode_multi_response(out: bytearray, results: list[tuple[int, Record | None]]) -> None:
    """Appends results as MultiResponse.serialize does.

    Each result is (op type, response record): OpCode.ERROR with an ErrorResponse gives
    MultiHeader(-1, false, err) + ErrorResponse(err); anything else MultiHeader(type, false, 0)
    + its record (none for delete and check).
    """
    for op_type, rec in results:
        entry = _RESULT.get(op_type)
        if entry is None:
            raise ValueError(f"invalid type {op_type} in a multi response")
        header_type, cls = entry
        if cls is None:
            out += _HEADER.pack(header_type, False, 0)
            continue
        if type(rec) is not cls:
            raise TypeError(f"result {op_type} needs a {cls.__name__}, not {type(rec).__name__}")
        out += _HEADER.pack(header_type, False, rec.err if cls is r.ErrorResponse else 0)
        rec.encode(out)
    out += _END


def decode_multi_response(
    buf: bytes | bytearray | memoryview, offset: int = 0
) -> tuple[list[tuple[int, Record | None]], int]:
    """The (header type, response record or None) pairs of a multi response."""
    results: list[tuple[int, Record | None]] = []
    o = offset
    while True:
        op_type, done, _err = _header(buf, o, "multi response")
        o += _HEADER_BYTES
        if done:
            return results, o
        if op_type not in _RESPONSE_RECORD:
            raise JuteError(f"multi response: invalid type {op_type}")
        cls = _RESPONSE_RECORD[op_type]
        rec = None
        if cls is not None:
            rec, o = cls.decode(buf, o)
        results.append((op_type, rec))


class MultiRequest:
    """The body of a multi/multiRead request, shaped like a record for the dispatch tables."""

    __slots__ = ("ops",)

    def __init__(self, ops: list[tuple[int, Record]] | None = None) -> None:
        self.ops = [] if ops is None else ops

    def __eq__(self, other: object) -> bool:
        if type(other) is not MultiRequest:
            return NotImplemented
        return self.ops == other.ops

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"MultiRequest(ops={self.ops!r})"

    def encode(self, out: bytearray) -> None:
        encode_multi_request(out, self.ops)

    def to_bytes(self) -> bytes:
        out = bytearray()
        self.encode(out)
        return bytes(out)

    @staticmethod
    def decode(buf: bytes | bytearray | memoryview, offset: int = 0) -> tuple[MultiRequest, int]:
        ops, o = decode_multi_request(buf, offset)
        return MultiRequest(ops), o

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> MultiRequest:
        return MultiRequest.decode(data, 0)[0]


class MultiResponse:
    """The body of a multi/multiRead response, shaped like a record for the dispatch tables."""

    __slots__ = ("results",)

    def __init__(self, results: list[tuple[int, Record | None]] | None = None) -> None:
        self.results = [] if results is None else results

    def __eq__(self, other: object) -> bool:
        if type(other) is not MultiResponse:
            return NotImplemented
        return self.results == other.results

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"MultiResponse(results={self.results!r})"

    def encode(self, out: bytearray) -> None:
        encode_multi_response(out, self.results)

    def to_bytes(self) -> bytes:
        out = bytearray()
        self.encode(out)
        return bytes(out)

    @staticmethod
    def decode(buf: bytes | bytearray | memoryview, offset: int = 0) -> tuple[MultiResponse, int]:
        results, o = decode_multi_response(buf, offset)
        return MultiResponse(results), o

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> MultiResponse:
        return MultiResponse.decode(data, 0)[0]
