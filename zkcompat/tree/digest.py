"""ZooKeeper's tree digest (DigestCalculator + NodeHashMapImpl + AdHash, digest version 2):
a CRC32 per znode, summed over the tree as a 64-bit Java long. Pure functions, no state.

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
from typing import TYPE_CHECKING
from zlib import crc32

if TYPE_CHECKING:
    from zkcompat.tree.datatree import DataTree, ZNode

DIGEST_VERSION = 2  # DigestCalculator.DIGEST_VERSION
ZOOKEEPER_NODE_SUBTREE = "/zookeeper/"  # ZooDefs.ZOOKEEPER_NODE_SUBTREE: digests count 0
DIGEST_LOG_INTERVAL = 128  # DataTree.DIGEST_LOG_INTERVAL: zxids the `hash` command lists
ROOT_DIGEST_PATH = b""  # DigestCalculator: "/" and "" are aliases; "" is hashed

# czxid, mzxid, pzxid, ctime, mtime, version, cversion, aversion, ephemeralOwner (60 bytes)
DIGEST_STAT = struct.Struct(">qqqqqiiiq")
_LONG_MOD = 1 << 64
_LONG_MIN = 1 << 63
JAVA_LONG_MIN, JAVA_LONG_MAX = -(1 << 63), (1 << 63) - 1  # Long.MIN_VALUE, Long.MAX_VALUE


def as_java_long(value: int) -> int:
    """value mod 2**64 as a signed 64-bit number, as a Java long holds it."""
    value %= _LONG_MOD
    return value - _LONG_MOD if value >= _LONG_MIN else value


def path_bytes(path: str) -> bytes:
    """The bytes DigestCalculator hashes for path ("/" as "")."""
    if path == "/":
        return ROOT_DIGEST_PATH
    return path.encode() if path.isascii() else path.encode("utf-8", "replace")


def node_digest(path: str, znode: ZNode) -> int:
    """DigestCalculator.calculateDigest: the node's CRC32 (0 .. 2**32-1), 0 under /zookeeper/."""
    n = znode
    return stat_digest(path, n.data, n.czxid, n.mzxid, n.pzxid, n.ctime, n.mtime, n.version,
                       n.cversion, n.aversion, n.ephemeralOwner)


def stat_digest(path: str, data, czxid: int, mzxid: int, pzxid: int, ctime: int, mtime: int,
                version: int, cversion: int, aversion: int, ephemeral_owner: int) -> int:
    """node_digest of a node given field by field (a leader's prediction of one, in prep)."""
    if path.startswith(ZOOKEEPER_NODE_SUBTREE):
        return 0
    crc = crc32(path.encode() if path.isascii() and path != "/" else path_bytes(path))
    if data is not None:
        crc = crc32(data, crc)
    return crc32(DIGEST_STAT.pack(czxid, mzxid, pzxid, ctime, mtime, version, cversion,
                                   aversion, ephemeral_owner), crc)


def add_digest(tree_value: int, node_value: int) -> int:
    """AdHash.addDigest: the tree digest after a node with digest node_value appears."""
    return as_java_long(tree_value + node_value)


def remove_digest(tree_value: int, node_value: int) -> int:
    """AdHash.removeDigest: the tree digest after a node with digest node_value goes."""
    return as_java_long(tree_value - node_value)


def tree_digest(tree: DataTree) -> int:
    """NodeHashMapImpl.getDigest of the whole tree, as ZooKeeper's signed long."""
    total = 0
    pack = DIGEST_STAT.pack
    for path, n in tree.nodes.items():
        if path.startswith(ZOOKEEPER_NODE_SUBTREE):
            continue
        crc = crc32(path.encode() if path.isascii() and path != "/" else path_bytes(path))
        data = n.data
        if data is not None:
            crc = crc32(data, crc)
        total += crc32(pack(n.czxid, n.mzxid, n.pzxid, n.ctime, n.mtime, n.version,
                            n.cversion, n.aversion, n.ephemeralOwner), crc)
    return as_java_long(total)
