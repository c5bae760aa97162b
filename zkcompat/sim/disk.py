"""A simulated server's disk: the txn log, the epoch files and the snapshots, with the
LevelDB store's durability contract. An appended txn is durable only once the simulated
fsync that covers it has returned; a crash loses everything not yet durable. The epoch
files and snapshot installs are written synchronously (fsync'd) as the real ones are.

SimDisk is what survives a crash; SimTxnLog/SimDataDir are one incarnation's view of it,
with the same interface the real TxnLog/DataDir give Pipeline, LogHistory and QuorumPeer.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Iterator

from zkcompat.store.datadir import DataDir
from zkcompat.store.txnlog import key_zxid, txn_key
from zkcompat.tree.datatree import DataTree
from zkcompat.tree.snapstream import SnapReader, snap_stream_chunks
from zkcompat.tree.txn import Txn, decode_txn, encode_txn

FSYNC_MIN_MS = 0.5
FSYNC_MAX_MS = 4.0


class SimDisk:
    """What is on the platter: survives crashes."""

    def __init__(self):
        self.zxids: list[int] = []  # the durable log, zxid order
        self.entries: dict[int, bytes] = {}  # zxid -> ZooKeeper's txn encoding
        self.accepted_epoch: int | None = None
        self.current_epoch: int | None = None
        self.snapshots: dict[int, bytes] = {}  # zxid -> snapshot stream bytes
        self.snapshot_chains: dict[int, dict] = {}  # zxid -> the history it holds (checks)
        self.slow_ms = 0.0  # nemesis: extra fsync latency
        self.fail_syncs = 0  # nemesis: this many fsyncs fail from now
        self.fail_slow_ms = 0.0  # nemesis: a failing fsync takes this much longer
        self.fsync_ms = (FSYNC_MIN_MS, FSYNC_MAX_MS)

    def truncate_after(self, zxid: int) -> int:
        i = bisect.bisect_right(self.zxids, zxid)
        gone = self.zxids[i:]
        del self.zxids[i:]
        for z in gone:
            del self.entries[z]
        return len(gone)


class SimTxnLog:
    """TxnLog's interface (append, on_synced, on_sync_failed, sync, read_from, ...) over a
    SimDisk. Group commit: appends gather while an fsync runs; the next fsync takes them all.

    ack_before_durable is an injected bug: on_synced reports a batch at once, while it
    only becomes durable after its fsync (a crash meanwhile loses an acknowledged txn)."""

    def __init__(self, disk: SimDisk, rng, ack_before_durable: bool = False):
        self.disk = disk
        self.rng = rng
        self.ack_before_durable = ack_before_durable
        self.last_zxid = disk.zxids[-1] if disk.zxids else 0
        self._pending: list[tuple[int, bytes]] = []  # appended, no fsync started
        self._batch_last_zxid = self.last_zxid
        self._syncing = False
        self._failure: BaseException | None = None
        self._waiters: list[tuple[int, asyncio.Future]] = []
        self.on_synced = _ignore
        self.on_sync_failed = _ignore
        self.db = _LogView(disk)
        self.stats = {"batches": 0, "txns": 0}

    # -- writing ----------------------------------------------------------------------

    def append(self, txns: list[Txn]) -> None:
        last = self._batch_last_zxid
        for txn in txns:
            assert txn.zxid > last, f"log must grow in zxid order: 0x{txn.zxid:x} after 0x{last:x}"
            self._pending.append((txn.zxid, encode_txn(txn)))
            last = txn.zxid
        self._batch_last_zxid = last
        loop = asyncio.get_running_loop()
        if self.ack_before_durable:
            loop.call_soon(self.on_synced, last)
        if not self._syncing and self._failure is None:
            self._start_fsync(loop)

    def _start_fsync(self, loop) -> None:
        batch, self._pending = self._pending, []
        if not batch:
            return
        self._syncing = True
        disk = self.disk
        ms = self.rng.uniform(*disk.fsync_ms) + disk.slow_ms
        if disk.fail_syncs > 0:
            ms += disk.fail_slow_ms
        loop.call_later(ms / 1000, self._fsynced, batch)

    def _fsynced(self, batch: list[tuple[int, bytes]]) -> None:
        self._syncing = False
        disk = self.disk
        if disk.fail_syncs > 0:
            self._fsync_failed(batch)
            return
        for zxid, data in batch:
            if disk.zxids:
                assert zxid > disk.zxids[-1], "durable log out of zxid order"
            disk.zxids.append(zxid)
            disk.entries[zxid] = data
        last = batch[-1][0]
        self.last_zxid = last
        self.stats["batches"] += 1
        self.stats["txns"] += len(batch)
        done = [w for w in self._waiters if w[0] <= last]
        self._waiters = [w for w in self._waiters if w[0] > last]
        for _, fut in done:
            if not fut.done():
                fut.set_result(last)
        if not self.ack_before_durable:
            self.on_synced(last)
        if self._pending:
            self._start_fsync(asyncio.get_running_loop())

    def _fsync_failed(self, batch: list[tuple[int, bytes]]) -> None:
        """TxnLog's writer after a failed write: nothing more is ever synced (its thread
        has returned), waiters get the error, on_sync_failed is told. Whether the failed
        batch reached the platter is unknown (fsyncgate): here a coin decides, so a
        restart may find txns that were never acknowledged."""
        disk = self.disk
        disk.fail_syncs -= 1
        if self.rng.random() < 0.5:
            for zxid, data in batch:
                disk.zxids.append(zxid)
                disk.entries[zxid] = data
        exc = OSError(5, "fsync failed (simulated)")
        self._failure = exc
        self._pending = []
        waiters, self._waiters = self._waiters, []
        for _, fut in waiters:
            if not fut.done():
                fut.set_exception(exc)
        self.on_sync_failed(exc)

    @property
    def has_unsynced(self) -> bool:
        return self._batch_last_zxid > self.last_zxid

    async def sync(self) -> int:
        if self._failure is not None:
            raise self._failure
        target = self._batch_last_zxid
        if target <= self.last_zxid:
            return self.last_zxid
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((target, fut))
        return await fut

    def close(self) -> None:
        pass

    # -- reading and repair -------------------------------------------------------------

    def entries(self, after_zxid: int = 0) -> Iterator[tuple[int, bytes]]:
        disk = self.disk
        i = bisect.bisect_right(disk.zxids, after_zxid)
        for zxid in disk.zxids[i:]:
            yield zxid, disk.entries[zxid]

    def read_from(self, after_zxid: int = 0) -> Iterator[Txn]:
        for zxid, data in list(self.entries(after_zxid)):
            txn = decode_txn(data)
            assert txn.zxid == zxid, "log entry holds another zxid"
            yield txn

    def truncate_after(self, zxid: int) -> int:
        assert not self._pending and not self._syncing, "truncating under an unsynced batch"
        n = self.disk.truncate_after(zxid)
        self.last_zxid = self._batch_last_zxid = self.disk.zxids[-1] if self.disk.zxids else 0
        return n

    def purge_before(self, zxid: int) -> int:
        return 0


class _LogView:
    """The two plyvel calls LogHistory makes (get, a key iterator), over the durable log."""

    def __init__(self, disk: SimDisk):
        self.disk = disk

    def get(self, key: bytes):
        return self.disk.entries.get(key_zxid(key))

    def iterator(self, start: bytes, stop: bytes, reverse: bool = False,
                 include_value: bool = True):
        lo, hi = key_zxid(start), key_zxid(stop)
        zs = self.disk.zxids
        keys = zs[bisect.bisect_left(zs, lo):bisect.bisect_left(zs, hi)]
        if reverse:
            keys = keys[::-1]
        for z in keys:
            yield txn_key(z) if not include_value else (txn_key(z), self.disk.entries[z])


def _ignore(*_args) -> None:
    pass


class SimEpochs:
    """EpochFiles over a SimDisk: written at once and durably, accepted before current."""

    def __init__(self, disk: SimDisk, last_zxid_epoch: int):
        self.disk = disk
        if disk.current_epoch is None:
            disk.current_epoch = last_zxid_epoch
        if disk.accepted_epoch is None:
            disk.accepted_epoch = disk.current_epoch
        assert disk.current_epoch <= disk.accepted_epoch, "epoch files damaged"

    @property
    def accepted(self) -> int:
        return self.disk.accepted_epoch

    @property
    def current(self) -> int:
        return self.disk.current_epoch

    def write(self, accepted: int | None, current: int | None) -> None:
        if accepted is not None:
            self.disk.accepted_epoch = accepted
        if current is not None:
            self.disk.current_epoch = current
        assert self.disk.current_epoch <= self.disk.accepted_epoch, \
            f"currentEpoch {self.disk.current_epoch} after acceptedEpoch {self.disk.accepted_epoch}"


class SimSnapshots:
    """SnapshotStore's interface: whole snapshots, written synchronously."""

    def __init__(self, disk: SimDisk):
        self.disk = disk

    def zxids(self) -> list[int]:
        return sorted(self.disk.snapshots, reverse=True)

    def write_sync(self, tree: DataTree) -> int:
        self.disk.snapshots[tree.last_processed_zxid] = b"".join(snap_stream_chunks(tree))
        return tree.last_processed_zxid

    def delete(self, zxid: int) -> None:
        self.disk.snapshots.pop(zxid, None)

    def delete_orphans(self) -> int:
        return 0

    def load(self, zxid: int, progress=None) -> DataTree:
        reader = SnapReader(zxid)
        reader.feed(self.disk.snapshots[zxid])
        assert reader.done, "a stored snapshot is complete"
        tree = reader.result().tree
        tree.last_processed_zxid = zxid
        return tree

    def close(self) -> None:
        pass


class SimDataDir:
    """DataDir over a SimDisk; recovery is DataDir's own (newest snapshot + log replay)."""

    recover = DataDir.recover
    _replay = DataDir._replay

    def __init__(self, disk: SimDisk, rng, ack_before_durable: bool = False):
        self.disk = disk
        self.txnlog = SimTxnLog(disk, rng, ack_before_durable)
        self.snapshots = SimSnapshots(disk)

    def close(self) -> None:
        pass
