"""DataTree.apply: Stat bookkeeping and events, one txn type at a time."""

from zkcompat.jute import records as r
from zkcompat.jute.constants import Code, EventType, OpCode
from zkcompat.tree.acl import OPEN_ACL_UNSAFE
from zkcompat.tree.datatree import CONTAINER_EPHEMERAL_OWNER, DataTree
from zkcompat.tree.txn import Txn, decode_txn, encode_txn

WORLD = [r.ACL(31, r.Id("world", "anyone"))]
SESSION = 0x0100000012340000


def txn(zxid, type_, body, session=SESSION, time=1000):
    return Txn(r.TxnHeader(session, 1, zxid, time + zxid, type_), body)


def create(tree, zxid, path, data=b"d", ephemeral=False, cversion=-1):
    return tree.apply(txn(zxid, OpCode.CREATE2, r.CreateTxn(path, data, WORLD, ephemeral, cversion)))


def test_fresh_tree_has_zookeeper_nodes():
    tree = DataTree()
    assert set(tree.nodes) == {"/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"}
    config = tree.nodes["/zookeeper/config"].stat()
    assert config.aversion == -1  # set with setACL(..., -1) at start-up
    assert tree.nodes["/zookeeper"].acl == OPEN_ACL_UNSAFE
    assert tree.nodes["/"].stat().numChildren == 1


def test_create_sets_stat_and_parent():
    tree = DataTree()
    rc = create(tree, 5, "/a", b"hello")
    assert rc.err == 0 and rc.path == "/a"
    st = rc.stat
    assert (st.czxid, st.mzxid, st.pzxid, st.version, st.dataLength) == (5, 5, 5, 0, 5)
    assert st.ctime == st.mtime == 1005
    root = tree.nodes["/"]
    assert root.pzxid == 5 and root.cversion == 1
    assert [e[:2] for e in rc.events] == [(EventType.NODE_CREATED, "/a"),
                                         (EventType.NODE_CHILDREN_CHANGED, "/")]
    assert tree.last_processed_zxid == 5


def test_reported_cversion_counts_deletes():
    tree = DataTree()
    create(tree, 1, "/p")
    create(tree, 2, "/p/a")
    create(tree, 3, "/p/b")
    tree.apply(txn(4, OpCode.DELETE, r.DeleteTxn("/p/a")))
    p = tree.nodes["/p"]
    assert p.cversion == 2  # stored: creates
    assert p.stat().cversion == 3  # reported: changes (creates * 2 - children)
    assert p.pzxid == 4


def test_set_data_and_acl():
    tree = DataTree()
    create(tree, 1, "/a")
    rc = tree.apply(txn(2, OpCode.SET_DATA, r.SetDataTxn("/a", b"xyz", 1)))
    assert (rc.stat.version, rc.stat.mzxid, rc.stat.dataLength) == (1, 2, 3)
    assert [e[:2] for e in rc.events] == [(EventType.NODE_DATA_CHANGED, "/a")]
    rc = tree.apply(txn(3, OpCode.SET_ACL, r.SetACLTxn("/a", [r.ACL(1, r.Id("world", "anyone"))], 1)))
    assert rc.stat.aversion == 1 and rc.events == []
    assert tree.nodes["/a"].acl == ((1, "world", "anyone"),)


def test_ephemerals_die_with_session_in_one_txn():
    tree = DataTree()
    tree.apply(txn(1, OpCode.CREATE_SESSION, r.CreateSessionTxn(4000)))
    create(tree, 2, "/e1", ephemeral=True)
    create(tree, 3, "/e2", ephemeral=True)
    assert tree.ephemerals_of(SESSION) == {"/e1", "/e2"}
    assert tree.nodes["/e1"].stat().ephemeralOwner == SESSION
    rc = tree.apply(txn(4, OpCode.CLOSE_SESSION, r.CloseSessionTxn(["/e1", "/e2"])))
    assert "/e1" not in tree.nodes and "/e2" not in tree.nodes
    assert SESSION not in tree.sessions and SESSION not in tree.ephemerals
    assert {e[:2] for e in rc.events} >= {(EventType.NODE_DELETED, "/e1"),
                                         (EventType.NODE_DELETED, "/e2")}


def test_failed_multi_applies_nothing_and_reports_per_op():
    tree = DataTree()
    body = [
        (OpCode.CREATE, r.CreateTxn("/m1", b"", WORLD, False, -1)),
        (OpCode.ERROR, r.ErrorTxn(Code.NONODE)),
        (OpCode.ERROR, r.ErrorTxn(Code.RUNTIMEINCONSISTENCY)),
    ]
    rc = tree.apply(txn(1, OpCode.MULTI, body))
    assert "/m1" not in tree.nodes
    assert [(s.type, s.err) for s in rc.multi] == [
        (OpCode.ERROR, 0), (OpCode.ERROR, Code.NONODE), (OpCode.ERROR, Code.RUNTIMEINCONSISTENCY)]
    assert rc.err == Code.NONODE and rc.events == []


def test_multi_applies_in_order_with_events():
    tree = DataTree()
    body = [
        (OpCode.CREATE, r.CreateTxn("/m", b"", WORLD, False, -1)),
        (OpCode.SET_DATA, r.SetDataTxn("/m", b"x", 1)),
        (OpCode.DELETE, r.DeleteTxn("/m")),
    ]
    rc = tree.apply(txn(1, OpCode.MULTI, body))
    assert rc.err == 0 and "/m" not in tree.nodes
    assert [e[0] for e in rc.events] == [EventType.NODE_CREATED, EventType.NODE_CHILDREN_CHANGED,
                                        EventType.NODE_DATA_CHANGED, EventType.NODE_DELETED,
                                        EventType.NODE_CHILDREN_CHANGED]


def test_container_reports_zero_owner():
    tree = DataTree()
    rc = tree.apply(txn(1, OpCode.CREATE_CONTAINER, r.CreateContainerTxn("/c", b"", WORLD, -1)))
    assert tree.nodes["/c"].ephemeralOwner == CONTAINER_EPHEMERAL_OWNER
    assert rc.stat.ephemeralOwner == 0


def test_replay_does_not_move_cversion_back():
    tree = DataTree()
    create(tree, 1, "/p")
    create(tree, 2, "/p/a", cversion=5)
    create(tree, 3, "/p/b", cversion=3)  # an older prediction, as after a fuzzy snapshot
    assert tree.nodes["/p"].cversion == 5 and tree.nodes["/p"].pzxid == 2


def test_txn_log_encoding_round_trips():
    for t in [
        txn(7, OpCode.CREATE, r.CreateTxn("/a", b"x", WORLD, True, 3)),
        txn(8, OpCode.MULTI, [(OpCode.CREATE, r.CreateTxn("/b", None, WORLD, False, 1)),
                              (OpCode.ERROR, r.ErrorTxn(-101))]),
        txn(9, OpCode.CLOSE_SESSION, r.CloseSessionTxn(["/a"])),
    ]:
        assert decode_txn(encode_txn(t)) == t


def test_close_session_deletes_ephemerals_its_txn_did_not_list_too():
    """DataTree.killSession: the txn's paths, then any other ephemeral of the session."""
    tree = DataTree()
    tree.apply(txn(1, OpCode.CREATE_SESSION, r.CreateSessionTxn(4000)))
    create(tree, 2, "/e1", ephemeral=True)
    create(tree, 3, "/e2", ephemeral=True)
    rc = tree.apply(txn(4, OpCode.CLOSE_SESSION, r.CloseSessionTxn(["/e1"])))
    assert "/e1" not in tree.nodes and "/e2" not in tree.nodes
    assert SESSION not in tree.ephemerals
    assert (EventType.NODE_DELETED, "/e2") in {e[:2] for e in rc.events}
    assert tree.nodes["/"].pzxid == 4
