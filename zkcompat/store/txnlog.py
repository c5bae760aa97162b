"""The txn log in LevelDB: one key per Txn (big-endian zxid), value = crc32 + ZooKeeper's
own encoding of the Txn (TxnHeader then its record). Group commit: `append` gathers
txns into a batch in the loop thread; a writer takes the whole batch and writes it with
one LevelDB write (fsync unless forceSync=no) while the next batch gathers, and reports
each sync to the loop (`on_synced`, in order). After a failed write nothing more is ever
synced (fsyncgate: a failed fsync is not retried and trusted).

The production writer is a thread of its own (ThreadWriter), during whose writes the GIL
is free; it takes the next batch the moment a write returns, without a round trip
through the event loop. The simulator gives the same TxnLog an in-memory store and a
writer on its virtual clock (sim/disk.py): one group-commit contract, not two.

Rule: a txn is acknowledged only after the sync that covers it has returned.
"""

import asyncio
import collections
import logging
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import plyvel

from zkcompat.jute.errors import JuteError
from zkcompat.tree.txn import Txn, decode_txn, encode_txn

log = logging.getLogger(__name__)

_ZXID = struct.Struct(">Q")
_CRC = struct.Struct(">I")
TXN_PREFIX = b"t"
_KEY = struct.Struct(">1sQ")  # TXN_PREFIX + big-endian zxid, in one pack
RECENT_WRITES_MAX = 4096
# FileTxnLog's fsync.warningthresholdms default: a slower sync is a "slow write"
# (ServerStats' fsync_threshold_exceed_count).
FSYNC_WARNING_THRESHOLD_MS = 1000.0
_TXN_END = b"u"  # first key after every b"t" key (plyvel takes prefix or start/stop, not both)


def _ignore_synced(zxid: int) -> None:
    pass


def _raise_sync_failed(exc: BaseException) -> None:
    log.error("event=txn_log_sync_failed error=%r", exc)


class LogCorruption(Exception):
    """A log entry that fails its checksum or decoding, with valid entries after it."""


def txn_key(zxid: int) -> bytes:
    return _KEY.pack(TXN_PREFIX, zxid & 0xFFFFFFFFFFFFFFFF)


def key_zxid(key: bytes) -> int:
    return _ZXID.unpack_from(key, len(TXN_PREFIX))[0]


def encode_entry(txn: Txn) -> bytes:
    body = encode_txn(txn)
    return _CRC.pack(zlib.crc32(body)) + body


def decode_entry(zxid: int, value: bytes) -> Txn:
    """Check and decode one log value; raises LogCorruption naming the zxid."""
    if len(value) < _CRC.size:
        raise LogCorruption(f"txn 0x{zxid:x}: entry of {len(value)} bytes is truncated")
    (crc,) = _CRC.unpack_from(value)
    body = value[_CRC.size :]
    if zlib.crc32(body) != crc:
        raise LogCorruption(f"txn 0x{zxid:x}: checksum mismatch")
    try:
        txn = decode_txn(body)
    except JuteError as e:
        raise LogCorruption(f"txn 0x{zxid:x}: undecodable ({e})") from None
    if txn.zxid != zxid:
        raise LogCorruption(f"txn 0x{zxid:x}: entry holds zxid 0x{txn.zxid:x}")
    return txn


class TxnLog:
    """`db` is the store (plyvel's interface; the simulator's is in memory) and `writer`
    what writes its batches (ThreadWriter unless given)."""

    def __init__(self, path: Path | None, sync: bool = True, *, db=None, writer=None):
        if db is None:
            path.mkdir(parents=True, exist_ok=True)
            db = plyvel.DB(str(path), create_if_missing=True)
        self.path = path
        self.sync_enabled = sync
        self.db = db
        self.last_zxid = self._last_key_zxid()
        # The batch being gathered and its bookkeeping, shared with the writer thread under
        # _lock (plyvel's put releases the GIL, so the GIL alone does not keep them apart).
        self._lock = threading.Lock()
        self._batch = None
        self._batch_last_zxid = self.last_zxid  # highest zxid appended, synced or not
        self._batch_count = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self.writer = writer if writer is not None else ThreadWriter(self)
        self._failure: BaseException | None = None  # a write failed: nothing more is synced
        self._waiters: list[tuple[int, asyncio.Future]] = []  # sync() callers: (zxid, future)
        self.on_synced: Callable[[int], None] = _ignore_synced  # loop thread, in sync order
        self.on_sync_failed: Callable[[BaseException], None] = _raise_sync_failed
        # Per sync, for ZooKeeper's fsynctime and sync_processor_batch_size: the write time
        # (ms, fsync included) summed, and (ms, txns) of the last RECENT_WRITES_MAX syncs.
        self.stats = {"batches": 0, "txns": 0, "write_ms": 0.0, "slow_writes": 0}
        self.recent_writes: collections.deque = collections.deque(maxlen=RECENT_WRITES_MAX)

    def _last_key_zxid(self) -> int:
        for key in self.db.iterator(prefix=TXN_PREFIX, reverse=True, include_value=False):
            return key_zxid(key)
        return 0

    # -- writing ----------------------------------------------------------------------

    def append(self, txns: list[Txn]) -> None:
        """Add txns to the batch the writer syncs next (loop thread; no I/O)."""
        key, last = _KEY.pack, self._batch_last_zxid  # only this thread changes it
        entries = []
        for txn in txns:
            zxid = txn.zxid
            assert zxid > last, "log must grow in zxid order"
            entries.append((key(TXN_PREFIX, zxid), encode_entry(txn)))
            last = zxid
        with self._lock:  # encoded outside: the writer waits only for the puts
            batch = self._batch
            if batch is None:
                batch = self._batch = self.db.write_batch(sync=self.sync_enabled)
            put = batch.put
            for k, v in entries:
                put(k, v)
            self._batch_last_zxid = last
            self._batch_count += len(txns)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # appended outside a loop (tools, tests): sync() starts the writer
        self.writer.kick(loop)

    @property
    def has_unsynced(self) -> bool:
        return self._batch_last_zxid > self.last_zxid

    async def sync(self) -> int:
        """Wait until everything appended so far is durable; return the highest zxid that is."""
        if self._failure is not None:
            raise self._failure
        target = self._batch_last_zxid
        if target <= self.last_zxid:
            return self.last_zxid
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._waiters.append((target, fut))
        self.writer.kick(loop)
        return await fut

    # -- what the writer calls ----------------------------------------------------------

    def take_batch(self, when_empty=None) -> tuple:
        """The batch gathered so far, for the writer to write: (batch, its last zxid, its
        txn count, the loop to report to); batch is None if nothing gathered, and then
        when_empty() runs under the same lock as the appends."""
        with self._lock:
            batch, self._batch = self._batch, None
            last, count = self._batch_last_zxid, self._batch_count
            self._batch_count = 0
            if batch is None and when_empty is not None:
                when_empty()
            return batch, last, count, self._loop

    def batch_synced(self, last: int, count: int, write_ms: float = 0.0) -> None:
        """Loop thread: a sync returned; everything up to `last` is durable."""
        self.last_zxid = last
        stats = self.stats
        stats["batches"] += 1
        stats["txns"] += count
        stats["write_ms"] += write_ms
        self.recent_writes.append((write_ms, count))
        if write_ms > FSYNC_WARNING_THRESHOLD_MS:
            stats["slow_writes"] += 1  # as FileTxnLog.commit, which warns each time
            log.warning("event=slow_txn_log_sync write_ms=%.0f txns=%d threshold_ms=%.0f "
                        "hint=\"the dataDir's disk is slow; every write waits for it\"",
                        write_ms, count, FSYNC_WARNING_THRESHOLD_MS)
        if self._waiters:
            done = [w for w in self._waiters if w[0] <= last]
            self._waiters = [w for w in self._waiters if w[0] > last]
            for _, fut in done:
                if not fut.done():
                    fut.set_result(last)
        self.on_synced(last)

    def batch_failed(self, exc: BaseException) -> None:
        """Loop thread: a write failed; nothing after `last_zxid` is durable, nor will be."""
        self._failure = exc
        waiters, self._waiters = self._waiters, []
        for _, fut in waiters:
            if not fut.done():
                fut.set_exception(exc)
        self.on_sync_failed(exc)

    def close(self) -> None:
        """Stop the writer once it has finished the write it is in; then close the DB."""
        with self._lock:
            self._batch = None  # never synced, so never acknowledged
        self.writer.stop()
        self.db.close()

    # -- reading and repair -------------------------------------------------------------

    def entries(self, after_zxid: int = 0) -> Iterator[tuple[int, bytes]]:
        for key, value in self.db.iterator(start=txn_key(after_zxid + 1), stop=_TXN_END):
            yield key_zxid(key), value

    def read_from(self, after_zxid: int = 0) -> Iterator[Txn]:
        """Every txn after `after_zxid` in zxid order, checked. A bad entry that is the last
        one is a torn tail: it is cut off, with a log line. A bad entry with valid ones after
        it is corruption: LogCorruption names it."""
        bad: LogCorruption | None = None
        for zxid, value in self.entries(after_zxid):
            if bad is not None:
                raise LogCorruption(
                    f"{bad}; valid txns follow it (next 0x{zxid:x}), so it is not a torn tail. "
                    "Restore this server's dataDir from a healthy copy or remove it and let it "
                    "resync from the ensemble."
                )
            try:
                txn = decode_entry(zxid, value)
            except LogCorruption as e:
                bad = e
                bad_zxid = zxid
                continue
            yield txn
        if bad is not None:
            log.warning("event=txn_log_torn_tail zxid=0x%x reason=%r action=truncate", bad_zxid,
                        str(bad))
            self.truncate_after(bad_zxid - 1)

    def truncate_after(self, zxid: int) -> int:
        """Delete every entry above `zxid`; returns how many went (recovery: nothing pending)."""
        assert self._batch is None, "truncating under an unsynced batch"
        n = 0
        with self.db.write_batch(sync=True) as wb:
            for key in self.db.iterator(start=txn_key(zxid + 1), stop=_TXN_END,
                                        include_value=False):
                wb.delete(key)
                n += 1
        if n:
            self.last_zxid = self._last_key_zxid()
            self._batch_last_zxid = self.last_zxid
        return n

    def purge_before(self, zxid: int) -> int:
        """Delete entries with zxid < `zxid` (a retained snapshot covers them)."""
        n = 0
        with self.db.write_batch() as wb:
            for key in self.db.iterator(start=TXN_PREFIX, stop=txn_key(zxid),
                                        include_value=False):
                wb.delete(key)
                n += 1
        return n


class ThreadWriter:
    """Writes a TxnLog's batches on a thread of its own, one LevelDB write each, and reports
    each to the loop through call_soon_threadsafe, in order."""

    def __init__(self, log: TxnLog):
        self.log = log
        # A writer that finds no batch sets _idle (under the log's lock) and sleeps on
        # _wake, a lock that stays acquired; whoever clears _idle (under the log's lock)
        # releases _wake once. So a wake-up is one C-level release, not an Event's
        # Condition in Python on both threads, which a 1x1 write pays in series.
        self._wake = threading.Lock()
        self._wake.acquire()
        self._idle = False
        self._thread: threading.Thread | None = None
        self._stopping = False

    def kick(self, loop: asyncio.AbstractEventLoop) -> None:
        """A batch gathered (or someone waits for one): write it soon."""
        log = self.log
        with log._lock:
            log._loop = loop  # where the writer reports what it writes next
            wake, self._idle = self._idle, False
        if self._thread is None:
            self._thread = threading.Thread(target=self._write_batches, name="txnlog-writer",
                                            daemon=True)
            self._thread.start()
        elif wake:
            self._wake.release()

    def stop(self) -> None:
        """After the write it is in, the thread ends (the log has dropped its batch)."""
        if self._thread is None:
            return
        self._stopping = True
        with self.log._lock:
            wake, self._idle = self._idle, False
        if wake:
            self._wake.release()
        self._thread.join()

    def _went_idle(self) -> None:
        self._idle = True

    def _write_batches(self) -> None:
        """The writer thread: take whatever has gathered, write it, report it, repeat."""
        log = self.log
        while True:
            batch, last, count, loop = log.take_batch(self._went_idle)
            if batch is None:
                if self._stopping:
                    return
                self._wake.acquire()  # until a kick releases it
                continue
            t0 = time.perf_counter()
            try:
                batch.write()
            except Exception as e:  # noqa: BLE001 - handed to the loop, which stops serving
                _report(loop, log.batch_failed, e)
                return
            _report(loop, log.batch_synced, last, count, (time.perf_counter() - t0) * 1000)


def _report(loop, callback, *args) -> None:
    try:
        loop.call_soon_threadsafe(callback, *args)
    except RuntimeError:  # the loop has closed (shutdown): nobody waits for this sync
        pass


class LogHistory:
    """The committed history a leader syncs learners from (DIFF), read from the txn log up
    to what the leader says is committed; the zab state machines see only this."""

    def __init__(self, txnlog: TxnLog):
        self.txnlog = txnlog

    def first_zxid(self) -> int | None:
        for zxid, _ in self.txnlog.entries(0):
            return zxid
        return None

    def contains(self, zxid: int) -> bool:
        return self.txnlog.db.get(txn_key(zxid)) is not None

    def floor(self, zxid: int) -> int:
        """The newest logged zxid at or below `zxid` (0 if none)."""
        for key in self.txnlog.db.iterator(start=txn_key(0), stop=txn_key(zxid + 1),
                                           reverse=True, include_value=False):
            return key_zxid(key)
        return 0

    def txns_between(self, after: int, upto: int) -> Iterator[Txn]:
        for txn in self.txnlog.read_from(after):
            if txn.zxid > upto:
                return
            yield txn
