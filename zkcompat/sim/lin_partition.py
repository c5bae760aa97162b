"""Which state objects each call touches (its footprint), and the independent partitions of
a history that follow: P-compositionality, so each is searched on its own."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from zkcompat.sim.history import (
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
from zkcompat.sim.lin_model import (
    CHILDREN,
    CONTENT,
    EXISTS,
    Obj,
    is_sequential_of,
    parent_of,
)

_UNKNOWN = object()  # the value of a call whose Ok reply no client heard


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
class Partition:
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


def partition(footprints: Sequence[Footprint], outcome_known: Sequence[bool]) -> list[Partition]:
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
    return [Partition(tuple(ops), tuple(sorted({obj for i in ops for obj in touched[i]})))
            for ops in sorted(groups.values())]


def sequential_candidates(history: Sequence[Operation],
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

