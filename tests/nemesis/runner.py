"""One nemesis round: a 3-server ensemble on 127.0.0.1-3, clients on every server recording
a history, one partition case played against it, then the faults healed and every check
run. The pytest cases (test_partitions.py) and `python -m tests.nemesis` both call
run_round(); a round keeps its history and fault schedule beside the servers' logs.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kazoo.exceptions import NodeExistsError, NoNodeError

from tests.ensemble.harness import Ensemble, check_trees_agree, close_client
from zkcompat.jute.constants import Code
from zkcompat.sim import history as h

from . import checks, net
from .workload import Layout, Recorder, Worker, start_client

SITE_DIR = Path(__file__).resolve().parent / "site"  # sitecustomize.py: the source shim
ENV_FLAG = "ZKCOMPAT_NEMESIS_BIND_SOURCE"  # switches it on (site/sitecustomize.py)
SIZE = 3
# tickTime 250 ms: a follower gives up on a silent leader after syncLimit=4 ticks (1 s), a
# leader on a silent quorum as soon; sessions of 5 s are within 2..20 ticks. quorumSync
# makes sync-then-read a linearizable read (docs/ensembles.md).
SETTINGS = {"tickTime": 250, "initLimit": 10, "syncLimit": 4, "quorumSync": "true"}
WARMUP_S = 2.0
RECOVER_S = 3.0  # load after the heal, once one leader serves with every follower
ELECTION_TIMEOUT_S = 40.0
FLAP_MIN_S, FLAP_MAX_S = 1.0, 2.0
WORKER_JOIN_S = 30.0
FINAL_READ_CLIENT = 1000  # + sid: the checker's client ids for the reads after the heal
TERM_ENDED = "event=term_ended"  # peer/quorum_peer.py: a server leaves its role
START_ATTEMPTS = 2
PORT_TAKEN = "is already in use by another process"  # cli/startup.py's words
SOURCE_LINE = "nemesis: connections to peers leave from {host}"


@dataclass
class Outcome:
    case: str
    seed: int
    operations: list[h.Operation]
    schedule: list[str]
    failures: list[str]
    counts: dict[str, int]
    unknown_errors: dict[str, int]
    unavailable_s: float
    duration_s: float
    directory: Path
    replay: str = ""

    def line(self) -> str:
        c = self.counts
        return (f"{self.case} seed={self.seed} ops={c.get('ops', 0)} ok={c.get('ok', 0)} "
                f"err={c.get('err', 0)} unknown={c.get('unknown', 0)} "
                f"longest_unavailable={self.unavailable_s:.1f}s "
                f"took={self.duration_s:.1f}s {'PASS' if not self.failures else 'FAIL'}")

    def report(self) -> str:
        tail = [h.describe(op) for op in self.operations[-30:]]
        return "\n".join([self.line(), *self.failures, "schedule:", *self.schedule,
                          "last operations:", *tail, f"kept in {self.directory}",
                          f"replay: {self.replay}"])


# -- the ensemble -------------------------------------------------------------------------


@contextlib.contextmanager
def nemesis_env() -> Iterator[None]:
    """The environment the ensemble command passes on to its servers: the source-address
    shim on PYTHONPATH, switched on. Restored afterwards."""
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", ENV_FLAG)}
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(SITE_DIR), saved["PYTHONPATH"]) if p)
    os.environ[ENV_FLAG] = "1"
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def peers(ens: Ensemble) -> list[net.Peer]:
    return [net.Peer(m.sid, m.host, m.quorum_port, m.election_port)
            for m in ens.members().values()]


def _start(directory: Path) -> Ensemble:
    """Start the servers; once more on new ports if one was taken between the ensemble
    command choosing it and a server binding it (127.0.0.1 is shared with every other test
    on the machine; seen: another run's AdminServer on server.1's election port)."""
    for attempt in range(START_ATTEMPTS):
        ens = Ensemble(directory / f"try{attempt}" if attempt else directory)
        try:
            with nemesis_env():
                ens.start(SIZE, settings=SETTINGS, addresses="spread")
            return ens
        except AssertionError as e:
            ens.close()
            if PORT_TAKEN not in str(e) or attempt + 1 == START_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


@contextlib.contextmanager
def spread_ensemble(directory: Path) -> Iterator[tuple[Ensemble, net.Firewall]]:
    """3 servers on 127.0.0.1-3 and an open firewall table; both always torn down, the
    table first (a server cut off takes longer to stop)."""
    ens = None
    firewall = None
    try:
        ens = _start(directory)
        for sid in ens.sids:
            host = ens.member(sid).host
            ens.wait_log(sid, SOURCE_LINE.format(host=host).replace(".", r"\."), timeout_s=5)
        firewall = net.Firewall(peers(ens)).open()
        yield ens, firewall
    finally:
        try:
            if firewall is not None:
                firewall.close()
        finally:
            if ens is not None:
                ens.close()


# -- the cases ----------------------------------------------------------------------------


@dataclass
class Nemesis:
    """What a case may do: find the leader, cut links, wait. Logs every step it takes."""

    ens: Ensemble
    firewall: net.Firewall
    rng: random.Random
    fault_s: float
    started: float = field(default_factory=time.monotonic)
    log: list[str] = field(default_factory=list)
    must_lose_term: dict[int, int] = field(default_factory=dict)  # sid -> its log offset

    def expect_term_end(self, sid: int) -> None:
        """The cut must be felt: server sid ends its term (a follower that hears no
        leader, a leader that hears no quorum) after this point of its log."""
        self.must_lose_term.setdefault(sid, self.ens.log_size(sid))

    def felt(self) -> list[str]:
        return [f"server.{sid} never ended its term under the cut: the partition did nothing"
                for sid, offset in sorted(self.must_lose_term.items())
                if TERM_ENDED not in self.ens.log_since(sid, offset)]

    def note(self, text: str) -> None:
        self.log.append(f"{time.monotonic() - self.started:6.2f}s {text}")

    def leader(self) -> int:
        return self.ens.wait_one_leader(timeout_s=ELECTION_TIMEOUT_S)

    def follower(self) -> int:
        leader = self.leader()
        return self.rng.choice([s for s in self.ens.sids if s != leader])

    def cut(self, links: set[net.Link], why: str) -> None:
        self.firewall.cut(links)
        self.note(f"cut {why}: drop {sorted(links)}")

    def heal(self) -> None:
        self.firewall.heal()
        self.note("heal")

    def hold(self, seconds: float) -> None:
        time.sleep(seconds)


def minority(n: Nemesis) -> None:
    f = n.follower()
    n.expect_term_end(f)
    n.cut(net.isolate(f, n.ens.sids), f"follower server.{f} from the majority")
    n.hold(n.fault_s)


def lone_leader(n: Nemesis) -> None:
    leader = n.leader()
    n.expect_term_end(leader)
    n.cut(net.isolate(leader, n.ens.sids), f"leader server.{leader} alone")
    n.hold(n.fault_s)


def bridge(n: Nemesis) -> None:
    middle = n.follower()
    leader = n.leader()
    for sid in n.ens.sids:
        if sid not in (middle, leader):
            n.expect_term_end(sid)  # cut from its leader, only the middle server left
    n.cut(net.bridge(middle, n.ens.sids), f"bridge: only follower server.{middle} sees both")
    n.hold(n.fault_s)


def one_way(n: Nemesis) -> None:
    leader = n.leader()
    for sid in n.ens.sids:
        if sid != leader:
            n.expect_term_end(sid)  # hears nothing from its leader
    n.cut(net.one_way(leader, n.ens.sids),
          f"one-way: nothing from leader server.{leader} arrives")
    n.hold(n.fault_s)


def flapping(n: Nemesis) -> None:
    deadline = time.monotonic() + n.fault_s
    while time.monotonic() < deadline:
        sid = n.rng.choice(n.ens.sids)
        n.cut(net.isolate(sid, n.ens.sids), f"flap: server.{sid} alone")
        n.hold(n.rng.uniform(FLAP_MIN_S, FLAP_MAX_S))
        n.heal()
        n.hold(n.rng.uniform(FLAP_MIN_S, FLAP_MAX_S))


CASES: dict[str, Callable[[Nemesis], None]] = {
    "minority": minority, "lone-leader": lone_leader, "bridge": bridge, "one-way": one_way,
    "flapping": flapping,
}


# -- one round ----------------------------------------------------------------------------


def _setup(ens: Ensemble, layout: Layout) -> None:
    client = start_client(ens.connect_string)
    try:
        for path in layout.setup_paths:
            client.create(path, b"")
    except NodeExistsError as e:
        raise AssertionError(f"{e}: a round needs a root of its own") from None
    finally:
        close_client(client)


def _final_reads(ens: Ensemble, layout: Layout) -> tuple[list[h.Operation], dict[int, list[str]]]:
    """On each server alone, once healed: sync, then getData of every key (linearizable
    reads, added to the history: an acknowledged write lost shows there) and the children
    of the queue."""
    ops, children = [], {}
    for sid in ens.sids:
        client = start_client(ens.address(sid))
        try:
            client.sync(layout.root)
            for key in layout.keys:
                invoked = time.monotonic_ns()
                try:
                    data, stat = client.get(key)
                    result = h.Ok((data, stat.version))
                except NoNodeError:
                    result = h.Err(Code.NONODE)
                ops.append(h.Operation(FINAL_READ_CLIENT + sid, h.GetData(key), invoked,
                                       time.monotonic_ns(), result))
            children[sid] = client.get_children(layout.queue)
        finally:
            close_client(client)
    return ops, children


def _replica_checks(ens: Ensemble, layout: Layout) -> list[str]:
    failures = []
    try:
        check_trees_agree(ens, layout.root)
    except AssertionError as e:
        failures.append(str(e))
    members = ens.members()
    stats = {sid: checks.mntr(m.host, m.client_port) for sid, m in members.items()}
    logs = {sid: checks.digest_log(m.host, m.admin_port) for sid, m in members.items()}
    return failures + checks.check_digests(stats, logs)


def run_round(ens: Ensemble, firewall: net.Firewall, case: str, seed: int,
              fault_s: float = 6.0, clients_per_server: int = 1) -> Outcome:
    """Load, fault, heal, check. Never leaves a link cut."""
    started = time.monotonic()
    layout = Layout(f"/nemesis-{case}-{seed}")
    _setup(ens, layout)
    rng = random.Random(seed)
    recorder, stop = Recorder(), threading.Event()
    workers = [Worker(len(ens.sids) * j + sid, ens.hosts(sid), layout, recorder, stop,
                      rng.randrange(1 << 32))
               for j in range(clients_per_server) for sid in ens.sids]
    nemesis = Nemesis(ens, firewall, rng, fault_s)
    try:
        for w in workers:
            w.start()
        nemesis.hold(WARMUP_S)
        CASES[case](nemesis)
    finally:
        nemesis.heal()
        try:
            nemesis.leader()
            ens.wait_one_leader(timeout_s=ELECTION_TIMEOUT_S)
            nemesis.note("one leader, every follower serving")
            nemesis.hold(RECOVER_S)
        finally:
            stop.set()
            for w in workers:
                w.join(WORKER_JOIN_S)
                w.close()
    failures = nemesis.felt()
    failures += [f"client {w.cid} died: {w.died!r}" for w in workers if w.died is not None]
    failures += [f"client {w.cid} did not stop" for w in workers if w.is_alive()]
    operations, seen = recorder.snapshot()
    final_ops, children = _final_reads(ens, layout)
    history = operations + final_ops
    failures += checks.check_client_order(operations)
    failures += checks.check_session_order(seen)
    failures += checks.check_sequential_unique(operations)
    failures += checks.check_acked_present(operations, children, layout.queue)
    failures += _replica_checks(ens, layout)
    failures += checks.check_linearizable(history, layout.setup_paths)
    outcome = Outcome(case, seed, history, nemesis.log, failures, checks.summary(history),
                      dict(recorder.unknown_errors), checks.unavailability_s(operations),
                      time.monotonic() - started, ens.dir,
                      f"python -m tests.nemesis --case {case} --seed {seed} "
                      f"--fault-seconds {fault_s:g} --clients-per-server {clients_per_server}")
    _keep(outcome)
    return outcome


def _keep(outcome: Outcome) -> None:
    """The history and the fault schedule, beside the servers' logs."""
    directory = outcome.directory / f"round-{outcome.case}-{outcome.seed}"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "history.txt").write_text("".join(h.describe(op) + "\n"
                                                   for op in outcome.operations))
    (directory / "schedule.txt").write_text("\n".join(outcome.schedule) + "\n")
    (directory / "outcome.txt").write_text(outcome.report() + "\n")
