"""The LevelDB txn log: group commit, checksums, torn tails and corruption."""

import asyncio
import threading

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
    # txn 3 joins 1 and 2 unless the writer took those first; 4 comes after a sync
    assert log.stats["txns"] == 4 and 2 <= log.stats["batches"] <= 3
    assert [t.zxid for t in log.read_from(0)] == [1, 2, 3, 4]
    assert [t.zxid for t in log.read_from(2)] == [3, 4]
    assert list(log.read_from(2))[0] == txn(3)
    log.close()
    assert TxnLog(tmp_path).last_zxid == 4  # reopened: knows where it ends


def test_the_writer_reports_each_sync_in_order_and_gathers_meanwhile(tmp_path):
    """The writer thread takes whatever has gathered when a write returns; each sync is
    reported to the loop in order, and sync() returns once its own appends are durable."""
    log = TxnLog(tmp_path)
    reported = []

    async def go():
        log.on_synced = reported.append
        log.append([txn(1), txn(2)])
        log.append([txn(3)])
        first = await log.sync()
        for z in range(4, 40):  # appends while earlier ones are being written
            log.append([txn(z)])
        return first, await log.sync()

    assert asyncio.run(go()) == (3, 39)
    assert reported == sorted(reported) and reported[-1] == 39
    assert log.stats["txns"] == 39 and log.stats["batches"] == len(reported)
    log.close()
    assert [t.zxid for t in TxnLog(tmp_path).read_from(0)] == list(range(1, 40))


def test_an_idle_writer_wakes_for_every_append(tmp_path):
    """A 1x1 client's pattern: each append comes after the writer went back to sleep, or
    (with no pause) while it is still finishing the last one. A lost wake-up hangs a sync."""
    log = TxnLog(tmp_path)

    async def go():
        for z in range(1, 201):
            log.append([txn(z)])
            assert await asyncio.wait_for(log.sync(), 5) == z
            if z % 2:
                await asyncio.sleep(0.001)  # the writer finds nothing and goes to sleep

    asyncio.run(go())
    assert log.stats["txns"] == 200
    log.close()
    assert TxnLog(tmp_path).last_zxid == 200


def test_close_stops_a_sleeping_writer(tmp_path):
    log = TxnLog(tmp_path)

    async def go():
        log.append([txn(1)])
        await log.sync()
        await asyncio.sleep(0.05)  # long enough for the writer to go to sleep

    asyncio.run(go())
    writer = log.writer._thread
    closer = threading.Thread(target=log.close)
    closer.start()
    closer.join(5)
    assert not closer.is_alive() and not writer.is_alive()


class _FailingBatch:
    def put(self, key, value):
        pass

    def write(self):
        raise OSError("no space left on device")


class _FailingDB:
    """Stands in for LevelDB only to make a write fail, as a full or dying disk does."""

    def __init__(self, db):
        self._db = db

    def write_batch(self, sync):
        return _FailingBatch()

    def close(self):
        self._db.close()


def test_a_failed_sync_is_reported_and_acknowledges_nothing(tmp_path):
    log = TxnLog(tmp_path)
    failures = []

    async def go():
        log.on_sync_failed = failures.append
        log.db = _FailingDB(log.db)
        log.append([txn(1)])
        with pytest.raises(OSError):
            await log.sync()
        log.append([txn(2)])
        with pytest.raises(OSError):  # and every later sync, at once: the writer is gone
            await asyncio.wait_for(log.sync(), 5)

    asyncio.run(go())
    assert [type(e) for e in failures] == [OSError]
    assert log.last_zxid == 0 and log.has_unsynced
    log.close()


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
