"""ZooKeeper's file formats (zkformat) and the importer on files built here byte for byte:
the node codec against the construct spec, seals, torn and corrupt logs, gaps, fuzzy
snapshots, and the fallback to an older snapshot. Snappy is in test_snappy.py."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.store import importer, zkformat
from zkcompat.store.importer import ImportFailed
from zkcompat.store.snapshot import SnapshotStore
from zkcompat.store.zkformat import ZkFormatError
from zkcompat.tree.acl import OPEN_ACL_UNSAFE
from zkcompat.tree.datatree import DataTree
from zkcompat.tree.paths import split_parent
from zkcompat.tree.txn import Txn, encode_txn

from .test_snapshot import Writer, state

WORLD = [r.ACL(31, r.Id("world", "anyone"))]

# -- helpers: ZooKeeper files from a DataTree --------------------------------------------


def zk_snapshot_bytes(tree: DataTree, digest=(0, 2, 0)) -> bytes:
    """What FileSnap.serialize writes for this tree (root as "", ACL ids from 1, -1 for
    OPEN_ACL_UNSAFE as ReferenceCountedACLCache.convertAcls never does, but reads)."""
    acl_ids: dict = {}
    nodes = []
    stack = ["/"]
    while stack:
        path = stack.pop()
        n = tree.nodes[path]
        if n.acl == OPEN_ACL_UNSAFE and len(acl_ids) % 2:
            ref = -1
        else:
            ref = acl_ids.setdefault(n.acl, len(acl_ids) + 1)
        nodes.append(("" if path == "/" else path, n.data, ref, {
            "czxid": n.czxid, "mzxid": n.mzxid, "ctime": n.ctime, "mtime": n.mtime,
            "version": n.version, "cversion": n.cversion, "aversion": n.aversion,
            "ephemeralOwner": n.ephemeralOwner, "pzxid": n.pzxid}))
        base = "" if path == "/" else path
        stack.extend(f"{base}/{c}" for c in sorted(n.children or ()))
    acls = {ref: acl for acl, ref in acl_ids.items()}
    return zkformat.build_snapshot(dict(tree.sessions), acls, nodes, digest)


def write_zk_datadir(root: Path, snapshots: dict[int, bytes], logs: dict[int, list[Txn]],
                     padding_bytes: int = 512) -> Path:
    vdir = root / "version-2"
    vdir.mkdir(parents=True)
    for zxid, data in snapshots.items():
        (vdir / f"snapshot.{zxid:x}").write_bytes(data)
    for first, txns in logs.items():
        (vdir / f"log.{first:x}").write_bytes(
            zkformat.build_log_file([encode_txn(t) for t in txns], padding_bytes=padding_bytes))
    return root


class ExplicitWriter(Writer):
    """Writer whose creates carry the parent's cversion, as ZooKeeper's prep writes them
    (what makes replay over a fuzzy snapshot exact)."""

    def step(self):
        super().step()
        t = self.txns[-1]
        if t.hdr.type == OpCode.CREATE:
            parent, _ = split_parent(t.body.path)
            t.body.parentCVersion = self.tree.nodes[parent].cversion


def history(seed: int, steps: int):
    tree = DataTree()
    w = ExplicitWriter(tree, seed)
    w.zxid = 1
    sess = Txn(r.TxnHeader(99, 0, 1, 5, OpCode.CREATE_SESSION), r.CreateSessionTxn(3000))
    tree.apply(sess)
    w.txns.append(sess)
    for _ in range(steps):
        w.step()
    return tree, w.txns


def replay(txns, upto: int) -> DataTree:
    tree = DataTree()
    for t in txns:
        if t.zxid <= upto:
            tree.apply(t)
    return tree


def split_logs(txns, every: int) -> dict[int, list[Txn]]:
    return {txns[i].zxid: txns[i : i + every] for i in range(0, len(txns), every)}


# -- construct spec vs the struct node loop ----------------------------------------------

# BMP only: Java writes a character outside it as two encoded surrogates (CESU-8) and
# reads each back as U+FFFD, so ZooKeeper's own snapshots do not keep such paths either.
paths = st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/",
                                       max_codepoint=0xFFFF),
                         min_size=1, max_size=8), min_size=1, max_size=3, unique=True)
longs = st.integers(-(2**63), 2**63 - 1)
ints = st.integers(-(2**31), 2**31 - 1)


@settings(max_examples=60, deadline=None)
@given(names=paths, data=st.one_of(st.none(), st.binary(max_size=40)), stat=st.tuples(
    longs, longs, longs, longs, ints, ints, ints, longs, longs))
def test_node_loop_reads_what_the_construct_spec_builds(tmp_path_factory, names, data, stat):
    keys = ("czxid", "mzxid", "ctime", "mtime", "version", "cversion", "aversion",
            "ephemeralOwner", "pzxid")
    stat_d = dict(zip(keys, stat, strict=True))
    nodes = [("", b"", -1, stat_d)]
    path = ""
    for name in names:
        path += "/" + name
        nodes.append((path, data, 7, stat_d))
    acl = ((5, "digest", "u:p"),)
    raw = zkformat.build_snapshot({1: 2}, {7: acl}, nodes)
    p = tmp_path_factory.mktemp("snap") / "snapshot.1"
    p.write_bytes(raw)
    snap = zkformat.read_snapshot(p)
    assert list(snap.nodes) == ["/"] + [n[0] for n in nodes[1:]]
    last = snap.nodes[nodes[-1][0]]
    assert (last.data, last.acl) == (data, acl)
    assert (last.czxid, last.mzxid, last.ctime, last.mtime, last.version, last.cversion,
            last.aversion, last.ephemeralOwner, last.pzxid) == stat
    # and the construct spec parses the same bytes the same way
    off = 16 + 4 + 12 + 4
    entry = zkformat.AclCacheEntry.parse(raw[off:])
    off += len(zkformat.AclCacheEntry.build(entry))
    first = zkformat.JuteString.parse(raw[off:])
    assert first == ""
    assert snap.sessions == {1: 2}
    assert len(snap.sealed) == 1


# -- snapshots ----------------------------------------------------------------------------


def test_snapshot_round_trip_of_a_random_tree(tmp_path):
    tree, _ = history(1, 400)
    p = tmp_path / f"snapshot.{tree.last_processed_zxid:x}"
    p.write_bytes(zk_snapshot_bytes(tree, digest=(tree.last_processed_zxid, 2, 12345)))
    snap = zkformat.read_snapshot(p)
    assert snap.zxid == tree.last_processed_zxid
    assert snap.digest == (tree.last_processed_zxid, 2, 12345)
    assert len(snap.sealed) == 2
    assert state(importer.tree_from_snapshot(snap)) == state(tree)


@pytest.mark.parametrize("where", ["in a node", "in the seal", "at the end"])
def test_damaged_snapshot_is_refused(tmp_path, where):
    tree, _ = history(2, 100)
    raw = bytearray(zk_snapshot_bytes(tree))
    p = tmp_path / "snapshot.5"
    if where == "in a node":
        raw[len(raw) // 2] ^= 0x01
        p.write_bytes(raw)
    elif where == "in the seal":
        seal_at = len(raw) - 13 - 20 - 13  # seal, digest, seal at the end
        raw[seal_at + 7] ^= 0x01
        p.write_bytes(raw)
        with pytest.raises(ZkFormatError, match="checksum after the end of the tree"):
            zkformat.read_snapshot(p)
    else:
        p.write_bytes(raw[: len(raw) - 30])
    with pytest.raises(ZkFormatError):
        zkformat.read_snapshot(p)


def test_unknown_acl_reference_is_refused(tmp_path):
    stat = dict(czxid=0, mzxid=0, ctime=0, mtime=0, version=0, cversion=0, aversion=0,
                ephemeralOwner=0, pzxid=0)
    raw = zkformat.build_snapshot({}, {}, [("", b"", -1, stat), ("/a", b"", 3, stat)])
    p = tmp_path / "snapshot.0"
    p.write_bytes(raw)
    with pytest.raises(ZkFormatError, match="ACL 3"):
        zkformat.read_snapshot(p)


def test_wrong_magic_is_refused(tmp_path):
    tree, _ = history(2, 10)
    raw = bytearray(zk_snapshot_bytes(tree))
    raw[0:4] = b"ZKLG"
    (tmp_path / "snapshot.1").write_bytes(raw)
    with pytest.raises(ZkFormatError, match="not ZKSN"):
        zkformat.read_snapshot(tmp_path / "snapshot.1")


# -- logs ---------------------------------------------------------------------------------


def test_log_ends_at_padding_and_at_a_partial_record(tmp_path):
    _, txns = history(3, 30)
    blob = zkformat.build_log_file([encode_txn(t) for t in txns], padding_bytes=4096)
    p = tmp_path / "log.1"
    p.write_bytes(blob)
    lf = zkformat.read_log_file(p)
    assert (len(lf.records), lf.end_reason) == (len(txns), "padding")
    last = zkformat.build_log_record(encode_txn(txns[-1]))
    whole = blob[: len(blob) - 4096]
    for cut in (1, len(last) // 2, len(last) - 1):  # torn inside the last record
        p.write_bytes(whole[: len(whole) - cut])
        lf = zkformat.read_log_file(p)
        assert (len(lf.records), lf.end_reason) == (len(txns) - 1, "partial record"), cut
    p.write_bytes(whole[:-1] + b"X")  # the end-of-record byte is not 'B'
    assert zkformat.read_log_file(p).end_reason == "partial record"
    p.write_bytes(whole)
    assert zkformat.read_log_file(p).end_reason == "eof"


def test_log_checksum_mismatch_names_the_record(tmp_path):
    _, txns = history(3, 30)
    records = [encode_txn(t) for t in txns]
    blob = bytearray(zkformat.build_log_file(records))
    target = txns[10]
    at = 16 + sum(len(zkformat.build_log_record(x)) for x in records[:10])
    blob[at + 12 + 40] ^= 0x10  # inside txn 10's record, after its header
    (tmp_path / "log.1").write_bytes(blob)
    with pytest.raises(ZkFormatError, match=f"offset {at}.*zxid 0x{target.zxid:x}.*Adler32"):
        zkformat.read_log_file(tmp_path / "log.1")


def test_reconfig_and_v0_create_decode_as_zookeeper_reads_them():
    hdr = r.TxnHeader(1, 2, 3, 4, OpCode.RECONFIG)
    raw = hdr.to_bytes() + r.SetDataTxn("/zookeeper/config", b"server.1=x", 3).to_bytes()
    txn = zkformat.decode_zk_txn(raw)
    assert txn.hdr.type == OpCode.SET_DATA and txn.body.path == "/zookeeper/config"
    hdr = r.TxnHeader(1, 2, 3, 4, OpCode.CREATE)
    raw = hdr.to_bytes() + r.CreateTxnV0("/old", b"d", WORLD, True).to_bytes()
    txn = zkformat.decode_zk_txn(raw)
    assert txn.body == r.CreateTxn("/old", b"d", WORLD, True, -1)
    with pytest.raises(ZkFormatError):
        zkformat.decode_zk_txn(r.TxnHeader(1, 2, 3, 4, 99).to_bytes())


# -- the importer -------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_fuzzy_snapshot_plus_logs_give_the_final_tree(tmp_path, seed):
    """The snapshot is named S but holds the tree of S+k (ZooKeeper's are fuzzy); the logs
    overlap it and are split over several files; the result is the final tree."""
    final, txns = history(seed, 500)
    snap_zxid, fuzz = 200, 15 + seed * 10
    snap = zk_snapshot_bytes(replay(txns, snap_zxid + fuzz))
    write_zk_datadir(tmp_path / "zk", {snap_zxid: snap}, split_logs(txns, 70))
    tree, result = importer.build_tree(tmp_path / "zk")
    assert result.snapshot_zxid == snap_zxid
    assert result.txns_applied == final.last_processed_zxid - snap_zxid
    assert result.log_files[0].name == f"log.{txns[140].zxid:x}"  # the file holding 0xc9
    assert state(tree) == state(final)


def test_import_writes_a_snapshot_zkcompat_loads(tmp_path):
    final, txns = history(7, 300)
    write_zk_datadir(tmp_path / "zk", {100: zk_snapshot_bytes(replay(txns, 100))},
                     split_logs(txns, 100))
    result = importer.import_zookeeper(tmp_path / "zk", tmp_path / "out")
    assert result.written_zxid == final.last_processed_zxid
    store = SnapshotStore(tmp_path / "out" / "zkcompat" / "snapshots")
    assert store.zxids() == [final.last_processed_zxid]
    assert state(store.load(final.last_processed_zxid)) == state(final)
    store.close()
    with pytest.raises(ImportFailed, match="already holds zkcompat data"):
        importer.import_zookeeper(tmp_path / "zk", tmp_path / "out")


def test_logs_alone_without_a_snapshot(tmp_path):
    final, txns = history(8, 150)
    write_zk_datadir(tmp_path / "zk", {}, split_logs(txns, 40))
    tree, result = importer.build_tree(tmp_path / "zk")
    assert result.snapshot_file is None and result.txns_applied == len(txns)
    assert state(tree) == state(final)


def test_corrupt_newest_snapshot_falls_back_to_an_older_one(tmp_path):
    final, txns = history(4, 300)
    bad = bytearray(zk_snapshot_bytes(replay(txns, 250)))
    bad[len(bad) // 3] ^= 0xFF
    write_zk_datadir(tmp_path / "zk", {
        100: zk_snapshot_bytes(replay(txns, 100)),
        250: bytes(bad),
    }, split_logs(txns, 100))
    tree, result = importer.build_tree(tmp_path / "zk")
    assert result.snapshot_zxid == 100 and len(result.skipped_snapshots) == 1
    assert "snapshot.fa" in result.skipped_snapshots[0]
    assert state(tree) == state(final)


def test_every_snapshot_corrupt_is_refused(tmp_path):
    _, txns = history(4, 100)
    bad = bytearray(zk_snapshot_bytes(replay(txns, 50)))
    bad[len(bad) // 2] ^= 0xFF
    write_zk_datadir(tmp_path / "zk", {50: bytes(bad)}, split_logs(txns, 100))
    with pytest.raises(ImportFailed, match="no valid ZooKeeper snapshot"):
        importer.build_tree(tmp_path / "zk")


def test_gap_in_the_logs_is_refused(tmp_path):
    _, txns = history(5, 300)
    logs = split_logs(txns, 50)
    del logs[txns[150].zxid]  # a whole log file missing
    write_zk_datadir(tmp_path / "zk", {100: zk_snapshot_bytes(replay(txns, 100))}, logs)
    with pytest.raises(ImportFailed, match=f"jumps from zxid 0x{txns[149].zxid:x} to "
                                           f"0x{txns[200].zxid:x}"):
        importer.build_tree(tmp_path / "zk")


def test_corrupt_log_record_is_refused_with_file_and_offset(tmp_path):
    _, txns = history(6, 120)
    write_zk_datadir(tmp_path / "zk", {}, split_logs(txns, 200), padding_bytes=0)
    p = tmp_path / "zk" / "version-2" / "log.1"
    blob = bytearray(p.read_bytes())
    blob[len(blob) // 2] ^= 0x04
    p.write_bytes(blob)
    with pytest.raises(ImportFailed, match="log.1: record at offset .*Adler32"):
        importer.build_tree(tmp_path / "zk")


def test_torn_last_record_is_left_out_as_zookeeper_does(tmp_path):
    final, txns = history(6, 120)
    write_zk_datadir(tmp_path / "zk", {}, {1: txns}, padding_bytes=0)
    p = tmp_path / "zk" / "version-2" / "log.1"
    p.write_bytes(p.read_bytes()[:-5])
    tree, result = importer.build_tree(tmp_path / "zk")
    assert result.txns_applied == len(txns) - 1
    assert state(tree) == state(replay(txns, txns[-2].zxid))


def test_not_a_zookeeper_datadir(tmp_path):
    with pytest.raises(ImportFailed, match="no version-2"):
        importer.build_tree(tmp_path)
    (tmp_path / "version-2").mkdir()
    with pytest.raises(ImportFailed, match="nothing to import"):
        importer.build_tree(tmp_path)


def test_adler32_is_what_zookeeper_writes():
    """FileTxnLog's checksum is Adler32 over the txn bytes only (not the length or 'B')."""
    rec = zkformat.build_log_record(b"abc")
    assert int.from_bytes(rec[:8], "big") == zlib.adler32(b"abc")
    assert rec[8:12] == (3).to_bytes(4, "big") and rec[-1:] == b"B"


def test_snapshot_of_zookeeper_39_with_last_processed_zxid(tmp_path):
    """3.9.3+ appends lastProcessedZxid and a third seal; older readers stop before it."""
    tree, _ = history(9, 50)
    raw = zk_snapshot_bytes(tree, digest=(tree.last_processed_zxid, 2, 7))
    raw += zkformat.Int64sb.build(0x1234)
    raw += zkformat.Seal.build({"checksum": zlib.adler32(raw), "path": "/"})
    (tmp_path / "snapshot.20").write_bytes(raw)
    snap = zkformat.read_snapshot(tmp_path / "snapshot.20")
    assert snap.last_processed_zxid == 0x1234 and len(snap.sealed) == 3
    assert snap.zxid == 0x20  # the file name decides, as FileSnap.deserialize does
    (tmp_path / "snapshot.21").write_bytes(raw + b"\x00")
    with pytest.raises(ZkFormatError, match="unexpected bytes"):
        zkformat.read_snapshot(tmp_path / "snapshot.21")
