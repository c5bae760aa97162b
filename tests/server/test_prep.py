"""Prep validates against the future state: outstanding txns count before they apply."""

import pytest

from zkcompat.jute import records as r
from zkcompat.jute.constants import Code, OpCode
from zkcompat.server.prep import Prep
from zkcompat.server.request import Request
from zkcompat.tree.datatree import DataTree
from zkcompat.tree.txn import Txn

WORLD = [r.ACL(31, r.Id("world", "anyone"))]
S = 0x0100000000000001


class Harness:
    def __init__(self):
        self.tree = DataTree()
        self.zxid = 0
        self.tree.apply(Txn(r.TxnHeader(S, 0, self._next(), 0, OpCode.CREATE_SESSION),
                            r.CreateSessionTxn(4000)))
        self.prep = Prep(self.tree, self._next, lambda: 1234)
        self.outstanding: list[Txn] = []

    def _next(self):
        self.zxid += 1
        return self.zxid

    def submit(self, op, record, auth=()):
        txn = self.prep.prepare(Request(S, 1, op, record, None, [("ip", "127.0.0.1"), *auth]))
        self.outstanding.append(txn)
        return txn

    def apply_all(self):
        for txn in self.outstanding:
            self.tree.apply(txn)
            self.prep.applied(txn.zxid)
        self.outstanding.clear()


@pytest.fixture
def h():
    return Harness()


def create(path, flags=0, data=b""):
    return r.CreateRequest(path, data, WORLD, flags)


def test_outstanding_create_is_seen_by_next_prep(h):
    t1 = h.submit(OpCode.CREATE, create("/a"))
    t2 = h.submit(OpCode.CREATE, create("/a"))  # not applied yet, but predicted
    t3 = h.submit(OpCode.CREATE, create("/a/b"))
    assert t1.hdr.type == OpCode.CREATE
    assert (t2.hdr.type, t2.body.err) == (OpCode.ERROR, Code.NODEEXISTS)
    assert t3.hdr.type == OpCode.CREATE
    assert t1.zxid < t2.zxid < t3.zxid  # a failed write still takes a zxid
    h.apply_all()
    assert "/a/b" in h.tree.nodes


def test_sequential_suffix_uses_predicted_cversion(h):
    h.submit(OpCode.CREATE, create("/q"))
    names = [h.submit(OpCode.CREATE, create("/q/n-", flags=2)).body.path for _ in range(3)]
    assert names == ["/q/n-0000000000", "/q/n-0000000001", "/q/n-0000000002"]


def test_delete_checks_predicted_version_and_children(h):
    h.submit(OpCode.CREATE, create("/d"))
    h.submit(OpCode.SET_DATA, r.SetDataRequest("/d", b"x", 0))
    bad = h.submit(OpCode.DELETE, r.DeleteRequest("/d", 0))
    assert bad.body.err == Code.BADVERSION
    h.submit(OpCode.CREATE, create("/d/c"))
    assert h.submit(OpCode.DELETE, r.DeleteRequest("/d", 1)).body.err == Code.NOTEMPTY
    h.submit(OpCode.DELETE, r.DeleteRequest("/d/c", -1))
    ok = h.submit(OpCode.DELETE, r.DeleteRequest("/d", 1))
    assert ok.hdr.type == OpCode.DELETE
    h.apply_all()
    assert "/d" not in h.tree.nodes


def test_failed_multi_leaves_no_prediction(h):
    h.submit(OpCode.CREATE, create("/m"))
    multi = [(OpCode.CREATE, create("/m/s-", flags=2)), (OpCode.DELETE, r.DeleteRequest("/nope", -1))]
    t = h.submit(OpCode.MULTI, multi)
    assert [typ for typ, _ in t.body] == [OpCode.CREATE, OpCode.ERROR]
    # The sequential name the failed multi would have used is free again.
    nxt = h.submit(OpCode.CREATE, create("/m/s-", flags=2))
    assert nxt.body.path == "/m/s-0000000000"
    h.apply_all()
    assert h.tree.nodes["/m"].num_children == 1


def test_error_precedence_create(h):
    h.submit(OpCode.CREATE, r.CreateRequest("/sec", b"", [r.ACL(1, r.Id("world", "anyone"))], 0))
    h.apply_all()
    # NoNode for the parent comes before NoAuth; NoAuth before NodeExists.
    assert h.submit(OpCode.CREATE, create("/missing/x")).body.err == Code.NONODE
    assert h.submit(OpCode.CREATE, create("/sec/x")).body.err == Code.NOAUTH
    assert h.submit(OpCode.CREATE, create("/sec")).body.err == Code.NODEEXISTS
    # Path validation comes after the parent lookup: "/nope/" is NoNode, "/sec/" NoAuth.
    assert h.submit(OpCode.CREATE, create("/nope/")).body.err == Code.NONODE
    h.submit(OpCode.CREATE, create("/open"))
    assert h.submit(OpCode.CREATE, create("/open/")).body.err == Code.BADARGUMENTS
    assert h.submit(OpCode.CREATE, create("/x", flags=99)).body.err == Code.BADARGUMENTS
    assert h.submit(OpCode.CREATE, create("/x", flags=5)).body.err == Code.UNIMPLEMENTED  # TTL off


def test_ephemeral_parent_refuses_children(h):
    h.submit(OpCode.CREATE, create("/e", flags=1))
    assert h.submit(OpCode.CREATE, create("/e/c")).body.err == Code.NOCHILDRENFOREPHEMERALS


def test_close_session_lists_predicted_ephemerals(h):
    h.submit(OpCode.CREATE, create("/e1", flags=1))
    h.apply_all()
    h.submit(OpCode.CREATE, create("/e2", flags=1))  # outstanding
    t = h.submit(OpCode.CLOSE_SESSION, None)
    assert t.body.paths2Delete == ["/e1", "/e2"]
    # After the close is prepared the session may not write.
    assert h.submit(OpCode.CREATE, create("/late")).body.err == Code.SESSIONEXPIRED
    h.apply_all()
    assert not h.tree.ephemerals and S not in h.tree.sessions


def test_version_wraps_past_minus_one(h):
    from zkcompat.server.prep import _next_version
    assert _next_version(0x7FFFFFFF, -1, "/p") == -(1 << 31)
    assert _next_version(-2, -1, "/p") == 0  # never -1 (ZOOKEEPER-4743)


def test_the_op_picks_the_txn_record(h):
    """createContainer makes a CreateContainerTxn whatever its flags; createTTL needs a TTL
    mode; a container mode on a plain create makes a plain CreateTxn (pRequest2TxnCreate)."""
    t = h.submit(OpCode.CREATE_CONTAINER, create("/c", flags=0))
    assert type(t.body) is r.CreateContainerTxn
    t = h.submit(OpCode.CREATE, create("/p", flags=4))
    assert type(t.body) is r.CreateTxn and not t.body.ephemeral
    h.prep.extended_types = True
    t = h.submit(OpCode.CREATE_TTL, r.CreateTTLRequest("/t", b"", WORLD, 0, 100))
    assert t.body.err == Code.BADARGUMENTS
    t = h.submit(OpCode.CREATE_TTL, r.CreateTTLRequest("/t", b"", WORLD, 5, 100))
    assert type(t.body) is r.CreateTTLTxn and t.body.ttl == 100
    h.apply_all()
    assert h.tree.nodes["/c"].ephemeralOwner == -0x8000000000000000
    assert "/t" in h.tree.ttls


def test_a_retired_record_gives_way_to_the_tree(h):
    # /a's record is applied while a later txn is still outstanding, so it stays in the
    # map, retired. The tree then changes under it (as apply's own side effects, quota
    # stats, change nodes without prep): prep must read the tree, not the old record.
    t1 = h.submit(OpCode.CREATE, create("/a"))
    h.submit(OpCode.CREATE, create("/b"))
    h.tree.apply(t1)
    h.prep.applied(t1.zxid)
    h.outstanding.remove(t1)
    h.tree.apply(Txn(r.TxnHeader(S, 9, h._next(), 0, OpCode.DELETE), r.DeleteTxn("/a")))
    set_data = h.submit(OpCode.SET_DATA, r.SetDataRequest("/a", b"x", -1))  # _to_change
    delete = h.submit(OpCode.DELETE, r.DeleteRequest("/a", -1))  # _record
    for txn in (set_data, delete):
        assert (txn.hdr.type, txn.body.err) == (OpCode.ERROR, Code.NONODE)
    again = h.submit(OpCode.CREATE, create("/a"))  # _exists
    assert again.hdr.type == OpCode.CREATE, again.body
    h.apply_all()
    assert "/a" in h.tree.nodes and "/b" in h.tree.nodes


def test_retired_records_are_pruned_under_endless_load(h):
    # The order never empties (one txn always outstanding), yet the map stays bounded.
    from zkcompat.server import prep as prep_module

    for i in range(prep_module._RETIRED_SLACK + 500):
        txn = h.submit(OpCode.CREATE, create(f"/n{i}"))
        if i:
            done = h.outstanding.pop(0)
            h.tree.apply(done)
            h.prep.applied(done.zxid)
    assert len(h.prep._order) == 2  # the newest create: its node and its parent
    assert len(h.prep._changes) <= len(h.prep._order) + prep_module._RETIRED_SLACK
    assert h.prep._exists(f"/n{prep_module._RETIRED_SLACK + 499}")
    assert txn.hdr.type == OpCode.CREATE
