"""Real ensembles for the replication fault tests: `zkcompat ensemble` drives the servers
(by PID, from D/ensemble.json), kazoo clients load them, and every acknowledged write is
recorded so that each live server can be checked to hold it after the fault."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import ZnodeStat

from zkcompat.cli.ensemble_process import is_ours, server_mode
from zkcompat.cli.ensemble_state import Member, load_state

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
ENSEMBLE_ARGV = [sys.executable, "-m", "zkcompat", "ensemble"]
# tickTime 500 ms: a follower gives up on a silent leader after syncLimit=4 ticks (2 s).
FAST = {"tickTime": 500, "initLimit": 10, "syncLimit": 4}
# The leader's log window kept short, so a follower that misses ~1000 txns needs a SNAP
# (zkcompat purges after each snapshot; ZooKeeper's txn-log sync is off, its
# committedLog holds 100 txns).
SMALL_LOG_WINDOW = {"snapCount": 100, "autopurge.purgeInterval": 1,
                    "autopurge.snapRetainCount": 3, "snapshotSizeFactor": -1,
                    "commitLogCount": 100}
START_TIMEOUT_S = 90.0  # JVMs electing on a loaded 2-core box
COMMAND_SLACK_S = 30.0  # the command's own Python start-up and teardown
ELECTION_TIMEOUT_S = 30.0
SESSION_TIMEOUT_S = 10.0  # the most tickTime 500 allows (20 ticks)
OP_TIMEOUT_S = 20.0  # one write's reply, across a failover
CLIENT_START_TIMEOUT_S = 20.0
FAST_RETRY = {"max_tries": -1, "delay": 0.1, "backoff": 1.5, "max_delay": 1.0}
POLL_S = 0.2
LOG_TAIL_LINES = 25
ZOOKEEPER_LOG_HEADER_BYTES = 16  # FileHeader: magic, version, dbid


def wait_for(predicate: Callable[[], object], timeout_s: float, what: str,
             interval_s: float = POLL_S, detail: Callable[[], str] = lambda: ""):
    """The first truthy value of predicate(); an AssertionError naming `what` at the end."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {timeout_s:g}s\n{detail()}")
        time.sleep(interval_s)


def make_client(hosts: str, timeout_s: float = SESSION_TIMEOUT_S, **kwargs) -> KazooClient:
    """A started KazooClient that tries hosts in the given order and reconnects quickly."""
    kwargs.setdefault("randomize_hosts", False)
    kwargs.setdefault("connection_retry", dict(FAST_RETRY))
    client = KazooClient(hosts=hosts, timeout=timeout_s, **kwargs)
    client.start(timeout=CLIENT_START_TIMEOUT_S)
    return client


def close_client(client: KazooClient) -> None:
    try:
        client.stop()
        client.close()
    except Exception:  # noqa: BLE001 - teardown of a client whose servers may be gone
        pass


# -- the ensemble -----------------------------------------------------------------------


class Ensemble:
    """One `zkcompat ensemble` directory: its commands, modes, logs and clients.
    close() ends everything it started, SIGSTOPped servers included."""

    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)
        self.clients: list[KazooClient] = []
        self.connect_string = ""

    # commands

    def run(self, *args: str, timeout_s: float = START_TIMEOUT_S) -> str:
        done = subprocess.run([*ENSEMBLE_ARGV, *args, "--dir", str(self.dir)],
                              capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=timeout_s + COMMAND_SLACK_S, cwd=REPO_ROOT,
                              env=_env())
        assert done.returncode == 0, (f"ensemble {' '.join(args)}: rc {done.returncode}\n"
                                      f"{done.stdout}{done.stderr}\n{self.log_tails()}")
        return done.stdout

    def start(self, size: int, kind: str = "zkcompat", settings: dict | None = None,
              timeout_s: float = START_TIMEOUT_S, addresses: str = "same") -> str:
        sets = [a for k, v in (settings or {}).items() for a in ("--set", f"{k}={v}")]
        out = self.run("start", str(size), "--kind", kind, "--timeout", str(timeout_s), *sets,
                       "--addresses", addresses, timeout_s=timeout_s)
        line = out.strip().splitlines()[-1]
        assert line.startswith("connect: "), out
        self.connect_string = line.removeprefix("connect: ")
        return self.connect_string

    def kill(self, sid: int) -> float:
        """SIGKILL by the recorded PID, as `ensemble kill` does, but timed here: returns
        time.monotonic() just before the signal, once the process is gone."""
        m = self.member(sid)
        assert is_ours(m.pid, m.cfg), f"server.{sid} (pid {m.pid}) is not running"
        killed_at = time.monotonic()
        os.kill(m.pid, signal.SIGKILL)
        wait_for(lambda: not self.running(sid), 10.0, f"server.{sid} gone after SIGKILL")
        return killed_at

    def stop_server(self, sid: int) -> None:
        self.run("stop-server", str(sid))

    def start_server(self, sid: int, kind: str | None = None) -> str:
        """`start-server`; with kind, server sid runs as that kind from now on (the same
        zoo.cfg, myid, ports and dataDir): a rolling replacement."""
        self._drop_torn_zookeeper_log(sid)
        kinds = () if kind is None else ("--kind", kind)
        return self.run("start-server", str(sid), "--timeout", str(START_TIMEOUT_S), *kinds)

    def _drop_torn_zookeeper_log(self, sid: int) -> None:
        """A ZooKeeper killed just as it opened a new txn log leaves a file shorter than
        its 16-byte FileHeader, and then cannot start ("Unable to run quorum server":
        EOFException in FileHeader.deserialize; seen once in CI after kill -9 of a 3.8
        leader). Such a file holds no txn: removing it loses nothing, and is what an
        operator does. zkcompat's own data is never touched here."""
        m = self.member(sid)
        if m.kind != "zookeeper":
            return
        for log in (Path(m.data_dir) / "version-2").glob("log.*"):
            if log.stat().st_size < ZOOKEEPER_LOG_HEADER_BYTES:
                print(f"server.{sid}: removing torn ZooKeeper txn log {log.name} "
                      f"({log.stat().st_size} bytes)")
                log.unlink()

    def start_servers(self, *sids: int) -> None:
        """Several at once: one alone may have no quorum to serve in. Each `start-server`
        rewrites ensemble.json with the PID it spawned, so the next one starts only once
        that PID is recorded (two at once could each save over the other's PID)."""
        procs = []
        for sid in sids:
            self._drop_torn_zookeeper_log(sid)
            old_pid = self.member(sid).pid
            procs.append(subprocess.Popen(
                [*ENSEMBLE_ARGV, "start-server", str(sid), "--dir", str(self.dir), "--timeout",
                 str(START_TIMEOUT_S)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True, stdin=subprocess.DEVNULL, cwd=REPO_ROOT, env=_env()))
            wait_for(lambda sid=sid, old_pid=old_pid: (self.member(sid).pid != old_pid
                                                       or procs[-1].poll() is not None),
                     COMMAND_SLACK_S, f"server.{sid}'s new PID recorded")
        outs = [p.communicate(timeout=START_TIMEOUT_S + COMMAND_SLACK_S)[0] for p in procs]
        for sid, p, out in zip(sids, procs, outs, strict=True):
            assert p.returncode == 0, f"start-server {sid}: {out}\n{self.log_tails()}"

    def signal(self, sid: int, sig: signal.Signals) -> None:
        """sig to the PID ensemble.json records for sid, if /proc shows it is that server."""
        m = self.member(sid)
        assert is_ours(m.pid, m.cfg), f"server.{sid} (pid {m.pid}) is not running"
        os.kill(m.pid, sig)

    def close(self) -> None:
        for client in self.clients:
            close_client(client)
        state = load_state(self.dir)
        if state is None:
            return
        for m in state.members.values():  # a stopped process would sit out SIGTERM's grace
            if is_ours(m.pid, m.cfg):
                os.kill(m.pid, signal.SIGCONT)
        subprocess.run([*ENSEMBLE_ARGV, "stop", "--dir", str(self.dir)], capture_output=True,
                       stdin=subprocess.DEVNULL, timeout=120, cwd=REPO_ROOT, env=_env())
        for m in load_state(self.dir).members.values():
            if is_ours(m.pid, m.cfg):
                os.kill(m.pid, signal.SIGKILL)

    # state

    def members(self) -> dict[int, Member]:
        state = load_state(self.dir)
        assert state is not None, f"no ensemble in {self.dir}"
        return state.members

    def member(self, sid: int) -> Member:
        return self.members()[sid]

    @property
    def sids(self) -> list[int]:
        return sorted(self.members())

    def address(self, sid: int) -> str:
        return self.member(sid).address

    def hosts(self, first: int) -> str:
        """The full connect string, starting at server `first` (then in sid order)."""
        sids = self.sids
        order = sids[sids.index(first):] + sids[:sids.index(first)]
        return ",".join(self.address(s) for s in order)

    def running(self, sid: int) -> bool:
        m = self.member(sid)
        return is_ours(m.pid, m.cfg)

    def mode(self, sid: int) -> str:
        m = self.member(sid)
        return server_mode(m.client_port, m.host) or "down"

    def modes(self) -> dict[int, str]:
        return {sid: self.mode(sid) for sid in self.sids}

    def wait_modes(self, want: Callable[[dict[int, str]], bool], what: str,
                   timeout_s: float = ELECTION_TIMEOUT_S) -> dict[int, str]:
        seen: list[dict[int, str]] = []

        def check():
            modes = self.modes()
            seen.append(modes)
            return modes if want(modes) else None

        return wait_for(check, timeout_s, what,
                        detail=lambda: f"modes: {seen[-1:]}\n{self.log_tails()}")

    def wait_one_leader(self, up: Iterable[int] | None = None,
                        timeout_s: float = ELECTION_TIMEOUT_S) -> int:
        """Wait until the servers `up` (default: all) are one leader and followers; the
        leader's sid."""
        up = set(self.sids if up is None else up)

        def settled(modes):
            mine = sorted(modes[s] for s in up)
            return mine == ["follower"] * (len(up) - 1) + ["leader"]

        modes = self.wait_modes(settled, f"one leader and followers among {sorted(up)}",
                                timeout_s)
        return next(s for s in up if modes[s] == "leader")

    # logs

    def log_path(self, sid: int) -> Path:
        return self.member(sid).log_path

    def log_size(self, sid: int) -> int:
        try:
            return self.log_path(sid).stat().st_size
        except OSError:
            return 0

    def log_since(self, sid: int, offset: int = 0) -> str:
        try:
            with open(self.log_path(sid), "rb") as f:
                f.seek(offset)
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def wait_log(self, sid: int, pattern: str, offset: int = 0,
                 timeout_s: float = ELECTION_TIMEOUT_S) -> re.Match:
        regex = re.compile(pattern)
        return wait_for(lambda: regex.search(self.log_since(sid, offset)), timeout_s,
                        f"server.{sid} log line /{pattern}/",
                        detail=lambda: self.log_tails())

    def log_tails(self, lines: int = LOG_TAIL_LINES) -> str:
        out = []
        for log in sorted(self.dir.glob("*/server.log")):
            tail = log.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {log} ---\n" + "\n".join(tail))
        return "\n".join(out)

    # clients

    def client(self, hosts: str | None = None, **kwargs) -> KazooClient:
        """A started client on hosts (default: the full connect string), closed at the end."""
        client = make_client(hosts or self.connect_string, **kwargs)
        self.clients.append(client)
        return client

    def client_on(self, sid: int, **kwargs) -> KazooClient:
        """A client of that one server only (reads see what that server holds)."""
        return self.client(self.address(sid), **kwargs)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH"))
                                        if p)
    return env


# -- acknowledged writes --------------------------------------------------------------------


@dataclass(frozen=True)
class Ack:
    path: str
    data: bytes
    version: int
    started: float  # time.monotonic() when the request was sent
    finished: float  # ... and when its reply arrived
    writer: str


@dataclass
class AckedWrites:
    """Every write a server acknowledged, and every failure the clients saw."""

    acks: list[Ack] = field(default_factory=list)
    failures: list[tuple[str, str, float]] = field(default_factory=list)  # writer, error, when
    violations: list[str] = field(default_factory=list)  # wrong data a client was shown
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ack(self, ack: Ack) -> None:
        with self.lock:
            self.acks.append(ack)

    def fail(self, writer: str, error: BaseException) -> None:
        with self.lock:
            self.failures.append((writer, type(error).__name__, time.monotonic()))

    def violation(self, message: str) -> None:
        with self.lock:
            self.violations.append(message)

    def latest(self) -> dict[str, Ack]:
        """Per path, the acknowledged write with the highest version."""
        with self.lock:
            acks = list(self.acks)
        out: dict[str, Ack] = {}
        for a in acks:
            if a.path not in out or a.version > out[a.path].version:
                out[a.path] = a
        return out

    def count(self, since: float = 0.0) -> int:
        with self.lock:
            return sum(1 for a in self.acks if a.started >= since)

    def writers(self, since: float = 0.0) -> set[str]:
        """The writers with a write sent at or after `since` acknowledged."""
        with self.lock:
            return {a.writer for a in self.acks if a.started >= since}

    def first_ack_sent_after(self, t: float) -> Ack | None:
        with self.lock:
            after = [a for a in self.acks if a.started >= t]
        return min(after, key=lambda a: a.finished, default=None)

    def failure_names(self, writer: str | None = None, since: float = 0.0) -> set[str]:
        with self.lock:
            return {e for w, e, t in self.failures if t >= since and writer in (None, w)}


def write_batch(client: KazooClient, writes: dict[str, bytes], acked: AckedWrites,
                writer: str = "batch", in_flight: int = 100) -> None:
    """Creates each path with its data, `in_flight` at a time; each one must be acked."""
    items = list(writes.items())
    for i in range(0, len(items), in_flight):
        chunk = items[i:i + in_flight]
        started = time.monotonic()
        pending = [(p, d, client.create_async(p, d)) for p, d in chunk]
        for path, data, result in pending:
            assert result.get(timeout=OP_TIMEOUT_S) == path
            acked.ack(Ack(path, data, 0, started, time.monotonic(), writer))


class Writer(threading.Thread):
    """One client writing in a loop, one request at a time: a sequential create, then a
    setData of its counter node, each recorded once acknowledged and read back on the
    same session (a session always reads its own acknowledged writes)."""

    def __init__(self, name: str, hosts: str, acked: AckedWrites, stop: threading.Event,
                 root: str = "/load") -> None:
        super().__init__(name=name, daemon=True)
        self.acked = acked
        self.stop_event = stop
        self.states: list[tuple[str, float]] = []
        self.client = make_client(hosts)
        self.client.add_listener(lambda s: self.states.append((s, time.monotonic())))
        self.session_id = self.client.client_id[0]
        self.prefix = f"{root}/{name}"
        self.counter = f"{self.prefix}/counter"
        self.ephemeral = f"{root}-ephemeral/{name}"
        self.client.ensure_path(self.prefix)
        self.client.ensure_path(f"{root}-ephemeral")
        self.client.create(self.counter, b"0")
        self.client.create(self.ephemeral, name.encode(), ephemeral=True)
        self.n = 0

    def run(self) -> None:
        try:
            self._loop()
        except BaseException as e:  # a writer that dies is a failed test, not a silent one
            self.acked.violation(f"{self.name} died: {e!r}")
            raise

    def _loop(self) -> None:
        while not self.stop_event.is_set():
            self.write_once()

    def write_once(self) -> None:
        """One write, recorded once acknowledged (or its failure, after a short pause)."""
        self.n += 1
        data = f"{self.name}-{self.n}".encode()
        started = time.monotonic()
        try:
            if self.n % 2:
                path = self.client.create_async(f"{self.prefix}/seq-", data,
                                                sequence=True).get(timeout=OP_TIMEOUT_S)
                version = 0
            else:
                path = self.counter
                version = self.client.set_async(path, data).get(
                    timeout=OP_TIMEOUT_S).version
            self.acked.ack(Ack(path, data, version, started, time.monotonic(), self.name))
            self._read_back(path, data, version)
        except (KazooException, KazooTimeoutError) as e:
            self.acked.fail(self.name, e)
            self.stop_event.wait(0.05)

    def _read_back(self, path: str, data: bytes, version: int) -> None:
        got, stat = self.client.get_async(path).get(timeout=OP_TIMEOUT_S)
        if stat.version < version or (stat.version == version and got != data):
            self.acked.violation(f"{self.name} wrote {path} v{version} {data!r} and then "
                                 f"read v{stat.version} {got!r}")

    def saw(self, state: str, since: float = 0.0) -> bool:
        return any(s == state and t >= since for s, t in self.states)

    @property
    def connected(self) -> bool:
        return self.client.state == KazooState.CONNECTED


class Load:
    """One Writer per server, each with the full connect string starting at its server."""

    def __init__(self, ensemble: Ensemble, sids: Iterable[int] | None = None,
                 root: str = "/load") -> None:
        self.acked = AckedWrites()
        self.stop_event = threading.Event()
        ensemble.client().ensure_path(root)
        self.writers = [Writer(f"w{sid}", ensemble.hosts(sid), self.acked, self.stop_event,
                               root)
                        for sid in (ensemble.sids if sids is None else sids)]
        for w in self.writers:
            ensemble.clients.append(w.client)

    def __enter__(self) -> Load:
        for w in self.writers:
            w.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        self.stop_event.set()
        for w in self.writers:
            w.join(timeout=OP_TIMEOUT_S * 2 + 5)
            assert not w.is_alive(), f"{w.name} did not stop"

    def wait_acks(self, n: int, since: float, what: str,
                  timeout_s: float = ELECTION_TIMEOUT_S) -> None:
        wait_for(lambda: self.acked.count(since) >= n, timeout_s,
                 f"{n} writes acknowledged {what}")

    def wait_every_writer(self, since: float, what: str,
                          timeout_s: float = ELECTION_TIMEOUT_S) -> None:
        """Each writer has a write sent since then acknowledged: a client that was on a
        killed server reconnects by kazoo's backoff, later than the others go on."""
        names = {w.name for w in self.writers}
        wait_for(lambda: self.acked.writers(since) >= names, timeout_s,
                 f"a write of every writer acknowledged {what}")


# -- checks --------------------------------------------------------------------------------


def check_acked_everywhere(ensemble: Ensemble, acked: AckedWrites,
                           sids: Iterable[int] | None = None) -> int:
    """sync, then read every acknowledged znode on each server alone: each holds the acked
    data at the acked version, or a later version. Returns the number of znodes checked."""
    latest = acked.latest()
    assert latest, "no write was ever acknowledged: nothing to check"
    for sid in ensemble.sids if sids is None else sids:
        client = ensemble.client_on(sid)
        client.sync("/")
        results = [(a, client.get_async(a.path)) for a in latest.values()]
        lost = []
        for a, result in results:
            try:
                data, stat = result.get(timeout=OP_TIMEOUT_S)
            except KazooException as e:
                lost.append(f"{a.path} v{a.version}: {type(e).__name__}")
                continue
            if stat.version < a.version or (stat.version == a.version and data != a.data):
                lost.append(f"{a.path} acked v{a.version} {a.data!r}, "
                            f"server.{sid} has v{stat.version} {data!r}")
        assert not lost, (f"server.{sid} lost {len(lost)} of {len(latest)} acknowledged "
                          f"writes: {lost[:10]}\n{ensemble.log_tails()}")
        close_client(client)
        ensemble.clients.remove(client)
    return len(latest)


CONFIG_NODE = "/zookeeper/config"


def read_tree(client: KazooClient, root: str) -> dict[str, tuple[bytes, tuple]]:
    """Every znode under root (root included): path -> (data, full Stat). One level at a
    time, pipelined; children are listed only where the Stat says there are some (most
    znodes are leaves, so this halves the requests)."""
    out = {}
    todo = [root]
    while todo:
        got = [(p, client.get_async(p)) for p in todo]
        parents = []
        for path, result in got:
            data, stat = result.get(timeout=OP_TIMEOUT_S)
            if stat.numChildren:
                parents.append(path)
            stat = tuple(stat)
            if path == CONFIG_NODE:
                # Each server sets its mtime from its own clock (ZooKeeper's too:
                # ZKDatabase.initConfigInZKDatabase), so no two servers agree on it.
                stat = stat[:3] + (None,) + stat[4:]
            out[path] = (data, stat)
        listed = [(p.rstrip("/"), client.get_children_async(p)) for p in parents]
        todo = [f"{base}/{c}" for base, result in listed
                for c in result.get(timeout=OP_TIMEOUT_S)]
    return out


Trees = dict[int, dict[str, tuple[bytes, tuple]]]  # sid -> read_tree's answer there
STAT_VERSION = ZnodeStat._fields.index("version")


def read_trees(ensemble: Ensemble, root: str, sids: Iterable[int] | None = None) -> Trees:
    """sync on each server, then read the tree under root there."""
    trees = {}
    for sid in ensemble.sids if sids is None else sids:
        client = ensemble.client_on(sid)
        client.sync(root)
        trees[sid] = read_tree(client, root)
    return trees


def assert_trees_agree(trees: Trees, root: str) -> int:
    """Every server holds the same znodes under root with the same data and the same Stat
    (czxid, mzxid, times, versions, owner, pzxid). Returns the znode count."""
    first_sid, first = next(iter(trees.items()))
    for sid, tree in trees.items():
        if tree != first:
            only_a = sorted(set(first) - set(tree))[:5]
            only_b = sorted(set(tree) - set(first))[:5]
            differ = [(p, first[p], tree[p]) for p in sorted(set(first) & set(tree))
                      if first[p] != tree[p]][:5]
            raise AssertionError(f"server.{first_sid} and server.{sid} disagree under {root}: "
                                 f"only on {first_sid}: {only_a}; only on {sid}: {only_b}; "
                                 f"different: {differ}")
    return len(first)


def check_trees_agree(ensemble: Ensemble, root: str, sids: Iterable[int] | None = None) -> int:
    """sync, then assert_trees_agree over every server (or sids)."""
    return assert_trees_agree(read_trees(ensemble, root, sids), root)


def assert_acked_in(trees: Trees, acked: AckedWrites, ensemble: Ensemble) -> int:
    """check_acked_everywhere's assertion on trees already read (after a sync, with the
    load paused) under a root that holds every acknowledged write: one read of each
    server serves both checks. Returns the number of znodes checked."""
    latest = acked.latest()
    assert latest, "no write was ever acknowledged: nothing to check"
    for sid, tree in trees.items():
        lost = []
        for a in latest.values():
            if a.path not in tree:
                lost.append(f"{a.path} v{a.version}: not on server.{sid}")
                continue
            data, stat = tree[a.path]
            version = stat[STAT_VERSION]
            if version < a.version or (version == a.version and data != a.data):
                lost.append(f"{a.path} acked v{a.version} {a.data!r}, "
                            f"server.{sid} has v{version} {data!r}")
        assert not lost, (f"server.{sid} lost {len(lost)} of {len(latest)} acknowledged "
                          f"writes: {lost[:10]}\n{ensemble.log_tails()}")
    return len(latest)


def ensure_created(client: KazooClient, path: str, data: bytes = b"") -> None:
    try:
        client.create(path, data)
    except NodeExistsError:
        pass
