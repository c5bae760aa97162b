"""A disk that fills up under a running server (a real tmpfs, filled by another file while
a client writes). A txn log that cannot be written must never acknowledge what it did not
persist: the server stops with one line that names the cause, as ZooKeeper's
SyncRequestProcessor exits on an IOException, and once space returns it restarts on the
same dataDir with every acknowledged write and a log that reads cleanly."""

from __future__ import annotations

import time

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from .disks import Tmpfs
from .harness import Node

DISK_SIZE = "8m"
VALUE = b"v" * 1024
STOP_TIMEOUT_S = 30.0  # from the failed write to the process gone
CLIENT_TIMEOUT_S = 10.0
WRITES_MAX = 20_000  # 20 MB of values: more than the disk holds, so the disk fills first


def test_a_full_disk_stops_the_server_without_acknowledging_and_it_restarts_with_every_ack(
        tmp_path):
    disk = Tmpfs(tmp_path / "disk", DISK_SIZE)
    node = None
    try:
        node = Node(tmp_path / "node", dataDir=disk.mountpoint / "data")  # its log stays off the disk
        node.start()
        client = KazooClient(hosts=node.connect_string, timeout=CLIENT_TIMEOUT_S,
                             connection_retry={"max_tries": 0})
        client.start(timeout=CLIENT_TIMEOUT_S)
        acked: dict[str, bytes] = {}
        for i in range(100):
            path = client.create(f"/before-{i:05d}", VALUE)
            acked[path] = VALUE
        disk.fill(keep_bytes=256 * 1024)

        error = None
        for i in range(WRITES_MAX):
            data = b"%05d" % i + VALUE
            try:
                path = client.create(f"/during-{i:05d}", data)
            except (KazooException, KazooTimeoutError) as e:
                error = e
                break
            acked[path] = data
        assert error is not None, f"{WRITES_MAX} writes of 1 KB acknowledged on an {DISK_SIZE} disk"
        client.stop()
        client.close()

        deadline = time.monotonic() + STOP_TIMEOUT_S
        while node.server.is_alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not node.server.is_alive(), ("the server kept running on a log it cannot "
                                            f"write:\n{node.log_tail()}")
        log = node.log_text()
        assert "event=txn_log_sync_failed" in log and "action=stop_server" in log, node.log_tail()
        assert "No space left on device" in log, node.log_tail()
        assert "Traceback" not in log, node.log_tail()

        disk.free()  # space returns
        node.start()
        reader = KazooClient(hosts=node.connect_string, timeout=CLIENT_TIMEOUT_S)
        reader.start(timeout=CLIENT_TIMEOUT_S)
        try:
            lost = [p for p, d in acked.items()
                    if reader.exists(p) is None or reader.get(p)[0] != d]
            assert not lost, f"{len(lost)} acknowledged writes lost, first {lost[:5]}"
            # The server writes again on the same log.
            reader.create("/after", b"space again")
            assert reader.get("/after")[0] == b"space again"
        finally:
            reader.stop()
            reader.close()
    finally:
        if node is not None:
            node.stop()
        disk.close()
