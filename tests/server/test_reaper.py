"""Reaper candidates: used-and-empty containers, expired childless TTL nodes."""

from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.server.reaper import candidates
from zkcompat.tree.datatree import DataTree
from zkcompat.tree.txn import Txn

WORLD = [r.ACL(31, r.Id("world", "anyone"))]


def apply(tree, zxid, op, body, time=1000):
    tree.apply(Txn(r.TxnHeader(1, 1, zxid, time, op), body))


def test_candidates():
    tree = DataTree()
    apply(tree, 1, OpCode.CREATE_CONTAINER, r.CreateContainerTxn("/used", b"", WORLD, -1))
    apply(tree, 2, OpCode.CREATE_CONTAINER, r.CreateContainerTxn("/fresh", b"", WORLD, -1))
    apply(tree, 3, OpCode.CREATE_CONTAINER, r.CreateContainerTxn("/busy", b"", WORLD, -1))
    apply(tree, 4, OpCode.CREATE, r.CreateTxn("/used/c", b"", WORLD, False, -1))
    apply(tree, 5, OpCode.DELETE, r.DeleteTxn("/used/c"))
    apply(tree, 6, OpCode.CREATE, r.CreateTxn("/busy/c", b"", WORLD, False, -1))
    apply(tree, 7, OpCode.CREATE_TTL, r.CreateTTLTxn("/ttl", b"", WORLD, -1, 500))
    assert candidates(tree, now_ms=1200, max_never_used_ms=0) == ["/used"]
    assert candidates(tree, now_ms=1600, max_never_used_ms=0) == ["/used", "/ttl"]
    assert candidates(tree, now_ms=10_000, max_never_used_ms=5000) == ["/fresh", "/used", "/ttl"]
