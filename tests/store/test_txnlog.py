"""The LevelDB txn log: group commit, checksums, torn tails and corruption."""

import asyncio

import plyvel
import pytest

from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.store.txnlog import LogCorruption, TxnLog, txn_key
from zkcompat.tree.txn import Txn

WORLD = [r.ACL(31, r.Id("world", "anyone"))]


def txn(zxid):
    return Txn(r.TxnHeader(7, zxid, zxid, 1000 + zxid, OpCode.CREATE),
               r.CreateTxn(f"/n{zxid}", b"x" * zxid, WORLD, False, -1))


def write(path, zxids):
    log = TxnLog(path)

    async def go():
        log.append([txn(z) for z in zxids])
        return await log.sync()

    last = asyncio.run(go())
    log.close()
    return last


def test_group_commit_and_read_back(tmp_path):
    log = TxnLog(tmp_path)

    async def go():
        log.append([txn(1), txn(2)])
        assert log.has_unsynced
        log.append([txn(3)])  # joins the same batch
        assert await log.sync() == 3
        assert not log.has_unsynced
        log.append([txn(4)])
        return await log.sync()

    assert asyncio.run(go()) == 4
    assert log.stats == {"batches": 2, "txns": 4}
    assert [t.zxid for t in log.read_from(0)] == [1, 2, 3, 4]
    assert [t.zxid for t in log.read_from(2)] == [3, 4]
    assert list(log.read_from(2))[0] == txn(3)
    log.close()
    assert TxnLog(tmp_path).last_zxid == 4  # reopened: knows where it ends


def test_a_second_sync_starts_while_the_first_is_awaited(tmp_path):
    """The pipeline starts the next sync before applying what the last made durable: both
    are written, they finish in the order started, and each reports its own batch."""
    log = TxnLog(tmp_path)

    async def go():
        log.append([txn(1), txn(2)])
        first = log.start_sync()
        log.append([txn(3)])  # gathers into a new batch while the first is on its way
        second = log.start_sync()
        assert not log.has_unsynced
        return await first, log.last_zxid, await second, log.last_zxid

    assert asyncio.run(go()) == (2, 2, 3, 3)
    assert log.stats == {"batches": 2, "txns": 3}
    log.close()
    assert [t.zxid for t in TxnLog(tmp_path).read_from(0)] == [1, 2, 3]


def test_append_out_of_order_is_a_bug(tmp_path):
    log = TxnLog(tmp_path)
    log.append([txn(5)])
    with pytest.raises(AssertionError):
        log.append([txn(5)])
    log.close()


def _damage(path, zxid, fn):
    db = plyvel.DB(str(path))
    db.put(txn_key(zxid), fn(db.get(txn_key(zxid))))
    db.close()


def test_torn_tail_is_cut(tmp_path, caplog):
    write(tmp_path, [1, 2, 3])
    _damage(tmp_path, 3, lambda v: v[: len(v) // 2])
    log = TxnLog(tmp_path)
    assert [t.zxid for t in log.read_from(0)] == [1, 2]
    assert "torn_tail" in caplog.text
    assert log.last_zxid == 2
    assert [t.zxid for t in log.read_from(0)] == [1, 2]  # the cut is durable
    log.close()


def test_corruption_in_the_middle_is_named(tmp_path):
    write(tmp_path, [1, 2, 3])
    _damage(tmp_path, 2, lambda v: v[:10] + bytes([v[10] ^ 0xFF]) + v[11:])
    log = TxnLog(tmp_path)
    with pytest.raises(LogCorruption, match="0x2"):
        list(log.read_from(0))
    log.close()


def test_purge_and_truncate(tmp_path):
    write(tmp_path, [1, 2, 3, 4])
    log = TxnLog(tmp_path)
    assert log.purge_before(3) == 2
    assert [t.zxid for t in log.read_from(0)] == [3, 4]
    assert log.truncate_after(3) == 1
    assert log.last_zxid == 3
    log.close()
