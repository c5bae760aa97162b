"""ZooKeeper's tree digest (DigestCalculator + NodeHashMapImpl + AdHash, digest version 2):
a CRC32 per znode, summed over the tree as a 64-bit Java long. Pure functions, no state;
the one place a digest is computed (DataTree's apply and load, prep's prediction, the
SNAP and snapshot-file writers, the simulator's checks all call these).

Per node (DigestCalculator.calculateDigest): CRC32 over path bytes, then the data bytes
(nothing when data is null, so null and empty digest alike), then 60 bytes of
StatPersisted: czxid, mzxid, pzxid, ctime, mtime (longs), version, cversion, aversion (ints),
ephemeralOwner (long), big-endian, as stored (cversion counts creates; a container's or TTL
node's ephemeralOwner is its raw marker). The ACL and the children are not included. The
root's path is "" ("/" is mapped to it). Every path that starts with "/zookeeper/" counts 0
(quota stats are updated locally); "/zookeeper" itself does count.

Tree (AdHash): the sum of every node's CRC32, wrapping at 2**64, read as a signed long; an
addition when a node appears, a subtraction when it goes, a subtraction of the old value
and an addition of the new one around every change (NodeHashMap.preChange/postChange).

When ZooKeeper 3.8 changes the digest, for whoever maintains it incrementally in apply:

- create (CreateTxn, container, TTL; also each create in a multi): the parent's digest is
  removed, its cversion/pzxid set (only if the txn's parentCVersion, or cversion + 1 when
  -1, is larger than the stored cversion: fuzzy-snapshot replay never moves it back), its
  digest added again, then the new node's digest added.
- create that fails with NODEEXISTS during replay (DataTree.processTxn, for a txn of type
  create only, not create2/container/TTL): setCversionPzxid on the parent (-1 meaning
  cversion + 1), with remove/add only when the cversion actually grows.
- delete: the parent's digest is removed, pzxid = max(pzxid, zxid), added again (even when
  the child turns out to be missing: the parent is updated before the NoNode), then the
  deleted node's digest removed. closeSession and session expiry are deletes, one each.
- setData: remove, then data, mtime, mzxid, version change, then add.
- setACL: remove, aversion changes, add (the ACL itself is not in the digest).
- createSession, check, error txns, and anything under /zookeeper/ (quota stats, the
  config node written by reconfig) leave the digest unchanged; but creating or deleting a
  direct child of /zookeeper changes /zookeeper's cversion/pzxid, and that node counts.

DataTree (tree/datatree.py) keeps `digest` so, each node caching its own as DataNode does.

After every txn ZooKeeper records (zxid, digest) as lastProcessedZxidDigest (written into
snapshot files after the tree, DataTree.serializeZxidDigest) and, every 128th zxid
(DIGEST_LOG_INTERVAL), in the log the AdminServer's `hash` command lists; a leader sends
its predicted digest after each txn as the proposal's TxnDigest. 3.9.3 is identical.

ZooKeeper hashes `path.getBytes()`, the JVM's default charset: UTF-8 on JDK 18+ and under a
UTF-8 locale; we always use UTF-8 (a znode path holds no unpaired surrogate).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Protocol
from zlib import crc32

DIGEST_VERSION = 2  # DigestCalculator.DIGEST_VERSION
ZOOKEEPER_NODE_SUBTREE = "/zookeeper/"  # ZooDefs.ZOOKEEPER_NODE_SUBTREE: digests count 0
DIGEST_LOG_INTERVAL = 128  # DataTree.DIGEST_LOG_INTERVAL: zxids the `hash` command lists
ROOT_DIGEST_PATH = b""  # DigestCalculator: "/" and "" are aliases; "" is hashed

# czxid, mzxid, pzxid, ctime, mtime, version, cversion, aversion, ephemeralOwner (60 bytes)
DIGEST_STAT = struct.Struct(">qqqqqiiiq")
_LONG_MOD = 1 << 64
_LONG_MIN = 1 << 63
JAVA_LONG_MIN, JAVA_LONG_MAX = -(1 << 63), (1 << 63) - 1  # Long.MIN_VALUE, Long.MAX_VALUE

# A change confined to pzxid, cversion or aversion needs no rehash of path, data and stat:
# CRC32 is affine, crc32(a) ^ crc32(b) == crc32(a ^ b) ^ crc32(zeros) for a, b of one
# length, and a ^ b is zero up to the stat's byte 16, so hashing the XOR of the changed
# fields from there on is enough (a fraction of a full digest: docs/measurements.md).
_pack_stat = DIGEST_STAT.pack
_pack_pzxid_cversion_xor = struct.Struct(">q20xi12x").pack  # stat[16:]: pzxid@0, cversion@28
_pack_aversion_xor = struct.Struct(">32xi8x").pack  # stat[16:]: aversion@32
_STAT_TAIL_ZEROS_CRC = crc32(bytes(DIGEST_STAT.size - 16))


class DigestedNode(Protocol):
    """What the digest reads of a node: tree/datatree.ZNode, or anything with its fields."""

    data: bytes | None
    czxid: int
    mzxid: int
    pzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeralOwner: int


class DigestedTree(Protocol):
    nodes: Mapping[str, DigestedNode]


def as_java_long(value: int) -> int:
    """value mod 2**64 as a signed 64-bit number, as a Java long holds it."""
    value %= _LONG_MOD
    return value - _LONG_MOD if value >= _LONG_MIN else value


def path_bytes(path: str) -> bytes:
    """The bytes DigestCalculator hashes for path ("/" as "")."""
    if path == "/":
        return ROOT_DIGEST_PATH
    return path.encode() if path.isascii() else path.encode("utf-8", "replace")


def calculate_digest(path: str, data: bytes | None, czxid: int, mzxid: int, pzxid: int,
                     ctime: int, mtime: int, version: int, cversion: int, aversion: int,
                     ephemeral_owner: int) -> int:
    """DigestCalculator.calculateDigest of a node that counts (not under /zookeeper/), given
    field by field: CRC32 over the path, the data and the 60 stat bytes (0 .. 2**32-1).
    The one place the formula is written; every other function here calls it."""
    crc = crc32(path.encode() if path.isascii() and path != "/" else path_bytes(path))
    if data is not None:
        crc = crc32(data, crc)
    return crc32(_pack_stat(czxid, mzxid, pzxid, ctime, mtime, version, cversion, aversion,
                            ephemeral_owner), crc)


def stat_digest(path: str, data, czxid: int, mzxid: int, pzxid: int, ctime: int, mtime: int,
                version: int, cversion: int, aversion: int, ephemeral_owner: int) -> int:
    """node_digest of a node given field by field (a leader's prediction of one, in prep)."""
    if path.startswith(ZOOKEEPER_NODE_SUBTREE):
        return 0
    return calculate_digest(path, data, czxid, mzxid, pzxid, ctime, mtime, version, cversion,
                            aversion, ephemeral_owner)


def node_crc(path: str, n: DigestedNode) -> int:
    """calculate_digest of a node that counts, for callers that know it is not under
    /zookeeper/ (DataTree caches None for those, and so skips the prefix test)."""
    return calculate_digest(path, n.data, n.czxid, n.mzxid, n.pzxid, n.ctime, n.mtime,
                            n.version, n.cversion, n.aversion, n.ephemeralOwner)


def node_digest(path: str, n: DigestedNode) -> int:
    """DigestCalculator.calculateDigest: the node's CRC32 (0 .. 2**32-1), 0 under /zookeeper/."""
    if path.startswith(ZOOKEEPER_NODE_SUBTREE):
        return 0
    return calculate_digest(path, n.data, n.czxid, n.mzxid, n.pzxid, n.ctime, n.mtime,
                            n.version, n.cversion, n.aversion, n.ephemeralOwner)


def child_change_digest(before: int, old_pzxid: int, new_pzxid: int, old_cversion: int,
                        new_cversion: int) -> int:
    """A node's digest once only its pzxid and cversion changed, from its digest before."""
    return before ^ _STAT_TAIL_ZEROS_CRC ^ crc32(
        _pack_pzxid_cversion_xor(old_pzxid ^ new_pzxid, old_cversion ^ new_cversion))


def aversion_change_digest(before: int, old_aversion: int, new_aversion: int) -> int:
    """A node's digest once only its aversion changed, from its digest before."""
    return before ^ _STAT_TAIL_ZEROS_CRC ^ crc32(_pack_aversion_xor(old_aversion ^ new_aversion))


def add_digest(tree_value: int, node_value: int) -> int:
    """AdHash.addDigest: the tree digest after a node with digest node_value appears."""
    return as_java_long(tree_value + node_value)


def remove_digest(tree_value: int, node_value: int) -> int:
    """AdHash.removeDigest: the tree digest after a node with digest node_value goes."""
    return as_java_long(tree_value - node_value)


def tree_digest(tree: DigestedTree) -> int:
    """NodeHashMapImpl.getDigest of the whole tree, as ZooKeeper's signed long."""
    return as_java_long(sum(node_digest(path, n) for path, n in tree.nodes.items()))
