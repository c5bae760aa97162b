"""The leader of an ensemble of one: propose -> persist -> commit in zxid order."""

from zkcompat.jute import records as r
from zkcompat.tree.txn import Txn
from zkcompat.zab.leader import Leader
from zkcompat.zab.peer import make_zxid, zxid_epoch


def t(zxid):
    return Txn(r.TxnHeader(1, 1, zxid, 0, 1), None)


def test_zxid_layout():
    assert make_zxid(3, 7) == (3 << 32) | 7
    assert zxid_epoch(make_zxid(3, 7)) == 3


def test_persist_then_deliver_in_order():
    p = Leader.standalone(1, 1, 0)
    a, b = t(p.next_zxid()), t(p.next_zxid())
    assert a.zxid == make_zxid(1, 1)
    assert p.propose([a]).persist == [a]
    assert p.propose([b]).persist == [b]
    assert p.on_persisted(a.zxid).deliver == [a]
    assert p.on_persisted(b.zxid).deliver == [b]
    assert p.on_persisted(b.zxid).deliver == []
    assert p.last_committed_zxid == b.zxid


def test_group_commit_delivers_batch():
    p = Leader.standalone(1, 0, 0)
    txns = [t(p.next_zxid()) for _ in range(5)]
    for x in txns:
        p.propose([x])
    assert p.on_persisted(txns[-1].zxid).deliver == txns


def test_one_proposal_of_many_txns_is_persisted_and_delivered_whole():
    p = Leader.standalone(1, 2, 0)
    first = [t(p.next_zxid()) for _ in range(3)]
    second = [t(p.next_zxid()) for _ in range(2)]
    assert p.propose(first).persist == first
    assert p.propose(second).persist == second
    # a sync that covers part of the second batch delivers exactly what it covers
    assert p.on_persisted(second[0].zxid).deliver == first + second[:1]
    assert p.on_persisted(second[1].zxid).deliver == second[1:]


def test_a_proposal_out_of_zxid_order_is_our_bug():
    p = Leader.standalone(1, 1, 0)
    a, b = t(p.next_zxid()), t(p.next_zxid())
    p.propose([b])
    try:
        p.propose([a])
    except AssertionError:
        return
    raise AssertionError(f"proposing zxid {a.zxid:x} after {b.zxid:x} went unnoticed")
