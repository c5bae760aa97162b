"""Linearizability of ZooKeeper client histories: Wing & Gong's search with Porcupine's memo
of (linearized set, state), run on each independent partition. check() validates a history
and runs the parts: lin_model, lin_partition, lin_search, lin_report.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from zkcompat.sim.history import (
    ROOT_ONLY,
    Check,
    Create,
    CreateSequential,
    Delete,
    Err,
    GetChildren,
    Multi,
    Ok,
    Operation,
    SetData,
    Znode,
)
from zkcompat.sim.lin_model import APPLY, Model, initial_lookup, parent_of
from zkcompat.sim.lin_partition import footprint, partition, sequential_candidates
from zkcompat.sim.lin_report import CheckResult, Verdict, partition_report
from zkcompat.sim.lin_search import Searcher, conflict_masks

# One step: one call tried at one point of a linearization, or one backtrack. Per partition.
SEARCH_STEPS_MAX_DEFAULT = 1_000_000


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
    lookup = initial_lookup(tree)
    seq = sequential_candidates(ops, tree)
    footprints = [footprint(op, seq) for op in ops]
    parts = partition(footprints, [op.outcome_known for op in ops])
    total_steps, exhausted = 0, None
    for part in parts:
        model = Model(part.objects, lookup)
        local = [ops[i] for i in part.operations]
        conflicts = conflict_masks([footprints[i] for i in part.operations], model.slots)
        found = Searcher(local, model, conflicts, search_steps_max).run()
        total_steps += found.search_steps
        if found.verdict is Verdict.NOT_LINEARIZABLE:
            report = partition_report(part, local, model, found.longest_prefix)
            return CheckResult(found.verdict, len(parts), total_steps, report, tuple(history))
        if found.verdict is Verdict.UNKNOWN and exhausted is None:
            exhausted = partition_report(part, local, model, found.longest_prefix)
    verdict = Verdict.LINEARIZABLE if exhausted is None else Verdict.UNKNOWN
    return CheckResult(verdict, len(parts), total_steps, exhausted, tuple(history))
