"""What a nemesis run must show once its faults heal. Each check returns failure messages
(empty: passed), so one run reports everything that went wrong, not only the first.

The history checks are pure (fabricated histories test them: test_checks.py); the replica
checks read the servers, each alone, after a sync.
"""

from __future__ import annotations

import json
import socket
import urllib.request
from collections import defaultdict
from collections.abc import Iterable, Sequence

from zkcompat.sim import history as h
from zkcompat.sim.checks import initial_tree
from zkcompat.sim.linearizability import check

from .workload import FencedWrite, Holding, Seen

SEARCH_STEPS_MAX = 2_000_000
FAILURES_SHOWN_MAX = 5
MNTR_TIMEOUT_S = 5.0


def check_linearizable(operations: Sequence[h.Operation], setup_paths: Iterable[str]) -> list[str]:
    """The simulator's checker: CAS registers per key, sequential creates, sync-then-read as
    linearizable reads. A search that runs out of steps fails too: no verdict is no pass."""
    result = check(operations, initial_tree(setup_paths), search_steps_max=SEARCH_STEPS_MAX)
    if result.linearizable:
        return []
    return [f"history of {len(operations)} operations: {result.explain()}"]


def check_sequential_unique(operations: Sequence[h.Operation]) -> list[str]:
    """No two acknowledged sequential creates were given the same name."""
    names: dict[str, h.Operation] = {}
    out = []
    for op in operations:
        if isinstance(op.call, h.CreateSequential) and isinstance(op.result, h.Ok):
            first = names.setdefault(op.result.value, op)
            if first is not op:
                out.append(f"sequential name {op.result.value} given twice: "
                           f"{h.describe(first)} and {h.describe(op)}")
    return out[:FAILURES_SHOWN_MAX]


def check_client_order(operations: Sequence[h.Operation]) -> list[str]:
    """Each client sends one request at a time: its requests are invoked in order, and
    each known outcome came before its next request was sent."""
    last: dict[int, h.Operation] = {}
    out = []
    for op in operations:
        prev = last.get(op.client)
        if prev is not None:
            if op.invoked_at < prev.invoked_at:
                out.append(f"client {op.client} recorded out of order: {h.describe(prev)} "
                           f"then {h.describe(op)}")
            elif prev.completed_at is not None and op.invoked_at < prev.completed_at:
                out.append(f"client {op.client} overlapped its own requests: "
                           f"{h.describe(prev)} then {h.describe(op)}")
        last[op.client] = op
    return out[:FAILURES_SHOWN_MAX]


def check_session_order(seen: Sequence[Seen]) -> list[str]:
    """Within one session a znode never goes back in time: every reply that shows its Stat
    has an mzxid at least the last one this session saw of it, its own writes included
    (a session reads its own writes, and never older data than it has seen)."""
    return [describe_going_back(prev, s)
            for prev, s in session_order_violations(seen)][:FAILURES_SHOWN_MAX]


def session_order_violations(seen: Sequence[Seen]) -> list[tuple[Seen, Seen]]:
    """(what the session saw last, the reply older than it), for check_session_order."""
    latest: dict[tuple[int, int, str], Seen] = {}
    out = []
    for s in sorted(seen, key=lambda s: (s.client, s.index)):
        if s.mzxid is None:
            continue  # deleted since: a later create has a higher mzxid, checked then
        key = (s.client, s.session_id, s.path)
        prev = latest.get(key)
        if prev is not None and s.mzxid < prev.mzxid:
            out.append((prev, s))
        if prev is None or s.mzxid >= prev.mzxid:
            latest[key] = s
    return out


def describe_going_back(prev: Seen, s: Seen) -> str:
    what = "its own write" if prev.own_write else "a read"
    served = f" from {','.join(sorted(s.served))}" if s.served else ""
    return (f"client {s.client} session 0x{s.session_id:x}: {s.path} at mzxid "
            f"0x{s.mzxid:x} (request {s.index}{served}) after {what} showed "
            f"0x{prev.mzxid:x} (request {prev.index})")


def check_acked_present(operations: Sequence[h.Operation],
                        children: dict[int, Iterable[str]], queue: str) -> list[str]:
    """Every acknowledged sequential create is on every server (nothing deletes them)."""
    acked = {op.result.value for op in operations
             if isinstance(op.call, h.CreateSequential) and isinstance(op.result, h.Ok)}
    out = []
    for sid, names in sorted(children.items()):
        held = {f"{queue}/{name}" for name in names}
        lost = sorted(acked - held)
        if lost:
            out.append(f"server.{sid} lost {len(lost)} of {len(acked)} acknowledged "
                       f"sequential creates: {lost[:FAILURES_SHOWN_MAX]}")
    return out


def check_lock_exclusive(holdings: Sequence[Holding]) -> list[str]:
    """No two clients held the lock at once, and each acquisition's token is larger than
    every earlier one's. A holding runs from acquire() returning to release() being called
    (or to the first connection trouble): an acquire with no answer gives none, a release
    with no answer ends it all the same (after it the client does nothing under the lock)."""
    out = []
    latest: Holding | None = None  # the one that ended last among those started so far
    for held in sorted(holdings, key=lambda x: x.acquired):
        if latest is not None:
            if held.acquired < latest.ended:
                out.append(f"client {held.client} acquired the lock (token 0x{held.token:x}) "
                           f"{(latest.ended - held.acquired) / 1e6:.1f} ms before client "
                           f"{latest.client} (token 0x{latest.token:x}) let it go")
            if held.token <= latest.token:
                out.append(f"client {held.client}'s token 0x{held.token:x} is not above the "
                           f"earlier holder client {latest.client}'s 0x{latest.token:x}")
        if latest is None or held.ended >= latest.ended:
            latest = held
    return out[:FAILURES_SHOWN_MAX]


def check_fenced_writes(writes: Sequence[FencedWrite], final_token: int | None) -> list[str]:
    """Fencing works: an acknowledged fenced write never follows (in real time) one with a
    larger token, and what the fenced znode holds after the heal is no older than the
    last acknowledged token."""
    acked = sorted((w for w in writes if w.ok), key=lambda w: w.invoked)
    out = []
    for b in acked:
        before = [a for a in acked if a.completed < b.invoked and a.token > b.token]
        if before:
            a = max(before, key=lambda w: w.token)
            out.append(f"client {b.client}'s fenced write of token 0x{b.token:x} was "
                       f"acknowledged after client {a.client}'s of 0x{a.token:x}")
    newest = max((w.token for w in acked), default=None)
    if newest is not None and (final_token is None or final_token < newest):
        shown = "nothing" if final_token is None else f"0x{final_token:x}"
        out.append(f"the fenced znode holds {shown} after the heal, older than the "
                   f"acknowledged token 0x{newest:x}")
    return out[:FAILURES_SHOWN_MAX]


def unavailability_s(operations: Sequence[h.Operation]) -> float:
    """The longest time, in seconds, between two successive known outcomes of any client."""
    done = sorted(op.completed_at for op in operations if op.completed_at is not None)
    gaps = [b - a for a, b in zip(done, done[1:], strict=False)]
    return max(gaps, default=0) / 1e9


def summary(operations: Sequence[h.Operation]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for op in operations:
        counts["ops"] += 1
        if op.result is None:
            counts["unknown"] += 1
        elif isinstance(op.result, h.Ok):
            counts["ok"] += 1
        else:
            counts["err"] += 1
    return dict(counts)


def mntr(host: str, port: int) -> dict[str, str]:
    with socket.create_connection((host, port), timeout=MNTR_TIMEOUT_S) as s:
        s.sendall(b"mntr")
        out = b"".join(iter(lambda: s.recv(65536), b""))
    pairs = (line.split("\t", 1) for line in out.decode().splitlines() if "\t" in line)
    return dict(pairs)


def digest_log(host: str, admin_port: int) -> list[dict]:
    """The AdminServer's `hash`: the tree digest at every 128th zxid the server applied."""
    url = f"http://{host}:{admin_port}/commands/hash"
    with urllib.request.urlopen(url, timeout=MNTR_TIMEOUT_S) as reply:
        return json.loads(reply.read())["digests"]


def check_digests(stats: dict[int, dict[str, str]],
                  logs: dict[int, list[dict]]) -> list[str]:
    """No learner's tree digest ever differed from its leader's after a txn
    (zk_digest_mismatches_count), and the servers' digest logs agree at every zxid they
    share."""
    out = []
    for sid, m in sorted(stats.items()):
        if m.get("zk_digest_mismatches_count", "0") != "0":
            out.append(f"server.{sid}: zk_digest_mismatches_count "
                       f"{m['zk_digest_mismatches_count']}")
    by_zxid: dict[int, dict[int, int]] = defaultdict(dict)
    for sid, log in logs.items():
        for entry in log:
            by_zxid[entry["zxid"]][sid] = entry["digest"]
    for zxid, digests in sorted(by_zxid.items()):
        if len(set(digests.values())) > 1:
            out.append(f"digests differ at zxid 0x{zxid:x}: {digests}")
    return out[:FAILURES_SHOWN_MAX]
