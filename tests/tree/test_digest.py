"""tree/digest.py: DigestCalculator's per-node CRC32 and AdHash's sum, field by field.

The real-ZooKeeper oracles (a ZooKeeper snapshot's zxid digest, every TxnDigest of a
ZooKeeper log replayed through DataTree.apply, ZooKeeper checking our snapshot's digest
at load) are in tests/store/test_zk_snapshot_writer.py.
"""

import struct
import zlib

from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.tree.acl import READ_ACL_UNSAFE
from zkcompat.tree.datatree import CONTAINER_EPHEMERAL_OWNER, DataTree, ttl_ephemeral_owner
from zkcompat.tree.digest import (
    DIGEST_VERSION,
    add_digest,
    as_java_long,
    node_digest,
    remove_digest,
    tree_digest,
)
from zkcompat.tree.txn import Txn

WORLD = [r.ACL(31, r.Id("world", "anyone"))]
SESSION = 0x0100000012340000


def txn(zxid, type_, body, session=SESSION):
    return Txn(r.TxnHeader(session, 1, zxid, 1_700_000_000_000 + zxid, type_), body)


def create(tree, zxid, path, data=b"d", ephemeral=False):
    tree.apply(txn(zxid, OpCode.CREATE2, r.CreateTxn(path, data, WORLD, ephemeral, -1)))


def java_crc(path: bytes, data: bytes | None, n) -> int:
    """DigestCalculator.calculateDigest written out: path, data, then the 60 stat bytes."""
    stat = struct.pack(">qqqqqiiiq", n.czxid, n.mzxid, n.pzxid, n.ctime, n.mtime, n.version,
                       n.cversion, n.aversion, n.ephemeralOwner)
    assert len(stat) == 60  # "total = 8 * 6 + 4 * 3 = 60 bytes"
    return zlib.crc32(path + (data or b"") + stat)


def test_version_is_zookeepers():
    assert DIGEST_VERSION == 2


def test_node_digest_is_crc32_of_path_data_and_stat_fields_in_zookeepers_order():
    tree = DataTree()
    create(tree, 5, "/a", b"hello")
    tree.apply(txn(6, OpCode.SET_DATA, r.SetDataTxn("/a", b"world", 1)))
    node = tree.nodes["/a"]
    node.aversion, node.cversion = 3, 7  # distinct values, so a swapped field shows
    assert node_digest("/a", node) == java_crc(b"/a", b"world", node)


def test_root_is_hashed_as_the_empty_path():
    tree = DataTree()
    create(tree, 1, "/a")
    root = tree.nodes["/"]
    assert node_digest("/", root) == java_crc(b"", root.data, root)


def test_zookeeper_subtree_counts_zero_but_zookeeper_itself_counts():
    tree = DataTree()
    assert node_digest("/zookeeper/quota", tree.nodes["/zookeeper/quota"]) == 0
    assert node_digest("/zookeeper/config", tree.nodes["/zookeeper/config"]) == 0
    zk = tree.nodes["/zookeeper"]
    assert node_digest("/zookeeper", zk) == java_crc(b"/zookeeper", b"", zk) != 0
    # A user node whose name merely starts with "zookeeper" is hashed.
    create(tree, 1, "/zookeeperx")
    assert node_digest("/zookeeperx", tree.nodes["/zookeeperx"]) != 0


def test_null_and_empty_data_hash_alike_and_acl_is_not_hashed():
    a, b = DataTree(), DataTree()
    create(a, 1, "/n", None)
    create(b, 1, "/n", b"")
    assert a.nodes["/n"].data is None and b.nodes["/n"].data == b""
    assert node_digest("/n", a.nodes["/n"]) == node_digest("/n", b.nodes["/n"])
    b.nodes["/n"].acl = READ_ACL_UNSAFE
    assert node_digest("/n", a.nodes["/n"]) == node_digest("/n", b.nodes["/n"])


def test_container_and_ttl_owners_are_hashed_raw():
    tree = DataTree()
    tree.apply(txn(1, OpCode.CREATE_CONTAINER, r.CreateContainerTxn("/c", b"", WORLD, -1)))
    tree.apply(txn(2, OpCode.CREATE_TTL, r.CreateTTLTxn("/t", b"", WORLD, -1, 5000)))
    c, t = tree.nodes["/c"], tree.nodes["/t"]
    assert c.ephemeralOwner == CONTAINER_EPHEMERAL_OWNER
    assert t.ephemeralOwner == ttl_ephemeral_owner(5000)
    assert node_digest("/c", c) == java_crc(b"/c", b"", c)
    assert node_digest("/t", t) == java_crc(b"/t", b"", t)


def test_non_ascii_path_is_hashed_as_utf8():
    tree = DataTree()
    create(tree, 1, "/\u00e9t\u00e9-\u4e2d")
    n = tree.nodes["/\u00e9t\u00e9-\u4e2d"]
    assert node_digest("/\u00e9t\u00e9-\u4e2d", n) == java_crc(
        "/\u00e9t\u00e9-\u4e2d".encode(), b"d", n)


def test_tree_digest_is_the_sum_of_node_digests_as_a_java_long():
    tree = DataTree()
    for i in range(50):
        create(tree, i + 1, f"/n{i}", bytes([i]) * i)
    expected = sum(node_digest(p, n) for p, n in tree.nodes.items())
    assert expected >= 1 << 32  # sums past 32 bits: the long arithmetic is exercised
    assert tree_digest(tree) == as_java_long(expected)


def test_java_long_wraps_like_adhash():
    assert as_java_long((1 << 63) - 1) == (1 << 63) - 1
    assert as_java_long(1 << 63) == -(1 << 63)
    assert as_java_long(-1) == -1
    assert add_digest((1 << 63) - 1, 1) == -(1 << 63)
    assert remove_digest(-(1 << 63), 1) == (1 << 63) - 1


def test_incremental_maintenance_as_documented_equals_recomputation():
    """The module docstring's rules (remove the parent, change it, add it, add the child;
    remove around every change) applied by hand track the full recomputation."""
    tree = DataTree()
    digest = tree_digest(tree)

    def change(path, mutate):
        nonlocal digest
        digest = remove_digest(digest, node_digest(path, tree.nodes[path]))
        mutate()
        digest = add_digest(digest, node_digest(path, tree.nodes[path]))

    def do_create(zxid, path):
        nonlocal digest
        parent = path.rsplit("/", 1)[0] or "/"
        digest = remove_digest(digest, node_digest(parent, tree.nodes[parent]))
        create(tree, zxid, path)
        digest = add_digest(digest, node_digest(parent, tree.nodes[parent]))
        digest = add_digest(digest, node_digest(path, tree.nodes[path]))

    do_create(1, "/a")
    do_create(2, "/a/b")
    change("/a/b", lambda: tree.apply(txn(3, OpCode.SET_DATA, r.SetDataTxn("/a/b", b"x", 1))))
    change("/a", lambda: tree.apply(txn(4, OpCode.SET_ACL, r.SetACLTxn("/a", WORLD, 1))))
    gone = node_digest("/a/b", tree.nodes["/a/b"])
    change("/a", lambda: tree.apply(txn(5, OpCode.DELETE, r.DeleteTxn("/a/b"))))
    digest = remove_digest(digest, gone)
    assert digest == tree_digest(tree)
