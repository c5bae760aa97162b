"""Quota stats kept by apply, in ZooKeeper's StatsTrack text."""

from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.tree.datatree import DataTree
from zkcompat.tree.quota import format_stats, max_prefix_with_quota, parse_stats
from zkcompat.tree.txn import Txn

WORLD = [r.ACL(31, r.Id("world", "anyone"))]


def apply(tree, zxid, op, body):
    return tree.apply(Txn(r.TxnHeader(1, 1, zxid, zxid, op), body))


def create(tree, zxid, path, data=b""):
    return apply(tree, zxid, OpCode.CREATE, r.CreateTxn(path, data, WORLD, False, -1))


def test_stats_text_round_trip():
    assert parse_stats(b"count=1,bytes=2=;countHardLimit=5") == {"count": 1, "bytes": 2, "countHardLimit": 5}
    assert format_stats({"count": 1, "bytes": 2, "countHardLimit": 5}) == b"count=1,bytes=2=;countHardLimit=5"
    assert format_stats({"count": 3, "bytes": -1}) == b"count=3,bytes=-1"


def test_max_prefix_is_component_wise():
    assert max_prefix_with_quota({"/a"}, "/a/b") == "/a"
    assert max_prefix_with_quota({"/a"}, "/ab") is None
    assert max_prefix_with_quota({"/a", "/a/b"}, "/a/b/c") == "/a/b"


def test_apply_keeps_stats_current():
    tree = DataTree()
    zx = iter(range(1, 100))
    create(tree, next(zx), "/app", b"12")
    create(tree, next(zx), "/app/x", b"345")
    for p in ("/zookeeper/quota/app",):
        create(tree, next(zx), p)
    create(tree, next(zx), "/zookeeper/quota/app/zookeeper_limits", b"count=10,bytes=-1")
    create(tree, next(zx), "/zookeeper/quota/app/zookeeper_stats", b"count=0,bytes=0")
    stats = tree.nodes["/zookeeper/quota/app/zookeeper_stats"]
    assert parse_stats(stats.data) == {"count": 2, "bytes": 5}
    create(tree, next(zx), "/app/y", b"6789")
    apply(tree, next(zx), OpCode.SET_DATA, r.SetDataTxn("/app/x", b"", 1))
    apply(tree, next(zx), OpCode.DELETE, r.DeleteTxn("/app/y"))
    assert parse_stats(stats.data) == {"count": 2, "bytes": 2}
    assert stats.version == 0  # updated in place, as ZooKeeper does
    apply(tree, next(zx), OpCode.DELETE, r.DeleteTxn("/zookeeper/quota/app/zookeeper_limits"))
    assert tree.quota_paths == set()


def test_rebuilding_indexes_counts_every_quota_afresh():
    # As DataTree.deserialize's setupQuota: a fuzzy snapshot's stats node may disagree
    # with the nodes it counts, and the log replayed on top would keep the error.
    tree = DataTree()
    zx = iter(range(1, 100))
    create(tree, next(zx), "/app", b"12")
    create(tree, next(zx), "/app/x", b"345")
    create(tree, next(zx), "/zookeeper/quota/app")
    create(tree, next(zx), "/zookeeper/quota/app/zookeeper_limits", b"count=10,bytes=-1")
    create(tree, next(zx), "/zookeeper/quota/app/zookeeper_stats", b"count=0,bytes=0")
    stats = tree.nodes["/zookeeper/quota/app/zookeeper_stats"]
    stats.data = b"count=7,bytes=70"  # what a snapshot taken mid-change can hold
    tree.rebuild_indexes()
    assert tree.quota_paths == {"/app"}
    assert parse_stats(stats.data) == {"count": 2, "bytes": 5}
