"""Shared fixtures for tests/: the real-server fixtures of conformance_tests, and a
launcher for zkcompat processes with a zoo.cfg written exactly as a test wants it.

tests/ is not a package and the checkout is not installed into the venv, so the
repository root goes on sys.path here (zkcompat and conformance_tests both live there).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from conformance_tests.servers import HOST, ServerProcess, free_port, log_tail  # noqa: E402

ZKCOMPAT_START_TIMEOUT_S = 20.0
ZKCOMPAT_EXIT_TIMEOUT_S = 20.0


def zkcompat_command(cfg_path: Path) -> list[str]:
    return [sys.executable, "-m", "zkcompat", "serve", "--config", str(cfg_path)]


def zkcompat_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
    )
    env["PYTHONUNBUFFERED"] = "1"
    return env


def write_cfg(path: Path, lines: dict[str, object] | str) -> Path:
    """A zoo.cfg with exactly these settings (a str is written verbatim)."""
    if isinstance(lines, str):
        path.write_text(lines)
    else:
        path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    return path


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1.0):
            return True
    except OSError:
        return False


class ZkcompatLauncher:
    """Starts `python -m zkcompat serve --config <cfg>` processes; stops them all at the end."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.started: list[ServerProcess] = []
        self._n = 0

    def _workdir(self) -> Path:
        self._n += 1
        workdir = self.base / f"zkcompat-{self._n}"
        workdir.mkdir(parents=True, exist_ok=True)
        return workdir

    def default_cfg(self, workdir: Path, **settings: object) -> dict[str, object]:
        """clientPort, clientPortAddress and dataDir only: every other key left to its default."""
        data_dir = workdir / "data"
        data_dir.mkdir(exist_ok=True)
        cfg: dict[str, object] = {
            "clientPort": free_port(),
            "clientPortAddress": HOST,
            "dataDir": data_dir,
        }
        cfg.update(settings)
        return cfg

    def start(self, settings: dict[str, object] | None = None, **more: object) -> ServerProcess:
        """A serving zkcompat with default_cfg(settings); fails the test if it does not come up."""
        workdir = self._workdir()
        cfg = self.default_cfg(workdir, **(settings or {}), **more)
        cfg_path = write_cfg(workdir / "zoo.cfg", cfg)
        log_path = workdir / "zkcompat.log"
        with open(log_path, "ab") as out:
            popen = subprocess.Popen(
                zkcompat_command(cfg_path),
                cwd=workdir,
                env=zkcompat_env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        server = ServerProcess("zkcompat", popen, int(cfg["clientPort"]), workdir, log_path,
                               cfg_path)
        self.started.append(server)
        deadline = time.monotonic() + ZKCOMPAT_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if not server.is_alive():
                break
            if _accepts(server.port):
                return server
            time.sleep(0.05)
        server.kill()
        pytest.fail(f"zkcompat with {cfg} did not start: rc={server.returncode}\n"
                    f"{log_tail(log_path)}")

    def run_to_exit(self, cfg_text: str, timeout_s: float = ZKCOMPAT_EXIT_TIMEOUT_S):
        """Run `serve` on a zoo.cfg expected to be refused; the CompletedProcess.

        A server that starts anyway is killed at the timeout (and the test sees rc -9).
        """
        workdir = self._workdir()
        cfg_path = write_cfg(workdir / "zoo.cfg", cfg_text)
        try:
            return subprocess.run(zkcompat_command(cfg_path), cwd=workdir, env=zkcompat_env(),
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=timeout_s)
        except subprocess.TimeoutExpired as e:
            # TimeoutExpired keeps the output as bytes, whatever text= said.
            out, err = (v.decode(errors="replace") if isinstance(v, bytes) else v or ""
                        for v in (e.stdout, e.stderr))
            return subprocess.CompletedProcess(e.cmd, -9, out, err)

    def stop_all(self) -> None:
        for server in self.started:
            server.stop()


@pytest.fixture(scope="module")
def zkcompat_launcher(tmp_path_factory) -> Iterator[ZkcompatLauncher]:
    launcher = ZkcompatLauncher(tmp_path_factory.mktemp("launched"))
    try:
        yield launcher
    finally:
        launcher.stop_all()


def kazoo_client(server: ServerProcess, **kwargs) -> object:
    """A started KazooClient on server (the caller stops it)."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=server.connect_string, **kwargs)
    client.start(timeout=10)
    return client


@pytest.fixture
def kazoo_factory() -> Iterator[Callable[..., object]]:
    """kazoo_factory(server, **kwargs) -> started KazooClient, stopped after the test."""
    clients = []

    def make(server: ServerProcess, **kwargs):
        client = kazoo_client(server, **kwargs)
        clients.append(client)
        return client

    yield make
    for client in clients:
        try:
            client.stop()
            client.close()
        except Exception:  # noqa: BLE001 - teardown of a client that may be broken
            pass
