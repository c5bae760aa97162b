"""ZooKeeper's tree as the linearizability checker's sequential model: three objects per path
(exists, content, children), one apply function per call, a partition's state tuple."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from zkcompat.jute.constants import Code
from zkcompat.sim.history import (
    ANY_VERSION,
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
)

EXISTS, CONTENT, CHILDREN = 0, 1, 2
OBJECT_KIND_NAMES = ("exists", "content", "children")
Obj = tuple[str, int]
State = tuple[object, ...]
EMPTY_CHILDREN: tuple[frozenset[str], int] = (frozenset(), 0)
_MISSING = object()


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


def initial_lookup(initial: Mapping[str, Znode]) -> Callable[[Obj], object]:
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


class Model:
    """One partition's sequential model over its state tuple, which holds the value of
    objects[i] at i."""

    def __init__(self, objects: Sequence[Obj], lookup: Callable[[Obj], object]):
        self.slots = {obj: i for i, obj in enumerate(objects)}
        self.lookup = lookup
        self.initial: State = tuple(lookup(obj) for obj in objects)

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
