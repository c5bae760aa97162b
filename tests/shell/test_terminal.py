"""`zkcompat shell` in a pseudo-terminal (pexpect) against zkcompat: prompt, tab completion
of a znode path, history recalled from the history file, a watch firing; and zkCli's
one-command use with its exit codes."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pexpect
import pytest

from tests.shell.helpers import SHELL_COMMAND, shell_env

pytestmark = pytest.mark.timeout(120)
EXPECT_TIMEOUT_S = 15
UP_ARROW = "\x1b[A"
# prompt_toolkit draws the prompt's trailing space as a cursor move
PROMPT_RE = r"\[zk: [^\]]+\(CONNECTED\) \d+\]"


def prompt(n: int) -> str:
    """The prompt after n commands (an earlier prompt may be redrawn after an event)."""
    return rf"\[zk: [^\]]+\(CONNECTED\) {n}\]"


def spawn(server, history: Path) -> pexpect.spawn:
    env = shell_env(history)
    env["TERM"] = "xterm"
    env["PROMPT_TOOLKIT_NO_CPR"] = "1"  # pexpect answers no cursor-position requests
    child = pexpect.spawn(SHELL_COMMAND[0], [*SHELL_COMMAND[1:], "-server",
                                             server.connect_string],
                          env=env, encoding="utf-8", timeout=EXPECT_TIMEOUT_S,
                          dimensions=(40, 200))
    child.expect_exact("WatchedEvent state:SyncConnected type:None path:null zxid: -1")
    child.expect(PROMPT_RE)
    return child


def finish(child: pexpect.spawn) -> None:
    child.sendline("quit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before


@pytest.fixture
def base(zkcompat, kazoo_factory) -> tuple[str, object]:
    client = kazoo_factory(zkcompat)
    path = f"/shell-{uuid.uuid4().hex[:8]}"
    client.create(path, b"root")
    return path, client


def test_tab_completes_a_child_path(zkcompat, base, tmp_path: Path) -> None:
    path, client = base
    client.create(f"{path}/alphabet/kid", b"", makepath=True)
    client.create(f"{path}/beta", b"")
    child = spawn(zkcompat, tmp_path / "history")
    child.send(f"ls {path}/al\t")
    child.send("\r")
    child.expect_exact("[kid]")  # without the completion: "Node does not exist"
    child.expect(prompt(1))
    child.send("getAllCh\t")
    child.send(f" {path}\r")
    child.expect(r"\D3\r\n")  # alphabet, alphabet/kid and beta
    finish(child)


def test_history_survives_the_session(zkcompat, base, tmp_path: Path) -> None:
    path, client = base
    client.set(path, b"remembered")
    history = tmp_path / "history"
    first = spawn(zkcompat, history)
    first.sendline(f"get {path}")
    first.expect_exact("remembered")
    first.expect(prompt(1))
    first.sendeof()  # Ctrl-D, so `get` stays the newest history entry
    first.expect(pexpect.EOF)
    first.close()
    assert f"get {path}" in history.read_text()
    client.set(path, b"changed since")
    second = spawn(zkcompat, history)
    second.send(UP_ARROW)
    second.send("\r")
    second.expect_exact("changed since")
    second.sendline("history")
    second.expect_exact(f"0 - get {path}")
    second.expect_exact("1 - history")
    finish(second)


def test_a_watch_fires_while_the_prompt_waits(zkcompat, base, tmp_path: Path) -> None:
    path, client = base
    child = spawn(zkcompat, tmp_path / "history")
    child.sendline(f"get -w {path}")
    child.expect_exact("root")
    child.expect(prompt(1))
    stat = client.set(path, b"new")
    child.expect_exact("WATCHER::")
    child.expect_exact(f"WatchedEvent state:SyncConnected type:NodeDataChanged path:{path} "
                       f"zxid: {stat.mzxid}")
    child.sendline("addWatch -m PERSISTENT_RECURSIVE " + path)
    child.expect(prompt(2))
    client.create(f"{path}/new-kid", b"")
    child.expect_exact(f"type:NodeCreated path:{path}/new-kid zxid: ")
    child.sendline("printwatches off")
    child.expect(prompt(3))
    client.delete(f"{path}/new-kid")
    child.sendline("printwatches")
    child.expect_exact("printwatches is off")
    assert "NodeDeleted" not in child.before
    finish(child)


def run_one(server, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*SHELL_COMMAND, "-server", server.connect_string, *args],
                          capture_output=True, text=True, timeout=60, env=shell_env())


def test_one_command_and_exit_codes(zkcompat, base) -> None:
    path, _ = base
    done = run_one(zkcompat, "get", "-s", path)
    assert done.returncode == 0, done.stderr
    assert "root\ncZxid = 0x" in done.stdout
    assert "numChildren = 0" in done.stdout
    missing = run_one(zkcompat, "get", f"{path}/missing")
    assert missing.returncode == 1
    assert f"Node does not exist: {path}/missing" in missing.stderr
    unknown = run_one(zkcompat, "frobnicate")
    assert unknown.returncode == 127
    assert "Command not found: Command not found frobnicate" in unknown.stderr
    created = run_one(zkcompat, "create", "-e", f"{path}/eph", "x")
    assert created.returncode == 0
    assert f"Created {path}/eph" in created.stderr
    # The ephemeral died with the one-command session.
    assert "Node does not exist" in run_one(zkcompat, "stat", f"{path}/eph").stderr


def test_read_only_flag_and_timeout(zkcompat, base) -> None:
    path, _ = base
    done = run_one(zkcompat, "-timeout", "5000", "-r", "get", path)
    assert done.returncode == 0, done.stderr
    assert "root" in done.stdout


def test_close_and_connect_on_stdin(zkcompat, base) -> None:
    path, _ = base
    script = f"close\nls {path}\nhistory\nconnect\nls {path}\nquit\n"
    done = subprocess.run([*SHELL_COMMAND, "-server", zkcompat.connect_string], input=script,
                          capture_output=True, text=True, timeout=60, env=shell_env())
    lines = [line for line in done.stdout.splitlines() if line and line != "WATCHER::"]
    assert lines == [
        f"Connecting to {zkcompat.connect_string}", "Welcome to ZooKeeper!",
        "WatchedEvent state:SyncConnected type:None path:null zxid: -1",
        "WatchedEvent state:Closed type:None path:null zxid: -1",
        "Not connected",
        "0 - close", "1 - ls " + path, "2 - history",
        "Not connected",  # zkCli checks the connection even after `history`
        "WatchedEvent state:SyncConnected type:None path:null zxid: -1",
        "[]",
        "WatchedEvent state:Closed type:None path:null zxid: -1"], done.stdout
