"""What each bench session sends. A Workload makes its nodes once (`setup`, in the parent
process, over a blocking session) and then yields requests for one session at a time
(`requests`, in a client process, as (op code, zkcompat.jute record) pairs). To add one:
subclass Workload, make its nodes in `setup`, yield its requests, and add it to WORKLOADS
(and DEFAULT_WORKLOADS to run it by default); the command line (--workloads, --levels) and
the table pick it up from there. Scenarios that are not a request stream (watch fan-out,
idle sessions) live in `sessions`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from bench import wire
from zkcompat.jute import records as r
from zkcompat.jute.constants import Code, CreateMode, OpCode

DATA_BYTES = 100


@dataclass(frozen=True)
class SessionSlot:
    process: int
    session: int

    @property
    def tag(self) -> str:
        return f"p{self.process}s{self.session}"


class Workload:
    name = "?"
    writes = True  # whether it changes the tree (and so is bound by the log's fsync)
    ok_errors: frozenset[int] = frozenset()  # reply codes that are not failures

    def __init__(self, root: str, data_bytes: int = DATA_BYTES) -> None:
        self.root = root  # a fresh node per run, so runs never collide
        self.data = (b"zkcompat-bench-" * (data_bytes // 15 + 1))[:data_bytes]

    def describe(self) -> str:
        return self.name

    def setup(self, session: wire.SyncSession, slots: list[SessionSlot]) -> None:
        """Create what the requests need; runs once before any client process starts."""
        _create_path(session, self.root)

    def requests(self, slot: SessionSlot) -> Iterator[tuple[int, object]]:
        """Endless (op code, request record) pairs for one session; the load generator
        frames them with their xids."""
        raise NotImplementedError


def _create_path(session: wire.SyncSession, path: str) -> None:
    parts = [p for p in path.split("/") if p]
    for i in range(1, len(parts) + 1):
        err = session.create("/" + "/".join(parts[:i]))
        if err not in (Code.OK, Code.NODEEXISTS):
            raise wire.WireError(f"create {'/'.join(parts[:i])}: err {err}")


class CreateWorkload(Workload):
    """Persistent creates of DATA_BYTES each, unique paths, one parent per session."""

    name = "create"

    def describe(self) -> str:
        return f"create ({len(self.data)} B)"

    def setup(self, session, slots) -> None:
        super().setup(session, slots)
        for slot in slots:
            _create_path(session, f"{self.root}/{slot.tag}")

    def path(self, slot: SessionSlot, seq: int) -> str:
        return f"{self.root}/{slot.tag}/n{seq:010d}"

    def requests(self, slot):
        seq = 0
        data, acl = self.data, wire.OPEN_ACL
        while True:
            yield OpCode.CREATE, r.CreateRequest(self.path(slot, seq), data, acl, 0)
            seq += 1


class SetDataWorkload(Workload):
    """setData (any version) round robin over KEYS nodes of each session's own."""

    name = "set"
    KEYS = 16

    def describe(self) -> str:
        return f"setData ({len(self.data)} B)"

    def setup(self, session, slots) -> None:
        super().setup(session, slots)
        for slot in slots:
            for k in range(self.KEYS):
                _create_path(session, f"{self.root}/{slot.tag}-k{k}")

    def requests(self, slot):
        paths = [f"{self.root}/{slot.tag}-k{k}" for k in range(self.KEYS)]
        data = self.data
        i = 0
        while True:
            yield OpCode.SET_DATA, r.SetDataRequest(paths[i % self.KEYS], data, -1)
            i += 1


class _SharedKeys(Workload):
    """Reads round robin over KEYS nodes of DATA_BYTES that every session shares."""

    writes = False
    KEYS = 16

    def setup(self, session, slots) -> None:
        super().setup(session, slots)
        for k in range(self.KEYS):
            err = session.create(f"{self.root}/k{k}", self.data)
            if err not in (Code.OK, Code.NODEEXISTS):
                raise wire.WireError(f"create {self.root}/k{k}: err {err}")

    def paths(self, slot: SessionSlot) -> list[str]:
        # each session starts at another key, so the sessions do not move in lockstep
        keys = [f"{self.root}/k{k}" for k in range(self.KEYS)]
        shift = (slot.process * 7 + slot.session) % self.KEYS
        return keys[shift:] + keys[:shift]


class GetDataWorkload(_SharedKeys):
    name = "get"

    def describe(self) -> str:
        return f"getData ({len(self.data)} B)"

    def requests(self, slot):
        reqs = [r.GetDataRequest(p, False) for p in self.paths(slot)]
        while True:
            for req in reqs:
                yield OpCode.GET_DATA, req


class ExistsWorkload(_SharedKeys):
    name = "exists"

    def describe(self) -> str:
        return "exists"

    def requests(self, slot):
        reqs = [r.ExistsRequest(p, False) for p in self.paths(slot)]
        while True:
            for req in reqs:
                yield OpCode.EXISTS, req


class GetChildrenWorkload(Workload):
    """getChildren of one node with CHILDREN children (names of 10 characters)."""

    name = "children"
    writes = False
    CHILDREN = 100

    def describe(self) -> str:
        return f"getChildren ({self.CHILDREN} children)"

    def setup(self, session, slots) -> None:
        super().setup(session, slots)
        for c in range(self.CHILDREN):
            err = session.create(f"{self.root}/c{c:09d}")
            if err not in (Code.OK, Code.NODEEXISTS):
                raise wire.WireError(f"create child {c}: err {err}")

    def requests(self, slot):
        req = r.GetChildrenRequest(self.root, False)
        while True:
            yield OpCode.GET_CHILDREN, req


class MixWorkload(_SharedKeys):
    """90% getData of the shared keys, 10% setData (DATA_BYTES) of the session's own key."""

    name = "mix"
    writes = True

    def describe(self) -> str:
        return f"90/10 getData/setData ({len(self.data)} B)"

    def setup(self, session, slots) -> None:
        super().setup(session, slots)
        for slot in slots:
            _create_path(session, f"{self.root}/{slot.tag}")

    def requests(self, slot):
        gets = [r.GetDataRequest(p, False) for p in self.paths(slot)]
        put = r.SetDataRequest(f"{self.root}/{slot.tag}", self.data, -1)
        i = 0
        while True:
            for req in gets:
                i += 1
                if i % 10 == 0:
                    yield OpCode.SET_DATA, put
                else:
                    yield OpCode.GET_DATA, req


class EphemeralSequentialWorkload(Workload):
    """create EPHEMERAL_SEQUENTIAL then delete it, alternately, each session under its own
    parent. The generator never reads reply bodies, so the delete names the node the
    create will get: a session's requests are applied in order, and the sequence number is
    the parent's cversion, which `setup` measures how far one create+delete moves."""

    name = "ephemeral"
    step = 2  # cversion change per create+delete; setup measures it on the server

    def describe(self) -> str:
        return "create+delete ephemeral-sequential"

    def setup(self, session, slots) -> None:
        super().setup(session, slots)
        probe = f"{self.root}/probe"
        _create_path(session, probe)
        names = []
        for _ in range(2):
            err, body = session.call(OpCode.CREATE, r.CreateRequest(
                f"{probe}/e-", b"", wire.OPEN_ACL, int(CreateMode.EPHEMERAL_SEQUENTIAL)))
            if err:
                raise wire.WireError(f"create ephemeral-sequential: err {err}")
            name = r.CreateResponse.decode(body, 0)[0].path
            names.append(int(name[-10:]))
            err, _ = session.call(OpCode.DELETE, r.DeleteRequest(name, -1))
            if err:
                raise wire.WireError(f"delete {name}: err {err}")
        self.step = names[1] - names[0]
        if names[0] != 0 or self.step < 1:
            raise wire.WireError(f"unexpected sequence numbers {names}")
        for slot in slots:
            _create_path(session, f"{self.root}/{slot.tag}")

    def requests(self, slot):
        prefix = f"{self.root}/{slot.tag}/e-"
        acl, data, flags = wire.OPEN_ACL, self.data, int(CreateMode.EPHEMERAL_SEQUENTIAL)
        seq = 0
        while True:
            yield OpCode.CREATE, r.CreateRequest(prefix, data, acl, flags)
            yield OpCode.DELETE, r.DeleteRequest(f"{prefix}{seq:010d}", -1)
            seq += self.step


WORKLOADS: dict[str, type[Workload]] = {
    w.name: w
    for w in (GetDataWorkload, ExistsWorkload, GetChildrenWorkload, SetDataWorkload,
              MixWorkload, EphemeralSequentialWorkload, CreateWorkload)
}
DEFAULT_WORKLOADS = ("get", "exists", "children", "set", "mix", "ephemeral")
