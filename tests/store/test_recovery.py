"""DataDir.recover: newest good snapshot + log replay; what it refuses and why."""

import asyncio

import plyvel
import pytest

from zkcompat.store.datadir import DataDir, RecoveryError
from zkcompat.store.txnlog import txn_key
from zkcompat.tree.datatree import DataTree

from .test_snapshot import Writer, state


def build(path, steps_before_snap=(200,), steps_after=100, seed=3):
    """A data dir with snapshots taken after each count in steps_before_snap, and a log."""
    dd = DataDir(path)
    tree = DataTree()
    w = Writer(tree, seed)

    async def log_all(txns):
        dd.txnlog.append(txns)
        await dd.txnlog.sync()

    done = 0
    for n in steps_before_snap:
        for _ in range(n):
            w.step()
        asyncio.run(log_all(w.txns[done:]))
        done = len(w.txns)
        dd.snapshots.write_sync(tree)
    for _ in range(steps_after):
        w.step()
    asyncio.run(log_all(w.txns[done:]))
    dd.close()
    return tree


def test_snapshot_plus_log(tmp_path):
    tree = build(tmp_path)
    dd = DataDir(tmp_path)
    assert state(dd.recover()) == state(tree)
    dd.close()


def test_log_alone(tmp_path):
    tree = build(tmp_path, steps_before_snap=())
    dd = DataDir(tmp_path)
    assert state(dd.recover()) == state(tree)
    dd.close()


def test_bad_newest_snapshot_falls_back_to_older(tmp_path):
    tree = build(tmp_path, steps_before_snap=(100, 100))
    snaps = tmp_path / "zkcompat" / "snapshots"
    db = plyvel.DB(str(snaps))
    newest = max(k for k in db.iterator(prefix=b"m", include_value=False))
    db.put(newest, b"\0\0\0\0garbage")
    db.close()
    dd = DataDir(tmp_path)
    assert state(dd.recover()) == state(tree)
    dd.close()


def test_gap_in_log_refuses_with_advice(tmp_path):
    build(tmp_path, steps_before_snap=())
    log_dir = tmp_path / "zkcompat" / "txnlog"
    db = plyvel.DB(str(log_dir))
    db.delete(txn_key(50))
    db.close()
    dd = DataDir(tmp_path)
    with pytest.raises(RecoveryError, match="gap.*0x31.*0x33"):
        dd.recover()
    dd.close()


def test_purge_keeps_what_recovery_needs(tmp_path):
    tree = build(tmp_path, steps_before_snap=(50, 50, 50, 50))
    dd = DataDir(tmp_path)
    dd.purge(retain=3)
    assert len(dd.snapshots.zxids()) == 3
    assert state(dd.recover()) == state(tree)
    dd.close()
