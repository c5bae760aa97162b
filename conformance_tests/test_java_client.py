"""The stock ZooKeeper Java client, sync and async APIs, against both servers.

java/ClientExercise.java prints a transcript; its zxids and times are
normalised here and zkcompat's transcript must equal ZooKeeper's line for line.
"""

from __future__ import annotations

import difflib
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conformance_tests.deliberate import java_transcript_39

JAVA_SOURCE = Path(__file__).parent / "java" / "ClientExercise.java"
# Debian's libzookeeper-java: zookeeper.jar's manifest Class-Path names
# zookeeper-jute, netty, slf4j-api and the rest, so javac and java follow it.
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
# A binding that drops every log line, so stderr stays readable on failure.
SLF4J_NOP_JAR = Path("/usr/share/java/slf4j-nop.jar")
COMPILE_TIMEOUT_S = 120
RUN_TIMEOUT_S = 60
# Server and client share this machine's clock; allow for coarse clocks.
TIME_SLACK_MS = 5_000

ZXID_RE = re.compile(r"zx\((0x[0-9a-f]+)\)")
TIME_RE = re.compile(r"time\((-?\d+)\)")


def _require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} not found on PATH: install a JDK (scripts/install-zookeeper)")
    return path


@pytest.fixture(scope="module")
def client_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Compiles ClientExercise.java once per module; a missing JDK or jar fails."""
    javac = _require("javac")
    for jar in (ZOOKEEPER_JAR, SLF4J_NOP_JAR):
        if not jar.exists():
            pytest.fail(f"{jar} missing: install libzookeeper-java (scripts/install-zookeeper)")
    out_dir = tmp_path_factory.mktemp("java-classes")
    proc = subprocess.run(
        [javac, "-d", str(out_dir), "-cp", str(ZOOKEEPER_JAR), str(JAVA_SOURCE)],
        capture_output=True,
        text=True,
        timeout=COMPILE_TIMEOUT_S,
    )
    assert proc.returncode == 0, f"javac failed:\n{proc.stdout}\n{proc.stderr}"
    return out_dir


def run_exercise(classes: Path, connect_string: str) -> list[str]:
    """Runs the Java program once against one server; returns its normalised transcript."""
    java = _require("java")
    base = f"/java-client-{uuid.uuid4().hex[:12]}"
    classpath = ":".join([str(classes), str(ZOOKEEPER_JAR), str(SLF4J_NOP_JAR)])
    started_ms = int(time.time() * 1000)
    proc = subprocess.run(
        [java, "-cp", classpath, "ClientExercise", connect_string, base],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    finished_ms = int(time.time() * 1000)
    assert proc.returncode == 0, (
        f"ClientExercise exited {proc.returncode} against {connect_string}\n"
        f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    )
    return normalise(proc.stdout, started_ms - TIME_SLACK_MS, finished_ms + TIME_SLACK_MS)


def normalise(transcript: str, earliest_ms: int, latest_ms: int) -> list[str]:
    """Zxids become their rank in the run; times are range-checked and dropped."""
    zxids = sorted({int(z, 16) for z in ZXID_RE.findall(transcript)})
    rank = {z: i for i, z in enumerate(zxids, start=1)}

    def zxid(m: re.Match[str]) -> str:
        return f"zx#{rank[int(m.group(1), 16)]}"

    def when(m: re.Match[str]) -> str:
        ms = int(m.group(1))
        if earliest_ms <= ms <= latest_ms:
            return "T"
        return f"T(out of range: {ms} not in [{earliest_ms}, {latest_ms}])"

    text = TIME_RE.sub(when, ZXID_RE.sub(zxid, transcript))
    return text.splitlines()


def _check_complete(lines: list[str], server: str) -> None:
    text = "\n".join(lines)
    assert lines and lines[-1] == "done", f"{server}: transcript did not finish:\n{text}"
    assert "TIMEOUT" not in text, f"{server}: something timed out:\n{text}"
    assert "out of range" not in text, f"{server}: a ctime/mtime is not the wall clock:\n{text}"


def test_java_client_against_zookeeper(client_classes: Path, zookeeper) -> None:
    """The script itself is sound: against the reference it finishes and does what it says."""
    lines = run_exercise(client_classes, zookeeper.connect_string)
    _check_complete(lines, "zookeeper")
    # A few anchors, so a script that silently stopped exercising things fails.
    assert "negotiatedTimeout=4000" in lines
    assert (
        "create ttl (extended types disabled) -> KeeperException(UNIMPLEMENTED path=$BASE/ttl)"
        in lines
    )
    assert any(line.startswith("multi failure -> KeeperException(BADVERSION") for line in lines)
    assert "badScheme event{type=None state=AuthFailed path=null}" in lines
    assert "ephemeralGone event{type=NodeDeleted state=SyncConnected path=$BASE/e}" in lines
    assert "replayWatch event{type=NodeCreated state=SyncConnected path=$BASE/r/x}" in lines


def test_java_client_zkcompat_matches_zookeeper(client_classes: Path, conformance_pair) -> None:
    """conformance_pair is (ZooKeeper, zkcompat); (ZooKeeper, ZooKeeper) under CONFORMANCE_SELFTEST."""
    reference, candidate = conformance_pair
    expected = run_exercise(client_classes, reference.connect_string)
    actual = run_exercise(client_classes, candidate.connect_string)
    _check_complete(expected, reference.kind)
    if candidate.kind == "zkcompat":
        expected = java_transcript_39(expected)  # see deliberate.EXISTS_NEEDS_READ
    if actual != expected:
        diff = "\n".join(
            difflib.unified_diff(expected, actual, reference.kind, candidate.kind, lineterm="", n=2)
        )
        pytest.fail(f"Java client transcript differs from ZooKeeper's:\n{diff}")
