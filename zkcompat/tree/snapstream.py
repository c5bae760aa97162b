"""ZooKeeper's snapshot serialisation (SerializeUtils.serializeSnapshot) from and into a
DataTree: a streaming writer of bounded chunks and an incremental reader, both for SNAP.

The SNAP stream of ZooKeeper 3.8.0 (and 3.9.3), what LearnerHandler writes right after the
QuorumPacket(SNAP, zxid) and Learner.syncWithLeader reads, with no header, checksum or
digest:

    int count; count * (long sessionId, int timeout)     sessions (a HashMap's order)
    int n; n * (long id, int k, k * ACL)                 ReferenceCountedACLCache.serialize
    * (ustring path, buffer data, long acl, StatPersisted) every node, root first as ""
    ustring "/"                                          DataTree.serializeNodes' end mark
    ustring "BenWasHere"                                 the signature

ACL = int perms, ustring scheme, ustring id. Each node is tree/nodecodec's, in ZooKeeper's
layout. The snapshot FILE adds a FileHeader before this and seals after it
(zkformat.snapshot_file_chunks).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from zkcompat.jute.constants import JUTE_MAXBUFFER_DEFAULT_BYTES
from zkcompat.jute.text import java_utf8_decode, java_utf8_encode
from zkcompat.tree import nodecodec
from zkcompat.tree.acl import OPEN_ACL_UNSAFE, AclTuple, intern_acl
from zkcompat.tree.datatree import DataTree, ZNode
from zkcompat.tree.digest import as_java_long, node_digest
from zkcompat.tree.nodecodec import OPEN_UNSAFE_ACL_ID, NodeFormatError
from zkcompat.tree.paths import QUOTA, ROOT, ZOOKEEPER
from zkcompat.tree.view import TreeView

SIGNATURE = "BenWasHere"  # LearnerHandler.syncFollower / Learner.syncWithLeader
END_OF_NODES = "/"  # DataTree.serializeNodes: "/" marks the end of the nodes
# ZooKeeper's DataTree gives the null ACL id (OPEN_UNSAFE_ACL_ID, -1) to /, /zookeeper and
# /zookeeper/quota at start-up (new DataNode(..., -1L, ...)); every other ACL, the same
# world:anyone ALL included, gets an index from convertAcls, counting up from 1.
NULL_ACL_PATHS = frozenset((ROOT, ZOOKEEPER, QUOTA))
FIRST_ACL_ID = 1  # ReferenceCountedACLCache.incrementIndex: ++aclIndex from 0
# BinaryInputArchive.checkLength: a buffer or string is refused above jute.maxbuffer plus
# zookeeper.jute.maxbuffer.extrasize, which defaults to jute.maxbuffer (at least 1024).
JUTE_MAXBUFFER_EXTRASIZE_BYTES = JUTE_MAXBUFFER_DEFAULT_BYTES
LENGTH_MAX_BYTES = JUTE_MAXBUFFER_DEFAULT_BYTES + JUTE_MAXBUFFER_EXTRASIZE_BYTES
CHUNK_BYTES = 64 * 1024  # what the writer yields at a time (the last chunk may be shorter)
SLICE_NODES = 2048  # nodes of work between the slice points of a writer with a view (~2 ms)
# java.util.HashMap: DEFAULT_LOAD_FACTOR, MAXIMUM_CAPACITY.
JAVA_HASHMAP_LOAD_FACTOR = 0.75
JAVA_HASHMAP_CAPACITY_MAX = 1 << 30

_INT = struct.Struct(">i")
_SESSION = struct.Struct(">qi")
_ACL_ENTRY_HEAD = struct.Struct(">qi")  # the cache entry's id, its ACL vector's length
_END_OF_NODES = _INT.pack(1) + b"/"
_SIGNATURE = _INT.pack(len(SIGNATURE)) + SIGNATURE.encode()

Progress = Callable[[int, int], None]  # (nodes written or read so far, total or -1)


class SnapStreamError(Exception):
    """Bytes ZooKeeper's Learner would refuse (IOException): the sync with this leader
    fails; the message says what and at which byte of the stream."""


# -- Java's iteration order ---------------------------------------------------------------


def _table_size_for(cap: int) -> int:
    """HashMap.tableSizeFor: the power of two >= cap (1 for cap <= 1)."""
    if cap <= 1:
        return 1
    return min(1 << (cap - 1).bit_length(), JAVA_HASHMAP_CAPACITY_MAX)


def java_long_hashmap_order(keys: Iterable[int]) -> list[int]:
    """The order `new HashMap<>(m)` iterates Long keys that came from m in `keys` order:
    by bucket (Long.hashCode spread by HashMap.hash), then insertion within a bucket.
    Sessions and the ACL cache are written in this order (SerializeUtils.serializeSnapshot,
    ReferenceCountedACLCache.serialize both copy their map first)."""
    keys = list(keys)
    if not keys:
        return keys
    cap = _table_size_for(int(len(keys) / JAVA_HASHMAP_LOAD_FACTOR + 1.0))
    mask = cap - 1

    def bucket(k: int) -> int:
        u = k & 0xFFFFFFFFFFFFFFFF
        h = (u ^ (u >> 32)) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & mask

    return sorted(keys, key=bucket)  # sorted is stable: insertion order within a bucket


# -- writing ------------------------------------------------------------------------------


def _depth(path: str) -> int:
    return 0 if path == ROOT else path.count("/")


class SnapshotWriter:
    """SerializeUtils.serializeSnapshot of `tree` as chunks of exactly `chunk_bytes` (the
    last one shorter): memory stays one chunk plus one node, whatever the tree's size.

    Nodes are written in `tree.nodes` order, which DataTree keeps parent-first (a node is
    only added under an existing parent, and a parent cannot go before its children);
    that is ZooKeeper's own order for a tree read from a ZooKeeper snapshot, and creation
    order otherwise. ZooKeeper walks depth-first in java.util.HashSet order, an accident of
    hashing and history; DataTree.deserialize needs only parents before children. Should
    the order ever not be parent-first, the writer walks depth-first with sorted children.

    ACL ids follow ReferenceCountedACLCache: -1 for /, /zookeeper and /zookeeper/quota
    while they hold OPEN_ACL_UNSAFE (as ZooKeeper creates them), otherwise 1, 2, ... in
    order of first use. `acl_ids` (id -> ACL, e.g. ZkSnapshot.acls) keeps a ZooKeeper
    snapshot's own ids: every entry is written, used or not, and new ACLs continue after
    the largest. Without a `view` the tree must not change while chunks() runs (a dict
    that changes size raises RuntimeError). With one (tree/view.py) the writer serialises
    the tree as it was when the view was taken, however it changes meanwhile, and yields
    an empty chunk after every `slice_nodes` nodes of work: a point where its caller may let
    the event loop run (apply included) before it asks for more.

    `progress(nodes_written, nodes_total)` is called at every chunk and at the end.
    With `digest=True` the tree digest (tree/digest.py) is computed on the way, in
    `self.digest` once chunks() is exhausted. (Speed: docs/measurements.md.)
    """

    def __init__(self, tree: DataTree, *, chunk_bytes: int = CHUNK_BYTES,
                 progress: Progress | None = None, digest: bool = False,
                 acl_ids: Mapping[int, AclTuple] | None = None,
                 view: TreeView | None = None, slice_nodes: int = SLICE_NODES) -> None:
        if chunk_bytes <= 0:
            raise ValueError(f"chunk_bytes must be > 0, not {chunk_bytes}")
        assert view is None or view.tree is tree
        self.tree = tree
        self.view = view
        self.slice_nodes = slice_nodes
        self.chunk_bytes = chunk_bytes
        self.progress = progress
        self.with_digest = digest
        self.digest: int | None = None
        self.nodes_total = len(tree.nodes) if view is None else len(view.paths)
        self.nodes_written = 0
        self.bytes_written = 0
        self.acl_cache: dict[int, AclTuple] = dict(acl_ids or {})
        self._acl_id_of: dict[int, int] = {}  # id(ACL tuple) -> cache id
        self._parent_first = True

    def _items(self) -> Iterable[tuple[str, ZNode]]:
        """Every (path, node) in the tree's own order: now, or as the view saw them."""
        view = self.view
        if view is None:
            return self.tree.nodes.items()
        return ((path, view.node(path)) for path in view.paths)

    # The ACL cache precedes the nodes, so a first pass finds every ACL (and checks the
    # node order); ACL tuples are interned, so they are looked up by identity first.
    def _first_pass(self) -> Iterator[bytes]:
        by_value = {acl: ref for ref, acl in self.acl_cache.items()}
        next_id = max((r for r in self.acl_cache if r > 0), default=FIRST_ACL_ID - 1) + 1
        id_of = self._acl_id_of
        internal: set[str] = set()
        sliced, slice_nodes = self.view is not None, self.slice_nodes
        for i, (path, node) in enumerate(self._items(), 1):
            if sliced and not i % slice_nodes:
                yield b""
            acl = node.acl
            if id(acl) not in id_of and not (acl is OPEN_ACL_UNSAFE and path in NULL_ACL_PATHS):
                ref = by_value.get(acl)
                if ref is None:
                    ref = by_value[acl] = next_id
                    self.acl_cache[ref] = acl
                    next_id += 1
                id_of[id(acl)] = ref
            if node.children:
                internal.add(path)
            if path != ROOT and (path[:path.rfind("/")] or ROOT) not in internal:
                self._parent_first = False

    def _node_order(self) -> Iterator[tuple[str, ZNode]]:
        if self._parent_first:
            yield from self._items()
            return
        if self.view is not None:
            # Depth orders parents first too; the view's children sets are the view's.
            view = self.view
            for path in sorted(view.paths, key=_depth):
                yield path, view.node(path)
            return
        nodes = self.tree.nodes
        stack = [ROOT]
        walked = 0
        while stack:
            path = stack.pop()
            node = nodes[path]
            yield path, node
            walked += 1
            if node.children:
                base = "" if path == ROOT else path
                stack.extend(f"{base}/{c}" for c in sorted(node.children, reverse=True))
        # Children sets out of step with the nodes: stop before the "/" end mark, so the
        # receiver sees an incomplete stream rather than a tree with nodes missing.
        assert walked == len(nodes), f"walked {walked} of {len(nodes)} nodes from the root"

    def _head(self) -> bytearray:
        out = bytearray()
        sessions = self.tree.sessions if self.view is None else self.view.sessions
        out += _INT.pack(len(sessions))
        for sid in java_long_hashmap_order(sessions):
            out += _SESSION.pack(sid, sessions[sid])
        cache = self.acl_cache
        out += _INT.pack(len(cache))
        for ref in java_long_hashmap_order(cache):
            acl = cache[ref]
            out += _ACL_ENTRY_HEAD.pack(ref, len(acl))
            for perms, scheme, ident in acl:
                s, i = java_utf8_encode(scheme), java_utf8_encode(ident)
                out += _INT.pack(perms) + _INT.pack(len(s)) + s + _INT.pack(len(i)) + i
        return out

    def chunks(self) -> Iterator[bytes]:
        """The stream, chunk by chunk; ends after the "/" end mark."""
        yield from self._first_pass()
        out = self._head()
        sliced, slice_nodes = self.view is not None, self.slice_nodes
        chunk = self.chunk_bytes
        write = nodecodec.ZOOKEEPER.write
        id_of = self._acl_id_of
        open_acl, null_acl_paths = OPEN_ACL_UNSAFE, NULL_ACL_PATHS
        with_digest = self.with_digest
        total = 0
        written = 0
        for path, n in self._node_order():
            acl = n.acl
            write(out, path, n, OPEN_UNSAFE_ACL_ID if acl is open_acl and path in null_acl_paths
                  else id_of[id(acl)])
            if with_digest:
                total += node_digest(path, n)
            written += 1
            if len(out) >= chunk:
                self.nodes_written = written
                yield from self._flush(out, full_only=True)
            elif sliced and not written % slice_nodes:
                yield b""
        out += _END_OF_NODES
        self.nodes_written = written
        if with_digest:
            self.digest = as_java_long(total)
        yield from self._flush(out, full_only=False)

    def _flush(self, out: bytearray, full_only: bool) -> Iterator[bytes]:
        chunk = self.chunk_bytes
        end = len(out) - len(out) % chunk if full_only else len(out)
        with memoryview(out) as view:
            pieces = [bytes(view[i:min(i + chunk, end)]) for i in range(0, end, chunk)]
        del out[:end]
        self.bytes_written += end
        if self.progress is not None:
            self.progress(self.nodes_written, self.nodes_total)
        yield from pieces


def snapshot_chunks(tree: DataTree, **options) -> Iterator[bytes]:
    """SerializeUtils.serializeSnapshot(tree), as SnapshotWriter's chunks."""
    return SnapshotWriter(tree, **options).chunks()


def snap_stream_chunks(tree: DataTree, **options) -> Iterator[bytes]:
    """What LearnerHandler writes after QuorumPacket(SNAP): the snapshot, then the
    "BenWasHere" signature. Options as SnapshotWriter's."""
    yield from snapshot_chunks(tree, **options)
    yield _SIGNATURE


# -- reading ------------------------------------------------------------------------------


@dataclass
class SnapResult:
    tree: DataTree  # indexes rebuilt, sessions set, last_processed_zxid the packet's zxid
    rest: bytes  # bytes after the signature: the start of the next QuorumPacket


_SESSION_COUNT, _SESSIONS, _ACL_COUNT, _ACL_HEAD, _ACL, _NODES, _SIGNATURE_STATE, _DONE = (
    range(8))
_STATE_NAMES = ("session count", "sessions", "ACL cache size", "ACL cache entry", "ACL",
                "nodes", "signature", "done")


class SnapReader:
    """Learner.syncWithLeader's SNAP read, incremental: feed() bytes as they arrive; when
    `done`, result() gives the tree and the bytes that followed the signature.

    Buffers at most one unparsed item (one node: path, data, stat) plus the last feed.
    Lengths are refused as BinaryInputArchive.checkLength refuses them (below -1, or above
    `length_max_bytes`); counts below 0 (which ZooKeeper reads as 0, and never writes), a
    null ACL vector or string, an ACL id the cache lacks, a node before its parent, a path
    given twice and a wrong signature are refused too. After a SnapStreamError every
    feed() raises it again. Null data (-1) stays None, empty data b"".

    With `signature=False` the stream ends at the "/" mark (the form inside a snapshot
    file). The caller still owns ZOOKEEPER-2819: a learner without reconfig overwrites
    /zookeeper/config from its own configuration after the load.
    """

    # A loader may gc.disable() around a SNAP: collections are a third of its time
    # (docs/measurements.md), and gc.freeze() after it.

    def __init__(self, zxid: int = 0, *, signature: bool = True,
                 length_max_bytes: int = LENGTH_MAX_BYTES,
                 progress: Progress | None = None) -> None:
        self.zxid = zxid
        self.length_max_bytes = length_max_bytes
        self.progress = progress
        self._expect_signature = signature
        self._buf = bytearray()
        self._consumed = 0  # stream offset of _buf[0], for messages
        self._state = _SESSION_COUNT
        self._left = 0  # sessions or cache entries still to read in this state
        self._acl_ref = 0
        self._acl_left = 0  # ACLs still to read in the current cache entry
        self._acl: list[tuple[int, str, str]] = []
        self._rest = b""
        self._error: SnapStreamError | None = None
        self.sessions: dict[int, int] = {}
        self.acls: dict[int, AclTuple] = {}
        self.nodes: dict[str, ZNode] = {}
        self._steps = (self._parse_session_count, self._parse_sessions,
                       self._parse_acl_count, self._parse_acl_head, self._parse_acl,
                       self._parse_nodes, self._parse_signature)

    @property
    def done(self) -> bool:
        return self._state == _DONE

    @property
    def nodes_read(self) -> int:
        return len(self.nodes)

    @property
    def bytes_read(self) -> int:
        return self._consumed + len(self._buf)

    @property
    def buffered_bytes(self) -> int:
        """Bytes of an incomplete item held until more arrive (at most one node's)."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._error is not None:
            raise self._error
        if self._state == _DONE:
            raise RuntimeError("SnapReader.feed after the signature: the rest belongs to "
                               "the next QuorumPacket (result().rest)")
        self._buf += data
        try:
            off = self._parse()
        except SnapStreamError as e:
            self._error = e
            raise
        if self._state == _DONE:
            self._rest = bytes(self._buf[off:])
            self._buf = bytearray()
        else:
            del self._buf[:off]
        self._consumed += off
        if self.progress is not None:
            self.progress(len(self.nodes), -1)

    def result(self) -> SnapResult:
        """The tree (ZKDatabase.deserializeSnapshot's) once `done`; RuntimeError before."""
        if self._state != _DONE:
            raise RuntimeError(f"SNAP stream incomplete: still reading "
                               f"{_STATE_NAMES[self._state]} after {self.bytes_read} bytes")
        tree = DataTree()
        tree.nodes = self.nodes
        tree.sessions = self.sessions
        tree.last_processed_zxid = self.zxid
        tree.rebuild_indexes()
        return SnapResult(tree, self._rest)

    def _fail(self, off: int, message: str) -> SnapStreamError:
        return SnapStreamError(f"SNAP stream, byte {self._consumed + off} "
                               f"({_STATE_NAMES[self._state]}): {message}")

    def _parse(self) -> int:
        """Parse all that is complete; returns how much of _buf that used. Each step
        returns the offset it reached and stops the loop by changing neither that nor
        the state."""
        off = 0
        while self._state != _DONE:
            state = self._state
            new = self._steps[state](off)
            if new == off and self._state == state:
                break
            off = new
        return off

    def _count(self, off: int, what: str, then: int) -> int:
        if len(self._buf) - off < 4:
            return off
        (n,) = _INT.unpack_from(self._buf, off)
        if n < 0:
            raise self._fail(off, f"{what} is {n}")
        self._left = n
        self._state = then
        return off + 4

    def _parse_session_count(self, off: int) -> int:
        return self._count(off, "session count", _SESSIONS)

    def _parse_sessions(self, off: int) -> int:
        buf, end, size = self._buf, len(self._buf), _SESSION.size
        unpack = _SESSION.unpack_from
        sessions = self.sessions
        while self._left and end - off >= size:
            sid, timeout = unpack(buf, off)
            sessions[sid] = timeout
            off += size
            self._left -= 1
        if not self._left:
            self._state = _ACL_COUNT
        return off

    def _parse_acl_count(self, off: int) -> int:
        return self._count(off, "ACL cache size", _ACL_HEAD)

    def _parse_acl_head(self, off: int) -> int:
        if not self._left:
            self._state = _NODES
            return off
        if len(self._buf) - off < _ACL_ENTRY_HEAD.size:
            return off
        ref, count = _ACL_ENTRY_HEAD.unpack_from(self._buf, off)
        if count < 0:  # ReferenceCountedACLCache.deserialize: "missing acls"
            raise self._fail(off, f"ACL cache entry {ref} has ACL vector length {count}")
        self._acl_ref, self._acl, self._acl_left = ref, [], count
        self._left -= 1
        self._state = _ACL
        return off + _ACL_ENTRY_HEAD.size

    def _parse_acl(self, off: int) -> int:
        while self._acl_left:
            got = self._one_acl(off)
            if got is None:
                return off
            off = got
            self._acl_left -= 1
        self.acls[self._acl_ref] = intern_acl(tuple(self._acl))
        self._state = _ACL_HEAD
        return off

    def _one_acl(self, off: int) -> int | None:
        """One ACL (int perms, ustring scheme, ustring id) if all of it is there."""
        if len(self._buf) - off < 8:
            return None
        (perms,) = _INT.unpack_from(self._buf, off)
        scheme, at = self._string(off + 4, "ACL scheme")
        if at is None or len(self._buf) - at < 4:
            return None
        ident, at = self._string(at, "ACL id")
        if at is None:
            return None
        self._acl.append((perms, scheme, ident))
        return at

    def _string(self, off: int, what: str) -> tuple[str, int | None]:
        """The ustring whose length is at off, and the offset after it; ("", None) if it
        has not all arrived."""
        (n,) = _INT.unpack_from(self._buf, off)
        if n < 0 or n > self.length_max_bytes:  # checkLength; null is refused too
            raise self._fail(off, f"{what} of length {n}" + (
                "" if n == -1 else f" (Unreasonable length; at most {self.length_max_bytes})"))
        start = off + 4
        if len(self._buf) - start < n:
            return "", None
        raw = bytes(self._buf[start:start + n])
        return (raw.decode("ascii") if raw.isascii() else java_utf8_decode(raw)), start + n

    def _parse_nodes(self, off: int) -> int:
        """The hot loop: one node per turn, taken only once all of it has arrived."""
        nodes, acls = self.nodes, self.acls
        read = nodecodec.ZOOKEEPER.read
        limit = self.length_max_bytes
        setdefault = nodes.setdefault
        with memoryview(self._buf) as view:
            while True:
                try:
                    got = read(view, off, acls, limit)
                except NodeFormatError as e:
                    raise self._fail(e.offset, str(e)) from None
                if got is None:
                    return off
                path, node, after = got
                if path is None:
                    return self._end_of_nodes(off, after)
                cut = path.rfind("/")
                if cut <= 0 or (path[:cut] not in nodes):  # the root, its children, errors
                    self._check_new_path(off, path, cut)
                if setdefault(path, node) is not node:
                    raise self._fail(off, f"node {path} appears twice")
                off = after

    def _check_new_path(self, off: int, path: str, cut: int) -> None:
        """DataTree.deserialize's rules, for what the hot loop does not decide: the root
        first, every node after its parent ("Invalid Datatree"), absolute paths."""
        nodes = self.nodes
        if path == ROOT:
            if nodes:
                raise self._fail(off, "the root comes after other nodes")
            return
        if cut < 0 or path[0] != "/":
            raise self._fail(off, f"node path {path!r} is not absolute")
        parent = path[:cut] or ROOT
        if parent not in nodes:
            raise self._fail(off, f"Invalid Datatree: no parent {parent} for node {path}")

    def _end_of_nodes(self, off: int, after: int) -> int:
        if ROOT not in self.nodes:
            raise self._fail(off, "the end mark \"/\" comes before any root node")
        self._state = _SIGNATURE_STATE if self._expect_signature else _DONE
        return after

    def _parse_signature(self, off: int) -> int:
        if len(self._buf) - off < 4:
            return off
        text, at = self._string(off, "signature")
        if at is None:
            return off
        if text != SIGNATURE:  # Learner.syncWithLeader: "Missing signature"
            raise self._fail(off, f"Missing signature. Got {text!r}, not {SIGNATURE!r}")
        self._state = _DONE
        return at
