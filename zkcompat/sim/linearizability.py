"""Linearizability of ZooKeeper client histories: Wing & Gong's search with Porcupine's memo
of (linearized set, state), run on each independent partition (see partition and _Searcher).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from zkcompat.jute.constants import Code
from zkcompat.sim.history import (
    ANY_VERSION,
    READ_CALLS,
    ROOT_ONLY,
    SEQUENCE_DIGITS,
    Call,
    Check,
    Create,
    CreateSequential,
    Delete,
    Err,
    Exists,
    GetChildren,
    GetData,
    Multi,
    Ok,
    Operation,
    Result,
    SetData,
    Znode,
    describe,
)

# One step: one call tried at one point of a linearization, or one backtrack. Per partition.
SEARCH_STEPS_MAX_DEFAULT = 1_000_000
EXPLAIN_PREFIX_OPS_MAX = 12  # how many of the longest prefix's last calls explain() prints

EXISTS, CONTENT, CHILDREN = 0, 1, 2
_OBJECT_KIND_NAMES = ("exists", "content", "children")
Obj = tuple[str, int]
State = tuple[object, ...]
EMPTY_CHILDREN: tuple[frozenset[str], int] = (frozenset(), 0)
_UNKNOWN = object()
_MISSING = object()


class Verdict(Enum):
    LINEARIZABLE = "linearizable"
    NOT_LINEARIZABLE = "not linearizable"
    UNKNOWN = "unknown: search step budget exhausted"


@dataclass(frozen=True, slots=True)
class PartitionReport:
    """Why one partition failed (or ran out of steps): its objects and calls (indices into the
    history), the longest linearization found, the state after it, and, for each completed
    call that could have come next, what the model answers instead of what the client heard."""

    objects: tuple[str, ...]
    operations: tuple[int, ...]
    longest_prefix: tuple[int, ...]
    state_after_prefix: tuple[str, ...]
    next_candidates: tuple[tuple[int, str], ...]


@dataclass(frozen=True, slots=True)
class CheckResult:
    verdict: Verdict
    partitions: int
    search_steps: int  # summed over the partitions searched
    report: PartitionReport | None  # the failing (else the exhausted) partition
    history: tuple[Operation, ...] = field(repr=False, compare=False, default=())

    @property
    def linearizable(self) -> bool:
        return self.verdict is Verdict.LINEARIZABLE

    def explain(self) -> str:
        """Deterministic text: the verdict and, unless linearizable, the partition's story."""
        head = (f"{self.verdict.value}: partitions={self.partitions}"
                f" search_steps={self.search_steps}")
        if self.report is None:
            return head
        return "\n".join([head, *_report_lines(self.report, self.history)])


# ---------------------------------------------------------------- the sequential model


def parent_of(path: str) -> str:
    cut = path.rfind("/")
    return "/" if cut == 0 else path[:cut]


def child_name(path: str) -> str:
    return path[path.rfind("/") + 1:]


def sequential_path(prefix: str, cversion: int) -> str:
    return f"{prefix}{cversion:0{SEQUENCE_DIGITS}d}"


def is_sequential_of(path: str, prefix: str) -> bool:
    suffix = path[len(prefix):]
    return path.startswith(prefix) and len(suffix) == SEQUENCE_DIGITS and suffix.isdigit()


class _Txn:
    """One call's view of a partition's state: writes stay here until the step is accepted;
    objects outside the partition are constants (read the initial tree) or sinks (dropped)."""

    __slots__ = ("_state", "_slots", "_initial", "writes")

    def __init__(self, state: State, slots: Mapping[Obj, int], initial: Callable[[Obj], object]):
        self._state = state
        self._slots = slots
        self._initial = initial
        self.writes: dict[Obj, object] = {}

    def get(self, obj: Obj):
        value = self.writes.get(obj, _MISSING)
        if value is not _MISSING:
            return value
        slot = self._slots.get(obj)
        return self._initial(obj) if slot is None else self._state[slot]

    def set(self, obj: Obj, value: object) -> None:
        self.writes[obj] = value


def _create_at(txn: _Txn, path: str, data: bytes | None) -> Result:
    if txn.get((path, EXISTS)):
        return Err(Code.NODEEXISTS)
    parent = parent_of(path)
    names, cversion = txn.get((parent, CHILDREN))
    txn.set((parent, CHILDREN), (names | {child_name(path)}, cversion + 1))
    txn.set((path, EXISTS), True)
    txn.set((path, CONTENT), (data, 0))
    txn.set((path, CHILDREN), EMPTY_CHILDREN)
    return Ok(path)


def apply_create(txn: _Txn, call: Create) -> Result:
    # PrepRequestProcessor: the parent (NONODE) is looked up before the node (NODEEXISTS).
    if not txn.get((parent_of(call.path), EXISTS)):
        return Err(Code.NONODE)
    return _create_at(txn, call.path, call.data)


def apply_create_sequential(txn: _Txn, call: CreateSequential) -> Result:
    parent = parent_of(call.prefix)
    if not txn.get((parent, EXISTS)):
        return Err(Code.NONODE)
    _, cversion = txn.get((parent, CHILDREN))
    return _create_at(txn, sequential_path(call.prefix, cversion), call.data)


def _version_mismatch(txn: _Txn, path: str, expected: int) -> bool:
    _, version = txn.get((path, CONTENT))
    return expected != ANY_VERSION and expected != version


def apply_delete(txn: _Txn, call: Delete) -> Result:
    path = call.path
    if not txn.get((path, EXISTS)):
        return Err(Code.NONODE)
    if _version_mismatch(txn, path, call.version):
        return Err(Code.BADVERSION)  # checked before NOTEMPTY, as PrepRequestProcessor does
    if txn.get((path, CHILDREN))[0]:
        return Err(Code.NOTEMPTY)
    parent = parent_of(path)
    names, cversion = txn.get((parent, CHILDREN))
    # Deletes leave the stored cversion alone: it counts creates (DataNode.copyStat).
    txn.set((parent, CHILDREN), (names - {child_name(path)}, cversion))
    txn.set((path, EXISTS), False)
    txn.set((path, CONTENT), None)
    txn.set((path, CHILDREN), EMPTY_CHILDREN)
    return Ok(None)


def apply_set_data(txn: _Txn, call: SetData) -> Result:
    if not txn.get((call.path, EXISTS)):
        return Err(Code.NONODE)
    if _version_mismatch(txn, call.path, call.version):
        return Err(Code.BADVERSION)
    version = txn.get((call.path, CONTENT))[1] + 1
    txn.set((call.path, CONTENT), (call.data, version))
    return Ok(version)


def apply_check(txn: _Txn, call: Check) -> Result:
    if not txn.get((call.path, EXISTS)):
        return Err(Code.NONODE)
    if _version_mismatch(txn, call.path, call.version):
        return Err(Code.BADVERSION)
    return Ok(None)


def apply_get_data(txn: _Txn, call: GetData) -> Result:
    if not txn.get((call.path, EXISTS)):
        return Err(Code.NONODE)
    return Ok(txn.get((call.path, CONTENT)))


def apply_exists(txn: _Txn, call: Exists) -> Result:
    if not txn.get((call.path, EXISTS)):
        return Ok(None)
    return Ok(txn.get((call.path, CONTENT))[1])


def apply_get_children(txn: _Txn, call: GetChildren) -> Result:
    if not txn.get((call.path, EXISTS)):
        return Err(Code.NONODE)
    return Ok(tuple(sorted(txn.get((call.path, CHILDREN))[0])))


def apply_multi(txn: _Txn, call: Multi) -> Result:
    values = []
    for op in call.ops:
        result = APPLY[type(op)](txn, op)
        if isinstance(result, Err):
            txn.writes.clear()  # all or nothing
            return result
        values.append(result.value)
    return Ok(tuple(values))


APPLY: dict[type, Callable[[_Txn, Call], Result]] = {
    Create: apply_create,
    CreateSequential: apply_create_sequential,
    Delete: apply_delete,
    SetData: apply_set_data,
    Check: apply_check,
    GetData: apply_get_data,
    Exists: apply_exists,
    GetChildren: apply_get_children,
    Multi: apply_multi,
}


def _initial_lookup(initial: Mapping[str, Znode]) -> Callable[[Obj], object]:
    children: dict[str, set[str]] = {}
    for path in initial:
        if path != "/":
            children.setdefault(parent_of(path), set()).add(child_name(path))

    def lookup(obj: Obj) -> object:
        path, kind = obj
        node = initial.get(path)
        if kind == EXISTS:
            return node is not None
        if node is None:
            return None if kind == CONTENT else EMPTY_CHILDREN
        if kind == CONTENT:
            return (node.data, node.version)
        names = frozenset(children.get(path, ()))
        return (names, len(names) if node.cversion is None else node.cversion)

    return lookup


# ---------------------------------------------------------------- footprints and partitions

class Footprint(NamedTuple):
    """The objects a call may read, overwrite, and update commutatively (the parent's child
    set and create count: creates and deletes of different children commute). A call that
    returned an error wrote and updated nothing."""

    reads: tuple[Obj, ...]
    writes: tuple[Obj, ...]
    updates: tuple[Obj, ...]


SequentialCandidates = Callable[[str], tuple[str, ...]]


def _own(path: str, *kinds: int) -> tuple[Obj, ...]:
    return tuple((path, kind) for kind in kinds)


def _fp_create(call: Create, value: object, seq: SequentialCandidates) -> Footprint:
    parent = parent_of(call.path)
    return Footprint(((parent, EXISTS), (call.path, EXISTS)),
                     _own(call.path, EXISTS, CONTENT, CHILDREN), ((parent, CHILDREN),))


def _fp_create_sequential(call: CreateSequential, value: object,
                          seq: SequentialCandidates) -> Footprint:
    # The path depends on the parent's cversion: unless the reply named it, any known path
    # the prefix could produce may be the one created (or found to exist).
    parent = parent_of(call.prefix)
    paths = (value,) if isinstance(value, str) else seq(call.prefix)
    reads = ((parent, EXISTS), (parent, CHILDREN), *((p, EXISTS) for p in paths))
    writes = tuple(obj for p in paths for obj in _own(p, EXISTS, CONTENT, CHILDREN))
    return Footprint(reads, writes, ((parent, CHILDREN),))


def _fp_delete(call: Delete, value: object, seq: SequentialCandidates) -> Footprint:
    mine = _own(call.path, EXISTS, CONTENT, CHILDREN)
    return Footprint(mine, mine, ((parent_of(call.path), CHILDREN),))


def _fp_set_data(call: SetData, value: object, seq: SequentialCandidates) -> Footprint:
    return Footprint(_own(call.path, EXISTS, CONTENT), _own(call.path, CONTENT), ())


def _fp_read_content(call: Check | GetData | Exists, value: object,
                     seq: SequentialCandidates) -> Footprint:
    return Footprint(_own(call.path, EXISTS, CONTENT), (), ())


def _fp_get_children(call: GetChildren, value: object, seq: SequentialCandidates) -> Footprint:
    return Footprint(_own(call.path, EXISTS, CHILDREN), (), ())


def _fp_multi(call: Multi, value: object, seq: SequentialCandidates) -> Footprint:
    values = value if isinstance(value, tuple) and len(value) == len(call.ops) else None
    parts = [_FOOTPRINT[type(op)](op, _UNKNOWN if values is None else values[i], seq)
             for i, op in enumerate(call.ops)]
    return Footprint(*(tuple(obj for fp in parts for obj in fp[k]) for k in range(3)))


_FOOTPRINT: dict[type, Callable[[Call, object, SequentialCandidates], Footprint]] = {
    Create: _fp_create,
    CreateSequential: _fp_create_sequential,
    Delete: _fp_delete,
    SetData: _fp_set_data,
    Check: _fp_read_content,
    GetData: _fp_read_content,
    Exists: _fp_read_content,
    GetChildren: _fp_get_children,
    Multi: _fp_multi,
}


def footprint(op: Operation, seq: SequentialCandidates) -> Footprint:
    """What the call may read, and what it may have changed given what the client heard."""
    value = op.result.value if isinstance(op.result, Ok) else _UNKNOWN
    fp = _FOOTPRINT[type(op.call)](op.call, value, seq)
    return Footprint(fp.reads, (), ()) if isinstance(op.result, Err) else fp


@dataclass(frozen=True, slots=True)
class _Partition:
    operations: tuple[int, ...]  # indices into the history, in history order
    objects: tuple[Obj, ...]  # sorted; the state tuple holds their values in this order


def _find(parent: dict[Obj, Obj], obj: Obj) -> Obj:
    root = parent.setdefault(obj, obj)
    while root != parent[root]:
        root = parent[root]
    while obj != root:
        parent[obj], obj = root, parent[obj]
    return root


def _union_all(parent: dict[Obj, Obj], objs: Sequence[Obj]) -> None:
    first = _find(parent, objs[0])
    for obj in objs[1:]:
        parent[_find(parent, obj)] = first
        first = _find(parent, first)


def partition(footprints: Sequence[Footprint], outcome_known: Sequence[bool]) -> list[_Partition]:
    """Independent groups of calls, in the order of their first call (P-compositionality,
    from Herlihy & Wing's locality).

    The tree's state is split into objects, three per path: exists, content (data, version)
    and children (names, and the stored cversion that numbers sequential creates). Each call
    reads, overwrites and commutatively updates a fixed set of them (footprint); one that
    returned an error changed nothing. An object no call reads is a sink: nothing observed
    depends on it, so the model drops it. An object no call changes is a constant: the model
    reads its initial value. Calls are joined by union-find over the live objects (read by
    some call, changed by some call) they touch, so a group shares no live object with
    another, and the history is linearizable iff every group is. An unknown call that
    could change no object anyone reads is dropped.

    So sets and reads of /a and /b split; creates and deletes under /p split while nothing
    reads /p's children (data on /p leaves its existence constant); one get_children(/p),
    create_sequential under /p or delete(/p) (NOTEMPTY) joins every create and delete under
    /p; a multi joins all it touches."""
    observed = {obj for fp in footprints for obj in fp.reads}
    changes = [(*fp.writes, *fp.updates) for fp in footprints]
    kept = [i for i, known in enumerate(outcome_known)
            if known or not observed.isdisjoint(changes[i])]
    live = observed & {obj for i in kept for obj in changes[i]}
    touched: dict[int, list[Obj]] = {}
    parent: dict[Obj, Obj] = {}
    for i in kept:
        reads = footprints[i].reads
        touched[i] = sorted({*reads, *changes[i]} & live) or sorted(set(reads))  # constants
        _union_all(parent, touched[i])
    groups: dict[Obj, list[int]] = {}
    for i in kept:
        groups.setdefault(_find(parent, touched[i][0]), []).append(i)
    return [_Partition(tuple(ops), tuple(sorted({obj for i in ops for obj in touched[i]})))
            for ops in sorted(groups.values())]


def _sequential_candidates(history: Sequence[Operation],
                           initial: Mapping[str, Znode]) -> SequentialCandidates:
    known = set(initial)
    for op in history:
        known.update(_paths_named(op.call, op.result))
    by_parent: dict[str, list[str]] = {}
    for path in sorted(known):
        by_parent.setdefault(parent_of(path), []).append(path)

    def candidates(prefix: str) -> tuple[str, ...]:
        return tuple(p for p in by_parent.get(parent_of(prefix), ()) if is_sequential_of(p, prefix))

    return candidates


def _paths_named(call: Call, result: Result | None) -> Iterable[str]:
    if isinstance(call, Multi):
        values = result.value if isinstance(result, Ok) and isinstance(result.value, tuple) else ()
        for i, op in enumerate(call.ops):
            yield from _paths_named(op, Ok(values[i]) if i < len(values) else None)
    elif isinstance(call, CreateSequential):
        if isinstance(result, Ok) and isinstance(result.value, str):
            yield result.value
    else:
        yield call.path


# ---------------------------------------------------------------- input checks


def _check_path(path: object, where: str, may_be_root: bool) -> None:
    ok = isinstance(path, str) and path.startswith("/") and "//" not in path
    if not ok or (path != "/" and path.endswith("/")) or (path == "/" and not may_be_root):
        raise ValueError(f"{where}: bad path {path!r}")


def _check_call(call: object, where: str, in_multi: bool) -> None:
    if in_multi and not isinstance(call, Create | CreateSequential | Delete | SetData | Check):
        raise ValueError(f"{where}: {type(call).__name__} cannot be inside a multi")
    if isinstance(call, Multi):
        for j, op in enumerate(call.ops):
            _check_call(op, f"{where}.ops[{j}]", True)
    elif isinstance(call, CreateSequential):
        if not isinstance(call.prefix, str) or call.prefix in ("", "/") or "//" in call.prefix:
            raise ValueError(f"{where}: bad prefix {call.prefix!r}")
    elif isinstance(call, Check) and not in_multi:
        raise ValueError(f"{where}: check is only a multi op")
    elif type(call) in APPLY:
        _check_path(call.path, where, not isinstance(call, Create | Delete))
    else:
        raise ValueError(f"{where}: not a call: {call!r}")


def _check_operation(op: Operation, where: str) -> None:
    _check_call(op.call, where, False)
    if (op.completed_at is None) != (op.result is None):
        raise ValueError(f"{where}: completed_at and result are both set or both None")
    if op.completed_at is not None and op.completed_at < op.invoked_at:
        raise ValueError(f"{where}: completed at {op.completed_at} before invoked at {op.invoked_at}")
    if op.result is not None and not isinstance(op.result, Ok | Err):
        raise ValueError(f"{where}: not a result: {op.result!r}")


def _check_initial(initial: Mapping[str, Znode]) -> None:
    if "/" not in initial:
        raise ValueError("initial tree has no root")
    for path in initial:
        _check_path(path, "initial tree", True)
        if path != "/" and parent_of(path) not in initial:
            raise ValueError(f"initial tree: {path} has no parent")


def _canonical(op: Operation) -> Operation:
    """Children lists compare sorted, multi values as tuples (other values never match)."""
    if not isinstance(op.result, Ok) or not isinstance(op.result.value, list | tuple):
        return op
    if isinstance(op.call, GetChildren):
        if not all(isinstance(name, str) for name in op.result.value):
            return op
        value = tuple(sorted(op.result.value))
    elif isinstance(op.call, Multi):
        value = tuple(op.result.value)
    else:
        return op
    return Operation(op.client, op.call, op.invoked_at, op.completed_at, Ok(value))


# ---------------------------------------------------------------- the search


class _Entry:
    """A call or return event in Porcupine's doubly linked list of the partition's history."""

    __slots__ = ("op", "is_call", "match", "prev", "next")

    def __init__(self, op: int, is_call: bool):
        self.op = op
        self.is_call = is_call
        self.match: _Entry | None = None
        self.prev: _Entry | None = None
        self.next: _Entry | None = None


def _event_list(ops: Sequence[Operation]) -> _Entry:
    """Calls and returns by time; a call at the time of a return counts as concurrent with it."""
    events = [(op.invoked_at, 0, j) for j, op in enumerate(ops)]
    events += [(op.completed_at, 1, j) for j, op in enumerate(ops) if op.completed_at is not None]
    events.sort()
    head = _Entry(-1, False)
    calls: dict[int, _Entry] = {}
    last = head
    for _, kind, j in events:
        entry = _Entry(j, kind == 0)
        if kind == 0:
            calls[j] = entry
        else:
            calls[j].match = entry
        entry.prev, last.next = last, entry
        last = entry
    return head


def _lift(entry: _Entry) -> None:
    entry.prev.next = entry.next
    if entry.next is not None:
        entry.next.prev = entry.prev
    match = entry.match
    if match is not None:
        match.prev.next = match.next
        if match.next is not None:
            match.next.prev = match.prev


def _unlift(entry: _Entry) -> None:
    match = entry.match
    if match is not None:
        match.prev.next = match
        if match.next is not None:
            match.next.prev = match
    entry.prev.next = entry
    if entry.next is not None:
        entry.next.prev = entry


class _Model:
    """One partition's sequential model over its state tuple."""

    def __init__(self, part: _Partition, lookup: Callable[[Obj], object]):
        self.slots = {obj: i for i, obj in enumerate(part.objects)}
        self.lookup = lookup
        self.initial: State = tuple(lookup(obj) for obj in part.objects)

    def answer(self, state: State, call: Call) -> tuple[Result, dict[Obj, object]]:
        txn = _Txn(state, self.slots, self.lookup)
        return APPLY[type(call)](txn, call), txn.writes

    def step(self, state: State, op: Operation) -> State | None:
        """The state after op, or None if op cannot come next (or, unknown, would do nothing)."""
        result, writes = self.answer(state, op.call)
        if op.result is not None and result != op.result:
            return None
        after = None
        for obj, value in writes.items():
            slot = self.slots.get(obj)
            if slot is not None and state[slot] != value:
                if after is None:
                    after = list(state)
                after[slot] = value
        if after is None:
            return state if op.result is not None else None
        return tuple(after)


@dataclass(slots=True)
class _Search:
    verdict: Verdict
    search_steps: int
    longest_prefix: list[int]


def _earlier_unknown_twins(ops: Sequence[Operation]) -> list[int]:
    """For each unknown call, the bits of the unknown calls with an equal call invoked before
    it. Twins are interchangeable (no return bounds them, the earlier may go wherever the later
    could), so the search takes them in invocation order: C(n, k) orders become one."""
    twins = [0] * len(ops)
    seen: dict[Call, int] = {}
    for j in sorted(range(len(ops)), key=lambda j: (ops[j].invoked_at, j)):
        if ops[j].result is None:
            twins[j] = seen.get(ops[j].call, 0)
            seen[ops[j].call] = twins[j] | 1 << j
    return twins


def writes_nothing(op: Operation) -> bool:
    """A completed call that cannot change any state: a read, a failure, a multi of checks."""
    if op.result is None:
        return False
    if isinstance(op.result, Err) or isinstance(op.call, READ_CALLS):
        return True
    return isinstance(op.call, Multi) and all(isinstance(sub, Check) for sub in op.call.ops)


def _conflicts(footprints: Sequence[Footprint], slots: Mapping[Obj, int]) -> list[int]:
    """For each call, the bits of the calls it does not commute with: one writes what the
    other reads or writes, or updates what the other reads or writes. Objects outside the
    partition (constants, sinks) never make calls conflict."""
    masks = ({}, {}, {})  # reads, writes, updates: object -> bits of the calls touching it
    for j, fp in enumerate(footprints):
        for kind, objs in enumerate(fp):
            for obj in objs:
                if obj in slots:
                    masks[kind][obj] = masks[kind].get(obj, 0) | 1 << j
    reads, writes, updates = masks
    conflicts = []
    for fp in footprints:
        mask = 0
        for obj in fp.reads:
            mask |= writes.get(obj, 0) | updates.get(obj, 0)
        for obj in fp.writes:
            mask |= reads.get(obj, 0) | writes.get(obj, 0) | updates.get(obj, 0)
        for obj in fp.updates:
            mask |= reads.get(obj, 0) | writes.get(obj, 0)
        conflicts.append(mask)
    return conflicts


# The passes over the calls that may come next, in the order the search makes them.
PASS_READS, PASS_WRITES, PASS_UNKNOWN = 0, 1, 2


class _Searcher:
    """Porcupine's checkSingle with three passes over the calls that may come next (those
    invoked before the first return still in the list): completed calls that write nothing,
    then completed writes, then unknown calls. An unknown call may take effect at any point
    after its invocation, or never: the search ends once every completed call is placed, and
    never tries an unknown call where it would change nothing. Three reductions, each
    complete (checked against brute force in the tests), keep it from blowing up:
    - a call that writes nothing and fits now is taken without choice: any linearization
      from here has one with it here (it changes no state, and coming earlier breaks no
      real-time order), so backtracking goes on past it, and finding its successor already
      explored means this point fails too;
    - an unknown call is tried only if it conflicts (_conflicts), directly or through other
      such unknown calls, with a completed call that may come next: any linearization from
      here can move the others past the next completed call, with which they commute;
    - equal unknown calls are taken in invocation order (_earlier_unknown_twins)."""

    def __init__(self, ops: Sequence[Operation], model: _Model, conflicts: Sequence[int],
                 search_steps_max: int):
        self.ops, self.model, self.search_steps_max = ops, model, search_steps_max
        self.conflicts = conflicts
        self.head = _event_list(ops)
        self.bits = [1 << j for j in range(len(ops))]
        self.twins = _earlier_unknown_twins(ops)
        self.free = [writes_nothing(op) for op in ops]
        self.remaining = sum(op.completed_at is not None for op in ops)
        self.any_unknown = self.remaining < len(ops)
        self.state, self.linearized, self.relevant = model.initial, 0, 0
        self.cache: set[tuple[int, State]] = set()
        self.calls: list[tuple[_Entry, State, int, int]] = []
        self.longest: list[int] = []
        self.entry, self.pass_, self.steps = self.head.next, PASS_READS, 0

    def run(self) -> _Search:
        while self.remaining:
            if self.steps >= self.search_steps_max:
                prefix = max(self.longest, [c[0].op for c in self.calls], key=len)
                return _Search(Verdict.UNKNOWN, self.steps, prefix)
            assert self.entry is not None, "a completed call is left, so its return is ahead"
            if self.entry.is_call:
                alive = self._consider(self.entry)
            else:
                alive = self._next_pass() or self._backtrack()
            if not alive:
                return _Search(Verdict.NOT_LINEARIZABLE, self.steps, self.longest)
        return _Search(Verdict.LINEARIZABLE, self.steps, [c[0].op for c in self.calls])

    def _wanted(self, entry: _Entry) -> bool:
        j = entry.op
        if self.pass_ == PASS_UNKNOWN:
            return (entry.match is None and self.relevant & self.bits[j] != 0
                    and self.linearized & self.twins[j] == self.twins[j])
        return entry.match is not None and self.free[j] == (self.pass_ == PASS_READS)

    def _consider(self, entry: _Entry) -> bool:
        """Linearize entry's call next if this pass wants it and it fits; False: no order."""
        if not self._wanted(entry):
            self.entry = entry.next
            return True
        self.steps += 1
        after = self.model.step(self.state, self.ops[entry.op])
        if after is None:
            self.entry = entry.next
            return True
        linearized = self.linearized | self.bits[entry.op]
        if (linearized, after) in self.cache:
            if self.pass_ == PASS_READS:
                return self._backtrack()
            self.entry = entry.next
            return True
        self.cache.add((linearized, after))
        self.calls.append((entry, self.state, self.pass_, self.relevant))
        self.state, self.linearized = after, linearized
        self.remaining -= entry.match is not None
        _lift(entry)
        self.entry, self.pass_ = self.head.next, PASS_READS
        return True

    def _next_pass(self) -> bool:
        if self.pass_ == PASS_READS:
            self.pass_ = PASS_WRITES
        elif self.pass_ == PASS_WRITES and self.any_unknown:
            self.pass_, self.relevant = PASS_UNKNOWN, self._relevant_unknown()
        else:
            return False
        self.entry = self.head.next
        return True

    def _relevant_unknown(self) -> int:
        """Bits of the unknown calls that may come next and conflict, directly or through
        others of them, with a completed call that may come next."""
        zone, unknown = 0, []
        entry = self.head.next
        while entry is not None and entry.is_call:
            if entry.match is None:
                unknown.append(entry.op)
            else:
                zone |= self.conflicts[entry.op]
            entry = entry.next
        relevant, grew = 0, True
        while grew:
            grew = False
            for j in unknown:
                if zone & self.bits[j] and not relevant & self.bits[j]:
                    relevant |= self.bits[j]
                    zone |= self.conflicts[j]
                    grew = True
        return relevant

    def _backtrack(self) -> bool:
        """Undo the last choice (and every forced one on top of it); False: none is left."""
        self.steps += 1
        if len(self.calls) > len(self.longest):
            self.longest = [c[0].op for c in self.calls]
        pass_ = PASS_READS
        while pass_ == PASS_READS:
            if not self.calls:
                return False
            entry, self.state, pass_, self.relevant = self.calls.pop()
            self.linearized ^= self.bits[entry.op]
            self.remaining += entry.match is not None
            _unlift(entry)
        self.entry, self.pass_ = entry.next, pass_
        return True


# ---------------------------------------------------------------- the check


def check(history: Sequence[Operation], initial: Mapping[str, Znode] | None = None,
          search_steps_max: int = SEARCH_STEPS_MAX_DEFAULT) -> CheckResult:
    """Is the history linearizable against a tree that starts as `initial` (default: only "/")?
    Every partition is searched with at most search_steps_max steps; a definite failure in
    any partition wins over a budget exhausted in another. Misuse raises ValueError."""
    tree = ROOT_ONLY if initial is None else initial
    _check_initial(tree)
    for i, op in enumerate(history):
        _check_operation(op, f"history[{i}]")
    ops = tuple(_canonical(op) for op in history)
    lookup = _initial_lookup(tree)
    seq = _sequential_candidates(ops, tree)
    footprints = [footprint(op, seq) for op in ops]
    parts = partition(footprints, [op.outcome_known for op in ops])
    total_steps, exhausted = 0, None
    for part in parts:
        model = _Model(part, lookup)
        local = [ops[i] for i in part.operations]
        conflicts = _conflicts([footprints[i] for i in part.operations], model.slots)
        found = _Searcher(local, model, conflicts, search_steps_max).run()
        total_steps += found.search_steps
        if found.verdict is Verdict.NOT_LINEARIZABLE:
            report = _report(part, local, model, found.longest_prefix)
            return CheckResult(found.verdict, len(parts), total_steps, report, tuple(history))
        if found.verdict is Verdict.UNKNOWN and exhausted is None:
            exhausted = _report(part, local, model, found.longest_prefix)
    verdict = Verdict.LINEARIZABLE if exhausted is None else Verdict.UNKNOWN
    return CheckResult(verdict, len(parts), total_steps, exhausted, tuple(history))


# ---------------------------------------------------------------- explanations


def _report(part: _Partition, local: Sequence[Operation], model: _Model,
            prefix: Sequence[int]) -> PartitionReport:
    state = model.initial
    for j in prefix:
        state = model.step(state, local[j])
        assert state is not None, "the longest prefix replays"
    done = set(prefix)
    left = [j for j in range(len(local)) if j not in done]
    deadline = min((local[j].completed_at for j in left if local[j].completed_at is not None),
                   default=None)
    candidates = []
    for j in left:
        op = local[j]
        if op.result is not None and deadline is not None and op.invoked_at <= deadline:
            answer, _ = model.answer(state, op.call)
            candidates.append((part.operations[j], _describe_answer(answer)))
    return PartitionReport(
        objects=tuple(_describe_object(obj) for obj in part.objects),
        operations=part.operations,
        longest_prefix=tuple(part.operations[j] for j in prefix),
        state_after_prefix=tuple(f"{_describe_object(obj)} = {_describe_value(value)}"
                                 for obj, value in zip(part.objects, state, strict=True)),
        next_candidates=tuple(candidates),
    )


def _describe_object(obj: Obj) -> str:
    return f"{obj[0]} {_OBJECT_KIND_NAMES[obj[1]]}"


def _describe_value(value: object) -> str:
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], frozenset):
        return f"{sorted(value[0])!r} cversion={value[1]}"
    return repr(value)


def _describe_answer(result: Result) -> str:
    return f"ok {result.value!r}" if isinstance(result, Ok) else result.code.name


def _report_lines(report: PartitionReport, history: Sequence[Operation]) -> list[str]:
    prefix = report.longest_prefix
    shown = prefix[-EXPLAIN_PREFIX_OPS_MAX:]
    lines = [f"partition: {', '.join(report.objects)} ({len(report.operations)} calls)",
             f"longest linearizable prefix: {len(prefix)} calls"
             + (f", the last {len(shown)}:" if len(shown) < len(prefix) else ":")]
    lines += [f"  #{i} {describe(history[i])}" for i in shown]
    lines.append("state after it:")
    lines += [f"  {line}" for line in report.state_after_prefix]
    lines.append("calls that could come next, and what the model says to each after it:")
    lines += [f"  #{i} {describe(history[i])}; model: {answer}"
              for i, answer in report.next_candidates]
    return lines
