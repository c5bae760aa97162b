"""Reconfig between the sans-I/O Leader and Learners (ZooKeeper 3.9's rules): the txns from a
reconfig on need a quorum of the old config and of the new one, earlier ones the old one's
alone; the reconfig commits as COMMITANDACTIVATE / INFORMANDACTIVATE naming the designated
leader; a leader the new config leaves out commits nothing more; with reconfigEnabled the
static config takes the first NEWLEADER's zxid as its version, on every member."""

import pytest

from zkcompat.jute import quorum as q
from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.tree.txn import Txn
from zkcompat.zab.leader import Leader
from zkcompat.zab.learner import Learner
from zkcompat.zab.membership import Membership, QuorumServer
from zkcompat.zab.peer import make_zxid

from .test_zab_roles import History, Net, txn

P = q.PacketType


def server(sid: int, role: str = "participant") -> QuorumServer:
    return QuorumServer(sid, "127.0.0.1", 2000 + sid, 3000 + sid, role, "127.0.0.1", 4000 + sid)


def members(*sids: int, observers=(), version: int = 0) -> Membership:
    return Membership([*(server(s) for s in sids), *(server(s, "observer") for s in observers)],
                      version)


def reconfig_txn(zxid: int, new: Membership) -> Txn:
    hdr = r.TxnHeader(1, 1, zxid, 0, OpCode.RECONFIG)
    return Txn(hdr, r.SetDataTxn("/zookeeper/config", new.with_version(zxid).to_bytes(), -1))


class ActivateNet(Net):
    """Net that records each server's activations (Effects.activate) in order."""

    def __init__(self, leader, learners):
        super().__init__(leader, learners)
        self.activated = {sid: [] for sid in [leader.my_sid, *learners]}

    def obey(self, sid, fx):
        if fx.activate is not None:
            self.activated[sid].append(fx.activate)
        super().obey(sid, fx)


def cluster(committed: Membership, learners: dict[int, bool], *, enabled: bool = True):
    """Leader 3 with `committed`; learners {sid: observer?}, each holding the same config."""
    leader = Leader(3, committed, 1, 1, 0, History([]), reconfig_enabled=enabled)
    ls = {sid: Learner(sid, 3, 1, 1, 0, observer=obs, membership=committed,
                       reconfig_enabled=enabled) for sid, obs in learners.items()}
    net = ActivateNet(leader, ls)
    net.obey(3, leader.start())
    for learner in ls.values():
        net.obey(learner.my_sid, learner.start())
    net.run()
    for sid in ls:
        net.make_durable(sid)
    net.run()
    assert leader.established
    return net


def test_first_established_term_versions_the_static_config_everywhere():
    net = cluster(members(1, 2, 3), {1: False, 2: False})
    newleader = make_zxid(net.leader.epoch, 0)
    assert net.leader.membership.version == newleader
    (new, designated), = net.activated[3]
    assert new == members(1, 2, 3, version=newleader) and designated == 3
    for sid in (1, 2):
        assert net.activated[sid] == [(new, None)]  # at UPTODATE, from NEWLEADER's config


def test_without_reconfig_enabled_the_config_keeps_version_0():
    net = cluster(members(1, 2, 3), {1: False, 2: False}, enabled=False)
    assert net.leader.membership.version == 0
    assert all(not a for a in net.activated.values())


def test_txns_from_the_reconfig_on_need_a_quorum_of_both_configs():
    # Server 4 follows while outside the config (a joiner), then 1 leaves and 4 joins.
    net = cluster(members(1, 2, 3), {1: False, 2: False, 4: False})
    leader = net.leader
    before = txn(leader.next_zxid())
    zxid = leader.next_zxid()
    reconfig = reconfig_txn(zxid, members(2, 3, 4))
    after = txn(leader.next_zxid(), "/b")
    net.obey(3, leader.propose([before, reconfig, after]))
    net.run()
    assert leader.reconfig_pending
    net.make_durable(3)
    net.make_durable(1)  # 3 and 1: a quorum of {1,2,3}, one voter of {2,3,4}
    assert [t.zxid for t in net.delivered[3]] == [before.zxid]
    assert not net.activated[3][1:]
    net.make_durable(4)  # 3 and 4: now a quorum of {2,3,4} too
    assert [t.zxid for t in net.delivered[3]] == [before.zxid, zxid, after.zxid]
    new, designated = net.activated[3][-1]
    assert new.voters == {2, 3, 4} and new.version == zxid and designated == 3
    assert not leader.reconfig_pending and leader.membership == new
    assert (3, 1, P.COMMITANDACTIVATE) in net.sent_types
    for sid in (1, 2, 4):
        assert net.activated[sid][-1] == (new, 3)
    net.make_durable(2)
    assert [t.zxid for t in net.delivered[2]] == [before.zxid, zxid, after.zxid]


def test_a_reconfig_acked_by_the_old_quorum_alone_does_not_commit():
    net = cluster(members(1, 2, 3), {1: False, 2: False, 4: False, 5: False})
    leader = net.leader
    zxid = leader.next_zxid()
    net.obey(3, leader.propose([reconfig_txn(zxid, members(3, 4, 5))]))
    net.run()
    for sid in (3, 1, 2):  # every old voter, and of the new ones only the leader
        net.make_durable(sid)
    assert zxid not in [t.zxid for t in net.delivered[3]]
    assert (3, 1, P.COMMITANDACTIVATE) not in net.sent_types
    net.make_durable(5)
    assert zxid in [t.zxid for t in net.delivered[3]]


def test_an_observer_gets_informandactivate():
    net = cluster(members(1, 2, 3), {1: False, 2: False, 7: True})
    leader = net.leader
    zxid = leader.next_zxid()
    new = members(1, 2, 3, observers=(7,))
    net.obey(3, leader.propose([reconfig_txn(zxid, new)]))
    net.run()
    net.make_durable(3)
    net.make_durable(1)
    assert (3, 7, P.INFORMANDACTIVATE) in net.sent_types
    got, designated = net.activated[7][-1]
    assert got.observers == {7} and got.version == zxid and designated == 3
    assert [t.zxid for t in net.delivered[7]][-1] == zxid


def test_a_leader_the_new_config_leaves_out_designates_another_and_commits_no_more():
    net = cluster(members(1, 2, 3), {1: False, 2: False})
    leader = net.leader
    zxid = leader.next_zxid()
    net.obey(3, leader.propose([reconfig_txn(zxid, members(1, 2))]))
    net.run()
    net.make_durable(3)
    net.make_durable(2)
    assert leader.reconfig_pending  # {1,2} needs both: 2 alone is no quorum of it
    net.make_durable(1)
    new, designated = net.activated[3][-1]
    assert new.voters == {1, 2} and designated == 1  # the lowest sid that acknowledged
    assert not leader.allowed_to_commit
    assert net.activated[1][-1] == (new, 1) and net.activated[2][-1] == (new, 1)
    later = txn(leader.next_zxid())
    net.obey(3, leader.propose([later]))
    net.run()
    for sid in (3, 1, 2):
        net.make_durable(sid)
    assert later.zxid not in [t.zxid for t in net.delivered[3]]


def test_a_learner_with_a_later_config_is_refused():
    leader = Leader(3, members(1, 2, 3), 1, 1, 0, History([]), reconfig_enabled=True)
    info = q.packet(P.FOLLOWERINFO, make_zxid(1, 0), q.learner_info(1, make_zxid(5, 0)))
    fx = leader.connected(1, info)
    assert fx.disconnect == [1] and 1 not in leader.learners


def test_a_follower_outside_the_config_syncs_but_its_acks_count_in_no_quorum():
    net = cluster(members(1, 2, 3), {1: False, 4: False})
    leader = net.leader
    assert 4 in leader.learners
    a = txn(leader.next_zxid())
    net.obey(3, leader.propose([a]))
    net.run()
    net.make_durable(3)
    net.make_durable(4)
    assert net.delivered[3] == []  # 3 and 4 are no quorum of {1,2,3}
    net.make_durable(1)
    assert [t.zxid for t in net.delivered[3]] == [a.zxid]


@pytest.mark.parametrize("text", [b"server.1=h:1:2:participant;3\nversion=x",
                                  b"server.1=h:1\nversion=1", b"group.1=1:2\n"])
def test_unreadable_config_text_is_a_value_error(text):
    with pytest.raises(ValueError):
        Membership.parse(text)


def test_membership_text_round_trips():
    m = members(1, 2, 3, observers=(4,), version=0x100000002)
    assert Membership.parse(m.to_bytes()) == m
    assert m.to_bytes().endswith(b"\nversion=100000002")
    assert m.contains_quorum({1, 2}) and not m.contains_quorum({1, 4})


def test_the_designated_leader_is_the_old_one_unless_it_leaves_or_moves():
    def server(sid, port=2888, role="participant"):
        return QuorumServer(sid, f"127.0.0.{sid}", port, 3888, role)

    old = Membership([server(1), server(2), server(3)])
    assert Membership([server(1), server(2), server(3), server(4)]).designated_leader(
        old, 3, [3, 1]) == 3
    # Leaving, turned observer, or at a new quorum port: the lowest voter that acked.
    for new in (Membership([server(1), server(2), server(4)]),
                Membership([server(1), server(2), server(4), server(3, role="observer")]),
                Membership([server(1), server(2), server(3, port=2999)])):
        assert new.designated_leader(old, 3, [3, 4, 2]) == 2
        assert new.designated_leader(old, 3, [3]) == 3  # nobody else acked: stays


def test_a_reconfig_logged_in_an_earlier_term_is_completed_by_newleader():
    """ZOOKEEPER-1324: the new leader's NEWLEADER carries the config its history proposes;
    establishing needs a quorum of both configs, and then every member commits it."""
    committed = members(1, 2, 3, version=make_zxid(1, 0))
    proposed = members(2, 3, 4, version=make_zxid(1, 5))
    leader = Leader(3, committed, 1, 1, 0, History([]), last_seen=proposed,
                    reconfig_enabled=True)
    learners = {sid: Learner(sid, 3, 1, 1, 0, membership=committed, reconfig_enabled=True)
                for sid in (1, 4)}
    net = ActivateNet(leader, learners)
    net.obey(3, leader.start())
    net.obey(1, learners[1].start())
    net.run()
    assert leader.epoch > 0 and 1 in leader.newleader_acked
    assert not leader.established  # {1,3} is a quorum of the old config only
    net.obey(4, learners[4].start())
    net.run()
    assert leader.established and leader.membership == proposed
    assert net.activated[3] == [(proposed, 3)]
    assert net.activated[1] == [(proposed, None)] and net.activated[4] == [(proposed, None)]
