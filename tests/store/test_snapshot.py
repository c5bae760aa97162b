"""Snapshots: exact round trip, fuzzy writing under changes, corruption detection."""

import asyncio
import random
from concurrent.futures import ThreadPoolExecutor

import plyvel
import pytest

from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.store.snapshot import SnapshotCorruption, SnapshotStore
from zkcompat.tree.datatree import DataTree
from zkcompat.tree.txn import Txn

WORLD = [r.ACL(31, r.Id("world", "anyone"))]
DIGEST = [r.ACL(1, r.Id("digest", "bob:abc"))]


def state(tree: DataTree) -> dict:
    out = {}
    for path, n in tree.nodes.items():
        out[path] = (n.data, n.acl, n.stat(), sorted(n.children or ()), n.digest)
    return {"nodes": out, "sessions": dict(tree.sessions), "eph": tree.ephemerals,
            "containers": tree.containers, "digest": tree.digest}


class Writer:
    """Drives a tree with random txns, as the pipeline would."""

    def __init__(self, tree, seed, suffixes=("",)):
        self.tree = tree
        self.rng = random.Random(seed)
        self.suffixes = suffixes  # of new nodes' names, drawn at random
        self.zxid = tree.last_processed_zxid
        self.txns = []

    def step(self):
        self.zxid += 1
        tree, rng = self.tree, self.rng
        paths = [p for p in tree.nodes if not p.startswith("/zookeeper")]
        parent = rng.choice(paths)
        leaves = [p for p in paths if p != "/" and not tree.nodes[p].children]
        roll = rng.random()
        if roll < 0.5 or not leaves:
            suffix = rng.choice(self.suffixes) if len(self.suffixes) > 1 else ""
            name = f"{'' if parent == '/' else parent}/n{self.zxid}{suffix}"
            owner_session = rng.random() < 0.2 and not tree.nodes[parent].ephemeralOwner
            body = r.CreateTxn(name, rng.randbytes(rng.randrange(0, 50)) if rng.random() < 0.9 else None,
                               rng.choice([WORLD, DIGEST]), bool(owner_session and parent == "/"),
                               # prep's explicit parentCVersion: replay over a fuzzy snapshot
                               # must not bump it twice (-1 would, as in ZooKeeper)
                               tree.nodes[parent].cversion + 1)
            t = Txn(r.TxnHeader(99, 1, self.zxid, self.zxid * 10, OpCode.CREATE), body)
        elif roll < 0.8:
            p = rng.choice(leaves)
            t = Txn(r.TxnHeader(99, 1, self.zxid, self.zxid * 10, OpCode.SET_DATA),
                    r.SetDataTxn(p, rng.randbytes(8), tree.nodes[p].version + 1))
        else:
            t = Txn(r.TxnHeader(99, 1, self.zxid, self.zxid * 10, OpCode.DELETE),
                    r.DeleteTxn(rng.choice(leaves)))
        tree.apply(t)
        self.txns.append(t)


def seeded_tree(seed=1, steps=600):
    tree = DataTree()
    tree.apply(Txn(r.TxnHeader(99, 0, 1, 5, OpCode.CREATE_SESSION), r.CreateSessionTxn(3000)))
    # Non-ASCII names too, a lone surrogate among them: zkcompat's snapshots keep it, and
    # the loader hashes each path as Java's getBytes does (UTF-8, "?" for the surrogate).
    w = Writer(tree, seed, suffixes=("", "", "\u00e9", "\U0001f600", "\udc80"))
    for _ in range(steps):
        w.step()
    return tree, w


def test_round_trip_is_exact(tmp_path):
    tree, _ = seeded_tree()
    store = SnapshotStore(tmp_path)
    zxid = store.write_sync(tree)
    assert store.zxids() == [zxid]
    loaded = store.load(zxid)
    assert state(loaded) == state(tree)
    assert loaded.last_processed_zxid == tree.last_processed_zxid
    store.close()


FUZZY_CHANGES_MAX = 1500


def test_fuzzy_snapshot_plus_replay_is_exact(tmp_path):
    """Write a snapshot in slices while txns keep applying; loading it and replaying the
    txns after its start zxid must give exactly the final tree."""
    for seed in range(5):
        tree, w = seeded_tree(seed, 300)
        store = SnapshotStore(tmp_path / str(seed))

        async def go(store=store, tree=tree, w=w):
            task = asyncio.create_task(store.write(tree, ThreadPoolExecutor(1), slice_ms=0.0))
            await asyncio.sleep(0)  # the snapshot starts here
            changed = 0
            while not task.done():
                # A bounded number of changes: each step reads the whole tree, and a tree
                # growing under a snapshot of 1-node slices made this test take 110 s.
                for _ in range(3 if changed < FUZZY_CHANGES_MAX else 0):
                    w.step()
                    changed += 1
                await asyncio.sleep(0)
            return (await task)[0], changed

        zxid, changed = asyncio.run(go())
        assert changed > 0  # the tree really changed under the snapshot
        loaded = store.load(zxid)
        for t in w.txns:
            if t.zxid > zxid:
                loaded.apply(t)
        assert state(loaded) == state(tree), f"seed {seed}"
        store.close()


def test_corrupt_chunk_and_missing_manifest(tmp_path):
    tree, _ = seeded_tree()
    store = SnapshotStore(tmp_path)
    zxid = store.write_sync(tree)
    store.close()
    db = plyvel.DB(str(tmp_path))
    key = next(k for k in db.iterator(prefix=b"c", include_value=False))
    v = bytearray(db.get(key))
    v[len(v) // 2] ^= 1
    db.put(key, bytes(v))
    db.close()
    store = SnapshotStore(tmp_path)
    with pytest.raises(SnapshotCorruption, match="checksum"):
        store.load(zxid)
    store.delete(zxid)
    assert store.zxids() == []
    store.close()


def test_chunks_of_an_interrupted_snapshot_are_deleted(tmp_path):
    tree, _ = seeded_tree()
    store = SnapshotStore(tmp_path)
    kept = store.write_sync(tree)
    store.db.put(b"c" + (kept + 7).to_bytes(8, "big") + (0).to_bytes(4, "big"), b"partial")
    assert store.delete_orphans() == 1
    assert store.delete_orphans() == 0
    assert [k for k in store.db.iterator(prefix=b"c", include_value=False)
            if int.from_bytes(k[1:9], "big") != kept] == []
    assert store.zxids() == [kept]
    store.load(kept)
    store.close()


def _mapped_under(directory) -> list[str]:
    """Files under `directory` this process has mapped (LevelDB reads tables by mmap)."""
    with open("/proc/self/maps") as f:
        return [line.split()[-1] for line in f if str(directory) in line]


def big_tree(nodes: int = 3000, size: int = 2048) -> DataTree:
    tree = DataTree()
    for i in range(nodes):
        tree.apply(Txn(r.TxnHeader(99, i, i + 1, 5, OpCode.CREATE),
                       r.CreateTxn(f"/n{i}", random.randbytes(size), WORLD, False, i + 1)))
    return tree


def test_reopen_after_a_load_unmaps_the_snapshots_tables(tmp_path):
    """LevelDB keeps the tables it read mapped while they are in its table cache: after a
    load, every page of the snapshot counted in RSS (1.2 GB at a million 1 KB znodes)."""
    store = SnapshotStore(tmp_path)
    zxid = store.write_sync(big_tree())
    store.close()
    store = SnapshotStore(tmp_path)  # the write-ahead log becomes a table on opening
    store.load(zxid)
    assert _mapped_under(tmp_path), "the control: a load maps the snapshot's tables"
    store.reopen()
    assert _mapped_under(tmp_path) == []
    assert store.zxids() == [zxid] and len(store.load(zxid).nodes) > 3000
    store.close()


def test_a_server_starting_on_its_data_keeps_no_snapshot_mapped(tmp_path):
    from zkcompat.config import Config
    from zkcompat.peer.node import build_standalone
    store = SnapshotStore(tmp_path / "zkcompat" / "snapshots")
    store.write_sync(big_tree())
    store.close()
    ctx = build_standalone(Config(data_dir=tmp_path, force_sync=False))
    try:
        assert len(ctx.tree.nodes) > 3000
        assert _mapped_under(tmp_path / "zkcompat" / "snapshots") == []
    finally:
        ctx.datadir.close()


def test_a_store_written_with_snappy_still_loads(tmp_path):
    """Snapshots are written without compression now; stores of earlier versions, written
    with LevelDB's default snappy, load as before (each block says how it is stored)."""
    tree = big_tree(500, 4096)
    old = SnapshotStore.__new__(SnapshotStore)
    old.path, old.db = tmp_path, plyvel.DB(str(tmp_path), create_if_missing=True,
                                            compression="snappy")
    zxid = old.write_sync(tree)
    old.close()
    store = SnapshotStore(tmp_path)
    assert state(store.load(zxid)) == state(tree)
    store.close()
