"""Client histories: what each client asked, when it asked, and what it heard (if it ever did).

Records only, plus a recorder the simulator fills in; the linearizability checker reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

from zkcompat.jute.constants import Code

ANY_VERSION = -1  # DeleteRequest/SetDataRequest/CheckVersionRequest: -1 matches every version
SEQUENCE_DIGITS = 10  # PrepRequestProcessor appends the parent's cversion as %010d


@dataclass(frozen=True, slots=True)
class Create:
    path: str
    data: bytes | None = b""


@dataclass(frozen=True, slots=True)
class CreateSequential:
    """create(prefix, SEQUENTIAL): ok is the path assigned, prefix + the parent's cversion."""

    prefix: str
    data: bytes | None = b""


@dataclass(frozen=True, slots=True)
class Delete:
    path: str
    version: int = ANY_VERSION


@dataclass(frozen=True, slots=True)
class SetData:
    """ok is the znode's new version."""

    path: str
    data: bytes | None
    version: int = ANY_VERSION


@dataclass(frozen=True, slots=True)
class Check:
    """CheckVersionRequest, only inside a Multi: ok is None."""

    path: str
    version: int


@dataclass(frozen=True, slots=True)
class GetData:
    """ok is (data, version)."""

    path: str


@dataclass(frozen=True, slots=True)
class Exists:
    """ok is the version, or None when there is no such znode (exists never fails)."""

    path: str


@dataclass(frozen=True, slots=True)
class GetChildren:
    """ok is the child names, sorted (any order is accepted and sorted)."""

    path: str


MultiOp = Create | CreateSequential | Delete | SetData | Check


@dataclass(frozen=True, slots=True)
class Multi:
    """All or nothing: ok is the tuple of each op's ok value; a failure is the first failing
    op's error (and nothing applied)."""

    ops: tuple[MultiOp, ...]


Call = Create | CreateSequential | Delete | SetData | GetData | Exists | GetChildren | Multi
READ_CALLS = (GetData, Exists, GetChildren)


@dataclass(frozen=True, slots=True)
class Ok:
    value: object = None


@dataclass(frozen=True, slots=True)
class Err:
    code: Code


Result = Ok | Err


@dataclass(frozen=True, slots=True)
class Operation:
    """One request of one client. completed_at and result are both None when the outcome is
    unknown (timed out, connection lost): it may have taken effect at any time after
    invoked_at, or never. Record CONNECTIONLOSS/OPERATIONTIMEOUT replies that way, not as Err."""

    client: int
    call: Call
    invoked_at: int
    completed_at: int | None = None
    result: Result | None = None

    @property
    def outcome_known(self) -> bool:
        return self.result is not None


@dataclass(frozen=True, slots=True)
class Znode:
    """A znode of the tree before the history starts. cversion is ZooKeeper's stored one (the
    count of creates under it, which numbers sequential children); None: its child count."""

    data: bytes | None = b""
    version: int = 0
    cversion: int | None = None


ROOT_ONLY: dict[str, Znode] = {"/": Znode()}


class HistoryRecorder:
    """Collects invocations and completions as the simulator sees them, in any interleaving."""

    def __init__(self) -> None:
        self._invoked: list[tuple[int, Call, int]] = []
        self._completed: dict[int, tuple[int, Result]] = {}

    def invoke(self, client: int, call: Call, at: int) -> int:
        """Record a request sent; returns its id for complete()."""
        self._invoked.append((client, call, at))
        return len(self._invoked) - 1

    def complete(self, op_id: int, result: Result, at: int) -> None:
        client, call, invoked_at = self._invoked[op_id]
        assert op_id not in self._completed, f"operation {op_id} completed twice"
        assert at >= invoked_at, f"operation {op_id} completed at {at} before its invocation"
        self._completed[op_id] = (at, result)

    def operations(self) -> tuple[Operation, ...]:
        """Every operation so far; those never completed have an unknown outcome."""
        ops = []
        for op_id, (client, call, invoked_at) in enumerate(self._invoked):
            done = self._completed.get(op_id)
            if done is None:
                ops.append(Operation(client, call, invoked_at))
            else:
                ops.append(Operation(client, call, invoked_at, done[0], done[1]))
        return tuple(ops)


def describe_call(call: Call) -> str:
    match call:
        case Create(path, data):
            return f"create({path}, {data!r})"
        case CreateSequential(prefix, data):
            return f"create_sequential({prefix}, {data!r})"
        case Delete(path, version):
            return f"delete({path}, v={version})"
        case SetData(path, data, version):
            return f"set_data({path}, {data!r}, v={version})"
        case Check(path, version):
            return f"check({path}, v={version})"
        case GetData(path):
            return f"get_data({path})"
        case Exists(path):
            return f"exists({path})"
        case GetChildren(path):
            return f"get_children({path})"
        case Multi(ops):
            return "multi(" + ", ".join(describe_call(op) for op in ops) + ")"
    raise TypeError(f"not a call: {call!r}")


def describe_result(result: Result | None) -> str:
    match result:
        case None:
            return "unknown"
        case Ok(value):
            return f"ok {value!r}"
        case Err(code):
            return code.name
    raise TypeError(f"not a result: {result!r}")


def describe(op: Operation) -> str:
    """One line, deterministic: client, [invoked, completed], call -> result."""
    done = "?" if op.completed_at is None else str(op.completed_at)
    return (f"client {op.client} [{op.invoked_at}, {done}] {describe_call(op.call)}"
            f" -> {describe_result(op.result)}")
