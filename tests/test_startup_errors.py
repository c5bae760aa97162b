"""`zkcompat serve` that cannot start says why in one line: the setting or file, the cause,
and what to do; no traceback, no claim that it listens, a non-zero exit. One case per bad
zoo.cfg or bad environment; a misspelt key is the one case that starts anyway (ZooKeeper
ignores unknown keys too), with a warning that names the key it resembles.

The unwritable dataDir cases run the server without CAP_DAC_OVERRIDE when the test runs as
root (setpriv), so a directory's mode counts; the full disk is a 2 MB tmpfs (root only)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tests.conftest import zkcompat_env

HOST = "127.0.0.1"
RUN_TIMEOUT_S = 30.0  # a server that cannot start has exited by then
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 20.0
CLIENT_TIMEOUT_S = 10.0
TMPFS_SIZE = "2m"
WARNING_TIMEOUT_S = 20.0
# Root ignores directory modes; without these capabilities it obeys them like anyone.
NO_DAC = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"]

pytestmark = pytest.mark.timeout(120)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _serve(*args: str) -> list[str]:
    return [sys.executable, "-m", "zkcompat", "serve", "--address", HOST, "--admin-port", "0",
            *args]


def _as_user() -> list[str]:
    """The prefix that makes directory modes count for the server."""
    if os.geteuid() != 0:
        return []
    assert shutil.which("setpriv"), "setpriv (util-linux) is needed to drop root's DAC override"
    return NO_DAC


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1.0):
            return True
    except OSError:
        return False


class Server:
    """A `zkcompat serve` this test started and ends by its PID."""

    def __init__(self, argv: list[str], port: int, log: Path):
        self.port, self.log = port, log
        with open(log, "w") as out:
            self.process = subprocess.Popen(argv, env=zkcompat_env(), stdin=subprocess.DEVNULL,
                                            stdout=out, stderr=subprocess.STDOUT)

    def wait_accepting(self) -> Server:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _accepts(self.port):
            assert self.process.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.1)
        return self

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=STOP_TIMEOUT_S)


def _started(stack: ExitStack, tmp: Path, data_dir: Path, port: int) -> Server:
    server = Server(_serve("--port", str(port), "--data-dir", str(data_dir)), port,
                    tmp / f"server-{port}.log")
    stack.callback(server.stop)
    return server.wait_accepting()


@dataclass
class Bad:
    """What a case hands the run: the serve arguments, a prefix (setpriv), and the
    one line expected (a regex, fullmatch against the line's text)."""

    argv: list[str]
    line: str
    prefix: list[str] = field(default_factory=list)
    after: Callable[[], None] | None = None  # checks once the server has refused to start


def _tmpfs(stack: ExitStack, mountpoint: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("a full disk is a tmpfs mounted here, which needs root")
    mountpoint.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs",
                    str(mountpoint)], check=True, capture_output=True, timeout=10)
    # Unmounted whatever happens (servers are stopped first: callbacks run last-in first).
    stack.callback(subprocess.run, ["umount", "--lazy", str(mountpoint)], capture_output=True,
                   timeout=10)


def _fill(directory: Path) -> Path:
    filler = directory / "filler"
    chunk = b"\0" * 65536
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(chunk)
                f.flush()
        except OSError:
            pass
    return filler


# -- the cases --------------------------------------------------------------------------------


def unwritable_parent(tmp: Path, stack: ExitStack) -> Bad:
    parent = tmp / "read-only"
    parent.mkdir()
    parent.chmod(0o555)
    stack.callback(parent.chmod, 0o755)
    data = parent / "data"
    return Bad(["--port", str(_free_port()), "--data-dir", str(data)],
               rf"dataDir {re.escape(str(data))}: cannot create {re.escape(str(data))} "
               r"\(Permission denied, as uid \d+\); make .* writable for that user, or "
               r"choose another dataDir \(--data-dir, or dataDir in zoo\.cfg\)",
               prefix=_as_user())


def unwritable_data_dir(tmp: Path, stack: ExitStack) -> Bad:
    data = tmp / "data"
    data.mkdir()
    data.chmod(0o555)
    stack.callback(data.chmod, 0o755)
    return Bad(["--port", str(_free_port()), "--data-dir", str(data)],
               rf"dataDir {re.escape(str(data))}: cannot create "
               rf"{re.escape(str(data / 'zkcompat'))} \(Permission denied, as uid \d+\); make "
               r".* writable for that user, or choose another dataDir .*",
               prefix=_as_user())


def data_dir_is_a_file(tmp: Path, stack: ExitStack) -> Bad:
    (tmp / "afile").write_text("")
    data = tmp / "afile" / "data"
    return Bad(["--port", str(_free_port()), "--data-dir", str(data)],
               rf"dataDir {re.escape(str(data))}: {re.escape(str(tmp / 'afile'))} is not a "
               r"directory; choose another dataDir .*")


def data_dir_in_use(tmp: Path, stack: ExitStack) -> Bad:
    data = tmp / "data"
    first = _started(stack, tmp, data, _free_port())
    lock = data / "zkcompat" / "txnlog" / "LOCK"
    return Bad(["--port", str(_free_port()), "--data-dir", str(data)],
               rf"dataDir {re.escape(str(data))} is in use by another server \(process "
               rf"{first.process.pid} holds {re.escape(str(lock))}\); stop that server, or "
               r"give this one a dataDir of its own \(--data-dir, or dataDir in zoo\.cfg\)")


def port_in_use(tmp: Path, stack: ExitStack) -> Bad:
    taken = socket.socket()
    stack.callback(taken.close)
    taken.bind((HOST, 0))
    taken.listen()
    port = taken.getsockname()[1]
    return Bad(["--port", str(port), "--data-dir", str(tmp / "data")],
               rf"clientPort {port}: {HOST}:{port} is already in use by another process; stop "
               r"it, or choose another port \(--port, or clientPort in zoo\.cfg\)")


def address_not_here(tmp: Path, stack: ExitStack) -> Bad:
    port = _free_port()
    # TEST-NET-1 (RFC 5737): never an address of this machine.
    return Bad(["--port", str(port), "--data-dir", str(tmp / "data"), "--address",
                "192.0.2.1"],
               r"clientPortAddress 192\.0\.2\.1: not an address of this machine \(cannot "
               r"bind 192\.0\.2\.1:\d+\); give one of its addresses, or 0\.0\.0\.0 for all "
               r"\(--address, or clientPortAddress in zoo\.cfg\)")


def full_disk_on_restart(tmp: Path, stack: ExitStack) -> Bad:
    mount = tmp / "disk"
    _tmpfs(stack, mount)
    data = mount / "data"
    port = _free_port()
    server = _started(stack, tmp, data, port)
    zk = KazooClient(hosts=f"{HOST}:{port}", timeout=CLIENT_TIMEOUT_S)
    zk.start(timeout=CLIENT_TIMEOUT_S)
    zk.create("/acknowledged", b"before the disk filled")
    zk.stop()
    zk.close()
    server.stop()
    filler = _fill(mount)

    def after() -> None:
        """What the line says to do works: with space again, the server starts with the
        acknowledged write."""
        filler.unlink()
        again = _started(stack, tmp, data, port)
        zk = KazooClient(hosts=f"{HOST}:{port}", timeout=CLIENT_TIMEOUT_S)
        zk.start(timeout=CLIENT_TIMEOUT_S)
        try:
            assert zk.get("/acknowledged")[0] == b"before the disk filled"
        finally:
            zk.stop()
            zk.close()
            again.stop()

    return Bad(["--port", str(port), "--data-dir", str(data)],
               rf"dataDir {re.escape(str(data))}: no space left on device \(writing "
               rf"{re.escape(str(data))}/\S+\); free space on that file system, then start "
               r"again: every acknowledged write is kept",
               after=after)


CASES = [unwritable_parent, unwritable_data_dir, data_dir_is_a_file, data_dir_in_use,
         port_in_use, address_not_here, full_disk_on_restart]


@pytest.mark.parametrize("case", CASES, ids=[c.__name__ for c in CASES])
def test_a_server_that_cannot_start_says_why_in_one_line(case, tmp_path):
    with ExitStack() as stack:
        bad = case(tmp_path, stack)
        done = subprocess.run([*bad.prefix, *_serve(*bad.argv)], env=zkcompat_env(),
                              capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
        err = done.stderr
        assert done.returncode != 0, err
        assert "Traceback" not in err and "listening" not in err, err
        errors = [line for line in err.splitlines() if line.startswith("Error: ")]
        assert len(errors) == 1 and err.splitlines()[-1] == errors[0], err
        assert re.fullmatch(bad.line, errors[0].removeprefix("Error: ")), (bad.line, err)
        if bad.after is not None:
            bad.after()


def test_a_misspelt_key_names_the_key_it_resembles(tmp_path):
    """ZooKeeper ignores an unknown key (it becomes a system property nobody reads), and so
    does zkcompat, but the warning says which known key it resembles."""
    port = _free_port()
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(f"tickTme=2000\nclientPort={port}\ndataDir={tmp_path / 'data'}\n"
                   "admin.enableServer=false\nmaxClientCnxn=10\nnoSuchSetting=1\n")
    server = Server([sys.executable, "-m", "zkcompat", "serve", "--config", str(cfg),
                     "--log-level", "warning"], port, tmp_path / "server.log")
    try:
        server.wait_accepting()
    finally:
        server.stop()
    lines = server.log.read_text().splitlines()
    unknown = [line.split(" event=", 1)[1] for line in lines if "event=config_unknown_key" in line]
    assert sorted(unknown) == [
        "config_unknown_key key=maxClientCnxn did_you_mean=maxClientCnxns",
        "config_unknown_key key=noSuchSetting",
        "config_unknown_key key=tickTme did_you_mean=tickTime"], lines
    assert "Traceback" not in server.log.read_text()
