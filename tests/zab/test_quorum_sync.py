"""quorumSync (not ZooKeeper's): the leader answers a sync only after a quorum of voters
answered a PING round that started after the sync arrived (etcd's ReadIndex), and, as
without it, after everything proposed before the sync has committed. Off, a sync is
ZooKeeper's (Leader.processSync): answered from the leader's own view, whoever follows.

The same in-memory Net as test_zab_roles: packets cross as ZooKeeper's QuorumPacket bytes.
"""

from tests.zab.test_zab_roles import History, Net, establish, txn
from zkcompat.jute import quorum as q
from zkcompat.zab.leader import Leader
from zkcompat.zab.learner import Learner
from zkcompat.zab.quorum_sync import PINGS_UNANSWERED_MAX

P = q.PacketType
LEADER = 3


def ensemble(quorum_sync: bool, voters=(1, 2, 3)) -> Net:
    leader = Leader(LEADER, frozenset(voters), 1, 1, 0, History([]), quorum_sync=quorum_sync)
    learners = {sid: Learner(sid, LEADER, 1, 1, 0) for sid in voters if sid != LEADER}
    net = Net(leader, learners)
    net.obey(LEADER, leader.start())
    for learner in learners.values():
        net.obey(learner.my_sid, learner.start())
    net.run()
    establish(net)
    assert leader.established
    net.sent_types.clear()
    return net


def sent(net: Net, kind, to=None) -> list[int]:
    return [t for f, t, k in net.sent_types if k == kind and f == LEADER and to in (None, t)]


def run_with_replies_lost(net: Net) -> None:
    """The learners read what the leader sent; what they answer is lost (a partition the
    leader has not noticed yet)."""
    to_learners, net.queue = [m for m in net.queue if m[0] != LEADER], []
    for to, _, data in to_learners:
        net.obey(to, net.learners[to].step(q.decode_packet(data)[0]))
    net.queue = []


def test_off_a_sync_is_answered_at_once_even_when_no_learner_still_follows():
    """ZooKeeper's sync (ZOOKEEPER-1675): nothing is asked of the quorum."""
    net = ensemble(quorum_sync=False)
    fx = net.leader.sync_request(1)
    assert [(to, q.decode_packet(p.to_bytes())[0].type) for to, p in fx.send] == [(1, P.SYNC)]


def test_on_a_sync_waits_for_a_quorum_to_answer_a_ping_round():
    net = ensemble(quorum_sync=True)
    net.obey(LEADER, net.leader.sync_request(1))
    assert sent(net, P.SYNC) == []
    assert sorted(sent(net, P.PING)) == [1, 2]  # the round starts at once
    net.run()  # both learners answer their PING
    assert sent(net, P.SYNC) == [1]


def test_on_answers_to_a_round_that_started_before_the_sync_do_not_count():
    net = ensemble(quorum_sync=True)
    leader = net.leader
    net.obey(LEADER, leader.tick())  # round 1: the tick's PINGs, in flight
    net.obey(LEADER, leader.sync_request(1))
    assert len(sent(net, P.PING)) == 2  # no round of its own while one is in flight
    # The learners answer round 1's PINGs; then the leader reads those answers.
    pings, net.queue = net.queue, []
    for to, _, data in pings:
        net.obey(to, net.learners[to].step(q.decode_packet(data)[0]))
    answers, net.queue = net.queue, []
    for _, frm, data in answers:
        net.obey(LEADER, leader.step(frm, q.decode_packet(data)[0]))
    assert sent(net, P.SYNC) == []  # round 1 is confirmed, but it started before the sync
    assert len(sent(net, P.PING)) == 4  # so round 2 started
    net.run()
    assert sent(net, P.SYNC) == [1]


def test_on_a_partitioned_leader_never_answers_and_steps_down_at_sync_limit():
    net = ensemble(quorum_sync=True)
    leader = net.leader
    net.obey(LEADER, leader.sync_request(1))
    for _ in range(leader.sync_limit + 2):
        run_with_replies_lost(net)
        fx = leader.tick()
        assert not any(q.decode_packet(p.to_bytes())[0].type == P.SYNC
                       for _, p in fx.send if not isinstance(p, bytes))
        if fx.abandon:
            break
        net.obey(LEADER, fx)
    assert fx.abandon, "a leader no quorum answers gives up its term"
    assert sent(net, P.SYNC) == []


def test_on_one_answer_of_four_learners_is_no_quorum_of_five():
    net = ensemble(quorum_sync=True, voters=(1, 2, 3, 4, 5))
    leader = net.leader
    net.obey(LEADER, leader.sync_request(1))
    # Only learner 1 is still with us (it and the leader are a minority of five).
    net.queue = [m for m in net.queue if m[0] == 1]
    net.run()
    assert sent(net, P.SYNC) == []
    net.obey(LEADER, leader.tick())  # the next round reaches learner 2 too: now a quorum
    net.queue = [m for m in net.queue if m[0] in (1, 2)]
    net.run()
    assert sent(net, P.SYNC) == [1]


def test_on_a_sync_also_waits_for_what_was_proposed_before_it():
    net = ensemble(quorum_sync=True)
    leader = net.leader
    a = txn(leader.next_zxid())
    net.obey(LEADER, leader.propose([a]))
    net.obey(LEADER, leader.sync_request(1))
    net.run()  # the round is confirmed; `a` is not durable anywhere yet
    assert sent(net, P.SYNC) == []
    net.make_durable(2)
    net.make_durable(LEADER)
    assert sent(net, P.SYNC) == [1]
    order = [k for f, t, k in net.sent_types if t == 1]
    assert order.index(P.SYNC) > order.index(P.COMMIT)  # applied there before the SYNC


def test_on_syncs_arriving_together_share_one_round_and_keep_their_order():
    net = ensemble(quorum_sync=True)
    leader = net.leader
    for sid in (1, 2, 1):
        net.obey(LEADER, leader.sync_request(sid))
    assert len(sent(net, P.PING)) == 2  # one round for the three
    net.run()
    assert sent(net, P.SYNC) == [1, 2, 1]


def test_on_the_syncs_of_a_learner_that_left_die_with_it():
    net = ensemble(quorum_sync=True)
    leader = net.leader
    net.obey(LEADER, leader.sync_request(1))
    net.obey(LEADER, leader.sync_request(2))
    leader.gone(1)
    net.queue = [m for m in net.queue if m[0] != 1 and m[1] != 1]
    net.obey(LEADER, leader.tick())  # learner 2 and the leader: a quorum of three
    net.queue = [m for m in net.queue if m[0] != 1]
    net.run()
    assert sent(net, P.SYNC) == [2]


def test_on_the_leaders_own_sync_is_answered_as_synced_not_as_a_packet():
    """The hook for a sync asked of the leader itself: Effects.synced, in the order asked
    among the learners' syncs."""
    net = ensemble(quorum_sync=True)
    leader = net.leader
    net.obey(LEADER, leader.sync_request(1))
    fx = leader.sync_request(LEADER)
    assert not fx.synced
    answered = []
    while net.queue:
        to, frm, data = net.queue.pop(0)
        if to == LEADER:
            fx = leader.step(frm, q.decode_packet(data)[0])
            answered += [("synced", fx.synced)] if fx.synced else []
            net.obey(LEADER, fx)
        else:
            net.obey(to, net.learners[to].step(q.decode_packet(data)[0]))
    assert answered == [("synced", 1)]
    assert sent(net, P.SYNC) == [1]  # and no SYNC packet to ourselves


def test_pending_syncs_count_the_ones_waiting_for_a_round():
    net = ensemble(quorum_sync=True)
    leader = net.leader
    net.obey(LEADER, leader.sync_request(1))
    net.obey(LEADER, leader.sync_request(2))
    assert leader.pending_sync_count == 2
    net.run()
    assert leader.pending_sync_count == 0


def test_on_a_learner_that_never_answers_a_ping_is_dropped_at_the_bound():
    net = ensemble(quorum_sync=True)
    leader = net.leader
    fx = None
    for _ in range(PINGS_UNANSWERED_MAX + 1):
        leader.learners[1].heard = leader.learners[2].heard = leader.now + 1  # it talks
        leader.learners[2].pings.clear()  # learner 2 answers every PING
        fx = leader.tick()
        if fx.disconnect:
            break
    assert fx.disconnect == [1] and 1 not in leader.learners


def _to_learner(net: Net, sid: int, kinds=(P.COMMIT, P.SYNC)) -> list:
    return [k for f, t, k in net.sent_types if f == LEADER and t == sid and k in kinds]


def _drop_pings(net: Net) -> None:
    net.queue = [m for m in net.queue if q.decode_packet(m[2])[0].type != P.PING]


def test_on_a_learner_gets_its_sync_before_the_commits_of_what_was_proposed_after_it():
    """A ZooKeeper follower matches its SYNC and the COMMITs of the writes it forwarded
    against one queue, in the order it forwarded them (CommitProcessor): a COMMIT of a txn
    proposed after its sync, arriving before the SYNC, leaves that queue wedged and the
    follower never answers a write again (seen in a mixed ensemble under the nemesis). So
    that learner's COMMITs of what was proposed after its sync wait for its SYNC; the other
    learner's do not."""
    net = ensemble(quorum_sync=True)
    leader = net.leader
    a = txn(leader.next_zxid())
    net.obey(LEADER, leader.propose([a]))
    net.obey(LEADER, leader.sync_request(1))  # waits for `a` and for a round
    b = txn(leader.next_zxid())
    net.obey(LEADER, leader.propose([b]))
    _drop_pings(net)  # the round is slow: `a` and `b` commit before it is confirmed
    net.run()
    net.make_durable(2)
    net.make_durable(LEADER)
    assert [t.zxid for t in net.delivered[LEADER]] == [a.zxid, b.zxid]
    assert _to_learner(net, 1) == [P.COMMIT]  # `a`'s; `b`'s is held behind the SYNC
    assert _to_learner(net, 2) == [P.COMMIT, P.COMMIT]
    net.obey(LEADER, leader.tick())  # the next round is answered
    net.run()
    assert _to_learner(net, 1) == [P.COMMIT, P.SYNC, P.COMMIT]
    assert [t.zxid for t in net.delivered[1]] == [a.zxid, b.zxid]
    c = txn(leader.next_zxid())  # with no sync waiting, commits go at once again
    net.obey(LEADER, leader.propose([c]))
    net.run()
    net.make_durable(2)
    net.make_durable(LEADER)
    assert _to_learner(net, 1) == [P.COMMIT, P.SYNC, P.COMMIT, P.COMMIT]
    assert not leader.quorum_syncs.held


def test_on_commits_held_for_a_learner_that_left_are_dropped_with_it():
    net = ensemble(quorum_sync=True)
    leader = net.leader
    net.obey(LEADER, leader.sync_request(1))
    b = txn(leader.next_zxid())
    net.obey(LEADER, leader.propose([b]))
    _drop_pings(net)
    net.run()
    net.make_durable(2)
    net.make_durable(LEADER)
    assert _to_learner(net, 1) == [] and leader.quorum_syncs.held
    net.obey(LEADER, leader.gone(1))
    assert not leader.quorum_syncs.held


def test_on_two_syncs_of_one_learner_answered_together_keep_the_commit_between_them():
    """Learner 1 forwards a sync, a write and a sync; both rounds are confirmed before
    either txn commits, so both SYNCs go in one batch: it must hear COMMIT, SYNC, COMMIT,
    SYNC. Two SYNCs together would match its second sync against the write still at the
    head of its queue."""
    net = ensemble(quorum_sync=True)
    leader = net.leader
    a = txn(leader.next_zxid())
    net.obey(LEADER, leader.propose([a]))
    net.obey(LEADER, leader.sync_request(1))
    b = txn(leader.next_zxid())
    net.obey(LEADER, leader.propose([b]))
    net.obey(LEADER, leader.sync_request(1))
    net.run()  # both rounds confirmed; neither txn durable yet
    assert _to_learner(net, 1) == []
    net.make_durable(2)
    net.make_durable(LEADER)  # `a` and `b` commit together
    assert _to_learner(net, 1) == [P.COMMIT, P.SYNC, P.COMMIT, P.SYNC]
    assert not leader.quorum_syncs.held


def test_on_a_reconfigs_commitandactivate_waits_behind_a_sync_as_a_commit_does():
    """A reconfig proposed after learner 1's sync commits before that sync's round is
    confirmed: its COMMITANDACTIVATE is held behind the SYNC like any COMMIT, or learner 1
    would match the reconfig against its sync."""
    from tests.zab.test_reconfig_roles import members, reconfig_txn

    config = members(1, 2, 3)
    leader = Leader(LEADER, config, 1, 1, 0, History([]), quorum_sync=True,
                    reconfig_enabled=True)
    learners = {sid: Learner(sid, LEADER, 1, 1, 0, membership=config, reconfig_enabled=True)
                for sid in (1, 2)}
    net = Net(leader, learners)
    net.obey(LEADER, leader.start())
    for learner in learners.values():
        net.obey(learner.my_sid, learner.start())
    net.run()
    establish(net)
    net.sent_types.clear()
    net.obey(LEADER, leader.sync_request(1))
    zxid = leader.next_zxid()
    net.obey(LEADER, leader.propose([reconfig_txn(zxid, members(1, 2, 3, observers=(4,)))]))
    _drop_pings(net)
    net.run()
    net.make_durable(2)
    net.make_durable(LEADER)
    assert zxid in [t.zxid for t in net.delivered[LEADER]]
    kinds = (P.COMMIT, P.SYNC, P.COMMITANDACTIVATE)
    assert _to_learner(net, 1, kinds) == []
    assert _to_learner(net, 2, kinds) == [P.COMMITANDACTIVATE]
    net.obey(LEADER, leader.tick())
    net.run()
    assert _to_learner(net, 1, kinds) == [P.SYNC, P.COMMITANDACTIVATE]
    assert not leader.quorum_syncs.held
