"""The txn log in LevelDB: one key per Txn (big-endian zxid), value = crc32 + ZooKeeper's
own encoding of the Txn (TxnHeader then its record). Group commit: `append` gathers
txns into the next batch in the loop thread; `sync` writes the whole batch with one
LevelDB write (fsync unless forceSync=no) on a writer thread, during which the GIL is
free, while the batch after it gathers.

Rule: a txn is acknowledged only after the sync that covers it has returned.
"""

import asyncio
import logging
import struct
import zlib
from collections.abc import Awaitable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import plyvel

from zkcompat.jute.errors import JuteError
from zkcompat.tree.txn import Txn, decode_txn, encode_txn

log = logging.getLogger(__name__)

_ZXID = struct.Struct(">Q")
_CRC = struct.Struct(">I")
TXN_PREFIX = b"t"
_KEY = struct.Struct(">1sQ")  # TXN_PREFIX + big-endian zxid, in one pack
_TXN_END = b"u"  # first key after every b"t" key (plyvel takes prefix or start/stop, not both)


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
    def __init__(self, path: Path, sync: bool = True):
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.sync_enabled = sync
        self.db = plyvel.DB(str(path), create_if_missing=True)
        self.last_zxid = self._last_key_zxid()
        self._batch = None
        self._batch_last_zxid = self.last_zxid  # highest zxid appended, synced or not
        self._batch_count = 0
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="txnlog")
        self.stats = {"batches": 0, "txns": 0}

    def _last_key_zxid(self) -> int:
        for key in self.db.iterator(prefix=TXN_PREFIX, reverse=True, include_value=False):
            return key_zxid(key)
        return 0

    # -- writing ----------------------------------------------------------------------

    def append(self, txns: list[Txn]) -> None:
        """Add txns to the batch the next sync writes (loop thread; no I/O)."""
        batch = self._batch
        if batch is None:
            batch = self._batch = self.db.write_batch(sync=self.sync_enabled)
        put, key, last = batch.put, _KEY.pack, self._batch_last_zxid
        for txn in txns:
            zxid = txn.zxid
            assert zxid > last, "log must grow in zxid order"
            put(key(TXN_PREFIX, zxid), encode_entry(txn))
            last = zxid
        self._batch_last_zxid = last
        self._batch_count += len(txns)

    @property
    def has_unsynced(self) -> bool:
        return self._batch is not None

    async def sync(self) -> int:
        """Write and fsync everything appended so far; return the highest zxid now durable."""
        return await self.start_sync()

    def start_sync(self) -> Awaitable[int]:
        """Hand everything appended so far to the writer thread at once; awaiting the result
        gives the highest zxid then durable. Syncs finish in the order they were started
        (one writer thread), so a second may start while the first is awaited."""
        batch, self._batch = self._batch, None
        if batch is None:
            return self._synced(None, self.last_zxid, 0)
        last, count = self._batch_last_zxid, self._batch_count
        self._batch_count = 0
        written = asyncio.get_running_loop().run_in_executor(self._writer, batch.write)
        return self._synced(written, last, count)

    async def _synced(self, written: asyncio.Future | None, last: int, count: int) -> int:
        if written is not None:
            await written
        self.last_zxid = last
        self.stats["batches"] += 1
        self.stats["txns"] += count
        return last

    def close(self) -> None:
        self._writer.shutdown(wait=True)
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
