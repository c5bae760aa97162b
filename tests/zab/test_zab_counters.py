"""The counters ZooKeeper's ServerMetrics keeps of the ZAB roles, counted by the sans-I/O
roles as they step (Leader.propose's proposal_count, LearnerHandler's snap_count and
diff_count, Follower.processPacket's learner_proposal_received_count and
learner_commit_received_count, Observer's INFORMs), and the leader's proposal sizes
(Leader.proposalStats). Same in-memory network as test_zab_roles."""

from zkcompat.tree.txn import encode_proposal
from zkcompat.zab.leader import Leader
from zkcompat.zab.learner import Learner
from zkcompat.zab.peer import BufferStats, ZabCounters, make_zxid

from .test_zab_roles import History, Net, establish, txn


def counted_ensemble(leader_log=(), learner_logs=None, observers=()):
    """Leader 3 and learners, each server counting into its own ZabCounters."""
    voters = frozenset((1, 2, 3))
    last = leader_log[-1].zxid if leader_log else 0
    leader = Leader(3, voters, 1, 1, last, History(leader_log), counters=ZabCounters())
    learner_logs = learner_logs or {1: leader_log, 2: leader_log}
    learners = {sid: Learner(sid, 3, 1, 1, lg[-1].zxid if lg else 0,
                             observer=sid in observers, counters=ZabCounters())
                for sid, lg in learner_logs.items()}
    net = Net(leader, learners)
    net.obey(3, leader.start())
    for learner in learners.values():
        net.obey(learner.my_sid, learner.start())
    net.run()
    return net


def broadcast(net, n):
    leader = net.leader
    txns = [txn(leader.next_zxid(), f"/n{i}") for i in range(n)]
    net.obey(3, leader.propose(txns))
    net.run()
    for sid in (3, *net.learners):
        net.make_durable(sid)
    net.run()
    return txns


def test_a_sync_counts_as_a_snap_or_a_diff_and_a_trunc_as_a_diff():
    old = [txn(make_zxid(1, i)) for i in range(5, 9)]
    log = old + [txn(make_zxid(2, i)) for i in (1, 2)]
    diverged = old + [txn(make_zxid(1, 9))]
    net = counted_ensemble(log, {1: diverged, 2: [txn(make_zxid(1, 2))], 4: log}, observers=(4,))
    assert net.installs[1][0] == "trunc" and net.installs[2][0] == "snap"
    counters = net.leader.counters
    assert (counters.snap_count, counters.diff_count) == (1, 2)  # TRUNC, and 4's DIFF


def test_learners_count_what_they_are_sent_in_broadcast_not_in_their_sync():
    log = [txn(make_zxid(1, i)) for i in range(1, 4)]
    net = counted_ensemble(log, {1: log[:1], 2: log})  # 1 is sent two txns by DIFF
    establish(net)
    assert net.learners[1].phase == "broadcast"
    assert net.learners[1].counters.learner_proposal_received_count == 0
    assert net.learners[1].counters.learner_commit_received_count == 0
    broadcast(net, 3)
    for learner in net.learners.values():
        c = learner.counters
        assert (c.learner_proposal_received_count, c.learner_commit_received_count) == (3, 3)


def test_an_observer_counts_its_informs_as_commits():
    net = counted_ensemble(learner_logs={1: [], 2: [], 4: []}, observers=(4,))
    establish(net)
    net.make_durable(4)
    broadcast(net, 2)
    observer = net.learners[4].counters
    assert len(net.delivered[4]) == 2
    assert (observer.learner_proposal_received_count, observer.learner_commit_received_count) \
        == (0, 2)


def test_the_leader_counts_its_proposals_and_keeps_their_sizes():
    net = counted_ensemble()
    establish(net)
    leader = net.leader
    assert str(leader.proposal_sizes) == "-1/-1/-1"  # BufferStats.INIT_VALUE
    small = broadcast(net, 1)
    big = [txn(leader.next_zxid(), "/a-longer-path"), txn(leader.next_zxid(), "/b")]
    net.obey(3, leader.propose(big))
    sizes = [len(encode_proposal(t)) for t in small + big]
    assert leader.counters.proposal_count == 3
    assert (leader.proposal_sizes.last, leader.proposal_sizes.min, leader.proposal_sizes.max) \
        == (sizes[-1], min(sizes), max(sizes))


def test_a_standalone_leader_counts_nothing_and_roles_without_counters_count_privately():
    standalone = Leader.standalone(1, 1, 0)
    standalone.propose([txn(standalone.next_zxid())])
    assert standalone.counters.proposal_count == 0  # ZooKeeper's standalone has no Leader
    a, b = Leader(3, frozenset((1, 2, 3)), 1, 1, 0), Leader(3, frozenset((1, 2, 3)), 1, 1, 0)
    net = Net(a, {sid: Learner(sid, 3, 1, 1, 0) for sid in (1, 2)})
    net.obey(3, a.start())
    for learner in net.learners.values():
        net.obey(learner.my_sid, learner.start())
    net.run()
    establish(net)
    broadcast(net, 1)
    assert a.counters is not b.counters
    assert (a.counters.proposal_count, b.counters.proposal_count) == (1, 0)


def test_buffer_stats_reset_to_no_value():
    stats = BufferStats()
    stats.add([30, 10])
    stats.add([20])
    assert str(stats) == "20/10/30"
    stats.reset()
    assert (stats.last, stats.min, stats.max) == (-1, -1, -1)
