"""Start and stop real server processes for tests: Apache ZooKeeper and zkcompat.

Every process started here is tracked by PID and ended by PID (never by name);
anything still running when the interpreter exits is killed.
"""

from __future__ import annotations

import atexit
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HOST = "127.0.0.1"
REPO_ROOT = Path(__file__).resolve().parent.parent

# Debian's zookeeper 3.8 packages (scripts/install-zookeeper installs them).
ZOOKEEPER_HOME = Path("/usr/share/zookeeper")
ZOOKEEPER_ENV_SH = ZOOKEEPER_HOME / "bin" / "zkEnv.sh"
JAVA_SHARE = Path("/usr/share/java")
# zookeeper.jar's manifest Class-Path names its own dependencies; slf4j needs a
# binding and log4j 1.2 to write our log file.
ZOOKEEPER_LOGGING_JARS = ("slf4j-log4j12.jar", "log4j-1.2.jar")
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
ZOOKEEPER_HEAP_MAX = "-Xmx512m"

START_TIMEOUT_S = 60.0  # a JVM on a loaded 2-core CI box can take a while
STOP_GRACE_S = 5.0
LOG_TAIL_LINES = 40

_LOG4J_PROPERTIES = """\
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File={log_path}
log4j.appender.FILE.Append=true
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{{ISO8601}} - %-5p [%t:%C{{1}}@%L] - %m%n
"""

# Curator's classpath: Debian's libcurator-*-java 5.4 and libzookeeper-java 3.8
# (scripts/install-zookeeper). Guava 31 in Debian bundles failureaccess; slf4j-nop keeps
# stderr readable. test_curator.py and tests/ensemble/test_reconfig.py compile against it.
CLASSPATH_JARS = (
    "curator-recipes.jar",
    "curator-framework.jar",
    "curator-client.jar",
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "guava.jar",
    "slf4j-api.jar",
    "slf4j-nop.jar",
)


class ServerStartError(RuntimeError):
    """A server process did not come up; the message carries its log tail."""


class ServerProcess:
    """One server process we started: where it listens and how to end it."""

    def __init__(
        self,
        kind: str,
        popen: subprocess.Popen,
        port: int,
        workdir: Path,
        log_path: Path,
        config_path: Path,
    ) -> None:
        self.kind = kind  # "zookeeper" or "zkcompat"
        self.host = HOST
        self.port = port
        self.workdir = workdir
        self.log_path = log_path
        self.config_path = config_path
        self._popen = popen

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    def is_alive(self) -> bool:
        return self._popen.poll() is None

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM, wait up to grace_s, then SIGKILL."""
        if self.is_alive():
            try:
                self._popen.send_signal(signal.SIGTERM)
                self._popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.kill()
        _forget(self)

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.is_alive():
            self._popen.kill()
        self._popen.wait()
        _forget(self)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return log_tail(self.log_path, lines)

    def four_letter_word(self, word: str, timeout_s: float = 5.0) -> str:
        """Send a 4-letter word ("ruok", "srvr", ...) and return the reply."""
        return four_letter_word(self.host, self.port, word, timeout_s)

    def __repr__(self) -> str:
        state = "alive" if self.is_alive() else f"exited({self.returncode})"
        return f"<ServerProcess {self.kind} {self.connect_string} pid={self.pid} {state}>"


_running: dict[int, ServerProcess] = {}


def _forget(server: ServerProcess) -> None:
    _running.pop(server.pid, None)


@atexit.register
def _kill_leftovers() -> None:
    for server in list(_running.values()):
        server.kill()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as e:
        return f"(no log at {path}: {e})"
    return "\n".join(text.splitlines()[-lines:])


def four_letter_word(host: str, port: int, word: str, timeout_s: float = 5.0) -> str:
    with socket.create_connection((host, port), timeout=timeout_s) as s:
        s.sendall(word.encode("ascii"))
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


def write_zoo_cfg(path: Path, settings: dict[str, object]) -> None:
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))


def _base_cfg(workdir: Path, port: int, tick_time_ms: int, extra_cfg: dict | None) -> dict:
    data_dir = workdir / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    cfg: dict[str, object] = {
        "tickTime": tick_time_ms,
        "dataDir": data_dir,
        "clientPort": port,
        "clientPortAddress": HOST,
        "4lw.commands.whitelist": "*",
        "admin.enableServer": "false",
    }
    cfg.update(extra_cfg or {})
    return cfg


# ---------------------------------------------------------------- ZooKeeper


def zookeeper_classpath() -> str:
    """The jars Debian's zkEnv.sh puts on CLASSPATH, plus a log4j binding."""
    jars: list[str] = []
    try:
        env_sh = ZOOKEEPER_ENV_SH.read_text()
    except OSError:
        env_sh = ""
    match = re.search(r'^CLASSPATH="?([^"\n]*)"?', env_sh, re.MULTILINE)
    if match:
        jars = [p for p in match.group(1).split(":") if p.endswith(".jar")]
    if not jars:
        jars = [str(JAVA_SHARE / "zookeeper.jar")]
    jars += [str(JAVA_SHARE / name) for name in ZOOKEEPER_LOGGING_JARS]
    missing = [j for j in jars if not Path(j).exists()]
    if missing:
        raise ServerStartError(f"ZooKeeper jars missing: {missing}; run scripts/install-zookeeper")
    return ":".join(jars)


def zookeeper_version() -> str:
    out = subprocess.run(
        [
            "java",
            "-cp",
            str(JAVA_SHARE / "zookeeper.jar"),
            "org.apache.zookeeper.version.VersionInfoMain",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return out.stdout.strip()


def start_zookeeper(
    workdir: Path, tick_time_ms: int = 200, extra_cfg: dict | None = None,
    jvm_flags: tuple[str, ...] = (),
) -> ServerProcess:
    """A real standalone ZooKeeper 3.8 on a free loopback port, logging into workdir.

    Calling it again with the same workdir restarts on the same dataDir (a new
    port unless extra_cfg sets clientPort). jvm_flags go on java's command line as
    zkServer.sh puts SERVER_JVMFLAGS there (-Djava.security.auth.login.config=...).
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    classpath = zookeeper_classpath()
    port = int((extra_cfg or {}).get("clientPort") or free_port())
    cfg_path = workdir / "zoo.cfg"
    write_zoo_cfg(cfg_path, _base_cfg(workdir, port, tick_time_ms, extra_cfg))
    log_path = workdir / "zookeeper.log"
    log4j_path = workdir / "log4j.properties"
    log4j_path.write_text(_LOG4J_PROPERTIES.format(log_path=log_path))
    stdout_path = workdir / "zookeeper.out"
    command = [
        "java",
        ZOOKEEPER_HEAP_MAX,
        "-XX:+UseSerialGC",  # smaller and quicker to start on 2 cores
        "-Xshare:auto",
        f"-Dlog4j.configuration=file:{log4j_path}",
        "-Dzookeeper.jmx.log4j.disable=true",
        *jvm_flags,
        "-cp",
        classpath,
        ZOOKEEPER_MAIN,
        str(cfg_path),
    ]
    with open(stdout_path, "ab") as out:
        popen = subprocess.Popen(
            command,
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a ^C to pytest should not reach it first
        )
    server = ServerProcess("zookeeper", popen, port, workdir, log_path, cfg_path)
    _running[server.pid] = server
    _wait_until_serving(server, _zookeeper_answers, extra_logs=(stdout_path,))
    return server


def _zookeeper_answers(server: ServerProcess) -> bool:
    # "ruok" says imok before the request pipeline is up; "srvr" tells.
    if server.four_letter_word("ruok", timeout_s=2.0) != "imok":
        return False
    return "Mode: standalone" in server.four_letter_word("srvr", timeout_s=2.0)


# ----------------------------------------------------------------- zkcompat


def zkcompat_available() -> bool:
    """Whether this checkout has a runnable `python -m zkcompat serve` yet."""
    package = REPO_ROOT / "zkcompat"
    return (package / "__main__.py").exists()


def start_zkcompat(
    workdir: Path, tick_time_ms: int = 200, extra_cfg: dict | None = None
) -> ServerProcess:
    """`python -m zkcompat serve --config zoo.cfg` on a free loopback port.

    The zoo.cfg has the same shape as start_zookeeper's, so both servers get
    the same limits (tickTime, hence min/max session timeouts).
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    port = int((extra_cfg or {}).get("clientPort") or free_port())
    cfg_path = workdir / "zoo.cfg"
    write_zoo_cfg(cfg_path, _base_cfg(workdir, port, tick_time_ms, extra_cfg))
    log_path = workdir / "zkcompat.log"
    env = dict(os.environ)
    # The tests exercise this checkout, installed into the venv or not.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    command = [sys.executable, "-m", "zkcompat", "serve", "--config", str(cfg_path)]
    with open(log_path, "ab") as out:
        popen = subprocess.Popen(
            command,
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = ServerProcess("zkcompat", popen, port, workdir, log_path, cfg_path)
    _running[server.pid] = server
    _wait_until_serving(server, _kazoo_connects)
    return server


class EnsembleProcess:
    """A 3-server zkcompat ensemble (scripts/ensemble) standing in for one server: its
    connect string names all three, as a client of an ensemble has it."""

    kind = "zkcompat"
    host = HOST

    def __init__(self, workdir: Path, connect: str) -> None:
        self.workdir = workdir
        self._connect = connect
        self.port = int(connect.split(",")[0].rsplit(":", 1)[1])
        self.log_path = workdir / "1" / "server.log"

    @property
    def connect_string(self) -> str:
        return self._connect

    @property
    def pid(self) -> int:
        import json
        state = json.loads((self.workdir / "ensemble.json").read_text())
        return state["members"]["1"]["pid"]

    @property
    def returncode(self) -> int | None:
        return None if self.is_alive() else -1

    def _cli(self, *args: str, timeout_s: float = START_TIMEOUT_S) -> str:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        done = subprocess.run([sys.executable, "-m", "zkcompat", "ensemble", *args, "--dir",
                               str(self.workdir)], env=env, capture_output=True, text=True,
                              timeout=timeout_s)
        if done.returncode != 0:
            raise ServerStartError(f"zkcompat ensemble {' '.join(args)}: {done.stderr}")
        return done.stdout

    def is_alive(self) -> bool:
        return all(line.split()[-1] != "down" for line in self._cli("status").splitlines())

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        self._cli("stop")

    kill = stop

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return "\n".join(f"server.{k}:\n" + log_tail(self.workdir / str(k) / "server.log", lines)
                         for k in (1, 2, 3))

    def four_letter_word(self, word: str, timeout_s: float = 5.0) -> str:
        return four_letter_word(self.host, self.port, word, timeout_s)

    def __repr__(self) -> str:
        return f"<EnsembleProcess zkcompat {self.connect_string}>"


def start_zkcompat_ensemble(workdir: Path, tick_time_ms: int = 200) -> EnsembleProcess:
    """Three zkcompat servers on loopback, the conformance zoo.cfg's tickTime; returns once
    every one serves (scripts/ensemble start)."""
    workdir = Path(workdir)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    done = subprocess.run(
        [sys.executable, "-m", "zkcompat", "ensemble", "start", "3", "--dir", str(workdir),
         "--set", f"tickTime={tick_time_ms}", "--set", "maxClientCnxns=0"],
        env=env, capture_output=True, text=True, timeout=START_TIMEOUT_S)
    line = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    if done.returncode != 0 or not line.startswith("connect: "):
        raise ServerStartError(f"zkcompat ensemble did not start: {done.stdout}{done.stderr}")
    return EnsembleProcess(workdir, line.removeprefix("connect: "))


def _kazoo_connects(server: ServerProcess) -> bool:
    from kazoo.client import KazooClient

    client = KazooClient(hosts=server.connect_string, timeout=5.0)
    try:
        client.start(timeout=3.0)
        return client.connected
    finally:
        client.stop()
        client.close()


# -------------------------------------------------------------------- both


def _tcp_accepts(server: ServerProcess) -> bool:
    try:
        with socket.create_connection((server.host, server.port), timeout=1.0):
            return True
    except OSError:
        return False


def _wait_until_serving(
    server: ServerProcess,
    answers,
    timeout_s: float = START_TIMEOUT_S,
    extra_logs: tuple[Path, ...] = (),
) -> None:
    deadline = time.monotonic() + timeout_s
    last_error = "never accepted a TCP connection"
    while time.monotonic() < deadline:
        if not server.is_alive():
            last_error = f"process exited with code {server.returncode}"
            break
        if _tcp_accepts(server):
            try:
                if answers(server):
                    return
                last_error = "accepted TCP but did not answer"
            except Exception as e:  # noqa: BLE001 - any failure means "not yet"
                last_error = f"accepted TCP but {type(e).__name__}: {e}"
        time.sleep(0.1)
    server.kill()
    tails = "\n".join(
        f"--- {path} (last {LOG_TAIL_LINES} lines) ---\n{log_tail(path)}"
        for path in (server.log_path, *extra_logs)
    )
    raise ServerStartError(
        f"{server.kind} at {server.connect_string} (workdir {server.workdir}) "
        f"did not start within {timeout_s:.0f}s: {last_error}\n{tails}"
    )
