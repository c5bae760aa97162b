"""Real zkcompat processes for the fault tests: one dataDir restarted many times on one port,
killed with SIGKILL by PID; the seed that drives every random choice, printed on failure."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

from conformance_tests.servers import (
    HOST,
    REPO_ROOT,
    ServerProcess,
    free_port,
    log_tail,
    start_zkcompat,
    write_zoo_cfg,
)

TICK_TIME_MS = 200
REFUSE_TIMEOUT_S = 30.0  # a server that must refuse to start gets this long to exit


def fault_seed() -> int:
    """ZKCOMPAT_FAULT_SEED reruns a failure exactly; otherwise a fresh one each run."""
    value = os.environ.get("ZKCOMPAT_FAULT_SEED")
    return int(value) if value else random.SystemRandom().randrange(1 << 32)


def reproduce(seed: int) -> str:
    return f"seed={seed} (rerun with ZKCOMPAT_FAULT_SEED={seed})"


class Node:
    """One zkcompat server identity: a workdir (hence dataDir) and a fixed client port, so
    clients of a killed server can find it again after the restart."""

    def __init__(self, workdir: Path, **cfg: object) -> None:
        self.workdir = Path(workdir)
        self.port = free_port()
        self.cfg = {"clientPort": self.port, **cfg}
        self.server: ServerProcess | None = None
        self.starts = 0

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def connect_string(self) -> str:
        return f"{HOST}:{self.port}"

    def start(self) -> ServerProcess:
        assert self.server is None or not self.server.is_alive(), "already running"
        self.server = start_zkcompat(self.workdir, TICK_TIME_MS, self.cfg)
        self.starts += 1
        return self.server

    def kill(self) -> None:
        """SIGKILL, as a crash or power cut (for the process) would."""
        if self.server is not None:
            self.server.kill()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.workdir / "zkcompat.log", lines)

    def log_text(self) -> str:
        try:
            return (self.workdir / "zkcompat.log").read_text(errors="replace")
        except OSError:
            return ""

    def run_expecting_refusal(self) -> subprocess.CompletedProcess:
        """`zkcompat serve` on this dataDir, captured to the end (killed at the timeout,
        which a test sees as rc -9)."""
        cfg_path = self.workdir / "zoo-refuse.cfg"
        write_zoo_cfg(cfg_path, {"tickTime": TICK_TIME_MS, "dataDir": self.data_dir,
                                 "clientPortAddress": HOST, **self.cfg,
                                 "clientPort": free_port()})
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        try:
            return subprocess.run(
                [sys.executable, "-m", "zkcompat", "serve", "--config", str(cfg_path)],
                cwd=self.workdir, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                text=True, timeout=REFUSE_TIMEOUT_S, start_new_session=True)
        except subprocess.TimeoutExpired as e:
            return subprocess.CompletedProcess(e.cmd, -9, e.stdout or "", e.stderr or "")


def wait_for(predicate, timeout_s: float, interval_s: float = 0.1, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    raise AssertionError(f"{what} not reached within {timeout_s}s")
