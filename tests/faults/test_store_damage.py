"""A stopped server's dataDir damaged on purpose, then restarted: a torn last log entry is
cut off; a flipped byte with valid entries after it stops start-up naming the zxid; a
missing or corrupt newest snapshot falls back to an older one plus the log."""

from __future__ import annotations

import re
import struct

import plyvel
from kazoo.client import KazooClient

from .harness import Node

MANY_SNAPSHOTS_SNAP_COUNT = 20  # a snapshot every 10-20 txns
WRITES = 150


def client(node: Node) -> KazooClient:
    c = KazooClient(hosts=node.connect_string, timeout=10)
    c.start(timeout=10)
    return c


def write_nodes(node: Node, n: int = WRITES, prefix: str = "/d") -> dict[str, bytes]:
    """n creates and a few setData, all acknowledged; returns path -> data."""
    c = client(node)
    expected = {}
    try:
        c.create(prefix, b"")
        for i in range(n):
            path = f"{prefix}/n{i:04d}"
            expected[path] = f"value {i}".encode() * (1 + i % 5)
            c.create(path, expected[path])
        for i in range(0, n, 7):
            path = f"{prefix}/n{i:04d}"
            expected[path] = f"changed {i}".encode()
            c.set(path, expected[path])
    finally:
        c.stop()
        c.close()
    return expected


def read_nodes(node: Node, prefix: str = "/d") -> dict[str, bytes]:
    c = client(node)
    try:
        names = c.get_children(prefix)
        futures = [(f"{prefix}/{n}", c.get_async(f"{prefix}/{n}")) for n in names]
        return {p: f.get(timeout=30)[0] for p, f in futures}
    finally:
        c.stop()
        c.close()


def txnlog_db(node: Node) -> plyvel.DB:
    return plyvel.DB(str(node.data_dir / "zkcompat" / "txnlog"))


def snapshots_db(node: Node) -> plyvel.DB:
    return plyvel.DB(str(node.data_dir / "zkcompat" / "snapshots"))


def snapshot_zxids(db: plyvel.DB) -> list[int]:
    """Complete snapshots (those with a b"m" manifest), newest first."""
    return sorted((struct.unpack(">Q", k[1:9])[0]
                   for k in db.iterator(prefix=b"m", include_value=False)), reverse=True)


def restart_log(node: Node, before: int) -> str:
    """What the server logged since `before` characters of its log."""
    return node.log_text()[before:]


def test_torn_last_log_entry_is_cut_off(tmp_path):
    node = Node(tmp_path / "node")
    node.start()
    expected = write_nodes(node)
    c = client(node)
    c.create("/torn", b"the last txn")
    c.stop()  # closeSession: now the last txn in the log
    c.close()
    last_client = client(node)
    last_client.create("/torn/last", b"torn")
    node.kill()  # no closeSession after it: the create is the last entry
    last_client.stop()
    last_client.close()

    db = txnlog_db(node)
    key, value = next(db.iterator(prefix=b"t", reverse=True))
    last_zxid = struct.unpack(">Q", key[1:])[0]
    db.put(key, value[: len(value) // 2])  # a write cut short by the crash
    db.close()

    mark = len(node.log_text())
    node.start()
    try:
        logged = restart_log(node, mark)
        assert re.search(rf"event=txn_log_torn_tail zxid=0x{last_zxid:x} ", logged), logged
        assert read_nodes(node) == expected
        c = client(node)
        try:
            assert c.get("/torn")[0] == b"the last txn"
            assert c.exists("/torn/last") is None
            _, stat = c.get("/torn")
            assert stat.numChildren == 0
            # The server goes on from the last good txn: new writes work and persist.
            stat = c.create("/torn/again", b"x", include_data=True)[1]
            assert stat.czxid >= last_zxid
        finally:
            c.stop()
            c.close()
        node.kill()
        node.start()
        c = client(node)
        try:
            assert c.get("/torn/again")[0] == b"x"
        finally:
            c.stop()
            c.close()
    finally:
        node.stop()


def test_flipped_byte_in_the_middle_of_the_log_refuses_to_start(tmp_path):
    node = Node(tmp_path / "node")
    node.start()
    write_nodes(node)
    node.stop()

    db = txnlog_db(node)
    keys = [k for k in db.iterator(prefix=b"t", include_value=False)]
    key = keys[len(keys) // 2]
    zxid = struct.unpack(">Q", key[1:])[0]
    value = bytearray(db.get(key))
    value[len(value) // 2] ^= 0x08
    db.put(key, bytes(value))
    db.close()

    result = node.run_expecting_refusal()
    assert result.returncode not in (0, -9), (result.returncode, result.stderr[-2000:])
    assert f"0x{zxid:x}" in result.stderr, result.stderr[-3000:]
    assert "corrupt" in result.stderr.lower(), result.stderr[-3000:]
    assert "event=listening" not in result.stderr, "it served from a corrupt log"


def _many_snapshots(tmp_path) -> tuple[Node, dict[str, bytes], list[int]]:
    node = Node(tmp_path / "node", snapCount=MANY_SNAPSHOTS_SNAP_COUNT)
    node.start()
    expected = write_nodes(node)
    node.kill()
    db = snapshots_db(node)
    zxids = snapshot_zxids(db)
    db.close()
    assert len(zxids) >= 2, f"the server wrote {len(zxids)} snapshots"
    return node, expected, zxids


def test_deleted_newest_snapshot_recovers_from_the_older_one_plus_log(tmp_path):
    node, expected, zxids = _many_snapshots(tmp_path)
    db = snapshots_db(node)
    db.delete(b"m" + struct.pack(">Q", zxids[0]))
    db.close()
    mark = len(node.log_text())
    node.start()
    try:
        logged = restart_log(node, mark)
        assert f"event=snapshot_loaded zxid=0x{zxids[1]:x} " in logged, logged
        assert read_nodes(node) == expected
    finally:
        node.stop()


def test_corrupt_newest_snapshot_chunk_falls_back(tmp_path):
    node, expected, zxids = _many_snapshots(tmp_path)
    db = snapshots_db(node)
    key, value = next(db.iterator(prefix=b"c" + struct.pack(">Q", zxids[0])))
    value = bytearray(value)
    value[len(value) // 2] ^= 0x40
    db.put(key, bytes(value))
    db.close()
    mark = len(node.log_text())
    node.start()
    try:
        logged = restart_log(node, mark)
        assert re.search(rf"event=snapshot_invalid zxid=0x{zxids[0]:x} .*checksum", logged), logged
        assert f"event=snapshot_loaded zxid=0x{zxids[1]:x} " in logged, logged
        assert read_nodes(node) == expected
    finally:
        node.stop()


def test_every_snapshot_corrupt_but_the_whole_log_there(tmp_path):
    node, expected, zxids = _many_snapshots(tmp_path)
    db = snapshots_db(node)
    for zxid in zxids:
        key = b"m" + struct.pack(">Q", zxid)
        db.put(key, b"\x00\x00\x00\x00" + db.get(key)[4:])
    db.close()
    node.start()
    try:
        assert read_nodes(node) == expected
    finally:
        node.stop()


def test_nothing_deleted_is_resurrected_by_an_older_snapshot(tmp_path):
    """Deletes after the older snapshot must replay too: the node stays gone."""
    node, expected, zxids = _many_snapshots(tmp_path)
    node.start()
    c = client(node)
    try:
        for path in list(expected)[:20]:
            c.delete(path)
            del expected[path]
    finally:
        c.stop()
        c.close()
    node.kill()
    db = snapshots_db(node)
    for zxid in snapshot_zxids(db)[:-1]:  # keep only the oldest snapshot
        db.delete(b"m" + struct.pack(">Q", zxid))
    db.close()
    node.start()
    try:
        assert read_nodes(node) == expected
    finally:
        node.stop()
