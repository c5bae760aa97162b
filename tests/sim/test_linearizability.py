"""The linearizability checker: hand-written histories with known answers, partitioning,
unknown outcomes, the step budget, and generated histories from a reference tree."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zkcompat.jute.constants import Code
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
    HistoryRecorder,
    Multi,
    Ok,
    Operation,
    Result,
    SetData,
    Znode,
)
from zkcompat.sim.lin_report import Verdict
from zkcompat.sim.linearizability import check

NONODE, NODEEXISTS = Err(Code.NONODE), Err(Code.NODEEXISTS)
BADVERSION, NOTEMPTY = Err(Code.BADVERSION), Err(Code.NOTEMPTY)
APP = {"/": Znode(), "/app": Znode(b"")}


def op(client: int, call: Call, invoked: int, completed: int | None = None,
       result: Result | None = None) -> Operation:
    return Operation(client, call, invoked, completed, result)


def verdict(history: list[Operation], initial: dict[str, Znode] | None = None) -> Verdict:
    return check(history, initial).verdict


def seq_name(prefix: str, n: int) -> str:
    return f"{prefix}{n:010d}"


LIN, NOT = Verdict.LINEARIZABLE, Verdict.NOT_LINEARIZABLE

# ---------------------------------------------------------------- hand-written histories

CREATED_A = op(0, Create("/a", b"0"), 0, 1, Ok("/a"))

HAND_WRITTEN = {
    # A read that starts after an acknowledged write returns the value before it.
    "stale read after acknowledged write": (NOT, [
        CREATED_A,
        op(1, SetData("/a", b"1"), 2, 3, Ok(1)),
        op(2, GetData("/a"), 4, 5, Ok((b"0", 0))),
    ]),
    # The same read, concurrent with the write: either value is allowed.
    "read concurrent with write sees old value": (LIN, [
        CREATED_A,
        op(1, SetData("/a", b"1"), 2, 5, Ok(1)),
        op(2, GetData("/a"), 3, 4, Ok((b"0", 0))),
    ]),
    # A read finishes before the write is even sent, yet sees it.
    "read sees write before it was invoked": (NOT, [
        CREATED_A,
        op(2, GetData("/a"), 2, 3, Ok((b"1", 1))),
        op(1, SetData("/a", b"1"), 4, 5, Ok(1)),
    ]),
    # create was acknowledged, later every read says the node is not there.
    "lost acknowledged create": (NOT, [
        CREATED_A,
        op(1, Exists("/a"), 2, 3, Ok(None)),
    ]),
    # An acknowledged set_data vanishes: the next set_data gets the same version again.
    "lost acknowledged set_data": (NOT, [
        CREATED_A,
        op(1, SetData("/a", b"1"), 2, 3, Ok(1)),
        op(2, SetData("/a", b"2"), 4, 5, Ok(1)),
    ]),
    # Two concurrent set_datas, the read after both sees the first one's data: fine.
    "concurrent writes, first wins": (LIN, [
        CREATED_A,
        op(1, SetData("/a", b"x"), 2, 5, Ok(2)),
        op(2, SetData("/a", b"y"), 3, 6, Ok(1)),
        op(3, GetData("/a"), 7, 8, Ok((b"x", 2))),
    ]),
    # The same two writes in the other order: also fine.
    "concurrent writes, second wins": (LIN, [
        CREATED_A,
        op(1, SetData("/a", b"x"), 2, 5, Ok(1)),
        op(2, SetData("/a", b"y"), 3, 6, Ok(2)),
        op(3, GetData("/a"), 7, 8, Ok((b"y", 2))),
    ]),
    # Both writes say they were first: impossible in any order.
    "concurrent writes both version 1": (NOT, [
        CREATED_A,
        op(1, SetData("/a", b"x"), 2, 5, Ok(1)),
        op(2, SetData("/a", b"y"), 3, 6, Ok(1)),
    ]),
    # One client reads version 2 and later version 1 with no delete in between.
    "version counter goes backwards": (NOT, [
        CREATED_A,
        op(1, SetData("/a", b"1"), 2, 3, Ok(1)),
        op(1, SetData("/a", b"2"), 4, 5, Ok(2)),
        op(2, Exists("/a"), 6, 7, Ok(2)),
        op(2, Exists("/a"), 8, 9, Ok(1)),
    ]),
    # Two concurrent creates of one path both succeed.
    "two creates of the same path both ok": (NOT, [
        op(1, Create("/a", b"1"), 0, 3, Ok("/a")),
        op(2, Create("/a", b"2"), 1, 2, Ok("/a")),
    ]),
    # Two concurrent creates: one ok, one NODEEXISTS, and the read sees the winner's data.
    "create race, one winner": (LIN, [
        op(1, Create("/a", b"1"), 0, 3, NODEEXISTS),
        op(2, Create("/a", b"2"), 1, 2, Ok("/a")),
        op(3, GetData("/a"), 4, 5, Ok((b"2", 0))),
    ]),
    # NODEEXISTS with nobody ever creating the node.
    "create fails NODEEXISTS on an absent node": (NOT, [
        op(1, Create("/a", b"1"), 0, 1, NODEEXISTS),
    ]),
    # A write that timed out shows up in a later read: it took effect after its invocation.
    "timed-out write later appears": (LIN, [
        CREATED_A,
        op(1, SetData("/a", b"lost"), 2),
        op(2, GetData("/a"), 10, 11, Ok((b"0", 0))),
        op(2, GetData("/a"), 12, 13, Ok((b"lost", 1))),
    ]),
    # A write that timed out is seen by a read that finished before it was sent.
    "timed-out write appears before its invocation": (NOT, [
        CREATED_A,
        op(2, GetData("/a"), 2, 3, Ok((b"lost", 1))),
        op(1, SetData("/a", b"lost"), 4),
    ]),
    # A timed-out write that never took effect is fine too.
    "timed-out write never appears": (LIN, [
        CREATED_A,
        op(1, SetData("/a", b"lost"), 2),
        op(2, GetData("/a"), 10, 11, Ok((b"0", 0))),
    ]),
    # A timed-out write cannot take effect twice.
    "timed-out write applied twice": (NOT, [
        CREATED_A,
        op(1, SetData("/a", b"lost"), 2),
        op(2, Exists("/a"), 10, 11, Ok(2)),
    ]),
    # Sequential creates number by the parent's cversion: 0 then 1.
    "sequential creates number 0, 1": (LIN, [
        op(1, CreateSequential("/app/n-"), 0, 1, Ok(seq_name("/app/n-", 0))),
        op(2, CreateSequential("/app/n-"), 2, 3, Ok(seq_name("/app/n-", 1))),
    ]),
    # Two sequential creates given the same number.
    "sequential creates share a number": (NOT, [
        op(1, CreateSequential("/app/n-"), 0, 1, Ok(seq_name("/app/n-", 0))),
        op(2, CreateSequential("/app/n-"), 2, 3, Ok(seq_name("/app/n-", 0))),
    ]),
    # Concurrent sequential creates may be numbered in either order.
    "concurrent sequential creates, reversed numbers": (LIN, [
        op(1, CreateSequential("/app/n-"), 0, 3, Ok(seq_name("/app/n-", 1))),
        op(2, CreateSequential("/app/n-"), 1, 2, Ok(seq_name("/app/n-", 0))),
    ]),
    # Deletes do not give numbers back (the stored cversion counts creates).
    "sequential number after a delete is not reused": (NOT, [
        op(1, CreateSequential("/app/n-"), 0, 1, Ok(seq_name("/app/n-", 0))),
        op(1, Delete(seq_name("/app/n-", 0)), 2, 3, Ok(None)),
        op(1, CreateSequential("/app/n-"), 4, 5, Ok(seq_name("/app/n-", 0))),
    ]),
    # A plain create under the parent uses up a number too.
    "plain create bumps the sequence": (LIN, [
        op(1, Create("/app/x"), 0, 1, Ok("/app/x")),
        op(1, Delete("/app/x"), 2, 3, Ok(None)),
        op(2, CreateSequential("/app/n-"), 4, 5, Ok(seq_name("/app/n-", 1))),
    ]),
    # A timed-out sequential create took number 0, so the next one gets 1 and both are listed.
    "timed-out sequential create took a number": (LIN, [
        op(1, CreateSequential("/app/n-"), 0),
        op(2, CreateSequential("/app/n-"), 2, 3, Ok(seq_name("/app/n-", 1))),
        op(3, GetChildren("/app"), 4, 5, Ok(("n-0000000000", "n-0000000001"))),
    ]),
    # A skipped number with nothing that could have used it.
    "sequential number skipped": (NOT, [
        op(1, CreateSequential("/app/n-"), 0, 1, Ok(seq_name("/app/n-", 1))),
    ]),
    # An acknowledged multi made only its first create visible.
    "multi half applied": (NOT, [
        op(1, Multi((Create("/a"), Create("/b"))), 0, 1, Ok(("/a", "/b"))),
        op(2, Exists("/a"), 2, 3, Ok(0)),
        op(2, Exists("/b"), 4, 5, Ok(None)),
    ]),
    # A failed multi (its second op found /b) must apply nothing, yet /a appeared.
    "failed multi leaks its first op": (NOT, [
        op(0, Create("/b"), 0, 1, Ok("/b")),
        op(1, Multi((Create("/a"), Create("/b"))), 2, 3, NODEEXISTS),
        op(2, Exists("/a"), 4, 5, Ok(0)),
    ]),
    # A multi's check sees its own earlier set_data: the version after it is 1.
    "multi ops see their predecessors": (LIN, [
        CREATED_A,
        op(1, Multi((SetData("/a", b"1", 0), Check("/a", 1))), 2, 3, Ok((1, None))),
        op(2, GetData("/a"), 4, 5, Ok((b"1", 1))),
    ]),
    # A multi reports a failure that is not the first failing op's.
    "multi reports a later failure": (NOT, [
        op(1, Multi((Delete("/missing"), Create("/a"), Create("/a"))), 0, 1, NODEEXISTS),
    ]),
    # Two children created and acknowledged, a later listing shows only one.
    "children list missing a create": (NOT, [
        op(1, Create("/app/a"), 0, 1, Ok("/app/a")),
        op(2, Create("/app/b"), 2, 3, Ok("/app/b")),
        op(3, GetChildren("/app"), 4, 5, Ok(("a",))),
    ]),
    # A listing concurrent with the second create may or may not show it.
    "children list concurrent with a create": (LIN, [
        op(1, Create("/app/a"), 0, 1, Ok("/app/a")),
        op(2, Create("/app/b"), 2, 6, Ok("/app/b")),
        op(3, GetChildren("/app"), 3, 4, Ok(("a",))),
        op(3, GetChildren("/app"), 7, 8, Ok(("b", "a"))),
    ]),
    # The listing shows a child whose create failed.
    "children list shows a failed create": (NOT, [
        op(1, Create("/app/a"), 0, 1, Ok("/app/a")),
        op(2, Create("/app/b/c"), 2, 3, NONODE),
        op(3, GetChildren("/app"), 4, 5, Ok(("a", "b"))),
    ]),
    # delete of a parent with a child is NOTEMPTY; the child's delete then lets it go.
    "delete needs an empty node": (LIN, [
        op(1, Create("/app/a"), 0, 1, Ok("/app/a")),
        op(1, Delete("/app"), 2, 3, NOTEMPTY),
        op(1, Delete("/app/a"), 4, 5, Ok(None)),
        op(1, Delete("/app", 0), 6, 7, Ok(None)),
        op(2, GetChildren("/app"), 8, 9, NONODE),
    ]),
    # A delete succeeded while the node still had a child.
    "delete of a non-empty node ok": (NOT, [
        op(1, Create("/app/a"), 0, 1, Ok("/app/a")),
        op(1, Delete("/app"), 2, 3, Ok(None)),
    ]),
    # BADVERSION when the version did match.
    "conditional set refused at the right version": (NOT, [
        CREATED_A,
        op(1, SetData("/a", b"1", 0), 2, 3, BADVERSION),
    ]),
    # A node deleted and created again starts at version 0 with the new data.
    "recreate resets the version": (LIN, [
        CREATED_A,
        op(1, SetData("/a", b"1"), 2, 3, Ok(1)),
        op(1, Delete("/a", 1), 4, 5, Ok(None)),
        op(1, Create("/a", b"2"), 6, 7, Ok("/a")),
        op(2, GetData("/a"), 8, 9, Ok((b"2", 0))),
    ]),
    # create under a parent that does not exist must fail NONODE.
    "create without parent ok": (NOT, [
        op(1, Create("/nope/a"), 0, 1, Ok("/nope/a")),
    ]),
}


@pytest.mark.parametrize("name", sorted(HAND_WRITTEN))
def test_hand_written(name: str) -> None:
    expected, history = HAND_WRITTEN[name]
    assert verdict(history, APP) is expected, check(history, APP).explain()


# ---------------------------------------------------------------- partitions and reports


def test_unrelated_znodes_are_checked_apart() -> None:
    history = [op(1, Create("/a"), 0, 1, Ok("/a")), op(2, Create("/b"), 0, 1, Ok("/b")),
               op(1, SetData("/a", b"1"), 2, 3, Ok(1)), op(2, GetData("/b"), 2, 3, Ok((b"", 0)))]
    assert check(history).partitions == 2


def test_listing_joins_the_children_of_the_listed_node() -> None:
    history = [op(1, Create("/app/a"), 0, 1, Ok("/app/a")),
               op(2, Create("/app/b"), 0, 1, Ok("/app/b"))]
    assert check(history, APP).partitions == 2
    listed = [*history, op(3, GetChildren("/app"), 2, 3, Ok(("a", "b")))]
    assert check(listed, APP).partitions == 1


def test_parent_data_does_not_join_children() -> None:
    # set_data on /app leaves its existence constant: the creates below it stay apart.
    history = [op(1, SetData("/app", b"x"), 0, 1, Ok(1)),
               op(2, Create("/app/a"), 0, 1, Ok("/app/a")),
               op(3, Create("/app/b"), 0, 1, Ok("/app/b"))]
    assert check(history, APP).partitions == 3


def test_unknown_reads_are_ignored() -> None:
    history = [CREATED_A, op(1, GetData("/a"), 2), op(1, GetData("/b"), 3)]
    assert check(history).partitions == 1


def test_failure_report_names_the_culprit_deterministically() -> None:
    _, history = HAND_WRITTEN["stale read after acknowledged write"]
    noise = [op(9, Create(f"/n{i}"), 0, 1, Ok(f"/n{i}")) for i in range(5)]
    result = check(noise + history)
    assert result.verdict is NOT
    assert result.report.longest_prefix == (5, 6)
    assert result.report.next_candidates == ((7, "ok (b'1', 1)"),)
    assert result.report.objects == ("/a exists", "/a content")
    text = result.explain()
    assert text == check(noise + history).explain()
    assert "get_data(/a) -> ok (b'0', 0); model: ok (b'1', 1)" in text


def test_budget_exhausted_is_unknown_not_a_failure() -> None:
    # Six concurrent creates and a listing of all six: 5 steps cannot place them all.
    writes = [op(i, Create(f"/a{i}"), 0, 10, Ok(f"/a{i}")) for i in range(6)]
    reads = [op(9, GetChildren("/"), 11, 12, Ok(tuple(f"a{i}" for i in range(6))))]
    result = check(writes + reads, search_steps_max=5)
    assert result.verdict is Verdict.UNKNOWN
    assert result.report is not None and "exhausted" in result.explain()
    assert check(writes + reads).verdict is LIN


def test_a_failure_beats_an_exhausted_partition() -> None:
    hard = [op(i, Create(f"/a{i}"), 0, 10, Ok(f"/a{i}")) for i in range(6)]
    hard.append(op(9, GetChildren("/"), 11, 12, Ok(("z", *(f"a{i}" for i in range(6))))))
    initial = {"/": Znode(), "/z": Znode()}
    bad = [op(8, Exists("/z"), 0, 1, Ok(None))]  # /z was there all along
    assert check(hard, initial, search_steps_max=5).verdict is Verdict.UNKNOWN
    assert check(hard + bad, initial, search_steps_max=5).verdict is NOT


@pytest.mark.parametrize("history", [
    [op(1, GetData("/a"), 3, 2, NONODE)],
    [op(1, GetData("/a"), 1, 2)],
    [op(1, GetData("a"), 1, 2, NONODE)],
    [op(1, Create("/"), 1, 2, NODEEXISTS)],
    [op(1, Multi((GetData("/a"),)), 1, 2, NONODE)],
    [op(1, Check("/a", 0), 1, 2, NONODE)],
])
def test_misuse_is_a_value_error(history: list[Operation]) -> None:
    with pytest.raises(ValueError):
        check(history)


def test_recorder_leaves_unfinished_calls_unknown() -> None:
    recorder = HistoryRecorder()
    first = recorder.invoke(1, Create("/a"), 0)
    recorder.invoke(2, SetData("/a", b"x"), 1)
    recorder.complete(first, Ok("/a"), 2)
    ops = recorder.operations()
    assert [o.outcome_known for o in ops] == [True, False]
    assert check(ops).verdict is LIN


# ---------------------------------------------------------------- generated histories


class ReferenceTree:
    """An independent sequential ZooKeeper tree: path -> [data, version, creates under it]."""

    def __init__(self) -> None:
        self.nodes: dict[str, list] = {"/": [b"", 0, 0]}

    def children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted(p[len(prefix):] for p in self.nodes
                      if p.startswith(prefix) and "/" not in p[len(prefix):] and p != "/")

    def run(self, call: Call) -> Result:
        if isinstance(call, Multi):
            saved = copy.deepcopy(self.nodes)
            values = []
            for sub in call.ops:
                result = self.run(sub)
                if isinstance(result, Err):
                    self.nodes = saved
                    return result
                values.append(result.value)
            return Ok(tuple(values))
        return getattr(self, "run_" + type(call).__name__)(call)

    def _parent(self, path: str) -> str:
        return path.rsplit("/", 1)[0] or "/"

    def _make(self, path: str, data: bytes | None) -> Result:
        parent = self.nodes.get(self._parent(path))
        if parent is None:
            return NONODE
        if path in self.nodes:
            return NODEEXISTS
        parent[2] += 1
        self.nodes[path] = [data, 0, 0]
        return Ok(path)

    def run_Create(self, call: Create) -> Result:
        return self._make(call.path, call.data)

    def run_CreateSequential(self, call: CreateSequential) -> Result:
        parent = self.nodes.get(self._parent(call.prefix))
        if parent is None:
            return NONODE
        return self._make(f"{call.prefix}{parent[2]:010d}", call.data)

    def _versioned(self, path: str, version: int) -> Result | None:
        if path not in self.nodes:
            return NONODE
        if version != -1 and version != self.nodes[path][1]:
            return BADVERSION
        return None

    def run_Delete(self, call: Delete) -> Result:
        refused = self._versioned(call.path, call.version)
        if refused is None and self.children(call.path):
            refused = NOTEMPTY
        if refused is not None:
            return refused
        del self.nodes[call.path]
        return Ok(None)

    def run_SetData(self, call: SetData) -> Result:
        refused = self._versioned(call.path, call.version)
        if refused is not None:
            return refused
        node = self.nodes[call.path]
        node[0], node[1] = call.data, node[1] + 1
        return Ok(node[1])

    def run_Check(self, call: Check) -> Result:
        return self._versioned(call.path, call.version) or Ok(None)

    def run_GetData(self, call: GetData) -> Result:
        node = self.nodes.get(call.path)
        return NONODE if node is None else Ok((node[0], node[1]))

    def run_Exists(self, call: Exists) -> Result:
        node = self.nodes.get(call.path)
        return Ok(None if node is None else node[1])

    def run_GetChildren(self, call: GetChildren) -> Result:
        return NONODE if call.path not in self.nodes else Ok(tuple(self.children(call.path)))


Choose = Callable[[int], int]  # choose(n) -> an index in range(n)


def random_call(choose: Choose, paths: list[str], prefixes: list[str], listed: list[str],
                multi_across_paths: bool) -> Call:
    """A random call on one path; multis span several paths only if multi_across_paths, and
    sequential creates then come only under the path chosen."""
    path = paths[choose(len(paths))]
    pool = [GetData(path), Exists(path), GetChildren((listed or [path])[choose(len(listed or [path]))])]
    near = prefixes if multi_across_paths else [p for p in prefixes if p.startswith(path + "/")]
    pool += [w for w in random_writes(choose, path, near) if not isinstance(w, Check)]
    if choose(8) == 0:
        picked = (random_writes(choose, paths[choose(len(paths))], prefixes)
                  if multi_across_paths else random_writes(choose, path, near)
                  for _ in range(1 + choose(3)))
        return Multi(tuple(writes[choose(len(writes))] for writes in picked))
    return pool[choose(len(pool))]


def random_writes(choose: Choose, path: str, prefixes: list[str]) -> list[Call]:
    data = (b"1", b"2", b"3")[choose(3)]
    version = (-1, 0, 1, 2)[choose(4)]
    writes = [Create(path, data), Delete(path, version), SetData(path, data, version),
              Check(path, version)]
    return writes + [CreateSequential(prefix, data) for prefix in prefixes]


def simulate(choose: Choose, clients: int, ops_max: int, paths: list[str], prefixes: list[str],
             listed: list[str] = (), lost_one_in: int = 10,
             multi_across_paths: bool = True) -> list[Operation]:
    """Run calls against ReferenceTree with random windows: each call takes effect at some
    tick between its invocation and its completion; some are lost (never complete), and a
    lost call may still take effect later, or never. A final get_data of a random path is
    answered once everything else has settled."""
    tree, recorder, now = ReferenceTree(), HistoryRecorder(), 0
    idle = list(range(clients))
    waiting: list[tuple[int, int, Call]] = []  # (op id, client, call): sent, no effect yet
    applied: list[tuple[int, int, Result]] = []  # (op id, client, result): effect, no reply
    lost: list[Call] = []
    sent = 0
    while sent < ops_max - 1 or waiting or applied:
        now += 1
        actions = (["send"] if idle and sent < ops_max - 1 else []) + (["apply"] if waiting else [])
        actions += (["reply"] if applied else []) + (["late"] if lost else [])
        action = actions[choose(len(actions))]
        if action == "send":
            client = idle.pop(choose(len(idle)))
            call = random_call(choose, paths, prefixes, list(listed), multi_across_paths)
            waiting.append((recorder.invoke(client, call, now), client, call))
            sent += 1
        elif action == "apply":
            op_id, client, call = waiting.pop(choose(len(waiting)))
            if choose(lost_one_in) == 0:
                lost.append(call)  # the client gives up before the call has any effect
                idle.append(client)
            else:
                applied.append((op_id, client, tree.run(call)))
        elif action == "reply":
            op_id, client, result = applied.pop(choose(len(applied)))
            if choose(lost_one_in) != 0:
                recorder.complete(op_id, result, now)
            idle.append(client)
        else:
            call = lost.pop(choose(len(lost)))
            if choose(2) == 0:
                tree.run(call)  # the lost request reaches the leader after all
    final = GetData(paths[choose(len(paths))])
    recorder.complete(recorder.invoke(clients, final, now + 1), tree.run(final), now + 2)
    return list(recorder.operations())


IMPOSSIBLE_DATA = b"never written"
IMPOSSIBLE_VERSION = 10**6
IMPOSSIBLE_CHILD = "never-created"


def corrupt(read: Operation) -> Operation:
    """The same read answering something no order of any calls could produce."""
    value: object
    if isinstance(read.call, GetData):
        value = (IMPOSSIBLE_DATA, 0)
    elif isinstance(read.call, Exists):
        value = IMPOSSIBLE_VERSION
    else:
        value = (IMPOSSIBLE_CHILD,)
    return replace(read, result=Ok(value))


SMALL_PATHS = ["/a", "/b", "/a/x", "/a/y", "/a/s-0000000000", "/a/s-0000000001"]
SMALL_PREFIXES = ["/a/s-", "/s-"]


def hypothesis_choose(data: st.DataObject) -> Choose:
    return lambda n: data.draw(st.integers(0, n - 1)) if n > 1 else 0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_generated_histories_are_linearizable_until_a_read_is_corrupted(data: st.DataObject) -> None:
    choose = hypothesis_choose(data)
    history = simulate(choose, 1 + choose(4), 1 + choose(30), SMALL_PATHS, SMALL_PREFIXES,
                       SMALL_PATHS[:1] + ["/"])
    result = check(history)
    assert result.verdict is LIN, result.explain()
    reads = [i for i, o in enumerate(history)
             if isinstance(o.call, GetData | Exists | GetChildren) and o.outcome_known]
    culprit = reads[choose(len(reads))]
    corrupted = [*history[:culprit], corrupt(history[culprit]), *history[culprit + 1:]]
    bad = check(corrupted)
    assert bad.verdict is NOT, bad.explain()
    assert culprit in bad.report.operations


# ---------------------------------------------------------------- scale


def test_two_thousand_ops_over_twenty_znodes_within_budget() -> None:
    rng = random.Random(20)
    paths = [f"/z{i:02d}" for i in range(20)]
    history = simulate(rng.randrange, 8, 2000, paths, ["/z00/seq-"], lost_one_in=50,
                       multi_across_paths=False)
    assert len(history) == 2000
    assert sum(not o.outcome_known for o in history) > 0
    result = check(history)
    assert result.verdict is LIN, result.explain()
    assert result.partitions > 1


def test_two_thousand_ops_in_one_partition_within_budget() -> None:
    # get_children("/"), sequential creates under "/" and multis across znodes join
    # everything into one partition.
    rng = random.Random(21)
    paths = [f"/z{i:02d}" for i in range(20)]
    history = simulate(rng.randrange, 8, 2000, paths, ["/seq-"], ["/"], lost_one_in=200)
    result = check(history)
    assert result.verdict is LIN, result.explain()
    assert result.partitions == 1


# ---------------------------------------------------------------- against brute force


def brute_force_linearizable(history: list[Operation]) -> bool:
    """Every order that respects real time, each unknown call in or out: no reductions."""
    completed = [i for i, o in enumerate(history) if o.outcome_known]

    def may_come_next(i: int, done: set[int]) -> bool:
        return all(j in done or history[j].completed_at is None
                   or history[j].completed_at >= history[i].invoked_at for j in range(len(history)))

    def search(tree: ReferenceTree, done: set[int]) -> bool:
        if all(i in done for i in completed):
            return True
        for i, o in enumerate(history):
            if i in done or not may_come_next(i, done):
                continue
            after = copy.deepcopy(tree)
            result = after.run(o.call)
            if (o.result is None or result == listed_sorted(o)) and search(after, done | {i}):
                return True
        return False

    return search(ReferenceTree(), set())


def listed_sorted(o: Operation) -> Result:
    """A get_children reply's names sorted, as the reference tree gives them."""
    value = o.result.value if isinstance(o.result, Ok) else None
    if isinstance(o.call, GetChildren) and isinstance(value, tuple) \
            and all(isinstance(name, str) for name in value):
        return Ok(tuple(sorted(value)))
    return o.result


WRONG_RESULTS = [NONODE, NODEEXISTS, BADVERSION, NOTEMPTY, Ok(None), Ok(0), Ok(1), Ok(2),
                 Ok((b"1", 0)), Ok((b"2", 1)), Ok(("x",)), Ok(()), Ok("/a/s-0000000001")]
TINY_PATHS = ["/a", "/a/x", "/b"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_agrees_with_brute_force_on_small_histories(data: st.DataObject) -> None:
    choose = hypothesis_choose(data)
    history = simulate(choose, 1 + choose(3), 2 + choose(5), TINY_PATHS, ["/a/s-"],
                       ["/a", "/"], lost_one_in=4)
    for _ in range(choose(3)):
        i = choose(len(history))
        if history[i].outcome_known:
            history[i] = replace(history[i], result=WRONG_RESULTS[choose(len(WRONG_RESULTS))])
    expected = LIN if brute_force_linearizable(history) else NOT
    assert check(history).verdict is expected, check(history).explain()
