"""What each bench session sends. A Workload makes its nodes once (`setup`, in the parent
process, over a blocking session) and then yields requests for one session at a time
(`requests`, in a client process, as (op code, zkcompat.jute record) pairs). To add one
(getData, exists, getChildren, a 90/10 read/write mix, watch fan-out): subclass
Workload, make its nodes in `setup`, yield its requests, and add it to WORKLOADS; the
command line (--workloads) and the table pick it up from there.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from zkcompat.bench import wire
from zkcompat.jute import records as r
from zkcompat.jute.constants import Code, OpCode

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


WORKLOADS: dict[str, type[Workload]] = {
    CreateWorkload.name: CreateWorkload,
    SetDataWorkload.name: SetDataWorkload,
}
