"""The one snapshot node codec: a znode as snapshots hold it, bytes to ZNode and back.
SNAP (tree/snapstream.py), ZooKeeper's snapshot files (store/zkformat.py) and zkcompat's
own snapshots (store/snapshot.py) all encode and decode their nodes here.

A node (DataTree.serializeNode, then DataNode.serialize):

    int n, n bytes          the path
    int n, n bytes          the data; n = -1 is null (None), 0 is empty (b"")
    ref                     the node's ACL, as an id into the snapshot's ACL table
    StatPersisted           long czxid, mzxid, ctime, mtime; int version, cversion (the
                            number of creates), aversion; long ephemeralOwner, pzxid

Two layouts of it, which differ only where named:

- ZOOKEEPER (SNAP, snapshot.<zxid> files): the path is a jute ustring (Java's UTF-8:
  CESU-8 outside the BMP, read back with Java's replacement rules), the root is written
  as "", the ref is a long (ReferenceCountedACLCache: -1 is OPEN_ACL_UNSAFE), and the
  path "/" is not a node but DataTree.serializeNodes' end mark.
- ZKCOMPAT (zkcompat's LevelDB snapshots): the path is UTF-8 with lone surrogates kept,
  the root is written as "/", the ref is an int index into the snapshot's ACL table, and
  there is no end mark (a chunk ends where its bytes do).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping

from zkcompat.jute.text import java_utf8_decode, java_utf8_encode
from zkcompat.tree.acl import OPEN_ACL_UNSAFE, AclTuple
from zkcompat.tree.datatree import ZNode
from zkcompat.tree.paths import ROOT

# ReferenceCountedACLCache.OPEN_UNSAFE_ACL_ID: the ACL id of a node whose ACL is null,
# which reads back as OPEN_ACL_UNSAFE (ZooKeeper's layout only).
OPEN_UNSAFE_ACL_ID = -1
END_OF_NODES = b"/"  # DataTree.serializeNodes: the path "/" marks the end of the nodes
LENGTH_ANY = 0x7FFFFFFF  # no bound on a length but what an int can say

_INT = struct.Struct(">i")
# StatPersisted: czxid, mzxid, ctime, mtime, version, cversion, aversion, ephemeralOwner, pzxid
_STAT_PERSISTED = "qqqqiiiqq"
_NULL_LENGTH = _INT.pack(-1)

# (path, node, offset after it): a node; (None, None, offset after it): the end mark.
Decoded = tuple[str | None, ZNode | None, int]


class NodeFormatError(ValueError):
    """Bytes that are not a node of the layout; `offset` is where, in the buffer read."""

    def __init__(self, offset: int, message: str) -> None:
        super().__init__(message)
        self.offset = offset


class NodeLayout:
    """One layout's `write(out, path, node, ref)` and `read(view, off, acls, max)`.

    write appends the node to `out`. read decodes the node at `off` of `view` (a
    memoryview) and returns (path, ZNode, offset after it), or (None, None, offset after
    it) at the end mark, or None when `view` ends inside the node. A length below -1 (or
    below 0 for a path) or above `length_max_bytes` raises NodeFormatError as soon as it
    is read, whatever follows; so does a ref that `acls` lacks. The ZNode read has no
    children set and no cached digest: DataTree.rebuild_indexes makes both.
    """

    __slots__ = ("name", "write", "read")

    def __init__(self, name: str, ref_format: str, root_bytes: bytes,
                 encode_path: Callable[[str], bytes], decode_path: Callable[[bytes], str],
                 open_acl_id: int | None, end_mark: bytes | None) -> None:
        self.name = name
        self.write = _writer(struct.Struct(">" + ref_format + _STAT_PERSISTED), root_bytes,
                             encode_path)
        self.read = _reader(struct.Struct(">" + ref_format + _STAT_PERSISTED), root_bytes,
                            decode_path, open_acl_id, end_mark)

    def __repr__(self) -> str:
        return f"<NodeLayout {self.name}>"


def _writer(tail: struct.Struct, root_bytes: bytes, encode_path: Callable[[str], bytes]):
    pack_int, pack_tail = _INT.pack, tail.pack
    null_length = _NULL_LENGTH

    def write(out: bytearray, path: str, node: ZNode, ref: int) -> None:
        if path == ROOT:
            p = root_bytes
        else:
            p = path.encode() if path.isascii() else encode_path(path)
        out += pack_int(len(p))
        out += p
        data = node.data
        if data is None:
            out += null_length
        else:
            out += pack_int(len(data))
            out += data
        out += pack_tail(ref, node.czxid, node.mzxid, node.ctime, node.mtime, node.version,
                         node.cversion, node.aversion, node.ephemeralOwner, node.pzxid)

    return write


def _reader(tail: struct.Struct, root_bytes: bytes, decode_path: Callable[[bytes], str],
            open_acl_id: int | None, end_mark: bytes | None):
    unpack_int, unpack_tail, tail_size = _INT.unpack_from, tail.unpack_from, tail.size
    new = ZNode.__new__
    open_acl = OPEN_ACL_UNSAFE

    def read(view: memoryview, off: int, acls: Mapping[int, AclTuple],
             length_max_bytes: int = LENGTH_ANY) -> Decoded | None:
        end = len(view)
        if end - off < 4:
            return None
        (plen,) = unpack_int(view, off)
        if plen < 0 or plen > length_max_bytes:
            raise NodeFormatError(off, f"node path of length {plen}"
                                  + _bound(plen, length_max_bytes))
        d0 = off + 4 + plen
        if end < d0:
            return None
        raw = view[off + 4:d0].tobytes()
        if raw == end_mark:
            return None, None, d0
        if end - d0 < 4:
            return None
        (dlen,) = unpack_int(view, d0)
        if dlen < -1 or dlen > length_max_bytes:
            raise NodeFormatError(d0, f"data of length {dlen} for node {raw!r}"
                                  + _bound(dlen, length_max_bytes))
        t0 = d0 + 4 + (dlen if dlen > 0 else 0)
        if end - t0 < tail_size:
            return None
        if raw == root_bytes:
            path = ROOT
        else:
            path = raw.decode("ascii") if raw.isascii() else decode_path(raw)
        (ref, czxid, mzxid, ctime, mtime, version, cversion, aversion, owner,
         pzxid) = unpack_tail(view, t0)
        if ref == open_acl_id:
            acl = open_acl
        else:
            acl = acls.get(ref)
            if acl is None:  # ReferenceCountedACLCache.convertLong fails the same way
                raise NodeFormatError(t0, f"node {path} refers to ACL {ref}, which is not "
                                          "in the ACL cache")
        node = new(ZNode)
        node.data = None if dlen == -1 else view[d0 + 4:t0].tobytes()
        node.acl = acl
        node.czxid, node.mzxid, node.ctime, node.mtime = czxid, mzxid, ctime, mtime
        node.version, node.cversion, node.aversion = version, cversion, aversion
        node.ephemeralOwner, node.pzxid = owner, pzxid
        node.children = None
        return path, node, t0 + tail_size

    return read


def _bound(length: int, length_max_bytes: int) -> str:
    return f" (at most {length_max_bytes})" if length > length_max_bytes else ""


def _utf8_surrogatepass(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogatepass")


def _encode_utf8_surrogatepass(path: str) -> bytes:
    return path.encode("utf-8", "surrogatepass")


ZOOKEEPER = NodeLayout("zookeeper", "q", b"", java_utf8_encode, java_utf8_decode,
                       OPEN_UNSAFE_ACL_ID, END_OF_NODES)
ZKCOMPAT = NodeLayout("zkcompat", "i", ROOT.encode(), _encode_utf8_surrogatepass,
                      _utf8_surrogatepass, None, None)
