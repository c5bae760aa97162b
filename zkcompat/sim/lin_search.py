"""Porcupine's search for one partition's linearization: the calls and returns as a linked
list, three passes over the calls that may come next, and a memo of (linearized, state)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from zkcompat.sim.history import READ_CALLS, Call, Check, Err, Multi, Operation
from zkcompat.sim.lin_model import Model, Obj, State
from zkcompat.sim.lin_partition import Footprint
from zkcompat.sim.lin_report import Verdict


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


def conflict_masks(footprints: Sequence[Footprint], slots: Mapping[Obj, int]) -> list[int]:
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


class Searcher:
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
    - an unknown call is tried only if it conflicts (conflict_masks), directly or through other
      such unknown calls, with a completed call that may come next: any linearization from
      here can move the others past the next completed call, with which they commute;
    - equal unknown calls are taken in invocation order (_earlier_unknown_twins)."""

    def __init__(self, ops: Sequence[Operation], model: Model, conflicts: Sequence[int],
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

