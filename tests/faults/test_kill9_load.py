"""kill -9 under load: every acknowledged write survives, exactly once.

Several kazoo clients (threads) write steadily: creates of unique paths, setData on their
own nodes, sequential creates with unique data. Each records what the server acknowledged
(data and the returned version) and what was in flight when the server died (unknown
outcome). The server is SIGKILLed at a random moment, restarted on the same dataDir, and
every node is checked: acknowledged state exact; an unacknowledged write either applied
once or not at all; no node nobody wrote; no sequential create's data twice.
ZKCOMPAT_FAULT_CYCLES (default 20) and ZKCOMPAT_FAULT_SEED control the run.
"""

from __future__ import annotations

import os
import random
import threading
import time
from dataclasses import dataclass, field

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import (
    ConnectionClosedError,
    ConnectionLoss,
    NoNodeError,
    SessionExpiredError,
)

from .harness import Node, fault_seed, reproduce, wait_for

CYCLES = int(os.environ.get("ZKCOMPAT_FAULT_CYCLES", "20"))
WRITERS = 4
# uniform, after the first ack: the kill lands anywhere in a write, a sync or a snapshot
LOAD_BEFORE_KILL_S = (0.0, 0.8)
SNAP_COUNT = 300  # fuzzy snapshots every 150-300 txns, so kills land inside them too
JOIN_TIMEOUT_S = 10.0
FIRST_ACK_TIMEOUT_S = 15.0
SAMPLE_OLD_PATHS = 300  # older paths re-checked each cycle (all of them at the end)
ABSENT = None  # the state of a node that does not exist
IN_FLIGHT_ERRORS = (ConnectionLoss, ConnectionClosedError, SessionExpiredError)
SEQ_PARENT = "/load/seq"


@dataclass
class Ledger:
    """Per path, the states the server may legitimately hold: one after an acknowledged
    write; two (before, after) while a write's outcome is unknown."""

    states: dict[str, set] = field(default_factory=dict)
    seq_acked: dict[bytes, str] = field(default_factory=dict)  # data -> path the server gave
    seq_unknown: set[bytes] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    acked_writes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def acked(self, path: str, state) -> None:
        with self.lock:
            self.states[path] = {state}
            self.acked_writes += 1

    def unknown(self, path: str, before, after) -> None:
        with self.lock:
            self.states[path] = {before, after}

    def error(self, message: str) -> None:
        with self.lock:
            self.errors.append(message)


class Writer(threading.Thread):
    """One client, one request in flight; stops at the first request whose outcome it
    cannot know (the server died under it)."""

    def __init__(self, connect_string: str, ledger: Ledger, cycle: int, index: int,
                 rng: random.Random, stop: threading.Event) -> None:
        super().__init__(name=f"writer-{cycle}-{index}", daemon=True)
        self.client = KazooClient(hosts=connect_string, timeout=10)
        self.client.start(timeout=10)
        self.ledger = ledger
        self.prefix = f"/load/c{cycle:03d}-w{index}"
        self.rng = rng
        self.stop_event = stop
        self.mine: dict[str, tuple[bytes, int]] = {}  # paths of this writer with known state
        self.n = 0

    def _data(self) -> bytes:
        self.n += 1
        return f"{self.prefix}#{self.n}:".encode() + self.rng.randbytes(self.rng.randrange(0, 120))

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                roll = self.rng.random()
                if roll < 0.5 or not self.mine:
                    self._create()
                elif roll < 0.85:
                    self._set()
                else:
                    self._create_sequential()
        except IN_FLIGHT_ERRORS:
            pass  # recorded as unknown by the op that raised
        except Exception as e:  # noqa: BLE001 - any other failure is a server bug
            self.ledger.error(f"{self.name}: {type(e).__name__}: {e}")

    def _create(self) -> None:
        path = f"{self.prefix}-{self.n:05d}"
        data = self._data()
        try:
            self.client.create(path, data)
        except IN_FLIGHT_ERRORS:
            self.ledger.unknown(path, ABSENT, (data, 0))
            raise
        self.ledger.acked(path, (data, 0))
        self.mine[path] = (data, 0)

    def _set(self) -> None:
        path = self.rng.choice(sorted(self.mine))
        before = self.mine[path]
        data = self._data()
        try:
            stat = self.client.set(path, data)
        except IN_FLIGHT_ERRORS:
            self.ledger.unknown(path, before, (data, before[1] + 1))
            del self.mine[path]
            raise
        if stat.version != before[1] + 1:
            self.ledger.error(f"setData {path}: version {stat.version}, expected {before[1] + 1}")
        self.ledger.acked(path, (data, stat.version))
        self.mine[path] = (data, stat.version)

    def _create_sequential(self) -> None:
        data = self._data()
        try:
            path = self.client.create(f"{SEQ_PARENT}/s-", data, sequence=True)
        except IN_FLIGHT_ERRORS:
            with self.ledger.lock:
                self.ledger.seq_unknown.add(data)
            raise
        with self.ledger.lock:
            self.ledger.seq_acked[data] = path
            self.ledger.acked_writes += 1

    def close(self) -> None:
        try:
            self.client.stop()  # fails whatever is still queued; the server is gone
        finally:
            self.client.close()


def read_many(client: KazooClient, paths: list[str]) -> dict[str, object]:
    """path -> (data, version) or ABSENT, with pipelined reads."""
    futures = [(p, client.get_async(p)) for p in paths]
    out = {}
    for path, fut in futures:
        try:
            data, stat = fut.get(timeout=30)
            out[path] = (data, stat.version)
        except NoNodeError:
            out[path] = ABSENT
    return out


def verify(client: KazooClient, ledger: Ledger, paths: list[str], check_seq: bool) -> list[str]:
    problems = []
    seen = read_many(client, paths)
    for path in paths:
        allowed = ledger.states[path]
        got = seen[path]
        if got not in allowed:
            problems.append(f"{path}: server has {_show(got)}, allowed {[_show(s) for s in allowed]}")
        else:
            ledger.states[path] = {got}  # settled: later cycles expect exactly this
    children = client.get_children("/load")
    phantom = [c for c in children if c != "seq" and f"/load/{c}" not in ledger.states]
    if phantom:
        problems.append(f"nodes nobody created: {sorted(phantom)[:10]}")
    if check_seq:
        problems += verify_sequential(client, ledger)
    return problems


def verify_sequential(client: KazooClient, ledger: Ledger) -> list[str]:
    problems = []
    names = client.get_children(SEQ_PARENT)
    by_data: dict[bytes, list[str]] = {}
    for path, got in read_many(client, [f"{SEQ_PARENT}/{n}" for n in names]).items():
        if got is not ABSENT:
            by_data.setdefault(got[0], []).append(path)
    for data, where in by_data.items():
        if len(where) > 1:
            problems.append(f"sequential create {data[:30]!r} applied {len(where)} times: {where}")
        if data not in ledger.seq_acked and data not in ledger.seq_unknown:
            problems.append(f"sequential node {where} holds data nobody wrote")
    for data, path in ledger.seq_acked.items():
        if by_data.get(data) != [path]:
            problems.append(f"acknowledged sequential create {path} ({data[:30]!r}) found at "
                            f"{by_data.get(data)}")
    for data in list(ledger.seq_unknown):
        if data in by_data:  # it was applied: from now on it must stay
            ledger.seq_acked[data] = by_data[data][0]
        ledger.seq_unknown.discard(data)
    return problems


def _show(state) -> str:
    return "absent" if state is ABSENT else f"(data {state[0][:24]!r}..., version {state[1]})"


@pytest.mark.timeout(170)
def test_acknowledged_writes_survive_kill9(tmp_path):
    seed = fault_seed()
    rng = random.Random(seed)
    node = Node(tmp_path / "node", snapCount=SNAP_COUNT)
    node.start()
    ledger = Ledger()
    setup = KazooClient(hosts=node.connect_string, timeout=10)
    setup.start(timeout=10)
    setup.create(SEQ_PARENT, b"", makepath=True)
    setup.stop()
    setup.close()
    kills = 0
    try:
        for cycle in range(CYCLES):
            stop = threading.Event()
            writers = [Writer(node.connect_string, ledger, cycle, i,
                              random.Random(rng.getrandbits(64)), stop) for i in range(WRITERS)]
            before = ledger.acked_writes
            for w in writers:
                w.start()
            # The kill lands a random time after the load is really flowing (a busy box
            # can take a while to serve the first write after a restart).
            wait_for(lambda before=before: ledger.acked_writes > before, FIRST_ACK_TIMEOUT_S,
                     interval_s=0.01, what=f"cycle {cycle}: a first acknowledged write; "
                     f"{reproduce(seed)}")
            time.sleep(rng.uniform(*LOAD_BEFORE_KILL_S))
            node.kill()
            kills += 1
            stop.set()
            for w in writers:
                w.close()
            for w in writers:
                w.join(JOIN_TIMEOUT_S)
                assert not w.is_alive(), f"{w.name} hung after the kill; {reproduce(seed)}"
            assert ledger.errors == [], f"cycle {cycle}: {ledger.errors}; {reproduce(seed)}"

            node.start()
            checker = KazooClient(hosts=node.connect_string, timeout=10)
            checker.start(timeout=10)
            try:
                prefix = f"/load/c{cycle:03d}-"
                current = [p for p in ledger.states if p.startswith(prefix)]
                older = [p for p in ledger.states if not p.startswith(prefix)]
                last = cycle == CYCLES - 1
                sample = older if last else rng.sample(older, min(len(older), SAMPLE_OLD_PATHS))
                problems = verify(checker, ledger, current + sample, check_seq=True)
            finally:
                checker.stop()
                checker.close()
            assert problems == [], (f"after kill {kills} (cycle {cycle}):\n"
                                    + "\n".join(problems[:30])
                                    + f"\n{reproduce(seed)}\n--- server log ---\n"
                                    + node.log_tail())
        # The run did what it claims: many kills, many acknowledged writes, snapshots taken.
        assert kills == CYCLES
        assert ledger.acked_writes > CYCLES * 20, ledger.acked_writes
        assert "event=snapshot_written" in node.log_text(), "no snapshot was ever taken"
    finally:
        node.stop()
