"""Apache Curator 5.4 recipes, unmodified, against ZooKeeper and zkcompat.

java/curator/CuratorExercise.java is compiled here against Debian's Curator
and ZooKeeper jars and run once per server: CuratorCache (persistent recursive
watches), LeaderLatch, LeaderSelector, InterProcessMutex,
InterProcessSemaphoreV2, DistributedAtomicLong, PersistentNode, container
parents, TTL nodes and PersistentTtlNode. It prints PASS/FAIL lines and exits
non-zero on any FAIL; its PASS lines hold nothing server-specific, so
zkcompat's transcript must equal ZooKeeper's. Both servers run with
extendedTypesEnabled=true and a 100 ms container reaper (the configuration of
test_scenarios_api39_extended.py). A missing JDK or jar fails the test.
"""

from __future__ import annotations

import difflib
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import close_admin_clients
from .servers import CLASSPATH_JARS, JAVA_SHARE, ServerProcess, start_zkcompat
from .test_scenarios_api39_extended import EXTENDED_CFG, start_extended_zookeeper

JAVA_SOURCE = Path(__file__).parent / "java" / "curator" / "CuratorExercise.java"
MAIN_CLASS = "CuratorExercise"
COMPILE_TIMEOUT_S = 120
RUN_TIMEOUT_S = 75  # the program gives up on its own after 50 s
SELFTEST = os.environ.get("CONFORMANCE_SELFTEST", "") not in ("", "0")
PARTS = (
    "setup",
    "CuratorCache",
    "LeaderLatch",
    "LeaderSelector",
    "InterProcessMutex",
    "InterProcessSemaphoreV2",
    "DistributedAtomicLong",
    "PersistentNode",
    "containers",
    "TTL nodes",
    "PersistentTtlNode",
    "ZooKeeper client 3.6+ API",
    "ZooKeeper client SetWatches2",
)

pytestmark = pytest.mark.timeout(240)


def _require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} not found on PATH: install a JDK (scripts/install-zookeeper)")
    return path


def _classpath_jars() -> list[str]:
    jars = [JAVA_SHARE / name for name in CLASSPATH_JARS]
    missing = [str(j) for j in jars if not j.exists()]
    if missing:
        pytest.fail(f"jars missing: {missing}; run scripts/install-zookeeper")
    return [str(j) for j in jars]


@pytest.fixture(scope="module")
def curator_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    javac = _require("javac")
    out_dir = tmp_path_factory.mktemp("curator-classes")
    proc = subprocess.run(
        [javac, "-d", str(out_dir), "-cp", ":".join(_classpath_jars()), str(JAVA_SOURCE)],
        capture_output=True,
        text=True,
        timeout=COMPILE_TIMEOUT_S,
    )
    assert proc.returncode == 0, f"javac failed:\n{proc.stdout}\n{proc.stderr}"
    return out_dir


@pytest.fixture(scope="module")
def curator_servers(tmp_path_factory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """ZooKeeper and zkcompat (a second ZooKeeper under CONFORMANCE_SELFTEST),
    both with TTL nodes enabled and a fast container reaper."""
    started: list[ServerProcess] = []
    try:
        started.append(start_extended_zookeeper(tmp_path_factory.mktemp("zk-curator")))
        workdir = tmp_path_factory.mktemp("candidate-curator")
        if SELFTEST:
            started.append(start_extended_zookeeper(workdir))
        else:
            started.append(start_zkcompat(workdir, extra_cfg=EXTENDED_CFG))
        yield started[0], started[1]
    finally:
        close_admin_clients()
        for server in started:
            server.stop()


def run_exercise(classes: Path, server: ServerProcess) -> tuple[int, list[str], str]:
    java = _require("java")
    classpath = ":".join([str(classes), *_classpath_jars()])
    base = f"/curator-{uuid.uuid4().hex[:12]}"
    try:
        proc = subprocess.run(
            [java, "-cp", classpath, MAIN_CLASS, server.connect_string, base],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        pytest.fail(f"CuratorExercise against {server.kind} ran over {RUN_TIMEOUT_S}s:\n{out}")
    return proc.returncode, proc.stdout.splitlines(), proc.stderr


def _report(kind: str, code: int, lines: list[str], stderr: str, server: ServerProcess) -> str:
    return (
        f"CuratorExercise against {kind} exited {code}\n"
        + "\n".join(lines)
        + f"\n--- stderr (tail) ---\n{stderr[-3000:]}"
        + f"\n--- {kind} log tail ---\n{server.log_tail(20)}"
    )


def _check_passed(kind: str, code: int, lines: list[str], stderr: str, server) -> None:
    report = _report(kind, code, lines, stderr, server)
    assert code == 0, report
    assert lines and lines[-1] == "DONE failures=0", report
    passed = [
        line.split(":", 1)[0].removeprefix("PASS ") for line in lines if line.startswith("PASS ")
    ]
    assert passed == list(PARTS), report


@pytest.fixture(scope="module")
def reference_run(curator_classes: Path, curator_servers) -> tuple[int, list[str], str]:
    return run_exercise(curator_classes, curator_servers[0])


def test_curator_recipes_against_zookeeper(reference_run, curator_servers) -> None:
    """The program is sound: against the reference every part passes."""
    reference, _ = curator_servers
    _check_passed(reference.kind, *reference_run, reference)


def test_curator_recipes_against_zkcompat(
    curator_classes: Path, curator_servers, reference_run
) -> None:
    """Every part passes against zkcompat, with the same transcript as ZooKeeper's."""
    _, candidate = curator_servers
    actual = run_exercise(curator_classes, candidate)
    _check_passed(candidate.kind, *actual, candidate)
    expected = reference_run[1]
    if actual[1] != expected:
        diff = "\n".join(
            difflib.unified_diff(expected, actual[1], "zookeeper", "zkcompat", lineterm="")
        )
        pytest.fail(f"Curator transcript differs from ZooKeeper's:\n{diff}")
