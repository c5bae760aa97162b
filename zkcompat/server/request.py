"""Request: one client request on its way down the pipeline, decoded once."""

import struct
import time

from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.jute.ops import REQUEST_RECORD as JUTE_REQUEST_RECORD

# Requests that become a Txn: prep turns them into one on the leader (ZooDefs/Request.isQuorum).
WRITE_OPS = frozenset((
    OpCode.CREATE, OpCode.CREATE2, OpCode.CREATE_CONTAINER, OpCode.CREATE_TTL,
    OpCode.DELETE, OpCode.DELETE_CONTAINER, OpCode.SET_DATA, OpCode.SET_ACL,
    OpCode.CHECK, OpCode.MULTI, OpCode.CREATE_SESSION, OpCode.CLOSE_SESSION,
    OpCode.RECONFIG,
))


_VALIDATED_OPS = frozenset((OpCode.SET_DATA, OpCode.SET_ACL, OpCode.CHECK))
# sync only echoes its path: FinalRequestProcessor answers `new SyncResponse(syncRequest
# .getPath())`, so a null path is OK with a null path back (3.8 and 3.9 alike).
_NULL_PATH_SAFE_OPS = _VALIDATED_OPS | {OpCode.SYNC}


class DeleteContainerRequest:
    """deleteContainer's body: the path as a jute buffer, not a ustring (DeleteContainerRequest)."""

    __slots__ = ("path",)

    def __init__(self, path: str):
        self.path = path

    @staticmethod
    def decode(buf, offset: int):
        # A buffer and a ustring share the wire form (int length + bytes); only the
        # null/empty handling differs, and a null path here is a marshalling error.
        rec, off = r.SyncRequest.decode(buf, offset)
        return DeleteContainerRequest(rec.path), off


# The type a request takes once the request throttler marks it throttled (Request.isThrottled):
# no client op has it (Code.THROTTLEDOP's value; a client's op -127 is UNIMPLEMENTED), so the
# pipeline answers it as a read, in its session's order, with THROTTLEDOP (reads.READ) and
# never prepares, forwards or applies it, as ZooKeeper's processors pass a throttled request
# by. Its last op in cons is NA, as FinalRequestProcessor leaves it.
THROTTLED_OP = -127
_THROTTLED_RECORD = object()  # not None: a missing record would be MARSHALLINGERROR


def mark_throttled(req: "Request") -> None:
    """RequestThrottler: the request waited longer than throttled_op_wait_time."""
    req.type = THROTTLED_OP
    req.record = _THROTTLED_RECORD
    req.is_write = False


# The wire around a request's body: RequestHeader{int xid; int type} before it, and
# createSession's body on the quorum wire (Learner.request), which no client sends.
REQUEST_HEADER_BYTES = 8
CREATE_SESSION_BODY = struct.Struct(">i")  # the session timeout

MULTI_OPS = frozenset((OpCode.MULTI, OpCode.MULTI_READ))
# The body record of each client request (jute.ops): multi, auth and SASL have handlers of
# their own; deleteContainer is a server op whose 3.9 body is the path as a buffer.
REQUEST_RECORD = {op: cls for op, cls in JUTE_REQUEST_RECORD.items()
                  if cls is not None and op not in MULTI_OPS | {OpCode.AUTH, OpCode.SASL}}
REQUEST_RECORD[OpCode.DELETE_CONTAINER] = DeleteContainerRequest


class Request:
    """A request of one session: xid (cxid), op type, decoded record, and where to answer.

    `cnxn` is the connection to answer on, or None for requests the server makes
    itself (a closeSession for an expired session). `reply` is filled when the
    request completes; the session's queue sends replies strictly in request order.
    `payload` is the frame it was decoded from (header and body), which a learner
    forwards to the leader as it is.
    """

    __slots__ = ("session_id", "xid", "type", "record", "cnxn", "auth_ids", "txn", "reply",
                 "is_write", "t0_ms", "payload")

    def __init__(self, session_id: int, xid: int, type_: int, record, cnxn, auth_ids,
                 t0_ms: int | None = None, payload: bytes | None = None):
        self.session_id = session_id
        self.xid = xid
        self.type = type_
        self.record = record
        self.cnxn = cnxn
        self.auth_ids = auth_ids
        self.txn = None
        self.reply: bytes | None = None
        self.is_write = type_ in WRITE_OPS
        self.t0_ms = time.monotonic_ns() // 1_000_000 if t0_ms is None else t0_ms
        self.payload = payload

    def has_npe_path(self) -> bool:
        """A null path where ZooKeeper dereferences it before validating (create, delete and
        reads): it throws, and answers MARSHALLINGERROR. setData, setACL and check validate
        it first and answer BADARGUMENTS instead; sync never dereferences it."""
        rec = self.record
        if self.type in (OpCode.MULTI, OpCode.MULTI_READ):
            return any(t not in _VALIDATED_OPS and getattr(op, "path", "") is None
                       for t, op in rec)
        return self.type not in _NULL_PATH_SAFE_OPS and getattr(rec, "path", "") is None

    def __repr__(self) -> str:
        try:
            name = OpCode(self.type).name
        except ValueError:
            name = str(self.type)
        return f"Request(session=0x{self.session_id:x}, xid={self.xid}, {name})"
