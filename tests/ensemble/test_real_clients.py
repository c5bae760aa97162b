"""ZooKeeper's own clients against a 3-server zkcompat ensemble through a multi-host
connect string: zkCli.sh with the first server of the string down prints what it prints
against one standalone zkcompat, and every member holds what it made; the stock Java client
writing in a loop survives a kill -9 of the leader with its session and its ephemeral."""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from conformance_tests.fixtures import TICK_TIME_MS
from conformance_tests.test_java_client import SLF4J_NOP_JAR, ZOOKEEPER_JAR, _require
from conformance_tests.test_zkcli import ANCHORS, CRUD_SCRIPT, run_zkcli

from .harness import (
    ELECTION_TIMEOUT_S,
    FAST,
    Ack,
    AckedWrites,
    check_acked_everywhere,
    check_trees_agree,
    wait_for,
)

JAVA_WRITER = "FailoverWriter"
JAVA_SOURCE = r"""
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs.Ids;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;

/** Writes sequential znodes under a base path until stdin closes; one line per outcome. */
public final class FailoverWriter {
    public static void main(String[] args) throws Exception {
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(args[0], 10_000, e -> {
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected) connected.countDown();
            if (e.getType() == Watcher.Event.EventType.None) System.out.println("state " + e.getState());
        });
        if (!connected.await(30, TimeUnit.SECONDS)) { System.out.println("never connected"); System.exit(1); }
        String base = args[1];
        zk.create(base, new byte[0], Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        zk.create(base + "-eph", new byte[0], Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
        System.out.println("session 0x" + Long.toHexString(zk.getSessionId()));
        Thread stdin = new Thread(() -> { try { while (System.in.read() >= 0) { } } catch (Exception e) { } });
        stdin.start();
        for (int i = 0; stdin.isAlive(); i++) {
            byte[] data = ("java-" + i).getBytes(StandardCharsets.UTF_8);
            try {
                String path = zk.create(base + "/seq-", data, Ids.OPEN_ACL_UNSAFE,
                                        CreateMode.PERSISTENT_SEQUENTIAL);
                System.out.println("ack " + path + " java-" + i);
            } catch (KeeperException e) {
                System.out.println("error " + e.code());
                Thread.sleep(50);
            }
        }
        Stat eph = zk.exists(base + "-eph", false);
        System.out.println("ephemeral 0x" + (eph == null ? "none" : Long.toHexString(eph.getEphemeralOwner())));
        System.out.println("session 0x" + Long.toHexString(zk.getSessionId()));
        zk.close();
        System.out.println("done");
    }
}
"""
JAVA_RUN_TIMEOUT_S = 90
WARM_UP = 4
ACKS = 50


def _crud_transcript(connect_string: str, workdir: Path) -> tuple[list[str], str]:
    """zkCli.sh runs the conformance CRUD script under a base path of ours, after a few
    reads that may meet the dead server: zkCli reads its script before it has connected,
    and the Java client tries the hosts in random order (ZooKeeper does the same)."""
    base = f"/zkcli-ensemble-{uuid.uuid4().hex[:8]}"
    workdir.mkdir()
    script = WARM_UP * "ls /zookeeper\n" + CRUD_SCRIPT.strip().replace("$B", base)
    transcript, _events = run_zkcli(connect_string, script, workdir)
    starts = [i for i, line in enumerate(transcript) if line.startswith("> ")]
    assert transcript[starts[WARM_UP - 1]:starts[WARM_UP]] == ["> ls /zookeeper",
                                                               "  [config, quota]"], transcript
    return [line.replace(base, "$BASE") for line in transcript[starts[WARM_UP]:]], base


@pytest.mark.parametrize("size", [3, 5])
def test_zkcli_through_a_multi_host_connect_string(ensemble, zkcompat, tmp_path, size):
    ensemble.start(size, settings={"tickTime": TICK_TIME_MS, "maxClientCnxns": 0})
    leader = ensemble.wait_one_leader()
    down = next(s for s in ensemble.sids if s != leader)
    ensemble.kill(down)
    ensemble.wait_one_leader([s for s in ensemble.sids if s != down])

    actual, base = _crud_transcript(ensemble.hosts(down), tmp_path / "zkcli-ensemble")
    expected, _ = _crud_transcript(zkcompat.connect_string, tmp_path / "zkcli-standalone")
    text = "\n".join(actual)
    assert "zkCli stopped early" not in text, text
    for anchor in ANCHORS["crud"]:
        assert anchor in actual, f"missing {anchor!r} in:\n{text}"
    assert actual == expected

    ensemble.start_server(down)  # it catches up with what zkCli did without it
    live = ensemble.sids
    # The script leaves $BASE, $BASE/empty and $BASE/s-0000000002 (the rest it deleted, or
    # went with its session).
    assert check_trees_agree(ensemble, base, live) == 3


@pytest.fixture(scope="module")
def java_writer(tmp_path_factory) -> Path:
    javac = _require("javac")
    for jar in (ZOOKEEPER_JAR, SLF4J_NOP_JAR):
        if not jar.exists():
            pytest.fail(f"{jar} missing: install libzookeeper-java (scripts/install-zookeeper)")
    out = tmp_path_factory.mktemp("java-writer")
    source = out / f"{JAVA_WRITER}.java"
    source.write_text(JAVA_SOURCE)
    done = subprocess.run([javac, "-d", str(out), "-cp", str(ZOOKEEPER_JAR), str(source)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"javac failed:\n{done.stdout}\n{done.stderr}"
    return out


class JavaWriter:
    """FailoverWriter as a child process; its stdout lines, each with the time it came."""

    def __init__(self, classes: Path, connect_string: str, base: str) -> None:
        classpath = ":".join([str(classes), str(ZOOKEEPER_JAR), str(SLF4J_NOP_JAR)])
        self.proc = subprocess.Popen([_require("java"), "-cp", classpath, JAVA_WRITER,
                                      connect_string, base], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[tuple[float, str]] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def acks(self, since: float = 0.0) -> list[tuple[float, str]]:
        return [(t, line) for t, line in list(self.lines)
                if t >= since and line.startswith("ack ")]

    def finish(self) -> list[str]:
        self.proc.stdin.close()
        self.proc.wait(timeout=JAVA_RUN_TIMEOUT_S)
        self.reader.join(timeout=10)
        return [line for _, line in self.lines]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.mark.parametrize("size", [3, 5])
def test_java_client_keeps_writing_through_a_leader_kill(ensemble, java_writer, size):
    ensemble.start(size, settings=FAST)
    leader = ensemble.wait_one_leader()
    base = f"/java-failover-{uuid.uuid4().hex[:8]}"
    writer = JavaWriter(java_writer, ensemble.hosts(leader), base)  # the leader first
    try:
        wait_for(lambda: len(writer.acks()) >= ACKS, ELECTION_TIMEOUT_S, "Java client acks",
                 detail=lambda: "\n".join(line for _, line in writer.lines[-20:]))
        killed_at = ensemble.kill(leader)
        survivors = [s for s in ensemble.sids if s != leader]
        ensemble.wait_one_leader(survivors)
        wait_for(lambda: len(writer.acks(killed_at)) >= ACKS, ELECTION_TIMEOUT_S,
                 "Java client acks after the kill",
                 detail=lambda: "\n".join(line for _, line in writer.lines[-20:]))
        lines = writer.finish()
    finally:
        writer.kill()
    assert writer.proc.returncode == 0, lines[-20:]
    sessions = [line for line in lines if line.startswith("session ")]
    assert len(sessions) == 2 and sessions[0] == sessions[1], sessions  # the same session
    assert f"ephemeral {sessions[0].removeprefix('session ')}" in lines
    # Every server's clients are dropped when its term ends: the client notices, then
    # acks resume (an ack read just after the kill may be of a write sent before it).
    timed = list(writer.lines)
    noticed = next(i for i, (t, line) in enumerate(timed) if t >= killed_at and (
        line.startswith("error ") or line == "state Disconnected"))
    resumed = next(t for t, line in timed[noticed:] if line.startswith("ack "))
    print(f"\nJava client: leader server.{leader} killed; acks resumed "
          f"{resumed - killed_at:.2f}s later; errors seen: "
          f"{sorted({line for line in lines if line.startswith('error ')})}")
    acked = AckedWrites()
    for t, line in writer.acks():
        _, path, data = line.split(" ")
        acked.ack(Ack(path, data.encode(), 0, t, t, "java"))
    check_acked_everywhere(ensemble, acked, survivors)
    check_trees_agree(ensemble, base, survivors)
