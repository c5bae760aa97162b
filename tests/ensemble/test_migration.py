"""A live migration of a ZooKeeper 3.8 ensemble to zkcompat with static config, one server
at a time and the leader last, under load; the way back; and ZooKeeper's own rolling
restart in the same loop, as the baseline (docs/migrating-from-zookeeper.md).

Each step stops server N and starts the other kind as server N with the same zoo.cfg, myid,
ports and dataDir (`ensemble start-server N --kind`): [empty] zkcompat comes up with nothing
and syncs from the leader; [import] it first imports the stopped ZooKeeper's dataDir
(`zkcompat import-zookeeper`). The rollback takes the ensemble the import left back, each
zkcompat server replaced by an empty ZooKeeper. Whatever a step replaces is moved out of
the dataDir first, as the runbook says.

Throughout, kazoo writers record every acknowledged write; a kazoo client and a Java client
(libzookeeper-java) watch one znode that a driver changes only once both have re-armed
their watch after the last change, so no two changes merge into one event; long-lived
sessions hold ephemerals, and one holds a kazoo Lock. After each step, with the load
paused: every acknowledged write is on every member; no session expired or changed id;
every ephemeral, and the lock node, is still owned by its session, and a contender cannot
take the lock; the Java watcher had one NodeDataChanged per change, and the kazoo one an
event per change or the re-read after kazoo dropped its watches at a disconnect; every
member holds the same tree, Stat for Stat. Each step's times and the longest gap between
acknowledged writes (what clients saw of the unavailability) are printed; no timing is
asserted.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from conformance_tests.test_java_client import SLF4J_NOP_JAR, ZOOKEEPER_JAR, _require

from .harness import (
    COMMAND_SLACK_S,
    ELECTION_TIMEOUT_S,
    FAST,
    OP_TIMEOUT_S,
    POLL_S,
    REPO_ROOT,
    AckedWrites,
    Ensemble,
    Writer,
    _env,
    assert_acked_in,
    assert_trees_agree,
    close_client,
    read_trees,
    wait_for,
    write_batch,
)

ROOT = "/migrate"
WATCHED = f"{ROOT}/watched"
LOCK_PATH = f"{ROOT}/lock"
PRELOADED = 2000  # znodes written before the first step: the data the ensemble holds
PRELOAD_BYTES = 512
WRITER_PACE_S = 0.05  # between one writer's writes: the gaps measured are near a second
WATCH_PACE_S = 0.05  # between two changes of WATCHED
WATCH_CATCH_UP_S = 30.0  # for every watcher to see a change and re-arm, across a failover
WARM_UP_ACKS = 60
IMPORT_TIMEOUT_S = 120.0
JAVA_WATCHER = "MigrationWatcher"
JAVA_START_TIMEOUT_S = 60.0
JAVA_FINISH_TIMEOUT_S = 60.0
# tickTime 500: sessions of 10 s, the most it allows. snapCount 1000: ZooKeeper snapshots
# (fuzzy, under load) a few times, so an import reads a snapshot and the logs after it.
SETTINGS = {**FAST, "snapCount": 1000}

# What the leader logs as it starts syncing learner `sid`, by the leader's kind. 3.8's
# "Sending snapshot" line names no sid: the LearnerHandler thread ties it to one.
_ZOOKEEPER_SYNC = re.compile(r"\[(LearnerHandler-[^\]]+)\] Synchronizing with Learner sid: "
                             r"(\d+) ")
_ZOOKEEPER_SENDING = r"\[{thread}\] Sending (DIFF|TRUNC|snapshot|SNAP)"
_ZKCOMPAT_SYNC = r"event=sync_learner sid={sid} mode=(\w+) "

JAVA_SOURCE = r"""
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs.Ids;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;

/** Watches one znode's data and re-arms after each event, until stdin closes; holds an
 *  ephemeral. One line per state change, event and re-arm ("armed VERSION"). */
public final class MigrationWatcher implements Watcher {
    private final String path;
    private volatile ZooKeeper zk;

    private MigrationWatcher(String path) { this.path = path; }

    @Override
    public void process(WatchedEvent e) {
        if (e.getType() == Event.EventType.None) {
            System.out.println("state " + e.getState());
            return;
        }
        System.out.println("event " + e.getType() + " " + e.getPath());
        arm();
    }

    private void arm() {
        while (true) {
            try {
                Stat stat = new Stat();
                zk.getData(path, this, stat);
                System.out.println("armed " + stat.getVersion());
                return;
            } catch (KeeperException.ConnectionLossException e) {
                try { Thread.sleep(100); } catch (InterruptedException i) { return; }
            } catch (Exception e) {
                System.out.println("error " + e);
                return;
            }
        }
    }

    public static void main(String[] args) throws Exception {
        MigrationWatcher w = new MigrationWatcher(args[1]);
        w.zk = new ZooKeeper(args[0], 10_000, w);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!w.zk.getState().isConnected()) {
            if (System.nanoTime() > deadline) { System.out.println("never connected"); System.exit(1); }
            Thread.sleep(50);
        }
        w.zk.create(args[2], new byte[0], Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
        System.out.println("session 0x" + Long.toHexString(w.zk.getSessionId()));
        w.arm();
        java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null; ) {
            if (line.startsWith("hosts ")) {  // the servers changed: updateServerList
                w.zk.updateServerList(line.substring(6));
                System.out.println("hosts updated");
            }
        }
        Stat eph = w.zk.exists(args[2], false);
        System.out.println("ephemeral 0x" + (eph == null ? "none" : Long.toHexString(eph.getEphemeralOwner())));
        System.out.println("session 0x" + Long.toHexString(w.zk.getSessionId()));
        w.zk.close();
        System.out.println("done");
    }
}
"""


@pytest.fixture(scope="module")
def java_watcher(tmp_path_factory) -> Path:
    javac = _require("javac")
    for jar in (ZOOKEEPER_JAR, SLF4J_NOP_JAR):
        if not jar.exists():
            pytest.fail(f"{jar} missing: install libzookeeper-java (scripts/install-zookeeper)")
    out = tmp_path_factory.mktemp("java-watcher")
    source = out / f"{JAVA_WATCHER}.java"
    source.write_text(JAVA_SOURCE)
    done = subprocess.run([javac, "-d", str(out), "-cp", str(ZOOKEEPER_JAR), str(source)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"javac failed:\n{done.stdout}\n{done.stderr}"
    return out


# -- the clients ----------------------------------------------------------------------------


class Gate:
    """Pauses the load for the checks: each loop holds `busy` around one unit of work and
    does it only while `open` is set, so after pause() returns nothing is in flight."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.open.set()
        self.loops: list = []

    def pause(self) -> None:
        self.open.clear()
        for loop in self.loops:
            with loop.busy:
                pass

    def resume(self) -> None:
        self.open.set()


class PacedWriter(Writer):
    """The harness's Writer (a sequential create, then a setData, each read back), paced
    and pausable."""

    def __init__(self, *args, gate: Gate, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.gate = gate
        self.busy = threading.Lock()
        gate.loops.append(self)

    def _loop(self) -> None:
        while not self.stop_event.is_set():
            with self.busy:
                go = self.gate.open.is_set()
                if go:
                    self.write_once()
            if go:
                self.stop_event.wait(WRITER_PACE_S)
            else:
                self.gate.open.wait(POLL_S)


class Session:
    """A long-lived kazoo session holding one ephemeral: it must outlive every step."""

    def __init__(self, ensemble: Ensemble, name: str, first: int) -> None:
        self.name = name
        self.client = ensemble.client(ensemble.hosts(first))
        self.states: list[str] = []
        self.client.add_listener(self.states.append)
        self.session_id = self.client.client_id[0]
        self.ephemeral = f"{ROOT}/sessions/{name}"
        self.client.create(self.ephemeral, name.encode(), ephemeral=True, makepath=True)


class KazooWatcher:
    """A one-shot data watch on WATCHED, re-armed after each event; `seen` holds, for each
    re-arm, the event that caused it and the version its read returned.

    kazoo drops every watch when a connection drops (its client sends no SetWatches) and
    tells each watcher so with a NONE event: a change made while the watch was down is found
    by the re-read that NONE causes, as kazoo's DataWatch finds it."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.seen: list[tuple[str, int]] = []
        self._arm("initial")
        wait_for(lambda: self.armed >= 0, OP_TIMEOUT_S, "the kazoo watch armed")

    @property
    def armed(self) -> int:
        return self.seen[-1][1] if self.seen else -1

    def _arm(self, cause: str) -> None:
        result = self.session.client.get_async(WATCHED, watch=self._on_event)
        result.rawlink(lambda r: self._armed(r, cause))

    def _on_event(self, event) -> None:
        self._arm(event.type)

    def _armed(self, result, cause: str) -> None:
        try:
            _, stat = result.get()
        except KazooException:  # the watch was not set: read again
            threading.Timer(0.1, self._arm, (cause,)).start()
            return
        self.seen.append((cause, stat.version))

    def account(self, what: str, version: int) -> tuple[int, int]:
        """Every change of WATCHED reached this watcher exactly once: announced by a CHANGED
        event, or found by the re-read after a NONE. (events, re-reads) it took."""
        seen = list(self.seen)
        assert seen[0] == ("initial", 0) and seen[-1][1] == version, (what, version, seen)
        events = rereads = 0
        for (_, before), (cause, after) in zip(seen, seen[1:], strict=False):
            step = after - before
            assert cause in ("CHANGED", "NONE") and step in (0, 1), (what, cause, before,
                                                                     after, seen)
            if cause == "CHANGED":
                assert step == 1, f"{what}: a CHANGED event for no change at v{before}"
                events += 1
            else:
                rereads += step
        assert events + rereads == version
        return events, rereads


class JavaWatcher:
    """MigrationWatcher as a child process; its stdout lines."""

    def __init__(self, classes: Path, connect_string: str) -> None:
        classpath = ":".join([str(classes), str(ZOOKEEPER_JAR), str(SLF4J_NOP_JAR)])
        self.ephemeral = f"{ROOT}/sessions/java"
        self.proc = subprocess.Popen([_require("java"), "-cp", classpath, JAVA_WATCHER,
                                      connect_string, WATCHED, self.ephemeral],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        wait_for(lambda: self.armed >= 0, JAVA_START_TIMEOUT_S, "the Java watcher armed",
                 detail=lambda: "\n".join(self.lines[-20:]))
        self.session_id = int(self._sessions()[0], 16)

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def _sessions(self) -> list[str]:
        return [line.removeprefix("session ") for line in list(self.lines)
                if line.startswith("session ")]

    @property
    def armed(self) -> int:
        versions = [int(line.split()[1]) for line in list(self.lines)
                    if line.startswith("armed ")]
        return versions[-1] if versions else -1

    @property
    def changed(self) -> int:
        return sum(1 for line in list(self.lines) if line == f"event NodeDataChanged {WATCHED}")

    @property
    def expired(self) -> bool:
        return any(line in ("state Expired", "state Closed") for line in list(self.lines))

    def finish(self) -> list[str]:
        self.proc.stdin.close()
        self.proc.wait(timeout=JAVA_FINISH_TIMEOUT_S)
        self.reader.join(timeout=10)
        return list(self.lines)

    def update_hosts(self, hosts: str) -> None:
        """ZooKeeper.updateServerList: the client may move its session at once."""
        self.proc.stdin.write(f"hosts {hosts}\n")
        self.proc.stdin.flush()
        wait_for(lambda: "hosts updated" in self.lines, JAVA_START_TIMEOUT_S,
                 "the Java watcher's updateServerList")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


class WatchDriver(threading.Thread):
    """Changes WATCHED, then waits until every watcher has re-armed at that version before
    the next change: one event per change per watcher, none merged into another."""

    def __init__(self, client: KazooClient, watchers: list, gate: Gate,
                 stop: threading.Event) -> None:
        super().__init__(name="watch-driver", daemon=True)
        self.client = client
        self.watchers = watchers
        self.gate = gate
        self.stop_event = stop
        self.busy = threading.Lock()
        gate.loops.append(self)
        self.version = 0  # WATCHED's version: the number of changes made so far
        self.failure: str | None = None

    def run(self) -> None:
        try:
            while not self.stop_event.is_set() and self.failure is None:
                with self.busy:
                    go = self.gate.open.is_set()
                    if go:
                        self._change()
                if go:
                    self.stop_event.wait(WATCH_PACE_S)
                else:
                    self.gate.open.wait(POLL_S)
        except BaseException as e:  # noqa: BLE001 - reported by check(), not lost
            self.failure = f"watch driver died: {e!r}"

    def _change(self) -> None:
        try:
            self.version = self.client.set_async(WATCHED, b"%d" % (self.version + 1)).get(
                timeout=OP_TIMEOUT_S).version
        except (KazooException, KazooTimeoutError):
            self.version = self._read_version()  # the change may have been made, or not
        deadline = time.monotonic() + WATCH_CATCH_UP_S
        while any(w.armed < self.version for w in self.watchers):
            if time.monotonic() > deadline:
                self.failure = (f"change v{self.version} of {WATCHED}: watchers re-armed at "
                                f"{[w.armed for w in self.watchers]} after {WATCH_CATCH_UP_S}s")
                return
            time.sleep(0.01)

    def _read_version(self) -> int:
        deadline = time.monotonic() + ELECTION_TIMEOUT_S
        while True:
            try:
                return self.client.get_async(WATCHED).get(timeout=OP_TIMEOUT_S)[1].version
            except (KazooException, KazooTimeoutError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


# -- the world under migration -------------------------------------------------------------


class World:
    """The data, the load, the sessions, the lock and the watchers of one test."""

    def __init__(self, ensemble: Ensemble, java_classes: Path) -> None:
        self.ensemble = ensemble
        self.gate = Gate()
        self.stop_event = threading.Event()
        self.acked = AckedWrites()
        self.checker = ensemble.client()
        self.checker.ensure_path(f"{ROOT}/data")
        self.checker.ensure_path(LOCK_PATH)
        self.checker.create(WATCHED, b"0")
        write_batch(self.checker, {f"{ROOT}/data/n-{i:04d}": bytes([i % 251]) * PRELOAD_BYTES
                                   for i in range(PRELOADED)}, self.acked, writer="preload")
        self.writers = [PacedWriter(f"w{sid}", ensemble.hosts(sid), self.acked,
                                    self.stop_event, root=f"{ROOT}/load", gate=self.gate)
                        for sid in ensemble.sids]
        for w in self.writers:
            ensemble.clients.append(w.client)
        self.sessions = [Session(ensemble, f"idle-{sid}", sid) for sid in ensemble.sids]
        self.holder = Session(ensemble, "lock-holder", ensemble.sids[0])
        self.contender = Session(ensemble, "lock-contender", ensemble.sids[-1])
        self.lock = self.holder.client.Lock(LOCK_PATH, "holder")
        assert self.lock.acquire(timeout=OP_TIMEOUT_S)
        self.lock_node = f"{LOCK_PATH}/{self.lock.node}"
        watcher_session = Session(ensemble, "watcher", ensemble.sids[1])
        self.sessions += [self.holder, self.contender, watcher_session]
        self.kazoo_watcher = KazooWatcher(watcher_session)
        self.java = JavaWatcher(java_classes, ensemble.connect_string)
        self.driver = WatchDriver(self.checker, [self.kazoo_watcher, self.java], self.gate,
                                  self.stop_event)
        self.watch_account = (0, 0)  # the kazoo watcher's (events, re-reads)

    def start(self) -> None:
        started = time.monotonic()
        for w in self.writers:
            w.start()
        self.driver.start()
        wait_for(lambda: self.acked.count(started) >= WARM_UP_ACKS, ELECTION_TIMEOUT_S,
                 "the load under way")

    def stop(self) -> None:
        self.stop_event.set()
        self.gate.resume()
        for t in [*self.writers, self.driver]:
            t.join(timeout=OP_TIMEOUT_S * 2 + WATCH_CATCH_UP_S)
            assert not t.is_alive(), f"{t.name} did not stop"

    def close(self) -> None:
        self.stop_event.set()
        self.gate.resume()
        self.java.kill()

    # during a step

    def wait_writers_back(self, since: float) -> None:
        """Every writer has a write sent since then acknowledged (the one whose server was
        stopped reconnects by kazoo's backoff)."""
        names = {w.name for w in self.writers}
        wait_for(lambda: self.acked.writers(since) >= names, ELECTION_TIMEOUT_S,
                 "a write of every writer acknowledged after the step",
                 detail=self.ensemble.log_tails)

    def gaps(self, start: float, end: float) -> tuple[float, float]:
        """The longest time without any acknowledged write in [start, end], and the
        longest one writer went without, as each ack's reply arrived."""
        with self.acked.lock:
            acks = [a for a in self.acked.acks if a.writer.startswith("w")]

        def longest(times: list[float]) -> float:
            times = sorted([start, *(t for t in times if start <= t <= end), end])
            return max(b - a for a, b in zip(times, times[1:], strict=False))
        overall = longest([a.finished for a in acks])
        per_writer = max(longest([a.finished for a in acks if a.writer == w.name])
                         for w in self.writers)
        return overall, per_writer

    # the checks

    def check(self, what: str) -> None:
        """With the load paused: the checks of the module docstring."""
        self.gate.pause()
        started = time.monotonic()
        try:
            self._check(what)
        finally:
            self.gate.resume()
        print(f"{what}: checked in {time.monotonic() - started:.1f}s")

    def _check(self, what: str) -> None:
        assert self.driver.failure is None, f"{what}: {self.driver.failure}"
        assert not self.acked.violations, f"{what}: {self.acked.violations}"
        self._check_sessions(what)
        self._check_lock(what)
        version = self.driver.version
        assert version > 0, f"{what}: {WATCHED} never changed"
        # The Java client sets its watches again on every reconnect (SetWatches with the
        # last zxid it saw): the servers owe it exactly one event per change.
        assert self.java.changed == version, (
            f"{what}: {version} changes of {WATCHED}, {self.java.changed} events to the Java "
            "watcher\n" + "\n".join(self.java.lines[-20:]))
        self.watch_account = self.kazoo_watcher.account(what, version)
        opened = len(self.ensemble.clients)
        try:  # every acknowledged write is under ROOT: one read of each member checks both
            trees = read_trees(self.ensemble, ROOT)
            assert_acked_in(trees, self.acked, self.ensemble)
            nodes = assert_trees_agree(trees, ROOT)
        finally:  # each member's own client: closed, not left to expire when it stops
            for client in self.ensemble.clients[opened:]:
                close_client(client)
            del self.ensemble.clients[opened:]
        assert nodes > PRELOADED, nodes

    def _check_sessions(self, what: str) -> None:
        self.checker.sync(ROOT)
        owned = [(s.name, s.client, s.session_id, s.ephemeral, s.states)
                 for s in self.sessions]
        owned += [(w.name, w.client, w.session_id, w.ephemeral,
                   [state for state, _ in w.states]) for w in self.writers]
        for name, client, session_id, ephemeral, states in owned:
            assert KazooState.LOST not in states, f"{what}: {name}'s session expired"
            assert client.client_id[0] == session_id, f"{what}: {name} has a new session"
            wait_for(lambda c=client: c.state == KazooState.CONNECTED, ELECTION_TIMEOUT_S,
                     f"{what}: {name} connected")
            stat = self.checker.exists(ephemeral)
            assert stat is not None and stat.ephemeralOwner == session_id, (
                f"{what}: {name}'s ephemeral {ephemeral}: {stat}")
        assert not self.java.expired, f"{what}: the Java watcher's session ended"
        stat = self.checker.exists(self.java.ephemeral)
        assert stat is not None and stat.ephemeralOwner == self.java.session_id, (
            f"{what}: the Java watcher's ephemeral: {stat}")

    def _check_lock(self, what: str) -> None:
        assert self.lock.is_acquired, f"{what}: the holder no longer holds the lock"
        stat = self.checker.exists(self.lock_node)
        assert stat is not None and stat.ephemeralOwner == self.holder.session_id, (
            f"{what}: lock node {self.lock_node}: {stat}")
        children = self.checker.get_children(LOCK_PATH)
        assert children == [self.lock.node], f"{what}: {LOCK_PATH} holds {children}"
        contender = self.contender.client.Lock(LOCK_PATH, "contender")
        assert not contender.acquire(blocking=False), f"{what}: a contender took the lock"

    def finish(self) -> None:
        """Stop the load; the Java watcher's session and ephemeral were the same to the end."""
        self.stop()
        lines = self.java.finish()
        assert self.java.proc.returncode == 0, lines[-20:]
        sessions = [line for line in lines if line.startswith("session ")]
        assert len(sessions) == 2 and sessions[0] == sessions[1], sessions
        assert f"ephemeral {sessions[0].removeprefix('session ')}" in lines
        assert self.lock.is_acquired
        self.lock.release()


# -- one step: stop server N, start server N (of another kind, or the same) ---------------------


@dataclass
class Step:
    sid: int
    role: str  # what server N was: follower or leader
    was: str
    now: str
    stop_s: float
    prepare_s: float
    start_s: float  # start-server: until it serves in the ensemble
    writers_back_s: float  # from the stop until every writer had a write acknowledged again
    gap_s: float  # the longest time no write at all was acknowledged
    writer_gap_s: float  # the longest time one writer went without an acknowledged write
    sync: str  # how the leader synced it: diff, snap, trunc

    def line(self) -> str:
        return (f"server.{self.sid} ({self.role}) {self.was} -> {self.now}: stop "
                f"{self.stop_s:.1f}s, prepare {self.prepare_s:.1f}s, start {self.start_s:.1f}s, "
                f"all writers back {self.writers_back_s:.1f}s; longest gap {self.gap_s:.2f}s "
                f"(one writer {self.writer_gap_s:.2f}s); synced by {self.sync}")


Prepare = Callable[[Ensemble, int], None]


def _set_aside(ensemble: Ensemble, sid: int, *names: str) -> None:
    """Move what the other kind kept in server sid's dataDir out of it (the runbook keeps it
    as a backup): the next server of that kind there then starts empty, never on stale
    data."""
    data_dir = Path(ensemble.member(sid).data_dir)
    backup = ensemble.dir / "backup" / f"{sid}-{ensemble.member(sid).kind}-{time.time_ns()}"
    for name in names:
        if (data_dir / name).exists():
            backup.mkdir(parents=True, exist_ok=True)
            shutil.move(str(data_dir / name), str(backup / name))


def prepare_empty(ensemble: Ensemble, sid: int) -> None:
    """zkcompat comes up empty: ZooKeeper's version-2 moves out of the dataDir."""
    _set_aside(ensemble, sid, "version-2")


def prepare_import(ensemble: Ensemble, sid: int) -> None:
    """zkcompat comes up with the stopped ZooKeeper's data: `zkcompat import-zookeeper`
    into the same dataDir (zkcompat keeps its files under dataDir/zkcompat), then
    version-2 moves out of it."""
    data_dir = ensemble.member(sid).data_dir
    done = subprocess.run([sys.executable, "-m", "zkcompat", "import-zookeeper", data_dir,
                           "--data-dir", data_dir], capture_output=True, text=True,
                          timeout=IMPORT_TIMEOUT_S, cwd=REPO_ROOT, env=_env(),
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"import-zookeeper: {done.stdout}{done.stderr}"
    print(f"server.{sid}: {done.stdout.strip().splitlines()[0]}")
    prepare_empty(ensemble, sid)


def prepare_zookeeper(ensemble: Ensemble, sid: int) -> None:
    """ZooKeeper comes up empty: zkcompat's files (its store and epoch files) move out."""
    _set_aside(ensemble, sid, "zkcompat", "acceptedEpoch", "currentEpoch")


def _sync_mode(ensemble: Ensemble, sid: int, offsets: dict[int, int]) -> str:
    """How another member, as leader, synced server sid since offsets (log sizes)."""
    for leader in ensemble.sids:
        if leader == sid:
            continue
        text = ensemble.log_since(leader, offsets[leader])
        if ensemble.member(leader).kind == "zkcompat":
            m = re.search(_ZKCOMPAT_SYNC.format(sid=sid), text)
            if m:
                return m.group(1)
            continue
        for m in _ZOOKEEPER_SYNC.finditer(text):
            if int(m.group(2)) != sid:
                continue
            sent = re.search(_ZOOKEEPER_SENDING.format(thread=re.escape(m.group(1))),
                             text[m.end():])
            if sent:
                return {"snapshot": "snap"}.get(sent.group(1), sent.group(1).lower())
    return "unknown"


# What each kind's server process runs (`zkcompat ensemble`'s command lines).
PROCESS_MARKS = {"zkcompat": b"zkcompat\0serve", "zookeeper": b"QuorumPeerMain"}


def _assert_runs(ensemble: Ensemble, sid: int, kind: str) -> None:
    """Server sid's process is of that kind (its command line), not only its record."""
    pid = ensemble.member(sid).pid
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    assert PROCESS_MARKS[kind] in cmdline, (sid, kind, cmdline)


def replace(ensemble: Ensemble, world: World, sid: int, kind: str,
            prepare: Prepare | None) -> Step:
    role = ensemble.mode(sid)
    was = ensemble.member(sid).kind
    offsets = {s: ensemble.log_size(s) for s in ensemble.sids}
    started = time.monotonic()
    ensemble.stop_server(sid)
    stopped = time.monotonic()
    if prepare is not None:
        prepare(ensemble, sid)
    prepared = time.monotonic()
    ensemble.start_server(sid, kind)
    serving = time.monotonic()
    _assert_runs(ensemble, sid, kind)
    world.wait_writers_back(serving)
    back = time.monotonic()
    gap, writer_gap = world.gaps(started, back)
    return Step(sid, role, was, kind, stopped - started, prepared - stopped, serving - prepared,
                back - started, gap, writer_gap, _sync_mode(ensemble, sid, offsets))


def roll(ensemble: Ensemble, world: World, kind: str, prepare: Prepare | None,
         label: str, check_each: bool = True) -> list[Step]:
    """Each server in turn, followers first and the leader last; the checks after each
    (or, without check_each, after the last only)."""
    steps = []
    todo = set(ensemble.sids)
    while todo:
        leader = ensemble.wait_one_leader()
        followers = sorted(todo - {leader})
        sid = followers[0] if followers else leader
        step = replace(ensemble, world, sid, kind, prepare)
        assert step.role == ("leader" if sid == leader else "follower"), step
        todo.discard(sid)
        steps.append(step)
        print(f"{label}: {step.line()}")
        ensemble.wait_one_leader(timeout_s=ELECTION_TIMEOUT_S + COMMAND_SLACK_S)
        if check_each or not todo:
            world.check(f"{label}, after server.{sid}")
    assert {ensemble.member(s).kind for s in ensemble.sids} == {kind}
    total = sum(s.writers_back_s for s in steps)
    print(f"{label}: {len(steps)} steps in {total:.1f}s; longest gap "
          f"{max(s.gap_s for s in steps):.2f}s, one writer's {max(s.writer_gap_s for s in steps):.2f}s; "
          f"{world.acked.count()} writes acknowledged; {world.driver.version} changes of the "
          f"watched znode: the Java watcher had an event for each, the kazoo one "
          f"{world.watch_account[0]} events and found {world.watch_account[1]} on re-reading "
          "after a disconnect")
    return steps


# -- migration (b): add the new servers by reconfig, then remove the old ones ----------------

# Reconfig is on in both kinds, with the super user kazoo's tests use (super:test).
RECONFIG_SETTINGS = {**SETTINGS, "reconfigEnabled": "true",
                     "DigestAuthenticationProvider.superDigest":
                         "super:D/InIHSb7yEEbrWz8b9l71RjZJU="}
SUPER_AUTH = "super:test"


def point_clients(ensemble: Ensemble, world: World) -> None:
    """What the runbook has operators do once the new servers are in: every client's host
    list names every member (kazoo's set_hosts, the Java client's updateServerList)."""
    hosts = ",".join(ensemble.address(s) for s in ensemble.sids)
    clients = [world.checker, *(w.client for w in world.writers),
               *(s.client for s in world.sessions)]
    for client in {id(c): c for c in clients}.values():
        client.set_hosts(hosts)
    world.java.update_hosts(hosts)


def reconfig_step(ensemble: Ensemble, world: World, action: str, sid: int,
                  kind: str) -> Step:
    """`ensemble add SID` (start it, then reconfig -add) or `ensemble remove SID`
    (reconfig -remove, then stop it), timed as replace() times a step."""
    adding = action == "add"
    role = "new" if adding else ensemble.mode(sid)
    was = "-" if adding else ensemble.member(sid).kind
    offsets = {s: ensemble.log_size(s) for s in ensemble.sids}
    started = time.monotonic()
    if adding:
        ensemble.run("add", str(sid), "--auth", SUPER_AUTH, "--kind", kind)
    else:
        ensemble.run("remove", str(sid), "--auth", SUPER_AUTH)
    done = time.monotonic()
    if adding:
        _assert_runs(ensemble, sid, kind)
    world.wait_writers_back(done)
    back = time.monotonic()
    gap, writer_gap = world.gaps(started, back)
    sync = _sync_mode(ensemble, sid, offsets) if adding else "-"
    return Step(sid, role, was, kind if adding else "removed", 0.0, 0.0, done - started,
                back - started, gap, writer_gap, sync)


def move_by_reconfig(ensemble: Ensemble, world: World, kind: str, label: str) -> list[Step]:
    """As many servers of `kind` as there are members, added one by one under new sids;
    the clients pointed at everyone; then the old members removed, followers first and
    the leader last. The checks after each step."""
    old = list(ensemble.sids)
    steps = []
    for sid in range(max(old) + 1, max(old) + 1 + len(old)):
        steps.append(reconfig_step(ensemble, world, "add", sid, kind))
        print(f"{label}: {steps[-1].line()}")
        world.check(f"{label}, after adding server.{sid}")
    point_clients(ensemble, world)
    todo = set(old)
    while todo:
        leader = ensemble.wait_one_leader()
        followers = sorted(todo - {leader})
        sid = followers[0] if followers else leader
        steps.append(reconfig_step(ensemble, world, "remove", sid, kind))
        todo.discard(sid)
        print(f"{label}: {steps[-1].line()}")
        ensemble.wait_one_leader(timeout_s=ELECTION_TIMEOUT_S + COMMAND_SLACK_S)
        world.check(f"{label}, after removing server.{sid}")
    assert {ensemble.member(s).kind for s in ensemble.sids} == {kind}
    print(f"{label}: {len(steps)} steps in {sum(s.writers_back_s for s in steps):.1f}s; "
          f"longest gap {max(s.gap_s for s in steps):.2f}s, one writer's "
          f"{max(s.writer_gap_s for s in steps):.2f}s; {world.acked.count()} writes "
          "acknowledged")
    return steps


def _run(ensemble: Ensemble, java_watcher: Path, start_kind: str,
         *rolls: tuple[str, Prepare | None, str, bool], settings: dict = SETTINGS,
         moves: tuple[tuple[str, str], ...] = ()) -> list[Step]:
    """Start an ensemble of start_kind, put the world on it, then each (kind, prepare,
    label, check_each) roll in turn, or each (kind, label) move by reconfig, under the same
    load, sessions, lock and watchers."""
    ensemble.start(3, kind=start_kind, settings=settings)
    ensemble.wait_one_leader()
    world = World(ensemble, java_watcher)
    try:
        world.start()
        world.check(f"{(rolls or moves)[0][-1 if moves else 2]}, before")
        steps = [s for kind, prepare, label, check_each in rolls
                 for s in roll(ensemble, world, kind, prepare, label, check_each)]
        steps += [s for kind, label in moves
                  for s in move_by_reconfig(ensemble, world, kind, label)]
        world.finish()
        return steps
    finally:
        world.close()


@pytest.mark.timeout(420)
@pytest.mark.parametrize("variant", ["empty", "import"])
def test_migrate_zookeeper_to_zkcompat(ensemble, java_watcher, variant):
    prepare = prepare_empty if variant == "empty" else prepare_import
    steps = _run(ensemble, java_watcher, "zookeeper",
                 ("zkcompat", prepare, f"migrate ({variant})", True))
    if variant == "import":  # each came up with the imported tree, not an empty one
        for step in steps:
            m = ensemble.wait_log(step.sid, r"event=snapshot_loaded zxid=0x[0-9a-f]+ "
                                            r"nodes=(\d+)")
            assert int(m.group(1)) > PRELOADED, m.group(0)


@pytest.mark.timeout(420)
def test_roll_back_zkcompat_to_zookeeper(ensemble, java_watcher):
    """The way back from where the migration left the ensemble: its ZooKeeper-era sessions,
    ephemerals, lock and watches, zkcompat servers that imported ZooKeeper's data, and
    their dataDirs with ZooKeeper's files moved out. Each zkcompat server is replaced by an
    empty ZooKeeper, the leader last. (The way there is checked at its end only: its steps
    are test_migrate_zookeeper_to_zkcompat[import]'s, checked each.)"""
    _run(ensemble, java_watcher, "zookeeper",
         ("zkcompat", prepare_import, "there (import)", False),
         ("zookeeper", prepare_zookeeper, "roll back", True))


@pytest.mark.timeout(420)
def test_zookeeper_rolling_restart_baseline(ensemble, java_watcher):
    """The same loop on ZooKeeper alone, each server restarted on its own data: the gaps
    a ZooKeeper operator already lives with."""
    _run(ensemble, java_watcher, "zookeeper", ("zookeeper", None, "ZooKeeper restart", True))


@pytest.mark.timeout(600)
def test_migrate_by_reconfig_and_back(ensemble, java_watcher):
    """Migration (b): a loaded ZooKeeper 3.8 ensemble with reconfig on gains three zkcompat
    servers by reconfig, its clients are pointed at all six, and its ZooKeeper servers are
    removed by reconfig, the leader last; then the way back, three ZooKeeper servers added
    and the zkcompat ones removed. No acknowledged write lost, no session expired, every
    watch event, the lock held, the trees equal after every step."""
    steps = _run(ensemble, java_watcher, "zookeeper", settings=RECONFIG_SETTINGS,
                 moves=(("zkcompat", "migrate by reconfig"),
                        ("zookeeper", "back by reconfig")))
    assert [s.sid for s in steps if s.now != "removed"] == [4, 5, 6, 7, 8, 9]
