"""`zkcompat import-zookeeper` on dataDirs that a real ZooKeeper 3.8 wrote.

A varied tree (ACLs, sequential and ephemeral nodes of a still-live session, deletes,
setData, multi, failed ops, null data, containers, TTL nodes, quotas, a large value, a
non-ASCII path) is written to ZooKeeper with a low snapCount (several snapshots and log
files); ZooKeeper is stopped (SIGKILL or SIGTERM); the import runs; then ZooKeeper is
restarted on its own dataDir and zkcompat on the import, and every node's data, Stat, ACL
and children must be identical through kazoo. After the live session's timeout both must
have expired it, and be identical again.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.security import make_acl, make_digest_acl

from conformance_tests.rawclient import RawClient, acl_vector, buffer, int32, int64, ustring
from conformance_tests.servers import ServerProcess, start_zookeeper
from zkcompat.store import zkformat

from .zk_tree import SUPER_CFG, diff_trees, read_tree, run_tool, super_client

TICK_TIME_MS = 1000  # session timeouts up to 20 s: time to read both trees before expiry
LIVE_SESSION_TIMEOUT_S = 8.0
SNAP_COUNT = 20  # ZooKeeper snapshots every 10-20 txns: several snapshots and log files
OP_CREATE_CONTAINER = 19
OP_CREATE_TTL = 21
FLAG_CONTAINER = 4  # CreateMode.CONTAINER
FLAG_PERSISTENT_WITH_TTL = 5  # CreateMode.PERSISTENT_WITH_TTL
TTL_MS = 3_600_000

SERVER_CFG = {**SUPER_CFG, "snapCount": SNAP_COUNT, "extendedTypesEnabled": "true"}


def raw_create(server: ServerProcess, op: int, path: str, data: bytes | None, flags: int,
               ttl_ms: int | None = None) -> None:
    """Creates kazoo cannot send: null data, containers, TTL nodes."""
    with RawClient(server.host, server.port) as raw:
        raw.connect(timeout_ms=4000)
        payload = ustring(path) + buffer(data) + acl_vector() + int32(flags)
        if ttl_ms is not None:
            payload += int64(ttl_ms)
        reply = raw.request(op, payload)
        assert reply.err == 0, f"raw create {path} (op {op}): err {reply.err}"
        raw.close_session()


def write_varied_tree(server: ServerProcess, small: bool = False) -> KazooClient:
    """The workload; returns a client whose session is still live (its ephemerals too)."""
    a = KazooClient(hosts=server.connect_string, timeout=10)
    a.start(timeout=10)
    a.add_auth("digest", "alice:secret")
    alice = make_digest_acl("alice", "secret", all=True)
    world_read = make_acl("world", "anyone", read=True)
    a.create("/app", b"app")
    a.create("/app/config", b"v0")
    for i in range(1, 4 if small else 11):
        assert a.set("/app/config", f"v{i}".encode()).version == i
    a.create("/app/private", b"secret", acl=[alice])
    a.create("/app/readonly", b"ro", acl=[world_read, alice])
    a.create("/app/ip", b"ip", acl=[make_acl("ip", "127.0.0.1", all=True)])
    a.set_acls("/app/readonly", [world_read, alice], version=0)
    a.set_acls("/app/readonly", [alice], version=1)
    jobs = [a.create("/app/jobs/job-", f"job{i}".encode(), sequence=True, makepath=True)
            for i in range(5 if small else 15)]
    for path in jobs[::3]:
        a.delete(path)
    # Failed writes are logged as error txns and take a zxid.
    with pytest.raises(NodeExistsError):
        a.create("/app/config", b"again")
    with pytest.raises(BadVersionError):
        a.set("/app/config", b"stale", version=0)
    with pytest.raises(NoNodeError):
        a.delete("/app/missing")
    tx = a.transaction()
    tx.create("/app/tx", b"")
    tx.create("/app/tx/a", b"a")
    tx.set_data("/app/config", b"from multi")
    tx.delete(jobs[1])
    tx.check("/app/private", 0)
    assert all(not isinstance(r, Exception) for r in tx.commit())
    bad = a.transaction()
    bad.create("/app/tx/never", b"")
    bad.check("/app/config", 0)  # wrong version: the whole multi fails
    assert any(isinstance(r, Exception) for r in bad.commit())
    a.create("/app/big", b"\x00\xff" * (50_000 if small else 200_000))
    a.create("/app/ünïcödé-✓", "päth".encode())
    a.create("/deep/a/b/c/d/e/f", b"leaf", makepath=True)
    raw_create(server, 1, "/app/nulldata", None, 0)
    raw_create(server, OP_CREATE_CONTAINER, "/app/container", b"c", FLAG_CONTAINER)
    a.create("/app/container/child", b"")
    raw_create(server, OP_CREATE_TTL, "/app/ttl", b"t", FLAG_PERSISTENT_WITH_TTL, TTL_MS)
    # What zkCli's setquota writes; the server keeps zookeeper_stats current after that.
    a.create("/zookeeper/quota/app/zookeeper_limits", b"count=1000,bytes=-1", makepath=True)
    a.create("/zookeeper/quota/app/zookeeper_stats", b"count=0,bytes=0")
    for i in range(40 if small else 200):
        a.create(f"/bulk/n-{i:04d}", f"{i}".encode() * (i % 7), makepath=True)
    for i in range(0, 40 if small else 200, 2):
        a.delete(f"/bulk/n-{i:04d}")
    for i in range(1, 40 if small else 200, 10):
        a.set(f"/bulk/n-{i:04d}", b"changed")
    a.create("/app/config/under", b"x")  # after the quota: its stats change
    # An ended session: its ephemerals go with its closeSession txn.
    c = KazooClient(hosts=server.connect_string, timeout=10)
    c.start(timeout=10)
    c.create("/app/gone", b"", ephemeral=True)
    c.stop()
    c.close()
    # The live session: its ephemerals must survive the import.
    b = KazooClient(hosts=server.connect_string, timeout=LIVE_SESSION_TIMEOUT_S)
    b.start(timeout=10)
    b.create("/live", b"")
    b.create("/live/plain", b"eph", ephemeral=True)
    for i in range(3):
        b.create("/live/member-", f"m{i}".encode(), ephemeral=True, sequence=True)
    btx = b.transaction()
    btx.create("/live/from-multi", b"", ephemeral=True)
    btx.set_data("/app/config", b"by b")
    btx.commit()
    a.stop()
    a.close()
    return b


def import_after(zk: ServerProcess, out: Path) -> str:
    result = run_tool("import-zookeeper", str(zk.workdir / "data"), "--data-dir", str(out))
    assert result.returncode == 0, f"import failed:\n{result.stdout}\n{result.stderr}"
    assert "imported" in result.stdout
    return result.stdout


def wait_until_gone(client: KazooClient, path: str, timeout_s: float) -> float:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if client.exists(path) is None:
            return time.monotonic()
        time.sleep(0.2)
    raise AssertionError(f"{path} still there after {timeout_s}s")


@pytest.mark.timeout(240)
@pytest.mark.parametrize("compression,crash", [("CHECKED", True), ("gz", False),
                                               ("snappy", False)])
def test_import_matches_zookeeper(tmp_path, zkcompat_launcher, compression, crash):
    small = compression != "CHECKED"
    cfg = {**SERVER_CFG, "snapshot.compression.method": compression}
    zk = start_zookeeper(tmp_path / "zk", TICK_TIME_MS, cfg)
    live = None
    try:
        live = write_varied_tree(zk, small=small)
        live_sid = live.client_id[0]
    finally:
        if crash:
            zk.kill()
        else:
            zk.stop()
        if live is not None:
            live.stop()  # the server is gone: no closeSession reaches it
            live.close()
    vdir = zkformat.version_dir(tmp_path / "zk" / "data")
    snaps = zkformat.snapshot_files(vdir)
    logs = zkformat.log_files(vdir)
    assert len(snaps) >= 3 and len(logs) >= 3, (snaps, logs)
    suffix = {"CHECKED": "", "gz": ".gz", "snappy": ".snappy"}[compression]
    assert all(p.name.endswith(suffix) for _, p in snaps), snaps

    out = tmp_path / "zkcompat-data"
    import_after(zk, out)

    # Both servers up again, each read at once (before the live session's timeout ends).
    zk = start_zookeeper(tmp_path / "zk", TICK_TIME_MS, cfg)
    zk_client = super_client(zk.connect_string)
    zkc = zkcompat_launcher.start({**SERVER_CFG, "tickTime": TICK_TIME_MS, "dataDir": out})
    zkc_client = super_client(zkc.connect_string)
    try:
        zk_tree = read_tree(zk_client)
        zkc_tree = read_tree(zkc_client)
        assert zk_tree["/live/plain"][1][7] == live_sid, "the live session's ephemeral is gone"
        assert len(zk_tree) > 40
        assert diff_trees(zk_tree, zkc_tree) == []

        # The live session never comes back: both expire it, with its ephemerals.
        for client in (zk_client, zkc_client):
            wait_until_gone(client, "/live/plain", LIVE_SESSION_TIMEOUT_S + 10)
        zk_after = read_tree(zk_client)
        zkc_after = read_tree(zkc_client)
        assert [p for p in zk_after if p.startswith("/live/")] == []
        assert diff_trees(zk_after, zkc_after) == []
    finally:
        for client in (zk_client, zkc_client):
            client.stop()
            client.close()
        zk.stop()
        zkc.stop()
