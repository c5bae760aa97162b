"""The servers of `zkcompat ensemble` as processes: spawned detached, asked `srvr` what they
serve as, and signalled only while /proc/PID/cmdline still names that server's zoo.cfg, so a
recycled PID is never hit.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import click

from zkcompat.cli.ensemble_state import HOST, Member
from zkcompat.cli.launch import ZOOKEEPER_HEAP_MAX, ZOOKEEPER_QUORUM_MAIN, zookeeper_classpath
from zkcompat.config.sysprops import jvm_flags

# What `srvr` says once a server serves clients (ZooKeeper's QuorumPeer.ServerState names,
# "read-only" for a ReadOnlyZooKeeperServer); `start-server` wants it back in the ensemble.
START_MODES = frozenset({"leader", "follower", "observer", "read-only", "standalone"})
RESTART_MODES = START_MODES - {"standalone"}
STOP_GRACE_S = 30.0  # after SIGTERM, before SIGKILL
GONE_TIMEOUT_S = 10.0  # after SIGKILL: the process and its listening socket disappear
POLL_S = 0.25
FOUR_LETTER_TIMEOUT_S = 2.0
# srvr's answer from a running member without a quorum (ZK_NOT_SERVING).
NOT_SERVING = "This ZooKeeper instance is not currently serving requests"
ZOOKEEPER_GC = "-XX:+UseSerialGC"  # smaller and quicker to start on 2 cores
REPO_ROOT = Path(__file__).resolve().parents[2]

_LOG4J_CONSOLE = """\
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %m%n
"""


# -- processes: only ours, by PID -----------------------------------------------------------


def is_ours(pid: int | None, cfg: str) -> bool:
    """The PID runs, is no zombie, and its command line names this server's zoo.cfg."""
    if pid is None:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[-1].split()[0]  # comm, in parentheses, may hold spaces
    return state not in ("Z", "X") and os.fsencode(cfg) in cmdline


def exited(pid: int | None) -> bool:
    """The process is gone, or a zombie. For a server this command just spawned (its child,
    so the PID cannot be reused), unlike is_ours: right after Popen returns,
    /proc/PID/cmdline can still be empty, since the kernel wakes the vfork parent before the
    new program's arguments are in place."""
    if pid is None:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X")


def send_signal(member: Member, sig: signal.Signals) -> bool:
    """Send sig to the member's recorded PID if it is still our process."""
    if not is_ours(member.pid, member.cfg):
        return False
    try:
        os.kill(member.pid, sig)
    except ProcessLookupError:
        return False
    return True


def wait_until(predicate: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)


def port_refuses(port: int, host: str = HOST) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return False
    except OSError:
        return True


def stop_members(members: list[Member], grace_s: float = STOP_GRACE_S) -> list[Member]:
    """SIGTERM, wait, SIGKILL the rest, then wait for their client ports to close.
    Returns the members that could not be brought down."""
    for m in members:
        send_signal(m, signal.SIGTERM)
    wait_until(lambda: not any(is_ours(m.pid, m.cfg) for m in members), grace_s)
    for m in members:
        if send_signal(m, signal.SIGKILL):
            click.echo(f"server.{m.sid}: no exit {grace_s:.0f}s after SIGTERM, sent SIGKILL",
                       err=True)
    wait_until(lambda: not any(is_ours(m.pid, m.cfg) for m in members), GONE_TIMEOUT_S)
    wait_until(lambda: all(port_refuses(m.client_port, m.host) for m in members),
               GONE_TIMEOUT_S)
    return [m for m in members
            if is_ours(m.pid, m.cfg) or not port_refuses(m.client_port, m.host)]


# -- four-letter words -----------------------------------------------------------------------


def server_mode(port: int, host: str = HOST) -> str | None:
    """The Mode line of `srvr`, "not serving" if the server says so, or None if it does not
    answer one."""
    try:
        with socket.create_connection((host, port), timeout=FOUR_LETTER_TIMEOUT_S) as s:
            s.sendall(b"srvr")
            chunks = []
            while chunk := s.recv(65536):
                chunks.append(chunk)
    except OSError:
        return None
    for line in b"".join(chunks).decode("utf-8", "replace").splitlines():
        if line.startswith("Mode: "):
            return line[len("Mode: "):].strip()
        if line == NOT_SERVING:
            return "not serving"
    return None


def wait_serving(members: list[Member], modes: frozenset[str],
                 timeout_s: float) -> dict[int, str]:
    """Wait until each member's srvr says one of `modes`; returns why each of those that
    did not, did not (empty when all serve). Stops early once the rest have exited."""
    pending = {m.sid: m for m in members}
    why = {sid: "no answer to srvr" for sid in pending}
    deadline = time.monotonic() + timeout_s
    while pending and time.monotonic() < deadline:
        for sid, m in list(pending.items()):
            mode = server_mode(m.client_port, m.host)
            if mode in modes:
                del pending[sid]
                why.pop(sid)
            elif exited(m.pid):
                why[sid] = "process exited"
            elif mode is not None:
                why[sid] = f"Mode: {mode}"
        if pending and all(why[sid] == "process exited" for sid in pending):
            break
        if pending:
            time.sleep(POLL_S)
    return why


# -- start ------------------------------------------------------------------------------------


def _command(kind: str, member: Member) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ)
    if kind == "zookeeper":
        log4j = Path(member.data_dir) / "log4j.properties"
        log4j.write_text(_LOG4J_CONSOLE)
        # zkServer.sh runs java with JVMFLAGS="$SERVER_JVMFLAGS $JVMFLAGS" (a JAAS file, a
        # heap size), after our defaults so that they win; zkcompat servers inherit both
        # variables and read their -D flags the same way (config/sysprops.py).
        flags = jvm_flags(env)
        return ["java", ZOOKEEPER_HEAP_MAX, ZOOKEEPER_GC, f"-Dlog4j.configuration=file:{log4j}",
                "-Dzookeeper.jmx.log4j.disable=true", *flags, "-cp", zookeeper_classpath(),
                ZOOKEEPER_QUORUM_MAIN, member.cfg], env
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return [sys.executable, "-m", "zkcompat", "serve", "--config", member.cfg], env


def spawn(kind: str, member: Member) -> int:
    """Start the server detached (its own session, output to its server.log); its PID."""
    argv, env = _command(kind, member)
    with open(member.log_path, "ab") as out:
        popen = subprocess.Popen(argv, cwd=member.data_dir, env=env, stdin=subprocess.DEVNULL,
                                 stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return popen.pid  # never waited for here: the server outlives this command

