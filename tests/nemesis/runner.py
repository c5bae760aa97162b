"""One nemesis round: a 3- or 5-server ensemble on 127.0.0.1-N, clients on every server
recording a history, one fault case played against it (a partition, kill -9, SIGSTOP, a
wall-clock jump, a slow, failing or full disk), then every fault healed and every check
run. The pytest cases (test_cases.py) and `python -m tests.nemesis` both call run_round();
a round keeps its history and fault schedule beside the servers' logs.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kazoo.exceptions import NodeExistsError, NoNodeError

from tests.ensemble.harness import Ensemble, check_trees_agree, close_client, wait_for
from tests.faults.disks import Tmpfs
from tests.faults.faultyfs import FaultyMount
from zkcompat.jute.constants import Code
from zkcompat.peer.links import TEST_BIND_PEER_SOURCE_ENV
from zkcompat.server.clock import TEST_WALL_OFFSET_DIR_ENV
from zkcompat.sim import history as h

from . import checks, net
from .workload import Layout, LockWorker, Recorder, Worker, start_client

SIZES = (3, 5)
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
LOCK_CLIENT = 500  # + sid: the lock takers' client ids (not in the linearizability history)
TERM_ENDED = "event=term_ended"  # peer/quorum_peer.py: a server leaves its role
SLOW_SYNC = "event=slow_txn_log_sync"  # store/txnlog.py: an fsync over 1000 ms
SYNC_FAILED = "event=txn_log_sync_failed .*action=stop_server"  # peer/shell.py
NO_SPACE = "No space left on device"
CRASH = "Traceback"  # an exception nothing handled: no server may print one
SHORT_PAUSE_S = 0.5  # under syncLimit (4 ticks of 250 ms): nobody need notice
CLOCK_JUMP_MS = 10 * 60_000  # minutes, forward and back
CLOCK_SLACK_MS = 60_000  # a probe's ctime within this of the jumped clock
SLOW_FSYNC_MS = (400, 1200)  # the disk-slow case: a few hundred ms, then over the warning
DISK_STOP_TIMEOUT_S = 30.0  # from the failing disk to the server gone
DISK_SIZE = "16m"  # the disk-full case's tmpfs: LevelDB's first files fit, with room
START_ATTEMPTS = 2
PORT_TAKEN = "is already in use by another process"  # cli/startup.py's words
SOURCE_LINE = "event=test_hook_enabled hook=bind_peer_source host={host}"  # peer/links.py


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
    locks: int = 0  # holdings of the lock
    fenced: int = 0  # acknowledged fenced writes

    def line(self) -> str:
        c = self.counts
        return (f"{self.case} seed={self.seed} ops={c.get('ops', 0)} ok={c.get('ok', 0)} "
                f"err={c.get('err', 0)} unknown={c.get('unknown', 0)} "
                f"locks={self.locks} fenced={self.fenced} "
                f"longest_unavailable={self.unavailable_s:.1f}s "
                f"took={self.duration_s:.1f}s {'PASS' if not self.failures else 'FAIL'}")

    def report(self) -> str:
        tail = [h.describe(op) for op in self.operations[-30:]]
        return "\n".join([self.line(), *self.failures, "schedule:", *self.schedule,
                          "last operations:", *tail, f"kept in {self.directory}",
                          f"replay: {self.replay}"])


# -- the ensemble -------------------------------------------------------------------------


@dataclass
class Disk:
    """Server `sid`'s txn log and snapshots (dataDir/zkcompat) on a disk the nemesis
    controls: faultyfs (fails or delays fsync on command) or a small tmpfs (fills up)."""

    sid: int
    mount: FaultyMount | Tmpfs

    def fault(self, *faults: str) -> None:
        assert isinstance(self.mount, FaultyMount), self.mount
        self.mount.set(*faults)

    def heal(self) -> None:
        if isinstance(self.mount, FaultyMount):
            self.mount.set()
        else:
            self.mount.free()

    def close(self) -> None:
        self.mount.close()


def _mount_disk(directory: Path, kind: str | None, sid: int) -> Disk | None:
    """Mounted where `zkcompat ensemble start` will put server sid's data, before it does."""
    if kind is None:
        return None
    where = directory / str(sid) / "zkcompat"  # DataDir.root under the member's data_dir
    if kind == "faulty":
        return Disk(sid, FaultyMount(directory / "disk-backing", where, directory / "disk-faults"))
    assert kind == "tmpfs", kind
    return Disk(sid, Tmpfs(where, DISK_SIZE))


@dataclass
class Rig:
    """One round's ensemble and what the nemesis holds on it; spread_ensemble() makes it
    and tears all of it down."""

    ens: Ensemble
    firewall: net.Firewall
    offsets: Path  # TEST_WALL_OFFSET_DIR_ENV: server.<sid> holds its wall-clock offset
    disk: Disk | None = None


@contextlib.contextmanager
def nemesis_env(offsets: Path) -> Iterator[None]:
    """The environment the ensemble command passes on to its servers, for starts and
    restarts alike: the product's two test hooks switched on (peer links leave from each
    server's own address; the wall clock reads its offset from `offsets`). Restored
    afterwards."""
    names = (TEST_BIND_PEER_SOURCE_ENV, TEST_WALL_OFFSET_DIR_ENV)
    saved = {k: os.environ.get(k) for k in names}
    os.environ[TEST_BIND_PEER_SOURCE_ENV] = "1"
    os.environ[TEST_WALL_OFFSET_DIR_ENV] = str(offsets)
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


def disk_sid(seed: int, size: int) -> int:
    """The server whose data a disk case puts on its own disk: chosen by the seed, before
    the servers start (so sometimes the first leader, sometimes a follower)."""
    return 1 + seed % size


def _start(directory: Path, size: int, disk: str | None, seed: int) -> tuple[Ensemble, Disk | None]:
    """Start the servers; once more on new ports if one was taken between the ensemble
    command choosing it and a server binding it (127.0.0.1 is shared with every other test
    on the machine; seen: another run's AdminServer on server.1's election port)."""
    for attempt in range(START_ATTEMPTS):
        where = directory / f"try{attempt}" if attempt else directory
        ens, mounted = Ensemble(where), None
        try:
            mounted = _mount_disk(where, disk, disk_sid(seed, size))
            ens.start(size, settings=SETTINGS, addresses="spread")
            return ens, mounted
        except BaseException as e:
            ens.close()
            if mounted is not None:
                mounted.close()
            if (not isinstance(e, AssertionError) or PORT_TAKEN not in str(e)
                    or attempt + 1 == START_ATTEMPTS):
                raise
    raise AssertionError("unreachable")


@contextlib.contextmanager
def spread_ensemble(directory: Path, case: str, seed: int, size: int = 3) -> Iterator[Rig]:
    """`size` servers on 127.0.0.1-size, an open firewall table and the case's disk; all
    of it always torn down: the table first (a server cut off takes longer to stop), then
    the servers (SIGSTOPped ones too), then the mount."""
    assert size in SIZES, size
    offsets = directory / "wall-offsets"
    offsets.mkdir(parents=True, exist_ok=True)
    ens = firewall = mounted = None
    try:
        with nemesis_env(offsets):
            ens, mounted = _start(directory, size, CASES[case].disk, seed)
            for sid in ens.sids:
                host = ens.member(sid).host
                ens.wait_log(sid, SOURCE_LINE.format(host=host).replace(".", r"\."),
                             timeout_s=5)
            firewall = net.Firewall(peers(ens)).open()
            yield Rig(ens, firewall, offsets, mounted)
    finally:
        try:
            if firewall is not None:
                firewall.close()
        finally:
            try:
                if ens is not None:
                    ens.close()
            finally:
                if mounted is not None:
                    mounted.close()


# -- the cases ----------------------------------------------------------------------------


@dataclass
class Nemesis:
    """What a case may do: find the leader, cut links, kill, pause and restart servers,
    jump a wall clock, fail a disk, wait. Logs every step it takes; heal() undoes them all."""

    rig: Rig
    rng: random.Random
    fault_s: float
    probe_root: str  # where the clock case creates the znodes whose ctime it reads
    started: float = field(default_factory=time.monotonic)
    log: list[str] = field(default_factory=list)
    expected: dict[tuple[int, str], tuple[int, str]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)  # what a case saw go wrong itself
    paused: set[int] = field(default_factory=set)
    down: set[int] = field(default_factory=set)
    jumped: set[int] = field(default_factory=set)
    probes: int = 0

    @property
    def ens(self) -> Ensemble:
        return self.rig.ens

    def expect_log(self, sid: int, pattern: str, why: str) -> None:
        """The fault must be felt: server sid logs `pattern` after this point of its log."""
        self.expected.setdefault((sid, pattern), (self.ens.log_size(sid), why))

    def expect_term_end(self, sid: int) -> None:
        """A follower that hears no leader, a leader that hears no quorum, ends its term."""
        self.expect_log(sid, TERM_ENDED, "never ended its term: the fault did nothing")

    def felt(self) -> list[str]:
        return self.failures + [
            f"server.{sid} {why} (no /{pattern}/ in its log)"
            for (sid, pattern), (offset, why) in sorted(self.expected.items())
            if not re.search(pattern, self.ens.log_since(sid, offset))]

    def note(self, text: str) -> None:
        self.log.append(f"{time.monotonic() - self.started:6.2f}s {text}")

    def leader(self) -> int:
        return self.ens.wait_one_leader(timeout_s=ELECTION_TIMEOUT_S)

    def follower(self) -> int:
        leader = self.leader()
        return self.rng.choice([s for s in self.ens.sids if s != leader])

    def others(self, sid: int) -> list[int]:
        return [s for s in self.ens.sids if s != sid]

    def cut(self, links: set[net.Link], why: str) -> None:
        self.rig.firewall.cut(links)
        self.note(f"cut {why}: drop {sorted(links)}")

    def kill(self, sid: int, why: str) -> None:
        self.down.add(sid)
        self.ens.kill(sid)  # asserts the process is gone
        self.note(f"kill -9 server.{sid} ({why})")

    def restart(self, sid: int) -> None:
        """Start a stopped server again (the round's environment is still set) and wait
        until it serves in the ensemble."""
        self.down.discard(sid)
        self.ens.start_server(sid)
        self.note(f"server.{sid} restarted, serving as {self.ens.mode(sid)}")

    def pause(self, sid: int, seconds: float, why: str) -> None:
        self.paused.add(sid)
        self.ens.signal(sid, signal.SIGSTOP)
        self.note(f"SIGSTOP server.{sid} for {seconds:g}s ({why})")
        try:
            self.hold(seconds)
        finally:
            self.ens.signal(sid, signal.SIGCONT)
            self.paused.discard(sid)
            self.note(f"SIGCONT server.{sid}")

    def jump(self, sid: int, offset_ms: int) -> None:
        """server.sid's wall clock moves to `offset_ms` from the system's; its monotonic
        clock runs on (server/clock.py's test hook rereads the file within 20 ms)."""
        path = self.rig.offsets / f"server.{sid}"
        path.write_text(f"{offset_ms}\n")
        now = time.time_ns()
        os.utime(path, ns=(now, now + self.probes + 1))  # a new mtime for certain
        if offset_ms:
            self.jumped.add(sid)
        else:
            self.jumped.discard(sid)
        self.note(f"server.{sid}'s wall clock at {offset_ms / 60_000:+g} min")

    def probe_clock(self, client, offset_ms: int) -> None:
        """A new znode's ctime comes from the leader's wall clock: it shows the jump."""
        self.probes += 1
        before_ms = time.time_ns() // 1_000_000
        path = client.create(f"{self.probe_root}/p{self.probes}", b"")
        ctime = client.exists(path).ctime
        skew = ctime - before_ms
        self.note(f"probe ctime {skew / 60_000:+.2f} min from the real clock")
        if abs(skew - offset_ms) > CLOCK_SLACK_MS:
            self.failures.append(f"the leader's wall clock did not move: a new znode's ctime "
                                 f"is {skew} ms from the real clock, not ~{offset_ms}")

    def wait_stopped(self, sid: int, why: str) -> None:
        try:
            wait_for(lambda: not self.ens.running(sid), DISK_STOP_TIMEOUT_S,
                     f"server.{sid} stopped")
        except AssertionError:
            self.failures.append(f"server.{sid} kept running {why}")
            return
        self.down.add(sid)
        self.note(f"server.{sid} stopped by itself ({why})")

    def heal(self) -> None:
        """Every fault undone, whatever the case got to: links, paused processes, clocks,
        the disk, then every server that is down started again."""
        self.rig.firewall.heal()
        for sid in sorted(self.paused):
            self.ens.signal(sid, signal.SIGCONT)
        self.paused.clear()
        for sid in sorted(self.jumped):
            self.jump(sid, 0)
        if self.rig.disk is not None:
            self.rig.disk.heal()
        for sid in sorted(self.down):
            self.restart(sid)
        self.note("heal")

    def hold(self, seconds: float) -> None:
        time.sleep(seconds)


@dataclass(frozen=True)
class Case:
    """One fault to play; `disk`: one server's data on a disk of that kind ("faulty":
    faultyfs, "tmpfs": a small tmpfs); `keeps_sessions`: no client may see its session
    expire."""

    play: Callable[[Nemesis], None]
    disk: str | None = None
    keeps_sessions: bool = False


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
    for sid in n.others(leader):
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
        n.rig.firewall.heal()
        n.note("flap: healed")
        n.hold(n.rng.uniform(FLAP_MIN_S, FLAP_MAX_S))


def kill(n: Nemesis) -> None:
    sid = n.rng.choice(n.ens.sids)
    leader = n.leader()
    if sid == leader:
        for other in n.others(sid):
            n.expect_term_end(other)
    n.kill(sid, "the leader" if sid == leader else "a follower")
    n.hold(n.fault_s)
    n.restart(sid)


def kill_leader(n: Nemesis) -> None:
    leader = n.leader()
    for sid in n.others(leader):
        n.expect_term_end(sid)  # their leader is gone
    n.kill(leader, "the leader")
    n.hold(n.fault_s)
    n.restart(leader)


def _pauses(n: Nemesis, sid: int, what: str) -> None:
    """A pause under syncLimit (nobody need notice), then one of the whole fault time."""
    n.pause(sid, SHORT_PAUSE_S, f"{what}, shorter than syncLimit")
    n.hold(1.0)
    n.expect_term_end(sid)  # resumed, it finds its links gone or its quorum moved on
    n.pause(sid, n.fault_s, f"{what}, longer than syncLimit")


def pause(n: Nemesis) -> None:
    sid = n.rng.choice(n.ens.sids)
    _pauses(n, sid, "the leader" if sid == n.leader() else "a follower")


def pause_leader(n: Nemesis) -> None:
    leader = n.leader()
    for sid in n.others(leader):
        n.expect_term_end(sid)  # their leader fell silent
    _pauses(n, leader, "the leader")


def clock(n: Nemesis) -> None:
    """The leader's wall clock jumps minutes forward, then back: ctimes follow it, no
    session expires (expiry reads the monotonic clock), nobody loses a term over it."""
    leader = n.leader()
    client = start_client(n.ens.connect_string)
    try:
        client.ensure_path(n.probe_root)
        for offset_ms in (CLOCK_JUMP_MS, -CLOCK_JUMP_MS):
            n.jump(leader, offset_ms)
            n.hold(0.2)
            n.probe_clock(client, offset_ms)
            n.hold(n.fault_s / 2)
        n.jump(leader, 0)
        n.hold(0.2)
        n.probe_clock(client, 0)
    finally:
        close_client(client)


def disk_slow(n: Nemesis) -> None:
    sid = n.rig.disk.sid
    n.expect_log(sid, SLOW_SYNC, "never warned of a slow fsync: the slow disk did nothing")
    for delay_ms in SLOW_FSYNC_MS:
        n.rig.disk.fault(f"delay fsync {delay_ms}")
        n.note(f"server.{sid}'s disk: every fsync waits {delay_ms} ms")
        n.hold(n.fault_s / len(SLOW_FSYNC_MS))
    n.rig.disk.heal()
    n.note(f"server.{sid}'s disk fast again")


def _failing_disk(n: Nemesis, fault: Callable[[], None], what: str, cause: str) -> None:
    """The disk fails under server sid: it must stop (acknowledging nothing it did not
    persist: the history shows that), and once the disk is healed, restart and rejoin."""
    sid = n.rig.disk.sid
    n.expect_log(sid, SYNC_FAILED, f"did not stop on {what}")
    n.expect_log(sid, cause, f"did not name the cause of {what}")
    deadline = time.monotonic() + n.fault_s
    fault()
    n.note(f"server.{sid}'s disk: {what}")
    n.wait_stopped(sid, f"on {what}")
    n.hold(max(0.0, deadline - time.monotonic()))
    n.rig.disk.heal()
    n.note(f"server.{sid}'s disk healed")
    if sid in n.down:
        n.restart(sid)


def disk_fail(n: Nemesis) -> None:
    _failing_disk(n, lambda: n.rig.disk.fault("fail fsync"), "a failing fsync",
                  "Input/output error")


def disk_full(n: Nemesis) -> None:
    _failing_disk(n, n.rig.disk.mount.fill, "a full disk", NO_SPACE)


CASES: dict[str, Case] = {
    "minority": Case(minority), "lone-leader": Case(lone_leader), "bridge": Case(bridge),
    "one-way": Case(one_way), "flapping": Case(flapping),
    "kill": Case(kill), "kill-leader": Case(kill_leader),
    "pause": Case(pause), "pause-leader": Case(pause_leader),
    "clock": Case(clock, keeps_sessions=True),
    "disk-slow": Case(disk_slow, disk="faulty"), "disk-fail": Case(disk_fail, disk="faulty"),
    "disk-full": Case(disk_full, disk="tmpfs"),
}


# -- one round ----------------------------------------------------------------------------


def _setup(ens: Ensemble, layout: Layout) -> None:
    client = start_client(ens.connect_string)
    try:
        for path in (*layout.setup_paths, layout.lock, layout.fenced):
            client.create(path, b"")
    except NodeExistsError as e:
        raise AssertionError(f"{e}: a round needs a root of its own") from None
    finally:
        close_client(client)


def _final_reads(ens: Ensemble, layout: Layout
                 ) -> tuple[list[h.Operation], dict[int, list[str]], int | None]:
    """On each server alone, once healed: sync, then getData of every key (linearizable
    reads, added to the history: an acknowledged write lost shows there) and the children
    of the queue; and the fenced znode's token (the lowest any server shows)."""
    ops, children, tokens = [], {}, []
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
            fenced = client.get(layout.fenced)[0]
            tokens.append(int(fenced) if fenced else None)
        finally:
            close_client(client)
    return ops, children, (None if None in tokens else min(tokens))


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


def _crashes(ens: Ensemble) -> list[str]:
    return [f"server.{sid} printed a traceback: {_around(ens.log_since(sid), CRASH)}"
            for sid in ens.sids if CRASH in ens.log_since(sid)]


def _around(text: str, word: str, lines: int = 12) -> str:
    at = text[:text.index(word)].count("\n")
    return "\n".join(text.splitlines()[max(0, at - 2):at + lines])


def run_round(rig: Rig, case: str, seed: int, fault_s: float = 6.0,
              clients_per_server: int = 1) -> Outcome:
    """Load, fault, heal, check. Never leaves a fault in place."""
    ens = rig.ens
    started = time.monotonic()
    layout = Layout(f"/nemesis-{case}-{seed}")
    _setup(ens, layout)
    rng = random.Random(seed)
    recorder, stop = Recorder(), threading.Event()
    workers = [Worker(len(ens.sids) * j + sid, ens.hosts(sid), layout, recorder, stop,
                      rng.randrange(1 << 32))
               for j in range(clients_per_server) for sid in ens.sids]
    workers += [LockWorker(LOCK_CLIENT + sid, ens.hosts(sid), layout, recorder, stop,
                           rng.randrange(1 << 32)) for sid in ens.sids]
    nemesis = Nemesis(rig, rng, fault_s, f"{layout.root}-probes")
    try:
        for w in workers:
            w.start()
        nemesis.hold(WARMUP_S)
        CASES[case].play(nemesis)
    finally:
        try:
            nemesis.heal()
            nemesis.leader()
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
    if CASES[case].keeps_sessions:
        failures += [f"client {w.cid} lost its session {w.sessions_lost} times"
                     for w in workers if w.sessions_lost]
        if recorder.unknown_errors.get("SessionExpiredError"):
            failures.append(f"{recorder.unknown_errors['SessionExpiredError']} requests "
                            "failed with SessionExpired")
    failures += _crashes(ens)
    operations, seen = recorder.snapshot()
    final_ops, children, final_token = _final_reads(ens, layout)
    history = operations + final_ops
    failures += checks.check_client_order(operations)
    failures += checks.check_session_order(seen)
    failures += checks.check_sequential_unique(operations)
    failures += checks.check_acked_present(operations, children, layout.queue)
    failures += checks.check_lock_exclusive(recorder.holdings)
    failures += checks.check_fenced_writes(recorder.fenced, final_token)
    failures += _replica_checks(ens, layout)
    failures += checks.check_linearizable(history, layout.setup_paths)
    size = len(ens.sids)
    outcome = Outcome(case, seed, history, nemesis.log, failures, checks.summary(history),
                      dict(recorder.unknown_errors), checks.unavailability_s(operations),
                      time.monotonic() - started, ens.dir,
                      f"scripts/nemesis --servers {size} --case {case} --seed {seed} "
                      f"--fault-seconds {fault_s:g} --clients-per-server {clients_per_server}",
                      len(recorder.holdings), sum(1 for w in recorder.fenced if w.ok))
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
