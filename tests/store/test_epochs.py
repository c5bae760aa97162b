"""acceptedEpoch/currentEpoch files and the log history a leader syncs learners from."""

import asyncio

import pytest

from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.store.epochs import ACCEPTED_EPOCH_FILE, CURRENT_EPOCH_FILE, EpochFiles
from zkcompat.store.txnlog import LogHistory, TxnLog
from zkcompat.tree.txn import Txn
from zkcompat.zab.peer import make_zxid


def test_missing_files_start_at_the_logs_epoch_and_are_written(tmp_path):
    e = EpochFiles(tmp_path, 3)
    assert (e.accepted, e.current) == (3, 3)
    assert (tmp_path / CURRENT_EPOCH_FILE).read_text().strip() == "3"
    e.write(5, None)
    e.write(None, 5)
    again = EpochFiles(tmp_path, 0)
    assert (again.accepted, again.current) == (5, 5)


def test_a_current_epoch_after_the_accepted_one_is_damage(tmp_path):
    (tmp_path / ACCEPTED_EPOCH_FILE).write_text("2\n")
    (tmp_path / CURRENT_EPOCH_FILE).write_text("3\n")
    with pytest.raises(ValueError, match="damaged"):
        EpochFiles(tmp_path, 0)
    (tmp_path / CURRENT_EPOCH_FILE).write_text("x\n")
    with pytest.raises(ValueError, match="not an epoch"):
        EpochFiles(tmp_path, 0)


def _txn(zxid):
    return Txn(r.TxnHeader(1, 1, zxid, 0, OpCode.SET_DATA), r.SetDataTxn("/a", b"x", 1))


def test_log_history_answers_what_sync_asks(tmp_path):
    log = TxnLog(tmp_path / "log")
    zxids = [make_zxid(1, 1), make_zxid(1, 2), make_zxid(1, 3), make_zxid(2, 1)]

    async def write():
        log.append([_txn(z) for z in zxids])
        await log.sync()

    asyncio.run(write())
    h = LogHistory(log)
    assert h.first_zxid() == zxids[0]
    assert h.contains(zxids[1]) and not h.contains(make_zxid(1, 4))
    assert h.floor(make_zxid(1, 9)) == zxids[2]
    assert h.floor(zxids[0] - 1) == 0
    assert [t.zxid for t in h.txns_between(zxids[0], zxids[2])] == zxids[1:3]
    log.close()
