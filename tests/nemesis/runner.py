"""One nemesis round: a 3- or 5-server ensemble on 127.0.0.1-N, clients on every server
recording a history, one fault case played against it (a partition, kill -9, SIGSTOP, a
wall-clock jump, a slow, failing or full disk), then every fault healed and every check
run. The pytest cases (test_cases.py, test_mixed_cases.py) and `python -m tests.nemesis`
all call run_round(); a round keeps its history and fault schedule beside the servers'
logs. A mixed round (`mix`, mixed.py) has Apache ZooKeeper 3.8 members too.
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

from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from tests.ensemble.harness import Ensemble, check_trees_agree, close_client, wait_for
from tests.ensemble.zookeeper_digest import own_fuzzy_mismatches
from tests.faults.disks import Tmpfs
from tests.faults.faultyfs import FaultyMount
from zkcompat.jute.constants import Code
from zkcompat.peer.links import TEST_BIND_PEER_SOURCE_ENV
from zkcompat.server.clock import TEST_WALL_OFFSET_DIR_ENV
from zkcompat.sim import history as h

from . import checks, mixed, net
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
    kinds: str = ""  # a mixed round: each server's kind, "zk,zkc,zkc"
    # What the checks found that is ZooKeeper's own known behaviour (mixed.py), kept apart
    # from `failures`: it does not fail the round.
    zookeeper_anomalies: list[str] = field(default_factory=list)

    def line(self) -> str:
        c = self.counts
        kinds = f" kinds={self.kinds} zk_anomalies={len(self.zookeeper_anomalies)}" \
            if self.kinds else ""
        return (f"{self.case} seed={self.seed}{kinds} ops={c.get('ops', 0)} "
                f"ok={c.get('ok', 0)} err={c.get('err', 0)} unknown={c.get('unknown', 0)} "
                f"locks={self.locks} fenced={self.fenced} "
                f"longest_unavailable={self.unavailable_s:.1f}s "
                f"took={self.duration_s:.1f}s {'PASS' if not self.failures else 'FAIL'}")

    def report(self) -> str:
        tail = [h.describe(op) for op in self.operations[-30:]]
        zookeeper = (["ZooKeeper's own anomalies (not counted):", *self.zookeeper_anomalies]
                     if self.zookeeper_anomalies else [])
        return "\n".join([self.line(), *self.failures, *zookeeper, "schedule:", *self.schedule,
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
    mix: str | None = None  # mixed.MIXES: some servers are Apache ZooKeeper

    @property
    def zookeeper(self) -> set[int]:
        """The sids of the ZooKeeper members."""
        return {sid for sid, m in self.ens.members().items() if m.kind == "zookeeper"}

    @property
    def zkcompat(self) -> list[int]:
        return [sid for sid in self.ens.sids if sid not in self.zookeeper]


@contextlib.contextmanager
def nemesis_env(offsets: Path, shim: Path | None = None) -> Iterator[None]:
    """The environment the ensemble command passes on to its servers, for starts and
    restarts alike: the product's two test hooks switched on (peer links leave from each
    server's own address; the wall clock reads its offset from `offsets`), and with `shim`
    (a mixed round) the same for ZooKeeper's peer links (mixed.py; it acts in java only).
    Restored afterwards."""
    names = (TEST_BIND_PEER_SOURCE_ENV, TEST_WALL_OFFSET_DIR_ENV, "LD_PRELOAD",
             "SERVER_JVMFLAGS")
    saved = {k: os.environ.get(k) for k in names}
    os.environ[TEST_BIND_PEER_SOURCE_ENV] = "1"
    os.environ[TEST_WALL_OFFSET_DIR_ENV] = str(offsets)
    if shim is not None:
        os.environ["LD_PRELOAD"] = " ".join(p for p in (saved["LD_PRELOAD"], str(shim)) if p)
        os.environ["SERVER_JVMFLAGS"] = " ".join(
            f for f in (saved["SERVER_JVMFLAGS"], mixed.ZOOKEEPER_JVM_FLAGS) if f)
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


def _start(directory: Path, size: int, disk: str | None, seed: int,
           kinds: list[str]) -> tuple[Ensemble, Disk | None]:
    """Start the servers; once more on new ports if one was taken between the ensemble
    command choosing it and a server binding it (127.0.0.1 is shared with every other test
    on the machine; seen: another run's AdminServer on server.1's election port)."""
    for attempt in range(START_ATTEMPTS):
        where = directory / f"try{attempt}" if attempt else directory
        ens, mounted = Ensemble(where), None
        try:
            mounted = _mount_disk(where, disk, disk_sid(seed, size))
            ens.start(size, kind=",".join(kinds), settings=SETTINGS, addresses="spread")
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
def spread_ensemble(directory: Path, case: str, seed: int, size: int = 3,
                    mix: str | None = None) -> Iterator[Rig]:
    """`size` servers on 127.0.0.1-size (with `mix`, some of them ZooKeeper, chosen by the
    seed), an open firewall table and the case's disk; all of it always torn down: the
    table first (a server cut off takes longer to stop), then the servers (SIGSTOPped ones
    too), then the mount. Each server's peer links must leave from its own address (its
    log says so), or no partition would cut them."""
    assert size in SIZES, size
    if mix is not None:
        mixed.check_mix(mix, size, case)
    shim = None if mix is None else mixed.shim_library()
    offsets = directory / "wall-offsets"
    offsets.mkdir(parents=True, exist_ok=True)
    ens = firewall = mounted = None
    try:
        with nemesis_env(offsets, shim):
            ens, mounted = _start(directory, size, CASES[case].disk, seed,
                                  mixed.kinds(mix, size, seed))
            for sid, m in ens.members().items():
                line = SOURCE_LINE if m.kind == "zkcompat" else mixed.SHIM_LINE
                ens.wait_log(sid, line.format(host=m.host).replace(".", r"\."), timeout_s=5)
            firewall = net.Firewall(peers(ens)).open()
            yield Rig(ens, firewall, offsets, mounted, mix)
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
        """A follower that hears no leader, a leader that hears no quorum, ends its term
        (a ZooKeeper member goes back to LOOKING)."""
        zookeeper = self.ens.member(sid).kind == "zookeeper"
        self.expect_log(sid, mixed.ZOOKEEPER_TERM_ENDED if zookeeper else TERM_ENDED,
                        "never ended its term: the fault did nothing")

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


def _final_reads(ens: Ensemble, layout: Layout, failures: list[str], apart: set[int]
                 ) -> tuple[list[h.Operation], dict[int, list[str] | None], int | None]:
    """On each server alone, once healed: sync, then getData of every key (linearizable
    reads, added to the history: an acknowledged write lost shows there) and the children
    of the queue; and the fenced znode's token (the lowest any server shows). A server
    that does not answer them is a failure (in `failures`); the others are still read.
    Servers `apart` are only asked whether they answer (their tree is compared apart)."""
    ops, children, tokens = [], {}, []
    for sid in ens.sids:
        try:
            if sid in apart:
                _final_reads_on(ens, sid, layout, {}, [])
                children[sid] = None  # answered: compared apart
                continue
            ops += _final_reads_on(ens, sid, layout, children, tokens)
        except (KazooException, KazooTimeoutError) as e:
            failures.append(f"server.{sid} ({ens.member(sid).kind}) did not serve the reads "
                            f"after the heal: {e!r}{mixed.thread_dump(ens, sid)}")
    return ops, children, (None if None in tokens or not tokens else min(tokens))


def _final_reads_on(ens: Ensemble, sid: int, layout: Layout, children: dict[int, list[str]],
                    tokens: list[int | None]) -> list[h.Operation]:
    ops = []
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
    return ops


def _replica_checks(rig: Rig, layout: Layout, answered: list[int],
                    broken: set[int]) -> tuple[list[str], list[str]]:
    """Every server that answered the reads after the heal holds the same tree (read
    through clients, so across kinds); no learner's digest differed from its leader's;
    zkcompat members' digest logs agree (ZooKeeper's AdminServer, which has them, is not in
    Debian's package). A ZooKeeper member whose sync died of ZOOKEEPER-4394 (`broken`) is
    compared on its own: what it got wrong is ZooKeeper's. Failures, and ZooKeeper's own
    anomalies."""
    ens = rig.ens
    failures, theirs = [], []
    healthy = [sid for sid in answered if sid not in broken]
    try:
        if healthy:
            check_trees_agree(ens, layout.root, healthy)
    except (AssertionError, KazooException, KazooTimeoutError) as e:
        failures.append(str(e) or repr(e))
    for sid in sorted(broken):
        theirs.append(f"server.{sid} (ZooKeeper) died in Learner.syncWithLeader of "
                      f"ZOOKEEPER-4394 (NullPointerException) and synced again")
        if sid not in answered or not healthy:
            continue
        try:
            check_trees_agree(ens, layout.root, [healthy[0], sid])
        except (AssertionError, KazooException, KazooTimeoutError) as e:
            theirs.append(f"ZooKeeper's (ZOOKEEPER-4394): {str(e) or repr(e)}")
    members = ens.members()
    stats = {sid: checks.mntr(m.host, m.client_port) for sid, m in members.items()}
    for sid in rig.zkcompat if rig.zookeeper else ():
        count = int(stats[sid].get("zk_digest_mismatches_count", "0"))
        why = count and mixed.fuzzy_snap_mismatches(ens, sid, count, rig.zookeeper)
        if why:
            theirs.append(why)
            stats[sid] = {**stats[sid], "zk_digest_mismatches_count": "0"}
    for sid in rig.zookeeper:
        count = stats[sid].get("zk_digest_mismatches_count", "0")
        if count == "0":
            continue
        if sid in broken:
            theirs.append(f"ZooKeeper's (ZOOKEEPER-4394): server.{sid} "
                          f"zk_digest_mismatches_count {count} after its sync died")
            stats[sid] = {**stats[sid], "zk_digest_mismatches_count": "0"}
            continue
        try:
            own = own_fuzzy_mismatches(ens.log_since(sid))
        except AssertionError as e:
            failures.append(f"server.{sid} (ZooKeeper): zk_digest_mismatches_count {count}: {e}")
            continue
        if str(own) == count:
            theirs.append(f"server.{sid} (ZooKeeper) counted a digest mismatch loading its "
                          "own fuzzy snapshot (see tests/ensemble/zookeeper_digest.py)")
            stats[sid] = {**stats[sid], "zk_digest_mismatches_count": "0"}
    logs = {sid: checks.digest_log(members[sid].host, members[sid].admin_port)
            for sid in rig.zkcompat}
    return failures + checks.check_digests(stats, logs), theirs


def _crashes(rig: Rig) -> list[str]:
    """zkcompat's servers only: a ZooKeeper logs Java stack traces in its ordinary work."""
    ens = rig.ens
    return [f"server.{sid} printed a traceback: {_around(ens.log_since(sid), CRASH)}"
            for sid in rig.zkcompat if CRASH in ens.log_since(sid)]


def _session_order(seen, zookeeper_hosts: set[str]) -> tuple[list[str], list[str]]:
    """check_session_order's findings, split: a reply that went back in time and came from
    a ZooKeeper member (or from a server not known) is ZooKeeper's."""
    ours, theirs = [], []
    for prev, s in checks.session_order_violations(seen):
        text = checks.describe_going_back(prev, s)
        if zookeeper_hosts and (not s.served or s.served & zookeeper_hosts):
            theirs.append(f"ZooKeeper's: {text}")
        else:
            ours.append(text)
    return ours[:checks.FAILURES_SHOWN_MAX], theirs[:checks.FAILURES_SHOWN_MAX]


def _linearizable(operations: list[h.Operation], final_ops: list[h.Operation],
                  layout: Layout, served: dict[int, frozenset[str]],
                  leads: mixed.LeadsLog | None, zookeeper_hosts: set[str]
                  ) -> tuple[list[str], list[str]]:
    """The whole history is checked; if it is not linearizable in a mixed round, it is
    checked again without the sync-then-reads a ZooKeeper may have answered stale
    (mixed.py): linearizable then, it is ZooKeeper's anomaly; still not, it fails."""
    history = operations + final_ops
    found = checks.check_linearizable(history, layout.setup_paths)
    if not found or not zookeeper_hosts:
        return found, []
    excused = mixed.zookeeper_attributable_reads(operations, served, leads, zookeeper_hosts)
    ids = {id(op) for op in excused}
    rest = [op for op in history if id(op) not in ids]
    if not excused or checks.check_linearizable(rest, layout.setup_paths):
        return found, []
    return [], [f"ZooKeeper's: {found[0]}; linearizable without the {len(excused)} "
                "sync-then-reads a ZooKeeper member served or ran while a ZooKeeper led "
                "(its leader answers sync without a quorum, ZOOKEEPER-1675)"]


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
    leads = None if rig.mix is None else mixed.LeadsLog(
        {sid: (m.host, m.client_port) for sid, m in ens.members().items()}, rig.zookeeper)
    with leads or contextlib.nullcontext():
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
    failures += _crashes(rig)
    operations, seen = recorder.snapshot()
    # A ZooKeeper whose sync died of ZOOKEEPER-4394 may hold a wrong tree: its reads after
    # the heal are compared apart (_replica_checks), not taken as the ensemble's.
    broken = mixed.broken_syncs(ens, rig.zookeeper)
    final_ops, children, final_token = _final_reads(ens, layout, failures, broken)
    history = operations + final_ops
    zookeeper_hosts = {ens.member(sid).host for sid in rig.zookeeper}
    failures += checks.check_client_order(operations)
    ours, theirs = _session_order(seen, zookeeper_hosts)
    failures += ours
    failures += checks.check_sequential_unique(operations)
    failures += checks.check_acked_present(
        operations, {sid: c for sid, c in children.items() if c is not None}, layout.queue)
    failures += checks.check_lock_exclusive(recorder.holdings)
    failures += checks.check_fenced_writes(recorder.fenced, final_token)
    ours, replicas = _replica_checks(rig, layout, sorted(children), broken)
    failures += ours
    theirs += replicas
    ours, linear = _linearizable(operations, final_ops, layout, recorder.served_by(), leads,
                                 zookeeper_hosts)
    failures += ours
    theirs += linear
    size = len(ens.sids)
    mix = "" if rig.mix is None else f" --mix {rig.mix}"
    kinds = "" if rig.mix is None else ",".join(
        "zk" if m.kind == "zookeeper" else "zkc" for m in ens.members().values())
    outcome = Outcome(case, seed, history, nemesis.log, failures, checks.summary(history),
                      dict(recorder.unknown_errors), checks.unavailability_s(operations),
                      time.monotonic() - started, ens.dir,
                      f"scripts/nemesis --servers {size}{mix} --case {case} --seed {seed} "
                      f"--fault-seconds {fault_s:g} --clients-per-server {clients_per_server}",
                      len(recorder.holdings), sum(1 for w in recorder.fenced if w.ok),
                      kinds, theirs)
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
