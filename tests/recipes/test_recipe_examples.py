"""Every script in examples/ runs as written against a fresh server started the way
scripts/run starts one (defaults: tickTime 2 s, so session timeouts of 4 s to 40 s)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance_tests.servers import ServerProcess, start_zkcompat

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples"
SCRIPTS_RUN_TICK_TIME_MS = 2000  # zkcompat serve's default, as scripts/run leaves it
EXAMPLE_TIMEOUT_S = 90

# Script -> lines its output must contain.
EXPECTED = {
    "fenced_job_runner.py": ["9 jobs done", "zombie write rejected: stale fencing token"],
    "pause_demo.py": ["[holder-2] storage: accepted", "[holder-1] storage: REJECTED: stale"],
    "leader_election.py": ["node-0 leads", "deposed leader's write rejected"],
    "service_discovery.py": ["instance 10.0.0.1 dies",
                             "lookup: {'10.0.0.2:8080': {'host': '10.0.0.2', 'port': 8080}}"],
    "classic_recipes.py": ["counter: 15", "work queue: ['page the on-call'",
                           "membership: ['worker-a', 'worker-b'] -> ['worker-a']"],
}


@pytest.fixture(scope="module")
def fresh_server(tmp_path_factory) -> Iterator[ServerProcess]:
    server = start_zkcompat(tmp_path_factory.mktemp("examples-zkcompat"), SCRIPTS_RUN_TICK_TIME_MS)
    try:
        yield server
    finally:
        server.stop()


def test_every_example_is_covered():
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.timeout(EXAMPLE_TIMEOUT_S + 30)
@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_example_runs(fresh_server, script):
    env = dict(os.environ, ZKCOMPAT_HOSTS=fresh_server.connect_string)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    popen = subprocess.Popen(
        [sys.executable, str(EXAMPLES / script)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT,
    )
    try:
        stdout, stderr = popen.communicate(timeout=EXAMPLE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        end_with_children(popen)
        raise
    assert popen.returncode == 0, f"{script} failed:\n{stdout}\n{stderr}"
    for line in EXPECTED[script]:
        assert line in stdout, f"{script}: no {line!r} in:\n{stdout}"


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(c) for c in text.split()]


def end_with_children(popen: subprocess.Popen) -> None:
    """Kill an example that hung, and the children it started (pause_demo's holder may be
    stopped), each by its PID."""
    for child in _children(popen.pid):
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(child, sig)
            except ProcessLookupError:
                pass
    popen.kill()
    popen.communicate()
