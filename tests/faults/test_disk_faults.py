"""fsync and write errors, and a slow disk, under a running server: its dataDir is on a FUSE
filesystem (tests/faults/faultyfs.py) that fails or delays them on command, over real
LevelDB.

After a failed fsync or write, nothing it covered may be acknowledged, and the server may
not retry the fsync and trust it (PostgreSQL's fsyncgate: the kernel may have dropped the
dirty pages and report the next fsync clean; `fail-once fsync` fails one fsync and lets the
next succeed, so a server that retried would acknowledge. LevelDB latches the first error
as well: DBImpl::Write records it and fails every later write). It stops with one line naming the error, as
ZooKeeper's SyncRequestProcessor exits on an IOException; restarted with a healthy disk it
has every acknowledged write, and the write in flight at most once. A slow fsync delays
writes, never fails them, expires no session, and is logged as ZooKeeper's
fsync.warningthresholdms is."""

from __future__ import annotations

import time

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from .faultyfs import FaultyMount
from .harness import Node

CLIENT_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 30.0
SLOW_FSYNC_MS = 1200  # over the 1000 ms warning threshold
SLOW_WRITES = 4


@pytest.fixture
def faulty_node(tmp_path):
    mount = FaultyMount(tmp_path / "backing", tmp_path / "mnt", tmp_path / "faults")
    node = Node(tmp_path / "node", dataDir=tmp_path / "mnt" / "data")  # its log stays off
    try:
        yield mount, node
    finally:
        node.stop()
        mount.close()


def _client(node: Node) -> KazooClient:
    client = KazooClient(hosts=node.connect_string, timeout=CLIENT_TIMEOUT_S,
                         connection_retry={"max_tries": 0})
    client.start(timeout=CLIENT_TIMEOUT_S)
    return client


def _wait_exit(node: Node) -> None:
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while node.server.is_alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not node.server.is_alive(), f"still running on a failed log:\n{node.log_tail()}"


@pytest.mark.parametrize("fault", ["fail fsync", "fail-once fsync", "fail write"])
def test_a_failed_fsync_or_write_is_never_acknowledged_and_the_server_stops(faulty_node, fault):
    mount, node = faulty_node
    node.start()
    client = _client(node)
    acked = {}
    for i in range(50):
        acked[client.create(f"/ok-{i:03d}", b"%d" % i)] = b"%d" % i

    mount.set(fault)
    with pytest.raises((KazooException, KazooTimeoutError)):
        client.create("/in-flight", b"never acknowledged")
    client.stop()
    client.close()
    _wait_exit(node)
    log = node.log_text()
    assert "event=txn_log_sync_failed" in log and "action=stop_server" in log, node.log_tail()
    assert "Input/output error" in log, node.log_tail()
    assert "Traceback" not in log, node.log_tail()

    mount.set()  # a healthy disk again
    node.start()
    reader = _client(node)
    try:
        lost = [p for p, d in acked.items() if reader.exists(p) is None or reader.get(p)[0] != d]
        assert not lost, f"{len(lost)} acknowledged writes lost after {fault!r}: {lost[:5]}"
        # The write in flight was never acknowledged: it may be there (it reached the log
        # before the error) or not, once.
        assert reader.get_children("/").count("in-flight") <= 1
        reader.create("/after", b"healthy")
        assert reader.get("/after")[0] == b"healthy"
    finally:
        reader.stop()
        reader.close()


def test_a_slow_fsync_delays_writes_and_is_reported_but_fails_nothing(faulty_node):
    mount, node = faulty_node
    node.start()
    client = _client(node)
    try:
        sid = client.client_id[0]
        client.create("/held", b"", ephemeral=True)
        mount.set(f"delay fsync {SLOW_FSYNC_MS}")
        took = []
        for i in range(SLOW_WRITES):
            t0 = time.monotonic()
            client.create(f"/slow-{i}", b"x")
            took.append(time.monotonic() - t0)
        mount.set()
        assert min(took) >= SLOW_FSYNC_MS / 1000 * 0.9, took  # each waited for its fsync
        assert client.client_id[0] == sid and client.exists("/held") is not None
        assert client.get_children("/").count("slow-0") == 1
        assert node.log_text().count("event=slow_txn_log_sync") >= SLOW_WRITES, node.log_tail()
        t0 = time.monotonic()
        client.create("/fast-again", b"x")
        assert time.monotonic() - t0 < SLOW_FSYNC_MS / 1000, "the delay outlived the fault"
    finally:
        client.stop()
        client.close()
