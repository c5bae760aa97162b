"""What the linearizability checker answers: the verdict, the failing partition's report (its
longest linearization and what the model says next), and that report as deterministic text."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

from zkcompat.sim.history import Ok, Operation, Result, describe
from zkcompat.sim.lin_model import OBJECT_KIND_NAMES, Model, Obj
from zkcompat.sim.lin_partition import Partition

EXPLAIN_PREFIX_OPS_MAX = 12  # how many of the longest prefix's last calls explain() prints


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


def partition_report(part: Partition, local: Sequence[Operation], model: Model,
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
    return f"{obj[0]} {OBJECT_KIND_NAMES[obj[1]]}"


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
