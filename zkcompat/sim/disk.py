"""A simulated server's disk: the txn log, the epoch files and the snapshots, with the
LevelDB store's durability contract. An appended txn is durable only once the simulated
fsync that covers it has returned; a crash loses everything not yet durable. The epoch
files and snapshot installs are written synchronously (fsync'd) as the real ones are.

SimDisk is what survives a crash; SimDataDir is one incarnation's view of it: the
production TxnLog over an in-memory store (SimDB) and a writer on the virtual clock
(SimWriter), with DataDir's own recovery.
"""

from __future__ import annotations

import asyncio
import bisect

from zkcompat.store.datadir import DataDir
from zkcompat.store.txnlog import TXN_PREFIX, TxnLog, key_zxid, txn_key
from zkcompat.tree.datatree import DataTree
from zkcompat.tree.snapstream import SnapReader, snap_stream_chunks

FSYNC_MIN_MS = 0.5
FSYNC_MAX_MS = 4.0


class SimDisk:
    """What is on the platter: survives crashes."""

    def __init__(self):
        self.zxids: list[int] = []  # the durable log, zxid order
        self.entries: dict[int, bytes] = {}  # zxid -> ZooKeeper's txn encoding
        self.accepted_epoch: int | None = None
        self.current_epoch: int | None = None
        # zoo.cfg.dynamic.<version>: the last committed config's server lines and version
        self.dynamic_config: tuple[str, int] | None = None
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


class SimDB:
    """The plyvel calls TxnLog and LogHistory make (iterator, get, write_batch), over the
    durable log of a SimDisk. A batch changes the disk only when written: what is never
    written is lost with the process, as LevelDB's unsynced writes are."""

    def __init__(self, disk: SimDisk):
        self.disk = disk

    def get(self, key: bytes):
        return self.disk.entries.get(key_zxid(key))

    def iterator(self, start: bytes | None = None, stop: bytes | None = None,
                 prefix: bytes | None = None, reverse: bool = False,
                 include_value: bool = True):
        if prefix is not None:
            assert prefix == TXN_PREFIX, "only the txn keys are simulated"
            start, stop = txn_key(0), None
        zs = self.disk.zxids
        lo = bisect.bisect_left(zs, _bound(start, 0))
        hi = bisect.bisect_left(zs, _bound(stop, zs[-1] + 1 if zs else 0))
        keys = zs[lo:hi]
        if reverse:
            keys = keys[::-1]
        for z in keys:
            yield txn_key(z) if not include_value else (txn_key(z), self.disk.entries[z])

    def write_batch(self, sync: bool = False) -> SimBatch:
        return SimBatch(self.disk)

    def close(self) -> None:
        pass


def _bound(key: bytes | None, otherwise: int) -> int:
    """A key bound as a zxid: a whole txn key's, or `otherwise` for none or a bare prefix."""
    if key is None or len(key) != len(txn_key(0)) or not key.startswith(TXN_PREFIX):
        return otherwise
    return key_zxid(key)


class SimBatch:
    """A LevelDB WriteBatch over a SimDisk: puts and deletes, applied by write()."""

    def __init__(self, disk: SimDisk):
        self.disk = disk
        self.puts: list[tuple[int, bytes]] = []
        self.deletes: list[int] = []

    def put(self, key: bytes, value: bytes) -> None:
        self.puts.append((key_zxid(key), value))

    def delete(self, key: bytes) -> None:
        self.deletes.append(key_zxid(key))

    def write(self) -> None:
        disk = self.disk
        for zxid in self.deletes:
            if disk.entries.pop(zxid, None) is not None:
                disk.zxids.remove(zxid)
        for zxid, value in self.puts:
            if disk.zxids:
                assert zxid > disk.zxids[-1], "durable log out of zxid order"
            disk.zxids.append(zxid)
            disk.entries[zxid] = value

    def __enter__(self) -> SimBatch:
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            self.write()


class SimWriter:
    """TxnLog's writer on the virtual clock: one simulated fsync at a time, taking every
    batch gathered meanwhile, each with a latency drawn from the disk's range (plus what
    the nemesis adds). A failing fsync may or may not have reached the platter
    (fsyncgate): a coin decides, so a restart may find txns never acknowledged.

    ack_before_durable is an injected bug, a disk that lies about fsync: the sync is
    reported at once, while the batch only reaches the platter when its fsync is done
    (a crash meanwhile loses an acknowledged txn)."""

    def __init__(self, disk: SimDisk, rng, ack_before_durable: bool = False):
        self.disk = disk
        self.rng = rng
        self.ack_before_durable = ack_before_durable
        self.log: TxnLog | None = None  # the log it writes for, set once both exist
        self._syncing = False

    def kick(self, loop) -> None:
        log = self.log
        log._loop = loop
        if not self._syncing and log._failure is None:
            self._start_fsync(loop)

    def stop(self) -> None:
        pass

    def _start_fsync(self, loop) -> None:
        batch, last, count, _ = self.log.take_batch()
        if batch is None:
            return
        self._syncing = True
        disk = self.disk
        ms = self.rng.uniform(*disk.fsync_ms) + disk.slow_ms
        if disk.fail_syncs > 0:
            ms += disk.fail_slow_ms
        if self.ack_before_durable:
            loop.call_soon(self.log.batch_synced, last, count)
        loop.call_later(ms / 1000, self._fsynced, batch, last, count)

    def _fsynced(self, batch: SimBatch, last: int, count: int) -> None:
        self._syncing = False
        disk = self.disk
        if disk.fail_syncs > 0:
            disk.fail_syncs -= 1
            if self.rng.random() < 0.5:
                batch.write()
            self.log.batch_failed(OSError(5, "fsync failed (simulated)"))
            return
        batch.write()
        if not self.ack_before_durable:
            self.log.batch_synced(last, count)
        if self.log._batch is not None:
            self._start_fsync(asyncio.get_running_loop())


def sim_txn_log(disk: SimDisk, rng, ack_before_durable: bool = False) -> TxnLog:
    """The production TxnLog over a SimDisk, written by a SimWriter."""
    writer = SimWriter(disk, rng, ack_before_durable)
    log = TxnLog(None, db=SimDB(disk), writer=writer)
    writer.log = log
    return log


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


class SimDynamicConfig:
    """DynamicConfigFiles over a SimDisk: the last committed config, durable at once (the
    real one is fsynced and renamed into place before the server goes on)."""

    def __init__(self, disk: SimDisk, sid: int):
        self.disk = disk
        self.sid = sid

    def read(self) -> tuple[str, int] | None:
        """The stored config, unless a reconfig left this server out of it: a real one
        would not start ("My id N not in the peer list"), so the simulated operator starts
        it as a joiner, with the static config that names it; the others' election
        notifications then tell it the committed one."""
        stored = self.disk.dynamic_config
        if stored is not None and not any(line.startswith(f"server.{self.sid}=")
                                          for line in stored[0].splitlines()):
            return None
        return stored

    def write(self, servers_text: str, version: int, erase_client: bool) -> None:
        self.disk.dynamic_config = (servers_text, version)


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
        self.txnlog = sim_txn_log(disk, rng, ack_before_durable)
        self.snapshots = SimSnapshots(disk)

    def close(self) -> None:
        pass
