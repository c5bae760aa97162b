"""`zkcompat shell` against a server that is not there, beside Debian's zkCli.sh: a command
fails with ConnectionLoss as soon as a connection attempt fails (the Java client's
ClientCnxn fails every queued request then), not after the session timeout, and nothing
but zkCli's own lines is printed. And `--help` prints help instead of connecting."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from conformance_tests.servers import HOST, free_port
from conformance_tests.test_zkcli import zkcli_path
from tests.shell.helpers import SHELL_COMMAND, shell_env

pytestmark = pytest.mark.timeout(120)

RUN_TIMEOUT_S = 60
# The session timeout both shells are given; failing a command must not wait for it.
SESSION_TIMEOUT_MS = 30_000
JLINE_LINE = "JLine support is disabled"  # zkCli's, when it reads stdin without JLine
# WatchedEvent.toString gained " zxid: N" in 3.9 (ZOOKEEPER-4655).
ZXID_39 = " zxid: -1"


def _zkcli_env(workdir: Path) -> dict[str, str]:
    log4j = workdir / "log4j.properties"
    log4j.write_text("log4j.rootLogger=OFF\n")
    env = dict(os.environ)
    env["CLIENT_JVMFLAGS"] = (f"-Dlog4j.configuration=file:{log4j} "
                              "-Dzookeeper.root.logger=OFF")
    env["ZOO_LOG_DIR"] = str(workdir)
    return env


def _run(argv: list[str], env: dict[str, str], stdin: str | None = None):
    """(returncode, stdout lines, stderr lines without SLF4J's, seconds taken)."""
    t0 = time.monotonic()
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env,
                          timeout=RUN_TIMEOUT_S,
                          stdin=None if stdin is not None else subprocess.DEVNULL)
    err = [line for line in done.stderr.splitlines() if not line.startswith("SLF4J:")]
    return done.returncode, done.stdout.splitlines(), err, time.monotonic() - t0


@pytest.fixture
def down() -> str:
    """host:port where nothing listens."""
    return f"{HOST}:{free_port()}"


def test_one_command_fails_at_once_as_zkclis(down, tmp_path):
    args = ["-timeout", str(SESSION_TIMEOUT_MS), "-server", down, "ls", "/"]
    zk = _run([zkcli_path(), *args], _zkcli_env(tmp_path))
    ours = _run([*SHELL_COMMAND, *args], shell_env())
    assert zk[:3] == (1, [f"Connecting to {down}"], ["KeeperErrorCode = ConnectionLoss for /"])
    assert ours[:3] == zk[:3]
    assert ours[3] < SESSION_TIMEOUT_MS / 1000 / 3, f"took {ours[3]:.1f}s"


def test_commands_on_stdin_each_fail_as_zkclis(down, tmp_path):
    script = "ls /\nget /a\nquit\n"
    zk = _run([zkcli_path(), "-server", down], _zkcli_env(tmp_path), stdin=script)
    ours = _run([*SHELL_COMMAND, "-server", down], shell_env(), stdin=script)
    zk_out = [line for line in zk[1] if line != JLINE_LINE]
    ours_out = [line.removesuffix(ZXID_39) for line in ours[1]]
    assert zk[2] == ["KeeperErrorCode = ConnectionLoss for /",
                     "KeeperErrorCode = ConnectionLoss for /a"]
    assert (ours[0], ours_out, ours[2]) == (zk[0], zk_out, zk[2])
    assert ours[3] < SESSION_TIMEOUT_MS / 1000 / 3, f"took {ours[3]:.1f}s"


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_help_and_connects_nowhere(flag):
    code, out, err, _ = _run([*SHELL_COMMAND, flag, "-server", f"{HOST}:{free_port()}"],
                             shell_env())
    assert code == 0, err
    assert out[0].startswith("Usage: zkcompat shell [-server host:port"), out
    assert "-waitforconnection" in "\n".join(out)
    assert not any(line.startswith("Connecting to") for line in out), out
