"""Prep's digest prediction (the TxnDigest a leader proposes): after each txn is applied,
the tree's digest is the one prep predicted for it, however many txns were outstanding
when it was prepared. Random request sequences of every write kind go through the real
Prep and DataTree.apply, applied in random batches behind the preparing, as a leader's
pipeline does; a wrong prediction would show on a follower as zk_digest_mismatches_count.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zkcompat.jute import records as r
from zkcompat.jute.constants import CreateMode, OpCode
from zkcompat.server.prep import Prep
from zkcompat.server.request import DeleteContainerRequest, Request
from zkcompat.tree.datatree import DataTree
from zkcompat.tree.digest import tree_digest
from zkcompat.tree.txn import Txn

WORLD = [r.ACL(31, r.Id("world", "anyone"))]
READ_ONLY = [r.ACL(1, r.Id("world", "anyone"))]
SESSIONS = (0x0100000000000001, 0x0100000000000002)
PARENTS = ("/", "/a", "/a/b", "/c", "/zookeeper", "/zookeeper/quota")
NAMES = ("a", "b", "c", "n-", "\u00e9")
MODES = (CreateMode.PERSISTENT, CreateMode.EPHEMERAL, CreateMode.PERSISTENT_SEQUENTIAL,
         CreateMode.EPHEMERAL_SEQUENTIAL, CreateMode.CONTAINER)


class Leader:
    """Prep ahead of apply, as the leader's pipeline runs them."""

    def __init__(self, digest_enabled: bool = True):
        self.tree = DataTree(digest_enabled=digest_enabled)
        self.zxid = 0
        self.time = 1_000
        for sid in SESSIONS:
            self.tree.apply(Txn(r.TxnHeader(sid, 0, self._next(), self.time,
                                            OpCode.CREATE_SESSION), r.CreateSessionTxn(30000)))
        self.prep = Prep(self.tree, self._next, self._now, extended_types=True)
        self.outstanding: list[Txn] = []
        self.checked = 0

    def _next(self) -> int:
        self.zxid += 1
        return self.zxid

    def _now(self) -> int:
        self.time += 7
        return self.time

    def submit(self, session: int, op: int, record) -> Txn:
        txn = self.prep.prepare(Request(session, 1, op, record, None, [("ip", "127.0.0.1")]))
        self.outstanding.append(txn)
        return txn

    def apply(self, count: int) -> None:
        for txn in self.outstanding[:count]:
            self.tree.apply(txn)
            self.prep.applied(txn.zxid)
            if self.tree.digest_enabled:
                assert txn.digest == self.tree.digest == tree_digest(self.tree), txn
                self.checked += 1
            else:
                assert txn.digest is None
        del self.outstanding[:count]


def _paths(leader: Leader) -> list[str]:
    return sorted(p for p in leader.tree.nodes if p != "/")


def _request(draw, leader: Leader):
    existing = _paths(leader) or ["/a"]
    path = draw(st.sampled_from(existing))
    def new():
        return (f"{draw(st.sampled_from(PARENTS)).rstrip('/')}/{draw(st.sampled_from(NAMES))}")
    kind = draw(st.sampled_from(("create", "create", "ttl", "delete", "set", "acl", "check",
                                 "multi", "close", "open", "reap")))
    if kind == "create":
        return OpCode.CREATE2, r.CreateRequest(new(), draw(st.sampled_from([b"", b"x", None])),
                                               WORLD, int(draw(st.sampled_from(MODES))))
    if kind == "ttl":
        return OpCode.CREATE_TTL, r.CreateTTLRequest(
            new(), b"t", WORLD, int(CreateMode.PERSISTENT_WITH_TTL), 5000)
    if kind == "delete":
        return OpCode.DELETE, r.DeleteRequest(path, draw(st.integers(-1, 2)))
    if kind == "set":
        return OpCode.SET_DATA, r.SetDataRequest(path, draw(st.binary(max_size=8)),
                                                 draw(st.integers(-1, 2)))
    if kind == "acl":
        return OpCode.SET_ACL, r.SetACLRequest(path, draw(st.sampled_from([WORLD, READ_ONLY])),
                                               draw(st.integers(-1, 1)))
    if kind == "check":
        return OpCode.CHECK, r.CheckVersionRequest(path, draw(st.integers(-1, 1)))
    if kind == "multi":
        target = new()
        ops = [(OpCode.CREATE, r.CreateRequest(target, b"m", WORLD, 0)),
               (OpCode.SET_DATA, r.SetDataRequest(target, b"n", -1)),
               (OpCode.CREATE, r.CreateRequest(target + "/k", b"", WORLD, 0)),
               (OpCode.SET_DATA, r.SetDataRequest(path, b"p", -1)),
               (OpCode.DELETE, r.DeleteRequest(target + "/k", -1))]
        ops = ops[:draw(st.integers(1, len(ops)))]
        if draw(st.booleans()):  # a failing op: the whole multi fails and predicts nothing
            ops.insert(draw(st.integers(0, len(ops))),
                       (OpCode.CHECK, r.CheckVersionRequest(path, 99)))
        return OpCode.MULTI, ops
    if kind == "close":
        return OpCode.CLOSE_SESSION, None
    if kind == "open":
        return OpCode.CREATE_SESSION, r.CreateSessionTxn(30000)
    return OpCode.DELETE_CONTAINER, DeleteContainerRequest(path)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_each_txn_leaves_the_digest_prep_predicted(data):
    leader = Leader()
    for _ in range(data.draw(st.integers(1, 60))):
        session = data.draw(st.sampled_from(SESSIONS))
        op, record = _request(data.draw, leader)
        leader.submit(session, op, record)
        if data.draw(st.integers(0, 3)) == 0:  # batches of outstanding txns, applied late
            leader.apply(data.draw(st.integers(0, len(leader.outstanding))))
    leader.apply(len(leader.outstanding))
    assert leader.checked > 0


def test_a_burst_of_outstanding_ephemerals_closed_with_their_session():
    """closeSession deletes several ephemerals under one parent in one txn: the parent's
    record is duplicated once per child within that txn."""
    leader = Leader()
    s = SESSIONS[0]
    leader.submit(s, OpCode.CREATE, r.CreateRequest("/e", b"", WORLD, 0))
    for _ in range(4):
        leader.submit(s, OpCode.CREATE, r.CreateRequest(
            "/e/x-", b"v", WORLD, int(CreateMode.EPHEMERAL_SEQUENTIAL)))
    leader.apply(2)  # half the ephemerals are in the tree, half are still predictions
    leader.submit(s, OpCode.CLOSE_SESSION, None)
    leader.apply(len(leader.outstanding))
    assert leader.tree.nodes["/e"].num_children == 0
    assert leader.checked == 6


def test_with_the_digest_off_no_txn_carries_one():
    leader = Leader(digest_enabled=False)
    leader.submit(SESSIONS[0], OpCode.CREATE, r.CreateRequest("/a", b"", WORLD, 0))
    leader.submit(SESSIONS[0], OpCode.SET_DATA, r.SetDataRequest("/a", b"x", -1))
    leader.apply(2)
