"""The fault fencing exists for: a holder process SIGSTOPped past its session timeout wakes up
after another took the lock, writes with its old token, and the resource rejects it."""

# Hosts come from the `hosts` fixture, so this runs unchanged against an ensemble.

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from recipes_resource import LedgerService

from zkcompat.recipes import FencedLock, FencedResource, Sequencer, ZnodeTokenStore

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
WORKER = HERE / "fenced_worker.py"
HOLDER_SESSION_TIMEOUT_S = 1.0  # the servers' minimum at tickTime 200 ms is 0.4 s
TAKEOVER_TIMEOUT_S = 30.0  # bound on the wait for the paused holder's session to expire
LINE_TIMEOUT_S = 30.0


class WorkerProcess:
    """The fenced_worker.py child: started, stopped, continued and ended by its PID only."""

    def __init__(self, hosts: str, lock_path: str, ledger_port: int) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), str(HERE), env.get("PYTHONPATH", "")) if p
        )
        self.popen = subprocess.Popen(
            [sys.executable, str(WORKER), "--hosts", hosts, "--lock", lock_path,
             "--ledger-port", str(ledger_port),
             "--session-timeout", str(HOLDER_SESSION_TIMEOUT_S)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=env,
        )
        self.pid = self.popen.pid
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.popen.stdout:
            self._lines.put(line.rstrip("\n"))

    def expect(self, prefix: str) -> str:
        while True:
            try:
                line = self._lines.get(timeout=LINE_TIMEOUT_S)
            except queue.Empty:
                raise AssertionError(f"worker printed no {prefix!r} line; stderr:\n"
                                     f"{self.stderr()}") from None
            if line.startswith(prefix):
                return line[len(prefix):].strip()

    def send(self, line: str) -> None:
        self.popen.stdin.write(line + "\n")
        self.popen.stdin.flush()

    def stderr(self) -> str:
        if self.popen.poll() is None:
            return "(still running)"
        return self.popen.stderr.read()

    def end(self) -> None:
        if self.popen.poll() is None:
            os.kill(self.pid, signal.SIGCONT)
            try:
                self.send("quit")
                self.popen.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                os.kill(self.pid, signal.SIGKILL)
                self.popen.wait()


@pytest.mark.timeout(120)
def test_paused_holder_is_fenced_off(zk, hosts, base):
    lock_path = f"{base}/lock"
    service = LedgerService(FencedResource(ZnodeTokenStore(zk, f"{base}/fence"), lock_path))
    worker = WorkerProcess(hosts, lock_path, service.address[1])
    try:
        old = Sequencer.parse(worker.expect("ACQUIRED"))
        worker.send("write before-pause")
        assert json.loads(worker.expect("RESULT"))["ok"] is True

        os.kill(worker.pid, signal.SIGSTOP)  # a GC pause, a VM migration...
        successor = FencedLock(zk, lock_path, identifier="successor")
        new = successor.acquire(timeout=TAKEOVER_TIMEOUT_S)  # only once the old session expired
        assert new.token > old.token
        for value in ("new-1", "new-2"):
            reply = service.write({"key": "ledger", "sequencer": str(new),
                                   "writer": "successor", "value": value})
            assert reply["ok"] is True

        worker.send("write stale-after-pause")  # queued in the pipe while it is stopped
        os.kill(worker.pid, signal.SIGCONT)
        result = json.loads(worker.expect("RESULT"))
        assert result["ok"] is False
        assert "stale fencing token" in result["error"]

        assert [(e.writer, e.value) for e in service.ledger] == [
            ("worker", "before-pause"), ("successor", "new-1"), ("successor", "new-2"),
        ]
        assert all(e.token == new.token for e in service.ledger[1:])
        assert service.resource.highest("ledger") == new.token
        # The paused holder learns it lost the lock once its client reconnects.
        for _ in range(100):
            worker.send("state")
            if worker.expect("STATE") == "lost":
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the paused holder never saw its lock as lost")
        assert successor.check() == new
        successor.release()
    finally:
        worker.end()
        service.close()
