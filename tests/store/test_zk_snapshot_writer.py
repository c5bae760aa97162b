"""Snapshot files and the tree digest against a real ZooKeeper 3.8, both directions.

- A tree made by our DataTree.apply, written as version-2/snapshot.<zxid>, is what a real
  ZooKeeper then serves: every node's data, Stat and ACL through kazoo, the live session's
  ephemeral included; ZooKeeper checks the snapshot's digest as it loads it (a wrong one
  is counted, so the check is live) and logs no ERROR.
- A snapshot ZooKeeper wrote, read by zkformat and written again by our writer, is the
  same file byte for byte; its zxid digest is our tree_digest; and every TxnDigest in
  ZooKeeper's log is our tree_digest after DataTree.apply of that txn.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.security import make_acl, make_digest_acl

from conformance_tests.rawclient import RawClient, acl_vector, buffer, int32, int64, ustring
from conformance_tests.servers import (
    ZOOKEEPER_HOME,
    ServerProcess,
    ServerStartError,
    start_zookeeper,
    zookeeper_classpath,
)
from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.store import zkformat
from zkcompat.store.importer import tree_from_snapshot
from zkcompat.tree.datatree import DataTree
from zkcompat.tree.digest import DIGEST_VERSION, tree_digest
from zkcompat.tree.snapstream import SnapshotWriter, java_long_hashmap_order
from zkcompat.tree.txn import Txn, decode_txn_at

from .zk_tree import SUPER_CFG, diff_trees, read_tree, super_client

pytestmark = pytest.mark.timeout(240)

try:
    zookeeper_classpath()
    HAVE_ZOOKEEPER = (ZOOKEEPER_HOME / "bin" / "zkServer.sh").exists()
except ServerStartError:
    HAVE_ZOOKEEPER = False
needs_zookeeper = pytest.mark.skipif(not HAVE_ZOOKEEPER, reason="scripts/install-zookeeper")

TICK_TIME_MS = 2000  # sessions of up to 40 s: time to read the tree before any expires
ZK_CFG = {**SUPER_CFG, "extendedTypesEnabled": "true"}  # TTL nodes need extended types
EPOCH = 1 << 32  # zxids of epoch 1, as a real ensemble's first leader makes them
LIVE_SESSION = 0x0100000012340000
IDLE_SESSION = LIVE_SESSION + 1
TIME_MS = 1_764_000_000_000
TTL_MS = 3_600_000
OP_CREATE_CONTAINER, OP_CREATE_TTL = 19, 21  # ZooDefs.OpCode
FLAG_CONTAINER, FLAG_PERSISTENT_WITH_TTL = 4, 5  # CreateMode

WORLD = [r.ACL(31, r.Id("world", "anyone"))]
WORLD_READ = [r.ACL(1, r.Id("world", "anyone"))]
ALICE = [r.ACL(31, r.Id("digest", "alice:Dk5QTa/0dyYsCT3S0rhGSq1Tw1w="))]
LOCAL = [r.ACL(31, r.Id("ip", "127.0.0.1")), r.ACL(1, r.Id("world", "anyone"))]


# -- a tree of ours, from txns ------------------------------------------------------------


class TxnMaker:
    """Applies txns with consecutive zxids of epoch 1 and times that move on."""

    def __init__(self, tree: DataTree) -> None:
        self.tree = tree
        self.zxid = EPOCH

    def __call__(self, type_: int, body, session: int = LIVE_SESSION) -> None:
        self.zxid += 1
        hdr = r.TxnHeader(session, self.zxid & 0xFFFF, self.zxid, TIME_MS + self.zxid, type_)
        self.tree.apply(Txn(hdr, body))

    def create(self, path, data=b"", acl=WORLD, ephemeral=False, session=LIVE_SESSION):
        self(OpCode.CREATE2, r.CreateTxn(path, data, acl, ephemeral, -1), session)


def our_tree() -> DataTree:
    """Persistent, ephemeral (of a session still in the table), sequential, container and
    TTL nodes; custom ACLs; null, empty and binary data; deletes, setData, setACL."""
    tree = DataTree()
    apply = TxnMaker(tree)
    apply(OpCode.CREATE_SESSION, r.CreateSessionTxn(30000), LIVE_SESSION)
    apply(OpCode.CREATE_SESSION, r.CreateSessionTxn(20000), IDLE_SESSION)
    apply.create("/app", b"app")
    apply.create("/app/null", None, ALICE)
    apply.create("/app/empty", b"", WORLD_READ)
    apply.create("/app/bin", bytes(range(256)) * 3, LOCAL)
    apply.create("/app/eph", b"mine", ephemeral=True)
    apply.create("/app/jobs")
    for i in range(4):
        apply.create(f"/app/jobs/job-{i:010d}", f"job{i}".encode())
    apply(OpCode.DELETE, r.DeleteTxn("/app/jobs/job-0000000001"))
    apply(OpCode.SET_DATA, r.SetDataTxn("/app", b"app v1", 1))
    apply(OpCode.SET_DATA, r.SetDataTxn("/app", b"app v2", 2))
    apply(OpCode.SET_ACL, r.SetACLTxn("/app/empty", WORLD, 1))
    apply(OpCode.CREATE_CONTAINER, r.CreateContainerTxn("/box", b"", WORLD, -1))
    apply.create("/box/item", b"kept")  # a container with a child is not reaped
    apply(OpCode.CREATE_TTL, r.CreateTTLTxn("/ttl", b"t", WORLD, -1, TTL_MS))
    apply.create("/\u00e9t\u00e9-\u4e2d", "\u00e9".encode())
    return tree


def expected_view(tree: DataTree) -> dict[str, tuple]:
    """What zk_tree.read_tree reads from a server holding `tree`."""
    out = {}
    for path, node in tree.nodes.items():
        st = node.stat()
        out[path] = (node.data, (st.czxid, st.mzxid, st.ctime, st.mtime, st.version,
                                 st.cversion, st.aversion, st.ephemeralOwner, st.dataLength,
                                 st.numChildren, st.pzxid),
                     tuple(node.acl), tuple(sorted(node.children or ())))
    return out


def mntr(server: ServerProcess) -> dict[str, str]:
    lines = server.four_letter_word("mntr").splitlines()
    return dict(line.split("\t", 1) for line in lines if "\t" in line)


# ServerCnxn.cleanupWriterSocket logs this when a four-letter-word client (the start-up
# probe, mntr) closes first: about the probe, not the data.
FOUR_LETTER_WORD_NOISE = "Error closing a command socket"


def log_errors(server: ServerProcess) -> list[str]:
    return [line for line in server.log_path.read_text(errors="replace").splitlines()
            if " ERROR " in line and FOUR_LETTER_WORD_NOISE not in line]


def with_digest(raw: bytes, digest: int) -> bytes:
    """A snapshot file whose zxid-digest trailer says `digest`, sealed again correctly."""
    seal_bytes = 8 + 5  # the Adler32 long, then ustring "/"
    body = raw[:-seal_bytes - 8] + struct.pack(">q", digest)
    return body + struct.pack(">q", zlib.adler32(body)) + raw[-5:]


# -- our writer, ZooKeeper's reader -------------------------------------------------------


def test_file_matches_the_construct_builder():
    """Two implementations of one format: snapshot_file_chunks (struct, streaming) and
    zkformat.build_snapshot (construct), given the same order and ids."""
    tree = our_tree()
    w = SnapshotWriter(tree, digest=True)
    b"".join(w.chunks())
    ours = b"".join(zkformat.snapshot_file_chunks(tree, dbid=3))
    nodes = []
    for path, n in tree.nodes.items():
        ref = -1 if path in ("/", "/zookeeper", "/zookeeper/quota") else next(
            k for k, v in w.acl_cache.items() if v == n.acl)
        nodes.append(("" if path == "/" else path, n.data, ref, {
            "czxid": n.czxid, "mzxid": n.mzxid, "ctime": n.ctime, "mtime": n.mtime,
            "version": n.version, "cversion": n.cversion, "aversion": n.aversion,
            "ephemeralOwner": n.ephemeralOwner, "pzxid": n.pzxid}))
    sessions = {s: tree.sessions[s] for s in java_long_hashmap_order(tree.sessions)}
    acls = {k: w.acl_cache[k] for k in java_long_hashmap_order(w.acl_cache)}
    theirs = zkformat.build_snapshot(
        sessions, acls, nodes, (tree.last_processed_zxid, DIGEST_VERSION, w.digest), dbid=3)
    assert ours == theirs


@needs_zookeeper
def test_zookeeper_serves_the_tree_of_our_snapshot(tmp_path):
    tree = our_tree()
    workdir = tmp_path / "zk"
    path = zkformat.write_snapshot_file(tree, workdir / "data")
    assert path.name == f"snapshot.{tree.last_processed_zxid:x}"
    snap = zkformat.read_snapshot(path)  # our own reader: seals and digest trailer
    assert snap.digest == (tree.last_processed_zxid, DIGEST_VERSION, tree_digest(tree))
    zk = start_zookeeper(workdir, TICK_TIME_MS, ZK_CFG)
    client = None
    try:
        client = super_client(zk.connect_string)
        got = read_tree(client)
        assert diff_trees(expected_view(tree), got, ("our tree", "zookeeper")) == []
        assert got["/app/null"][0] is None and got["/app/empty"][0] == b""
        assert got["/app/eph"][1][7] == LIVE_SESSION  # the live session's ephemeral
        # FileSnap.deserialize compares the digest of a non-fuzzy snapshot at once.
        assert mntr(zk)["zk_digest_mismatches_count"] == "0"
    finally:
        if client is not None:
            client.stop()
            client.close()
        zk.stop()
    assert log_errors(zk) == []


@needs_zookeeper
def test_zookeeper_counts_a_wrong_digest_in_our_snapshot(tmp_path):
    """The control for the test above: the same file with a digest off by one."""
    tree = our_tree()
    workdir = tmp_path / "zk"
    path = zkformat.write_snapshot_file(tree, workdir / "data")
    path.write_bytes(with_digest(path.read_bytes(), tree_digest(tree) + 1))
    zkformat.read_snapshot(path)  # still a well-sealed file
    zk = start_zookeeper(workdir, TICK_TIME_MS, ZK_CFG)
    try:
        assert mntr(zk)["zk_digest_mismatches_count"] == "1"
    finally:
        zk.stop()


# -- ZooKeeper's writer, our reader and writer --------------------------------------------


def raw_create(server: ServerProcess, op: int, path: str, data: bytes | None, flags: int,
               ttl_ms: int | None = None) -> None:
    """Creates kazoo cannot send: null data, containers, TTL nodes."""
    with RawClient(server.host, server.port) as raw:
        raw.connect(timeout_ms=4000)
        payload = ustring(path) + buffer(data) + acl_vector() + int32(flags)
        if ttl_ms is not None:
            payload += int64(ttl_ms)
        assert raw.request(op, payload).err == 0, path
        raw.close_session()


def zookeeper_workload(zk: ServerProcess) -> list[KazooClient]:
    """Writes a varied tree; returns clients whose sessions (and ephemerals) stay open."""
    clients = []
    for i in range(4):
        c = KazooClient(hosts=zk.connect_string, timeout=30)
        c.start(timeout=30)
        clients.append(c)
        c.create(f"/s{i}", b"", ephemeral=True)
    a = clients[0]
    a.add_auth("digest", "alice:secret")
    alice = make_digest_acl("alice", "secret", all=True)
    a.create("/app", b"app")
    a.create("/app/private", b"secret", acl=[alice])
    a.create("/app/readonly", b"ro", acl=[make_acl("world", "anyone", read=True), alice])
    a.create("/app/ip", b"", acl=[make_acl("ip", "127.0.0.1", all=True)])
    a.set_acls("/app/readonly", [alice], version=0)
    for i in range(3):
        a.set("/app", f"v{i}".encode())
    jobs = [a.create("/app/jobs/job-", f"j{i}".encode(), sequence=True, makepath=True)
            for i in range(12)]
    for p in jobs[::4]:
        a.delete(p)
    a.create("/app/bin", bytes(range(256)) * 4)
    a.create("/\u00e9t\u00e9", b"\xff\x00")
    tx = a.transaction()
    tx.create("/app/multi", b"m")
    tx.set_data("/app/multi", b"m2")
    tx.commit()
    raw_create(zk, OpCode.CREATE, "/app/null", None, 0)
    raw_create(zk, OP_CREATE_CONTAINER, "/box", b"", FLAG_CONTAINER)
    a.create("/box/item", b"i")
    raw_create(zk, OP_CREATE_TTL, "/ttl", b"t", FLAG_PERSISTENT_WITH_TTL, TTL_MS)
    return clients


@pytest.fixture(scope="module")
def zookeeper_data(tmp_path_factory) -> Path:
    """A dataDir a real ZooKeeper wrote: snapshot.0 and the log of the workload, then the
    snapshot it takes of the whole tree when restarted (ZooKeeperServer.loadData)."""
    if not HAVE_ZOOKEEPER:
        pytest.skip("scripts/install-zookeeper")
    workdir = tmp_path_factory.mktemp("zk-written")
    zk = start_zookeeper(workdir, TICK_TIME_MS, ZK_CFG)
    clients = []
    try:
        clients = zookeeper_workload(zk)
    finally:
        zk.stop()  # the sessions are still open in the log
        for c in clients:
            c.stop()
            c.close()
    zk = start_zookeeper(workdir, TICK_TIME_MS, ZK_CFG)
    zk.stop()
    assert log_errors(zk) == []
    return workdir / "data"


def newest_snapshot(data_dir: Path) -> zkformat.ZkSnapshot:
    zxid, path = zkformat.snapshot_files(data_dir)[0]
    assert zxid > 0
    return zkformat.read_snapshot(path)


@needs_zookeeper
def test_rewriting_zookeepers_snapshot_gives_the_same_bytes(zookeeper_data):
    snap = newest_snapshot(zookeeper_data)
    assert len(snap.sessions) == 4 and snap.digest[0] == snap.zxid  # quiescent, sessions
    tree = tree_from_snapshot(snap)
    ours = b"".join(zkformat.snapshot_file_chunks(tree, snap.dbid, acl_ids=snap.acls,
                                                  chunk_bytes=1000))
    theirs = snap.path.read_bytes()
    assert len(ours) == len(theirs)
    first = next((i for i, (x, y) in enumerate(zip(ours, theirs, strict=True)) if x != y),
                 None)
    assert first is None, f"first difference at byte {first}"


@needs_zookeeper
def test_zookeepers_snapshot_digest_is_our_tree_digest(zookeeper_data):
    snap = newest_snapshot(zookeeper_data)
    zxid, version, digest = snap.digest
    assert (zxid, version) == (snap.zxid, DIGEST_VERSION) and digest != 0
    assert tree_digest(tree_from_snapshot(snap)) == digest


@needs_zookeeper
def test_every_logged_txn_digest_is_our_tree_digest_after_apply(zookeeper_data):
    """ZooKeeper logs each txn with the leader's TxnDigest of the tree after it; replaying
    the log through our DataTree.apply must give that digest at every zxid."""
    snapshots = zkformat.snapshot_files(zookeeper_data)
    zxid, first = snapshots[-1]
    assert zxid == 0
    tree = tree_from_snapshot(zkformat.read_snapshot(first))
    checked = 0
    for _, log in zkformat.log_files(zookeeper_data):
        for rec in zkformat.read_log_file(log).records:
            txn, end = decode_txn_at(rec.txn_bytes, digest_follows=True)
            tree.apply(txn)
            if end == len(rec.txn_bytes):
                continue  # logged without a digest
            logged, _ = r.TxnDigest.decode(rec.txn_bytes, end)
            assert logged.version == DIGEST_VERSION
            assert tree_digest(tree) == logged.treeDigest, (
                f"zxid 0x{txn.zxid:x} type {txn.hdr.type}")
            checked += 1
    assert checked >= 40  # the workload's txns, sessions and multi included
