"""The quorum port's wire: QuorumPacket framing by its own lengths, and the payloads
ZooKeeper 3.8 packs into `data` (Learner, LearnerHandler, Follower)."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkcompat.jute import quorum as q
from zkcompat.jute import records as r
from zkcompat.jute.errors import JuteError

P = q.PacketType


def test_packet_types_are_leader_javas():
    assert (P.REQUEST, P.PROPOSAL, P.ACK, P.COMMIT, P.PING, P.REVALIDATE, P.SYNC) == tuple(
        range(1, 8))
    assert (P.NEWLEADER, P.FOLLOWERINFO, P.UPTODATE, P.DIFF, P.TRUNC, P.SNAP, P.OBSERVERINFO,
            P.LEADERINFO, P.ACKEPOCH) == tuple(range(10, 19))


def test_packet_bytes_are_jute_records_back_to_back():
    pkt = q.packet(P.ACK, 0x100000002)
    assert pkt.to_bytes() == struct.pack(">iqii", 3, 0x100000002, -1, -1)
    auth = q.packet(P.REQUEST, -1, b"xy", [r.Id("digest", "u:p")])
    assert auth.to_bytes() == (struct.pack(">iqi", 1, -1, 2) + b"xy" + struct.pack(">i", 1)
                               + struct.pack(">i", 6) + b"digest" + struct.pack(">i", 3) + b"u:p")


@given(st.lists(st.tuples(st.sampled_from(list(P)), st.integers(-2**63, 2**63 - 1),
                          st.one_of(st.none(), st.binary(max_size=40))), min_size=1, max_size=5),
       st.integers(1, 7))
def test_packet_end_finds_every_packet_in_any_split(packets, step):
    wire = b"".join(q.packet(t, z, d).to_bytes() for t, z, d in packets)
    got, buf, off = [], b"", 0
    for i in range(0, len(wire), step):
        buf += wire[i:i + step]
        while (end := q.packet_end(buf, off)) >= 0:
            got.append(q.decode_packet(buf, off)[0])
            off = end
    assert [(p.type, p.zxid, p.data) for p in got] == packets


def test_impossible_lengths_are_refused():
    with pytest.raises(JuteError):
        q.packet_end(struct.pack(">iqi", 2, 1, q.PACKET_DATA_MAX_BYTES + 1))
    with pytest.raises(JuteError):
        q.packet_end(struct.pack(">iqii", 2, 1, -1, q.AUTHINFO_MAX + 1))
    assert q.packet_end(struct.pack(">iqi", 2, 1, 10) + b"abc") == -1  # not all there yet


def test_payloads_round_trip_in_zookeepers_layout():
    assert q.learner_info(5) == struct.pack(">qiq", 5, 0x10000, 0)
    assert q.parse_learner_info(q.learner_info(5)) == (5, 0x10000)
    assert q.parse_learner_info(struct.pack(">q", 7)) == (7, 0)  # a bare sid, before 3.4
    touches = [(0x1000000000001, 4000), (-5, 30000)]
    assert q.decode_touches(q.encode_touches(touches)) == touches
    assert q.encode_request(9, 3, 4, b"body") == struct.pack(">qii", 9, 3, 4) + b"body"
    assert q.decode_request(q.encode_request(9, 3, 4, b"body")) == (9, 3, 4, b"body")
    assert q.decode_revalidate(q.encode_revalidate(9, 4000)) == (9, 4000)
    assert q.decode_revalidate_reply(q.encode_revalidate_reply(9, True)) == (9, True)
    with pytest.raises(JuteError):
        q.decode_touches(b"\0" * 11)
    with pytest.raises(JuteError):
        q.parse_int_payload(None, "ACKEPOCH")


def test_a_proposal_carries_the_leaders_digest_when_it_has_one():
    from zkcompat.jute.constants import OpCode
    from zkcompat.tree.digest import DIGEST_VERSION
    from zkcompat.tree.txn import Txn, encode_txn
    from zkcompat.zab.learner import decode_proposal

    txn = Txn(r.TxnHeader(1, 2, 0x100000001, 0, OpCode.SET_DATA), r.SetDataTxn("/a", b"", 1))
    plain = encode_txn(txn)
    assert decode_proposal(plain).digest is None
    assert decode_proposal(plain + q.encode_digest(DIGEST_VERSION, -42)).digest == -42
    assert decode_proposal(plain + q.encode_digest(DIGEST_VERSION + 1, -42)).digest is None
    close = Txn(r.TxnHeader(1, 2, 0x100000002, 0, OpCode.CLOSE_SESSION), None)
    got = decode_proposal(encode_txn(close) + q.encode_digest(DIGEST_VERSION, 7))
    assert got.body is None and got.digest == 7  # a record-less closeSession, then a digest
