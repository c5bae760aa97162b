"""Servers under test: ones this run starts (zkcompat, Apache ZooKeeper), standalone or as
an ensemble, with PIDs and RSS, or an external connect string (one server or an ensemble)
that the run only talks to.

Both managed kinds get the same zoo.cfg: forceSync=yes, the same snapCount and tickTime,
no per-address connection limit; an ensemble's members also get the same server.N lines,
initLimit and syncLimit, and each its myid. ZooKeeper's heap is capped at ZOOKEEPER_HEAP_MAX
per server unless the run gives it another (`jvm_heap`, for data that would not fit). All inherit this process's open-file limit, raised to the hard limit before
they start. Processes are ended by their PID only. That zoo.cfg and ZooKeeper's classpath
come from zkcompat.cli.launch, which `zkcompat ensemble` starts its servers with too.
"""

from __future__ import annotations

import atexit
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench import wire
from zkcompat.cli.launch import (
    BASE_CFG,
    ENSEMBLE_CFG,
    HOST,
    ZOOKEEPER_HEAP_MAX,
    ZOOKEEPER_MAIN,
    ZOOKEEPER_QUORUM_MAIN,
    zookeeper_classpath,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
# The kinds this run can start as an ensemble.
ENSEMBLE_KINDS = ("zkcompat", "zookeeper")
ENSEMBLE_SIZES = (3, 5, 7)
START_TIMEOUT_S = 900.0  # recovering a million znodes can take minutes
STOP_GRACE_S = 60.0  # ZooKeeper and zkcompat both finish quickly on SIGTERM
JCMD_TIMEOUT_S = 60.0  # a full GC of a 1 GB heap takes a second or two

_LOG4J = """\
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File={log}
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{{ISO8601}} %-5p [%t] %m%n
"""

_running: dict[int, subprocess.Popen] = {}


@atexit.register
def _kill_leftovers() -> None:
    for pid, popen in list(_running.items()):
        if popen.poll() is None:
            os.kill(pid, signal.SIGKILL)
            popen.wait()


def raise_nofile_limit(needed: int = 0) -> int:
    """Raise RLIMIT_NOFILE's soft limit to the hard one (children inherit it); returns the
    new soft limit, or raises RuntimeError if even the hard limit is below `needed`."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    elif hard == resource.RLIM_INFINITY and soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
        soft = needed
    if soft != resource.RLIM_INFINITY and soft < needed:
        raise RuntimeError(f"open-file limit {soft} is below the {needed} this run needs "
                           "(raise the hard limit: ulimit -Hn, limits.conf)")
    return soft


_HANDED_OUT: set[int] = set()  # every port free_port has returned in this process
_FREE_PORT_TRIES = 1000


def free_port() -> int:
    """A loopback port that was free a moment ago and that this process has not handed out
    before. The kernel may give out a port it just closed again, so two calls in a row could
    name one port (a zoo.cfg whose quorum and election ports were the same made ZooKeeper
    exit: "Client and election port must be different")."""
    for _ in range(_FREE_PORT_TRIES):
        with socket.socket() as s:
            s.bind((HOST, 0))
            port = s.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port
    raise RuntimeError(f"no loopback port this process has not handed out already "
                       f"({len(_HANDED_OUT):,} handed out)")


def parse_connect_string(text: str) -> list[tuple[str, int]]:
    """"h1:p1,h2:p2[/chroot]" -> [(h1, p1), (h2, p2)] (a chroot is not supported)."""
    if "/" in text:
        raise ValueError(f"{text!r}: a chroot is not supported by the bench")
    out = []
    for part in text.split(","):
        host, _, port = part.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"{part!r} is not host:port")
        out.append((host, int(port)))
    return out


@dataclass
class Target:
    """Where load goes. `servers` are the processes behind it when this run manages them
    (one, or an ensemble's members): their CPU and RSS are measured, summed."""

    name: str
    addresses: list[tuple[str, int]]
    servers: list[ManagedServer] = field(default_factory=list)

    @property
    def connect_string(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.addresses)

    @property
    def pids(self) -> list[int]:
        return [s.pid for s in self.servers]


@dataclass
class ManagedServer:
    kind: str  # "zkcompat" or "zookeeper"
    workdir: Path
    extra_cfg: dict = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    popen: subprocess.Popen | None = None
    myid: int | None = None  # an ensemble member's id (its myid file); None: standalone
    jvm_heap: str = ZOOKEEPER_HEAP_MAX  # ZooKeeper's -Xmx flag; zkcompat ignores it

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def target(self) -> Target:
        return Target(self.kind, [(HOST, self.port)], [self])

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def _write_cfg(self) -> Path:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(exist_ok=True)
        cfg = {**BASE_CFG, "dataDir": self.data_dir, "clientPort": self.port, **self.extra_cfg}
        if self.myid is not None:
            (self.data_dir / "myid").write_text(f"{self.myid}\n")
        path = self.workdir / "zoo.cfg"
        path.write_text("".join(f"{k}={v}\n" for k, v in cfg.items()))
        return path

    def _command(self, cfg: Path) -> tuple[list[str], dict]:
        env = dict(os.environ)
        if self.kind == "zookeeper":
            log4j = self.workdir / "log4j.properties"
            log4j.write_text(_LOG4J.format(log=self.workdir / "zookeeper.log"))
            main = ZOOKEEPER_MAIN if self.myid is None else ZOOKEEPER_QUORUM_MAIN
            return ["java", self.jvm_heap, f"-Dlog4j.configuration=file:{log4j}",
                    "-Dzookeeper.jmx.log4j.disable=true", "-cp", zookeeper_classpath(),
                    main, str(cfg)], env
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH"))
                                            if p)
        return [sys.executable, "-m", "zkcompat", "serve", "--config", str(cfg)], env

    def start(self, probe_path: str = "/", timeout_s: float = START_TIMEOUT_S) -> float:
        """Start and wait until a session can read probe_path; returns the seconds from
        spawn to that first successful read."""
        t0 = self.spawn()
        return self.wait_serving(probe_path, timeout_s) - t0

    def spawn(self) -> float:
        """Start the process without waiting for it to serve (an ensemble's members start
        together: none serves before a quorum of them runs); returns when it was spawned."""
        assert not self.alive(), f"{self.kind} is already running"
        cmd, env = self._command(self._write_cfg())
        raise_nofile_limit()  # the server inherits it: thousands of sessions, one fd each
        out = open(self.workdir / f"{self.kind}.out", "ab")  # noqa: SIM115 - the child owns it
        t0 = time.monotonic()
        self.popen = subprocess.Popen(cmd, cwd=self.workdir, env=env, stdin=subprocess.DEVNULL,
                                      stdout=out, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        out.close()
        _running[self.popen.pid] = self.popen
        return t0

    def wait_serving(self, probe_path: str = "/", timeout_s: float = START_TIMEOUT_S) -> float:
        """Wait until a session on this server can read probe_path; returns that moment.
        A server that does not, or exits, is killed and named in the RuntimeError."""
        try:
            return wire.wait_serving(HOST, self.port, probe_path, timeout_s, self.alive)
        except wire.WireError as e:
            self.kill()
            raise RuntimeError(f"{self.kind} did not start: {e}; see {self.workdir}") from None

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.popen is not None:
            _running.pop(self.popen.pid, None)

    def wipe(self) -> None:
        """Delete a stopped server's dataDir: it next starts empty (its myid is written
        again), as a replaced disk would, and has to fetch the whole tree."""
        assert not self.alive(), f"{self.kind} is running"
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def kill(self) -> None:
        if self.alive():
            self.popen.kill()
        if self.popen is not None:
            self.popen.wait()
            _running.pop(self.popen.pid, None)

    def rss_bytes(self) -> int:
        """VmRSS from /proc/PID/status."""
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError(f"no VmRSS for pid {self.pid}")

    def live_heap_bytes(self) -> int | None:
        """ZooKeeper only: the JVM heap in use right after a full GC (`jcmd GC.run`), which,
        unlike RSS, excludes garbage not yet collected; None for zkcompat or without jcmd."""
        if self.kind != "zookeeper" or not self.alive() or shutil.which("jcmd") is None:
            return None
        try:
            subprocess.run(["jcmd", str(self.pid), "GC.run"], capture_output=True,
                           timeout=JCMD_TIMEOUT_S, check=True)
            out = subprocess.run(["jcmd", str(self.pid), "GC.heap_info"], capture_output=True,
                                 text=True, timeout=JCMD_TIMEOUT_S, check=True).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        m = re.search(r"heap\s+total \d+K, used (\d+)K", out)
        return int(m.group(1)) * 1024 if m else None

    def disk_bytes(self) -> int:
        """Bytes actually allocated under dataDir (ZooKeeper's logs are sparse, preallocated)."""
        total = 0
        for root, _, files in os.walk(self.data_dir):
            for name in files:
                try:
                    total += os.stat(os.path.join(root, name)).st_blocks * 512
                except OSError:
                    pass
        return total


@dataclass
class ManagedEnsemble:
    """`size` servers of one kind on loopback (one address, a client, quorum and election
    port each), one zoo.cfg naming them all, started together; stopped by their PIDs."""

    kind: str
    workdir: Path
    size: int
    jvm_heap: str = ZOOKEEPER_HEAP_MAX  # each ZooKeeper member's -Xmx flag
    members: list[ManagedServer] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.kind not in ENSEMBLE_KINDS:
            raise ValueError(f"{self.kind} cannot run as an ensemble")
        if self.size not in ENSEMBLE_SIZES:
            raise ValueError(f"an ensemble has {', '.join(map(str, ENSEMBLE_SIZES))} servers")
        ports = [(free_port(), free_port(), free_port()) for _ in range(self.size)]
        quorum = {f"server.{i}": f"{HOST}:{peer}:{election}"
                  for i, (_, peer, election) in enumerate(ports, 1)}
        self.members = [
            ManagedServer(self.kind, self.workdir / f"{self.kind}{i}",
                          extra_cfg={**ENSEMBLE_CFG, **quorum}, port=client, myid=i,
                          jvm_heap=self.jvm_heap)
            for i, (client, _, _) in enumerate(ports, 1)]

    def target(self) -> Target:
        return Target(self.kind, [(HOST, m.port) for m in self.members], list(self.members))

    def start(self, probe_path: str = "/", timeout_s: float = START_TIMEOUT_S) -> float:
        """Start every member, then wait until each serves; returns the seconds from the
        first spawn until the last member served. If one fails, all are stopped."""
        try:
            t0 = min(m.spawn() for m in self.members)
            return max(m.wait_serving(probe_path, timeout_s) for m in self.members) - t0
        except BaseException:
            self.stop()
            raise

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        for m in self.members:
            m.stop(grace_s)
