"""Apache ZooKeeper's own on-disk files, read with construct: `version-2/snapshot.<zxid>`
(optionally .gz or .snappy) and `version-2/log.<zxid>`; snapshot files written from a
DataTree (write_snapshot_file, streaming, through snapstream's writer).

Cold path only (import, dump): declarative construct Structs that also build, so tests
write exact ZooKeeper files; the snapshot's nodes, the one part a million long, are read
by tree/nodecodec (ZooKeeper's layout), which the construct spec checks in tests. Rules are ZooKeeper's own: a log ends at its zero padding or
at a partial last record (FileTxnIterator); a record whose Adler32 does not match, or a
snapshot whose seal does not, is corruption (ZkFormatError names the file and offset).
"""

from __future__ import annotations

import gzip
import io
import os
import re
import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from construct import (
    Adapter,
    Bytes,
    Check,
    ConstructError,
    If,
    Int32sb,
    Int64sb,
    Struct,
    this,
)

from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.jute.errors import JuteError
from zkcompat.jute.text import java_utf8_decode, java_utf8_encode
from zkcompat.store import snappy
from zkcompat.tree import nodecodec
from zkcompat.tree.acl import AclTuple, intern_acl
from zkcompat.tree.datatree import DataTree, ZNode
from zkcompat.tree.digest import DIGEST_VERSION
from zkcompat.tree.nodecodec import NodeFormatError
from zkcompat.tree.snapstream import CHUNK_BYTES, Progress, SnapshotWriter
from zkcompat.tree.txn import Txn, decode_txn

# FileSnap.SNAP_MAGIC / FileTxnLog.TXNLOG_MAGIC: "ZKSN" / "ZKLG" read as a big-endian int.
SNAP_MAGIC = int.from_bytes(b"ZKSN", "big")
TXNLOG_MAGIC = int.from_bytes(b"ZKLG", "big")
FILE_FORMAT_VERSION = 2  # FileSnap.VERSION, FileTxnLog.VERSION
# Util.readTxnBytes: the byte after each log record ('B'); anything else is a partial record.
END_OF_RECORD = 0x42
# The directory ZooKeeper keeps its files in under dataDir/dataLogDir (FileTxnSnapLog.version).
VERSION_DIR = "version-2"

SNAPSHOT_NAME = re.compile(r"^snapshot\.([0-9a-fA-F]+)(?:\.(gz|snappy))?$")
LOG_NAME = re.compile(r"^log\.([0-9a-fA-F]+)$")


class ZkFormatError(Exception):
    """A ZooKeeper file that is not what ZooKeeper would have written (or was damaged)."""


# -- jute primitives as construct ---------------------------------------------------------


class _NullableBytes(Adapter):
    """jute buffer: int length then bytes; length -1 is null (BinaryInputArchive.readBuffer)."""

    def _decode(self, obj, context, path):
        return None if obj.length == -1 else obj.data

    def _encode(self, obj, context, path):
        return {"length": -1, "data": None} if obj is None else {"length": len(obj), "data": obj}


class _JuteString(Adapter):
    """jute ustring: a buffer read as Java's `new String(bytes, UTF_8)` reads it."""

    def _decode(self, obj, context, path):
        return None if obj is None else java_utf8_decode(obj)

    def _encode(self, obj, context, path):
        return None if obj is None else java_utf8_encode(obj)


_RawBuffer = Struct(
    "length" / Int32sb,
    Check(this.length >= -1),
    "data" / If(this.length >= 0, Bytes(this.length)),
)
JuteBuffer = _NullableBytes(_RawBuffer)
JuteString = _JuteString(JuteBuffer)

FileHeader = Struct("magic" / Int32sb, "version" / Int32sb, "dbid" / Int64sb)

# org.apache.zookeeper.data.StatPersisted
StatPersisted = Struct(
    "czxid" / Int64sb,
    "mzxid" / Int64sb,
    "ctime" / Int64sb,
    "mtime" / Int64sb,
    "version" / Int32sb,
    "cversion" / Int32sb,  # the number of creates under it (DataNode.copyStat derives the rest)
    "aversion" / Int32sb,
    "ephemeralOwner" / Int64sb,
    "pzxid" / Int64sb,
)

Session = Struct("id" / Int64sb, "timeout" / Int32sb)

AclEntry = Struct("perms" / Int32sb, "scheme" / JuteString, "id" / JuteString)

# One entry of ReferenceCountedACLCache.serialize: long id, then vector<ACL>.
AclCacheEntry = Struct(
    "id" / Int64sb,
    "count" / Int32sb,
    Check(this.count >= -1),
    "acls" / If(this.count >= 0, AclEntry[this.count]),
)

# DataNode.serialize, preceded by DataTree.serializeNodeData's path.
NodeRecord = Struct(
    "data" / JuteBuffer,
    "acl" / Int64sb,
    "stat" / StatPersisted,
)

Seal = Struct("checksum" / Int64sb, "path" / JuteString)  # SnapStream.sealStream

# log record head: Adler32 of the txn bytes (as a long), then the txn buffer's length.
LogRecordHead = Struct("checksum" / Int64sb, "length" / Int32sb)

_PROGRESS_BYTES = 1 << 20

_COMPILED: dict[int, object] = {}


def _fast(c):
    """construct's compiled form where it can compile, else the Struct itself."""
    key = id(c)
    if key not in _COMPILED:
        try:
            _COMPILED[key] = c.compile()
        except Exception:  # noqa: BLE001 - Adapters without an emitter stay interpreted
            _COMPILED[key] = c
    return _COMPILED[key]


# -- streams ------------------------------------------------------------------------------


class _Reader:
    """An in-memory stream that knows its offset (for checksums and error messages)."""

    def __init__(self, name: str, buf: bytes):
        self.name = name
        self.buf = buf
        self.stream = io.BytesIO(buf)

    @property
    def offset(self) -> int:
        return self.stream.tell()

    @property
    def remaining(self) -> int:
        return len(self.buf) - self.stream.tell()

    def parse(self, what: str, con):
        at = self.offset
        try:
            return con.parse_stream(self.stream)
        except ConstructError as e:
            raise ZkFormatError(f"{self.name}: bad or truncated {what} at offset {at}: "
                                f"{_first_line(e)}") from None

    def adler32(self, end: int) -> int:
        return zlib.adler32(memoryview(self.buf)[:end])


def _first_line(e: Exception) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def read_snapshot_bytes(path: Path) -> bytes:
    """The snapshot's serialised stream, decompressed per its suffix (SnapStream)."""
    raw = Path(path).read_bytes()
    name = Path(path).name
    if name.endswith(".gz"):
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise ZkFormatError(f"{name}: gzip: {e}") from None
    if name.endswith(".snappy"):
        try:
            return snappy.stream_decompress(raw)
        except snappy.SnappyError as e:
            raise ZkFormatError(f"{name}: {e}") from None
    return raw


# -- files in a dataDir -------------------------------------------------------------------


def version_dir(data_dir: Path) -> Path:
    """dataDir/version-2, or the directory itself when it is already a version-2."""
    data_dir = Path(data_dir)
    if data_dir.name == VERSION_DIR:
        return data_dir
    return data_dir / VERSION_DIR


def snapshot_files(data_dir: Path) -> list[tuple[int, Path]]:
    """(zxid, path) of every snapshot file, newest first (Util.sortDataDir)."""
    found = []
    vdir = version_dir(data_dir)
    if not vdir.is_dir():
        return []
    for p in vdir.iterdir():
        m = SNAPSHOT_NAME.match(p.name)
        if m:
            found.append((int(m.group(1), 16), p))
    return sorted(found, key=lambda t: t[0], reverse=True)


def log_files(log_dir: Path) -> list[tuple[int, Path]]:
    """(first zxid, path) of every txn log file, oldest first."""
    found = []
    vdir = version_dir(log_dir)
    if not vdir.is_dir():
        return []
    for p in vdir.iterdir():
        m = LOG_NAME.match(p.name)
        if m:
            found.append((int(m.group(1), 16), p))
    return sorted(found, key=lambda t: t[0])


def logs_from(log_dir: Path, zxid: int) -> list[tuple[int, Path]]:
    """The log files that can hold txns >= zxid: the last one starting at or before it and
    every later one (FileTxnLog.getLogFiles)."""
    files = log_files(log_dir)
    start = 0
    for i, (first, _) in enumerate(files):
        if first <= zxid:
            start = i
    return files[start:]


# -- snapshots ----------------------------------------------------------------------------


@dataclass
class ZkSnapshot:
    path: Path
    zxid: int  # from the file name, as FileSnap.deserialize takes it
    dbid: int
    sessions: dict[int, int]
    acls: dict[int, AclTuple]
    # path ("/" for the root, which ZooKeeper writes as "") -> node, in file order; a
    # path given twice keeps its last node. cversion as stored: the number of creates.
    nodes: dict[str, ZNode]
    digest: tuple[int, int, int] | None = None  # (zxid, digest version, digest)
    last_processed_zxid: int | None = None  # only in snapshots of ZooKeeper 3.9.3+
    sealed: list[int] = field(default_factory=list)  # offsets of the verified seals


def snapshot_zxid(path: Path) -> int:
    m = SNAPSHOT_NAME.match(Path(path).name)
    if not m:
        raise ZkFormatError(f"{Path(path).name}: not a snapshot file name (snapshot.<hex zxid>)")
    return int(m.group(1), 16)


def read_snapshot(path: Path, progress=None) -> ZkSnapshot:
    """Parse a whole ZooKeeper snapshot; ZkFormatError if it is damaged or incomplete.

    `progress(bytes_read, bytes_total)` is called now and then while nodes are read.
    """
    path = Path(path)
    zxid = snapshot_zxid(path)
    rd = _Reader(path.name, read_snapshot_bytes(path))
    hdr = rd.parse("file header", _fast(FileHeader))
    if hdr.magic != SNAP_MAGIC:
        raise ZkFormatError(f"{path.name}: magic 0x{hdr.magic & 0xFFFFFFFF:08x} is not ZKSN")
    if hdr.version != FILE_FORMAT_VERSION:
        raise ZkFormatError(f"{path.name}: file format version {hdr.version}, expected 2")
    snap = ZkSnapshot(path, zxid, hdr.dbid, {}, {}, {})
    count = rd.parse("session count", Int32sb)
    if count < 0 or count * 12 > rd.remaining:
        raise ZkFormatError(f"{path.name}: impossible session count {count}")
    session = _fast(Session)
    for _ in range(count):
        s = rd.parse("session", session)
        snap.sessions[s.id] = s.timeout
    snap.acls = _read_acl_cache(rd)
    _read_nodes(rd, snap, progress)
    _check_seal(rd, snap, "end of the tree")
    # Later additions, each followed by a seal of its own; an older snapshot just ends.
    if rd.remaining:
        z = rd.parse("digest zxid", Int64sb)
        version = rd.parse("digest version", Int32sb)
        # DataTree.ZxidDigest.deserialize: before version 2 the digest was a hex string.
        if version < 2:
            text = rd.parse("digest", JuteString)
            digest = int(text, 16) if text else 0
        else:
            digest = rd.parse("digest", Int64sb)
        snap.digest = (z, version, digest)
        _check_seal(rd, snap, "digest")
    if rd.remaining:
        snap.last_processed_zxid = rd.parse("last processed zxid", Int64sb)
        _check_seal(rd, snap, "last processed zxid")
    if rd.remaining:
        raise ZkFormatError(f"{path.name}: {rd.remaining} unexpected bytes after offset "
                            f"{rd.offset}")
    return snap


def _read_acl_cache(rd: _Reader) -> dict[int, AclTuple]:
    n = rd.parse("ACL cache size", Int32sb)
    if n < 0 or n * 12 > rd.remaining:
        raise ZkFormatError(f"{rd.name}: impossible ACL cache size {n}")
    acls: dict[int, AclTuple] = {}
    entry = _fast(AclCacheEntry)
    for _ in range(n):
        e = rd.parse("ACL cache entry", entry)
        acls[e.id] = intern_acl(tuple((a.perms, a.scheme, a.id) for a in e.acls or ()))
    return acls


def _read_nodes(rd: _Reader, snap: ZkSnapshot, progress) -> None:
    """The node loop, the one hot part of a snapshot (a million nodes is common), through
    nodecodec; tests/store/test_zkformat.py keeps it equal to `JuteString` + `NodeRecord`."""
    end = len(rd.buf)
    off = rd.offset
    acls = snap.acls
    nodes = snap.nodes
    read = nodecodec.ZOOKEEPER.read
    next_report = off + _PROGRESS_BYTES
    with memoryview(rd.buf) as view:
        while True:
            try:
                got = read(view, off, acls)
            except NodeFormatError as e:
                raise ZkFormatError(f"{rd.name}: {e}, at offset {e.offset} (file has {end} "
                                    "bytes)") from None
            if got is None:
                raise ZkFormatError(f"{rd.name}: snapshot ends inside the node at offset "
                                    f"{off} (truncated)")
            path, node, off = got
            if path is None:  # the end mark
                break
            nodes[path] = node
            if progress is not None and off >= next_report:
                progress(off, end)
                next_report = off + _PROGRESS_BYTES
    rd.stream.seek(off)
    if progress is not None:
        progress(off, end)


def _check_seal(rd: _Reader, snap: ZkSnapshot, what: str) -> None:
    at = rd.offset
    expected = rd.adler32(at)
    seal = rd.parse(f"seal after the {what}", _fast(Seal))
    if seal.checksum != expected:
        raise ZkFormatError(f"{rd.name}: checksum after the {what} (offset {at}) is "
                            f"0x{seal.checksum & 0xFFFFFFFFFFFFFFFF:x}, the content's Adler32 "
                            f"is 0x{expected:x}: the snapshot is corrupt")
    snap.sealed.append(at)


# -- txn logs -----------------------------------------------------------------------------


@dataclass
class ZkLogRecord:
    offset: int  # of the record's checksum in the file
    txn_bytes: bytes  # TxnHeader + record [+ TxnDigest]


@dataclass
class ZkLogFile:
    path: Path
    dbid: int
    records: list[ZkLogRecord]
    end_offset: int  # where reading stopped
    end_reason: str  # "eof", "padding" or "partial record"


def read_log_file(path: Path) -> ZkLogFile:
    """Every complete record of one log file, in file order (FileTxnIterator.next)."""
    path = Path(path)
    rd = _Reader(path.name, path.read_bytes())
    hdr = rd.parse("file header", _fast(FileHeader))
    if hdr.magic != TXNLOG_MAGIC:
        raise ZkFormatError(f"{path.name}: magic 0x{hdr.magic & 0xFFFFFFFF:08x} is not ZKLG")
    if hdr.version != FILE_FORMAT_VERSION:
        raise ZkFormatError(f"{path.name}: file format version {hdr.version}, expected 2")
    records: list[ZkLogRecord] = []
    head = _fast(LogRecordHead)
    buf = rd.buf
    while True:
        at = rd.offset
        if rd.remaining < LogRecordHead.sizeof():
            return ZkLogFile(path, hdr.dbid, records, at, "eof" if not rd.remaining
                             else "partial record")
        h = rd.parse("record head", head)
        if h.length == 0:  # preallocated zeros: Util.readTxnBytes' "empty transaction"
            return ZkLogFile(path, hdr.dbid, records, at, "padding")
        if h.length < 0:
            raise ZkFormatError(f"{path.name}: record at offset {at} has length {h.length}")
        start = rd.offset
        if start + h.length + 1 > len(buf) or buf[start + h.length] != END_OF_RECORD:
            # Util.readTxnBytes: EOF inside the record, or no 'B' after it: the last
            # transaction was partial; ZooKeeper stops reading this file there.
            return ZkLogFile(path, hdr.dbid, records, at, "partial record")
        txn_bytes = buf[start : start + h.length]
        crc = zlib.adler32(txn_bytes)
        if h.checksum != crc:
            raise ZkFormatError(_crc_message(path.name, at, txn_bytes, h.checksum, crc))
        records.append(ZkLogRecord(at, txn_bytes))
        rd.stream.seek(start + h.length + 1)


def _crc_message(name: str, at: int, txn_bytes: bytes, stored: int, actual: int) -> str:
    try:
        hdr, _ = r.TxnHeader.decode(txn_bytes, 0)
        which = f" (txn zxid 0x{hdr.zxid:x}, if its header can be trusted)"
    except JuteError:
        which = ""
    return (f"{name}: record at offset {at}{which} fails its Adler32 checksum "
            f"(stored 0x{stored & 0xFFFFFFFFFFFFFFFF:x}, computed 0x{actual:x}): "
            "the log is corrupt (FileTxnLog's CRC check fails here too)")


def decode_zk_txn(txn_bytes: bytes) -> Txn:
    """SerializeUtils.deserializeTxn into a Txn that DataTree.apply takes. reconfig carries
    a SetDataTxn on /zookeeper/config and is applied as the setData it is; a pre-3.3
    create without parentCVersion (CreateTxnV0) becomes a CreateTxn with -1."""
    try:
        hdr, off = r.TxnHeader.decode(txn_bytes, 0)
        if hdr.type == OpCode.RECONFIG:
            body, _ = r.SetDataTxn.decode(txn_bytes, off)
            return Txn(r.TxnHeader(hdr.clientId, hdr.cxid, hdr.zxid, hdr.time, OpCode.SET_DATA),
                       body)
        try:
            return decode_txn(txn_bytes)
        except JuteError:
            if hdr.type != OpCode.CREATE:
                raise
            v0, _ = r.CreateTxnV0.decode(txn_bytes, off)
            return Txn(hdr, r.CreateTxn(v0.path, v0.data, v0.acl, v0.ephemeral, -1))
    except JuteError as e:
        raise ZkFormatError(f"undecodable txn: {e}") from None


@dataclass
class ZkLogEntry:
    file: Path
    offset: int
    txn: Txn


def iter_log(log_dir: Path, after_zxid: int = -1) -> Iterator[ZkLogEntry]:
    """Every txn with zxid > after_zxid across the log files, in file order."""
    for _, path in logs_from(log_dir, after_zxid + 1):
        lf = read_log_file(path)
        for rec in lf.records:
            try:
                txn = decode_zk_txn(rec.txn_bytes)
            except ZkFormatError as e:
                raise ZkFormatError(f"{path.name}: record at offset {rec.offset}: {e}") from None
            if txn.zxid > after_zxid:
                yield ZkLogEntry(path, rec.offset, txn)


# -- building files (tests, and the round trip that proves the parser) --------------------


def build_log_record(txn_bytes: bytes) -> bytes:
    return (LogRecordHead.build({"checksum": zlib.adler32(txn_bytes), "length": len(txn_bytes)})
            + txn_bytes + bytes([END_OF_RECORD]))


def build_log_file(records: list[bytes], dbid: int = 0, padding_bytes: int = 0) -> bytes:
    out = FileHeader.build({"magic": TXNLOG_MAGIC, "version": FILE_FORMAT_VERSION, "dbid": dbid})
    out += b"".join(build_log_record(t) for t in records)
    return out + bytes(padding_bytes)


def build_snapshot(sessions: dict[int, int], acls: dict[int, AclTuple],
                   nodes: list[tuple[str, bytes | None, int, dict]],
                   digest: tuple[int, int, int] | None = None, dbid: int = 0) -> bytes:
    """A ZooKeeper snapshot stream (uncompressed): nodes are (path, data, acl id, stat
    fields), root first with path "" as ZooKeeper writes it."""
    out = bytearray(FileHeader.build({"magic": SNAP_MAGIC, "version": FILE_FORMAT_VERSION,
                                      "dbid": dbid}))
    out += Int32sb.build(len(sessions))
    for sid, timeout in sessions.items():
        out += Session.build({"id": sid, "timeout": timeout})
    out += Int32sb.build(len(acls))
    for ref, acl in acls.items():
        out += AclCacheEntry.build({"id": ref, "count": len(acl), "acls": [
            {"perms": p, "scheme": s, "id": i} for p, s, i in acl]})
    for path, data, ref, stat in nodes:
        out += JuteString.build(path)
        out += NodeRecord.build({"data": data, "acl": ref, "stat": stat})
    out += JuteString.build("/")
    out += Seal.build({"checksum": zlib.adler32(out), "path": "/"})
    if digest is not None:
        out += Int64sb.build(digest[0]) + Int32sb.build(digest[1]) + Int64sb.build(digest[2])
        out += Seal.build({"checksum": zlib.adler32(out), "path": "/"})
    return bytes(out)


# -- writing snapshot files from a DataTree -----------------------------------------------

_SEAL_PATH = b"\x00\x00\x00\x01/"  # SnapStream.sealStream: the checksum, then ustring "/"
_FILE_HEADER = struct.Struct(">iiq")
_ZXID_DIGEST = struct.Struct(">qiq")  # DataTree.ZxidDigest.serialize: zxid, version, digest


def snapshot_file_name(zxid: int) -> str:
    """FileTxnSnapLog / Util.makeSnapshotName: "snapshot." + Long.toHexString(zxid)."""
    return f"snapshot.{zxid & 0xFFFFFFFFFFFFFFFF:x}"


def snapshot_file_chunks(tree: DataTree, dbid: int = 0, *, zxid_digest: bool = True,
                         chunk_bytes: int = CHUNK_BYTES, progress: Progress | None = None,
                         acl_ids: Mapping[int, AclTuple] | None = None) -> Iterator[bytes]:
    """FileSnap.serialize of tree (uncompressed): FileHeader(ZKSN, 2, dbid), the
    serializeSnapshot stream, a seal (Adler32 of everything before it as a long, then "/"),
    then, as ZooKeeper 3.8 does with zookeeper.digest.enabled (its default), the
    ZxidDigest (last processed zxid, DIGEST_VERSION, tree digest) and a second seal. 3.9.3
    appends lastProcessedZxid and a third seal; 3.8.0 reads neither that nor needs it.

    Chunks as SnapshotWriter's (`chunk_bytes`), except the header and seals, which come
    on their own."""
    head = _FILE_HEADER.pack(SNAP_MAGIC, FILE_FORMAT_VERSION, dbid)
    checksum = zlib.adler32(head)
    yield head
    writer = SnapshotWriter(tree, chunk_bytes=chunk_bytes, progress=progress,
                            digest=zxid_digest, acl_ids=acl_ids)
    for chunk in writer.chunks():
        checksum = zlib.adler32(chunk, checksum)
        yield chunk
    seal = struct.pack(">q", checksum) + _SEAL_PATH
    checksum = zlib.adler32(seal, checksum)
    yield seal
    if zxid_digest:
        assert writer.digest is not None
        trailer = _ZXID_DIGEST.pack(tree.last_processed_zxid, DIGEST_VERSION, writer.digest)
        checksum = zlib.adler32(trailer, checksum)
        yield trailer + struct.pack(">q", checksum) + _SEAL_PATH


def write_snapshot_file(tree: DataTree, data_dir: Path, dbid: int = 0,
                        **options) -> Path:
    """dataDir/version-2/snapshot.<last processed zxid>, written to a temporary name and
    renamed (fsync'd), so ZooKeeper never sees half a file; options as
    snapshot_file_chunks'. Returns the file's path."""
    vdir = version_dir(Path(data_dir))
    vdir.mkdir(parents=True, exist_ok=True)
    path = vdir / snapshot_file_name(tree.last_processed_zxid)
    tmp = path.with_name(f".{path.name}.tmp")  # no "snapshot." prefix: ZooKeeper skips it
    with open(tmp, "wb") as f:
        for chunk in snapshot_file_chunks(tree, dbid, **options):
            f.write(chunk)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path
