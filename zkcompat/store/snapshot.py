"""Snapshots of the tree and the session table in LevelDB, fuzzy like ZooKeeper's.

A snapshot starts at zxid Z (the last applied txn) and is written in small slices
between requests, so the tree keeps changing under it; recovery loads it and replays
the log after Z, and replay is idempotent, so the result is exact. Layout:
  b"c" + Z + chunk number -> crc32 + serialised nodes (depth first, parents first), each
                             in tree/nodecodec's ZKCOMPAT layout
  b"m" + Z                -> crc32 + manifest (counts, sessions, ACL table); written
                             last and synced: a snapshot without its manifest is ignored.
"""

import asyncio
import logging
import struct
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import plyvel

from zkcompat.tree import nodecodec
from zkcompat.tree.acl import AclTuple, intern_acl
from zkcompat.tree.datatree import DataTree, ZNode
from zkcompat.tree.nodecodec import NodeFormatError

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
CHUNK_BYTES = 1 << 20
SLICE_MS = 2.0  # serialising time per event-loop turn; the loop stalls no longer than this
_CLOCK_EVERY = 64  # nodes between looks at the clock

_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_ZXID = struct.Struct(">Q")
_CHUNK_KEY = struct.Struct(">cQI")
_MANIFEST_HEAD = struct.Struct(">iqqqii")  # version, start zxid, end zxid, nodes, chunks, acls
_SESSION = struct.Struct(">qi")


class SnapshotCorruption(Exception):
    pass


def _chunk_key(zxid: int, n: int) -> bytes:
    return _CHUNK_KEY.pack(b"c", zxid, n)


def _manifest_key(zxid: int) -> bytes:
    return b"m" + _ZXID.pack(zxid)


def _with_crc(payload: bytes) -> bytes:
    return _U32.pack(zlib.crc32(payload)) + payload


def _checked(what: str, value: bytes | None) -> bytes:
    if value is None or len(value) < 4:
        raise SnapshotCorruption(f"{what} is missing or truncated")
    payload = value[4:]
    if zlib.crc32(payload) != _U32.unpack_from(value)[0]:
        raise SnapshotCorruption(f"{what} fails its checksum")
    return payload


def _put_str(out: bytearray, s: str) -> None:
    b = s.encode("utf-8", "surrogatepass")
    out += _I32.pack(len(b))
    out += b


class SnapshotWriter:
    """Serialises a tree in slices: iterate `chunks()` and yield to the loop in between."""

    def __init__(self, tree: DataTree):
        self.tree = tree
        self.start_zxid = tree.last_processed_zxid
        self.sessions = dict(tree.sessions)
        self.acl_index: dict = {}
        self.nodes = 0

    def _acl(self, acl) -> int:
        i = self.acl_index.get(acl)
        if i is None:
            i = self.acl_index[acl] = len(self.acl_index)
        return i

    def chunks(self, slice_ms: float = SLICE_MS) -> Iterator[bytes | None]:
        """Yields a chunk when one is full, and None after each slice of about slice_ms of
        work (a yield point for the event loop)."""
        nodes = self.tree.nodes
        stack = ["/"]
        out = bytearray()
        in_slice = 0
        budget_s = slice_ms / 1000
        clock = time.perf_counter
        slice_start = clock()
        write = nodecodec.ZKCOMPAT.write
        while stack:
            path = stack.pop()
            node = nodes.get(path)
            if node is None:
                continue  # deleted since its parent was visited: replay settles it
            write(out, path, node, self._acl(node.acl))
            self.nodes += 1
            if node.children:
                base = "" if path == "/" else path
                stack.extend(f"{base}/{c}" for c in node.children)
            if len(out) >= CHUNK_BYTES:
                yield bytes(out)
                out = bytearray()
            in_slice += 1
            if in_slice >= _CLOCK_EVERY:
                in_slice = 0
                if clock() - slice_start >= budget_s:
                    yield None
                    slice_start = clock()
        if out:
            yield bytes(out)

    def manifest(self, chunk_count: int, end_zxid: int) -> bytes:
        out = bytearray(_MANIFEST_HEAD.pack(FORMAT_VERSION, self.start_zxid, end_zxid, self.nodes,
                                            chunk_count, len(self.acl_index)))
        for acl in self.acl_index:  # dicts keep insertion order: index order
            out += _I32.pack(len(acl))
            for perms, scheme, ident in acl:
                out += _I32.pack(perms)
                _put_str(out, scheme)
                _put_str(out, ident)
        out += _I32.pack(len(self.sessions))
        for sid, timeout in sorted(self.sessions.items()):
            out += _SESSION.pack(sid, timeout)
        return bytes(out)


def _open(path: Path) -> plyvel.DB:
    """Without snappy, as ZooKeeper's snapshots are by default: a learner writes the SNAP
    it installed before it acknowledges NEWLEADER, and with incompressible data snappy's
    attempt on every block took a third of that write (1,000,000 znodes of 1 KB: 4.5 s
    -> 3.1 s). A store written with snappy stays readable: LevelDB marks every block."""
    return plyvel.DB(str(path), create_if_missing=True, compression=None)


class SnapshotStore:
    def __init__(self, path: Path):
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.db = _open(path)

    def close(self) -> None:
        self.db.close()

    def reopen(self) -> None:
        """Close and open the store again, only while nothing else uses it. LevelDB reads
        its tables through mmap and keeps them mapped while they stay in its table cache,
        so after a load every page of the snapshot counts in the process's RSS (1.2 GB
        beside a 1.6 GB tree of a million 1 KB znodes); closing unmaps them."""
        self.db.close()
        self.db = _open(self.path)

    def zxids(self) -> list[int]:
        """Start zxids of complete snapshots, newest first."""
        return [_ZXID.unpack_from(k, 1)[0]
                for k in self.db.iterator(prefix=b"m", reverse=True, include_value=False)]

    # -- writing ------------------------------------------------------------------------

    def write_sync(self, tree: DataTree) -> int:
        """Write a snapshot of a tree nothing else is changing (tools, tests)."""
        writer = SnapshotWriter(tree)
        n = 0
        for chunk in writer.chunks(slice_ms=float("inf")):
            if chunk is not None:
                self.db.put(_chunk_key(writer.start_zxid, n), _with_crc(chunk))
                n += 1
        self.db.put(_manifest_key(writer.start_zxid),
                    _with_crc(writer.manifest(n, tree.last_processed_zxid)), sync=True)
        return writer.start_zxid

    async def write(self, tree: DataTree, executor,
                    slice_ms: float = SLICE_MS) -> tuple[int, int]:
        """Write a fuzzy snapshot while the server runs; returns (start zxid, nodes)."""
        loop = asyncio.get_running_loop()
        writer = SnapshotWriter(tree)
        n = 0
        for chunk in writer.chunks(slice_ms):
            if chunk is None:
                await asyncio.sleep(0)
                continue
            await loop.run_in_executor(executor, self.db.put,
                                       _chunk_key(writer.start_zxid, n), _with_crc(chunk))
            n += 1
        manifest = _with_crc(writer.manifest(n, tree.last_processed_zxid))
        await loop.run_in_executor(
            executor, lambda: self.db.put(_manifest_key(writer.start_zxid), manifest, sync=True))
        return writer.start_zxid, writer.nodes

    def delete_orphans(self) -> int:
        """Drop chunks no manifest owns: a snapshot cut short by a crash. Only call it
        while no snapshot is being written (at start-up)."""
        complete = set(self.zxids())
        orphans = set()
        for key in self.db.iterator(prefix=b"c", include_value=False):
            zxid = _CHUNK_KEY.unpack(key)[1]
            if zxid not in complete:
                orphans.add(zxid)
        for zxid in orphans:
            log.info("event=snapshot_orphan_deleted zxid=0x%x", zxid)
            self.delete(zxid)
        return len(orphans)

    def delete(self, zxid: int) -> None:
        with self.db.write_batch(sync=True) as wb:
            wb.delete(_manifest_key(zxid))  # first: the snapshot stops counting at once
            for key in self.db.iterator(prefix=b"c" + _ZXID.pack(zxid), include_value=False):
                wb.delete(key)

    # -- reading ------------------------------------------------------------------------

    def load(self, zxid: int, progress=None) -> DataTree:
        """Rebuild the tree of the snapshot that started at `zxid`; SnapshotCorruption if
        any part of it is missing or fails its checksum."""
        name = f"snapshot 0x{zxid:x}"
        manifest = _checked(f"{name} manifest", self.db.get(_manifest_key(zxid)))
        version, start, end, count, chunks, acl_count = _MANIFEST_HEAD.unpack_from(manifest)
        if version != FORMAT_VERSION:
            raise SnapshotCorruption(f"{name}: unknown format version {version}")
        off = _MANIFEST_HEAD.size
        try:
            acls, off = _read_acls(manifest, off, acl_count)
            (n_sessions,) = _I32.unpack_from(manifest, off)
            off += 4
            sessions = {}
            for _ in range(n_sessions):
                sid, timeout = _SESSION.unpack_from(manifest, off)
                off += _SESSION.size
                sessions[sid] = timeout
        except (struct.error, IndexError, UnicodeDecodeError) as e:
            raise SnapshotCorruption(f"{name} manifest: {e}") from None
        tree = DataTree()
        tree.nodes.clear()
        loaded = 0
        for i in range(chunks):
            chunk = _checked(f"{name} chunk {i}", self.db.get(_chunk_key(zxid, i)))
            try:
                loaded += _read_nodes(chunk, acls, tree.nodes)
            except NodeFormatError as e:
                raise SnapshotCorruption(f"{name} chunk {i}, offset {e.offset}: {e}") from None
            except UnicodeDecodeError as e:
                raise SnapshotCorruption(f"{name} chunk {i}: {e}") from None
            if progress is not None:
                progress(loaded, count)
        if loaded != count or "/" not in tree.nodes:
            raise SnapshotCorruption(f"{name}: {loaded} nodes found, manifest says {count}")
        tree.sessions = sessions
        tree.last_processed_zxid = start
        tree.rebuild_indexes()
        return tree


def _read_str(buf: bytes, off: int) -> tuple[str, int]:
    (n,) = _I32.unpack_from(buf, off)
    off += 4
    if n < 0 or off + n > len(buf):
        raise IndexError("string runs past the end")
    return buf[off : off + n].decode("utf-8", "surrogatepass"), off + n


def _read_acls(buf: bytes, off: int, count: int) -> tuple[dict[int, AclTuple], int]:
    """The ACL table: index -> ACL, as the nodes refer to them."""
    acls = {}
    for i in range(count):
        (n,) = _I32.unpack_from(buf, off)
        off += 4
        entries = []
        for _ in range(n):
            (perms,) = _I32.unpack_from(buf, off)
            scheme, off = _read_str(buf, off + 4)
            ident, off = _read_str(buf, off)
            entries.append((perms, scheme, ident))
        acls[i] = intern_acl(tuple(entries))
    return acls, off


def _read_nodes(buf: bytes, acls: dict[int, AclTuple], nodes: dict[str, ZNode]) -> int:
    """Every node of one chunk into `nodes`; NodeFormatError if the chunk is not whole."""
    read = nodecodec.ZKCOMPAT.read
    off = 0
    n = 0
    with memoryview(buf) as view:
        end = len(view)
        while off < end:
            got = read(view, off, acls)
            if got is None:
                raise NodeFormatError(off, "the chunk ends inside a node")
            path, node, off = got
            nodes[path] = node
            n += 1
    return n
