"""Zab 1.0's discovery, sync and broadcast between the sans-I/O Leader and Learners.

Messages cross an in-memory network as bytes in ZooKeeper's QuorumPacket encoding; the
"disk" is a list whose durability the test decides (persist effects are durable only when
the test says so), so each phase's ordering rules can be checked one at a time.
"""

from zkcompat.jute import quorum as q
from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.tree.txn import Txn
from zkcompat.zab.committed_log import SNAP
from zkcompat.zab.leader import Leader
from zkcompat.zab.learner import Learner
from zkcompat.zab.peer import make_zxid

P = q.PacketType


def txn(zxid: int, path: str = "/a") -> Txn:
    hdr = r.TxnHeader(1, 1, zxid, 0, OpCode.SET_DATA)
    return Txn(hdr, r.SetDataTxn(path, b"x", 1))


class History:
    def __init__(self, txns):
        self.txns = list(txns)

    def first_zxid(self):
        return self.txns[0].zxid if self.txns else None

    def contains(self, zxid):
        return any(t.zxid == zxid for t in self.txns)

    def floor(self, zxid):
        return max((t.zxid for t in self.txns if t.zxid <= zxid), default=0)

    def txns_between(self, after, upto):
        return [t for t in self.txns if after < t.zxid <= upto]


class Net:
    """Delivers packets as bytes; records every effect per server."""

    def __init__(self, leader, learners):
        self.leader = leader
        self.learners = learners  # sid -> Learner
        self.queue = []  # (to, from, bytes)
        self.epochs = {}  # sid -> list of (accepted, current) writes, in order
        self.installs = {}
        self.delivered = {sid: [] for sid in [leader.my_sid, *learners]}
        self.persisted = {sid: [] for sid in [leader.my_sid, *learners]}
        self.served = set()
        self.sent_types = []  # (from, to, type)

    def obey(self, sid, fx):
        if fx.accepted_epoch is not None or fx.current_epoch is not None:
            self.epochs.setdefault(sid, []).append((fx.accepted_epoch, fx.current_epoch))
        if fx.install:
            self.installs[sid] = fx.install
        self.persisted[sid] += fx.persist
        for to, pkt in fx.send:
            if pkt is SNAP:
                self.sent_types.append((sid, to, P.SNAP))
                self.queue.append((to, sid, ("snap", self.leader.last_committed_zxid)))
                continue
            wire = pkt if isinstance(pkt, bytes) else pkt.to_bytes()
            off = 0
            while off < len(wire):  # a send may hold several packets' bytes
                end = q.packet_end(wire, off)
                one = wire[off:end]
                self.sent_types.append((sid, to, q.decode_packet(one)[0].type))
                self.queue.append((to, sid, one))
                off = end
        self.delivered[sid] += fx.deliver
        if fx.serve:
            self.served.add(sid)
        assert not fx.abandon, f"server {sid} abandoned: {fx.abandon}"

    def run(self, limit=1000):
        while self.queue and limit:
            limit -= 1
            to, frm, data = self.queue.pop(0)
            if to == self.leader.my_sid:
                pkt, _ = q.decode_packet(data)
                if self.leader.learners.get(frm) is None:
                    self.obey(to, self.leader.connected(frm, pkt))
                else:
                    self.obey(to, self.leader.step(frm, pkt))
            else:
                learner = self.learners[to]
                if isinstance(data, tuple):
                    pkt = q.packet(P.SNAP, data[1])
                    self.obey(to, learner.step(pkt, snap_tree=object()))
                else:
                    self.obey(to, learner.step(q.decode_packet(data)[0]))

    def make_durable(self, sid):
        role = self.leader if sid == self.leader.my_sid else self.learners[sid]
        if self.persisted[sid]:
            self.obey(sid, role.on_persisted(self.persisted[sid][-1].zxid))
            self.run()


def ensemble(leader_log=(), learner_logs=None, accepted=1, current=1):
    voters = frozenset((1, 2, 3))
    last = leader_log[-1].zxid if leader_log else 0
    leader = Leader(3, voters, accepted, current, last, History(leader_log))
    learner_logs = learner_logs or {1: leader_log, 2: leader_log}
    learners = {sid: Learner(sid, 3, accepted, current, lg[-1].zxid if lg else 0)
                for sid, lg in learner_logs.items()}
    net = Net(leader, learners)
    net.obey(3, leader.start())
    for learner in learners.values():
        net.obey(learner.my_sid, learner.start())
    net.run()
    return net


def establish(net):
    for sid in net.learners:
        net.make_durable(sid)
    net.run()


def test_discovery_new_epoch_is_max_accepted_plus_one_and_durable_before_leaderinfo_is_acked():
    net = ensemble(accepted=4, current=4)
    assert net.leader.epoch == 5
    assert net.epochs[3][0] == (5, None)  # the leader's acceptedEpoch first
    for sid in (1, 2):
        assert net.epochs[sid][0] == (5, None)  # a learner accepts before its ACKEPOCH


def test_leader_serves_only_after_a_quorum_acks_newleader():
    log = [txn(make_zxid(1, i)) for i in range(1, 3)]
    net = ensemble(leader_log=log, learner_logs={1: log[:1], 2: log[:1]})
    assert not net.served  # both learners still have a DIFF txn to make durable
    net.make_durable(1)
    assert 3 in net.served  # 1 and 3 are a quorum of 3
    net.make_durable(2)
    assert 3 in net.served and {1, 2} <= net.served
    assert net.leader.established


def test_learner_acks_newleader_only_after_its_sync_txns_are_durable():
    log = [txn(make_zxid(1, i)) for i in range(1, 4)]
    net = ensemble(leader_log=log, learner_logs={1: log[:1], 2: log})
    # learner 1 got DIFF of two txns: no ACK of NEWLEADER and no currentEpoch yet
    assert (1, 3, P.ACK) not in net.sent_types
    assert all(cur is None for _, cur in net.epochs[1])
    net.make_durable(1)
    assert (1, 3, P.ACK) in net.sent_types
    assert net.epochs[1][-1] == (None, net.leader.epoch)
    assert [t.zxid for t in net.delivered[1]] == [t.zxid for t in log[1:]]


def test_sync_modes_trunc_and_snap():
    old = [txn(make_zxid(1, i)) for i in range(5, 9)]
    log = old + [txn(make_zxid(2, i)) for i in (1, 2)]
    diverged = old + [txn(make_zxid(1, 9))]  # an epoch-1 txn the new leader never had
    voters = frozenset((1, 2, 3))
    leader = Leader(3, voters, 2, 2, log[-1].zxid, History(log))
    learners = {1: Learner(1, 3, 1, 1, diverged[-1].zxid),
                2: Learner(2, 3, 1, 1, make_zxid(1, 2))}  # older than the leader's log
    net = Net(leader, learners)
    net.obey(3, leader.start())
    for learner in learners.values():
        net.obey(learner.my_sid, learner.start())
    net.run()
    assert net.installs[1] == ("trunc", old[-1].zxid)
    assert [t.zxid for t in net.persisted[1]] == [t.zxid for t in log[4:]]
    assert net.installs[2][0] == "snap"
    assert leader.epoch == 3


def test_a_learner_whose_zxid_only_opens_an_epoch_we_lack_gets_a_snap_not_a_trunc():
    """A ZooKeeper that led an epoch in which nothing was written says its last zxid is that
    epoch's first (counter 0: "setting last processed zxid"), a zxid in no log. ZooKeeper's
    leader sends it a SNAP (LearnerHandler.syncFollower: no TRUNC for isPeerNewEpochZxid);
    a TRUNC to a zxid before it makes a ZooKeeper with no txn log exit ("No log files found
    to truncate", code 13), seen in a mixed ensemble whose first leader was cut off."""
    voters = frozenset((1, 2, 3))
    leader = Leader(3, voters, 1, 1, 0, History([]))
    learners = {1: Learner(1, 3, 1, 1, 0), 2: Learner(2, 3, 1, 1, make_zxid(1, 0))}
    net = Net(leader, learners)
    net.obey(3, leader.start())
    net.obey(1, learners[1].start())
    net.run()
    net.make_durable(1)
    assert leader.established
    net.obey(2, learners[2].start())  # the old leader of epoch 1 comes back
    net.run()
    assert net.installs[2][0] == "snap"


def test_a_learner_ahead_of_the_new_leader_is_refused():
    log = [txn(make_zxid(1, i)) for i in range(1, 3)]
    ahead = log + [txn(make_zxid(1, 3))]
    net = ensemble(leader_log=log, learner_logs={1: ahead, 2: log})
    assert 1 not in net.leader.learners


def test_broadcast_commits_after_a_quorum_of_durable_acks_in_zxid_order():
    net = ensemble()
    establish(net)
    leader = net.leader
    a, b = txn(leader.next_zxid()), txn(leader.next_zxid(), "/b")
    net.obey(3, leader.propose([a, b]))
    net.run()
    assert net.delivered[3] == []
    net.make_durable(1)  # one follower: with the leader not yet durable, no quorum
    assert net.delivered[3] == []
    net.make_durable(3)
    assert [t.zxid for t in net.delivered[3]] == [a.zxid, b.zxid]
    net.run()
    assert [t.zxid for t in net.delivered[1]] == [a.zxid, b.zxid]
    assert [t.zxid for t in net.delivered[2]] == [a.zxid, b.zxid]  # commit needs no own fsync


def test_leader_gives_up_without_a_quorum_of_pings():
    net = ensemble()
    establish(net)
    leader = net.leader
    for sid in (1, 2):
        leader.gone(sid)
    fx = leader.tick()
    assert fx.abandon and "not sufficient followers" in fx.abandon


def test_learner_gives_up_when_the_leader_is_silent_for_sync_limit():
    net = ensemble()
    establish(net)
    learner = net.learners[1]
    for _ in range(learner.sync_limit):
        assert not learner.tick().abandon
    assert learner.tick().abandon


def test_sync_request_waits_for_outstanding_proposals():
    net = ensemble()
    establish(net)
    leader = net.leader
    a = txn(leader.next_zxid())
    net.obey(3, leader.propose([a]))
    assert leader.sync_request(1).send == []
    net.make_durable(3)
    net.make_durable(2)
    assert (3, 1, P.SYNC) in net.sent_types
    order = [t for f, to, t in net.sent_types if to == 1]
    assert order.index(P.SYNC) > len(order) - 1 - order[::-1].index(P.COMMIT)


def test_a_learner_still_syncing_gets_init_limit_an_uptodate_one_sync_limit():
    net = ensemble()
    establish(net)
    leader = net.leader
    leader.learners[1].phase = "newleader"  # as if it were still reading a SNAP
    for _ in range(leader.sync_limit + 1):
        fx = leader.tick()
        leader.learners[2].heard = leader.now
    assert 1 in leader.learners and not fx.disconnect
    for _ in range(leader.init_limit - leader.sync_limit):
        fx = leader.tick()
        leader.learners[2].heard = leader.now
    assert fx.disconnect == [1]


def test_a_sync_waiting_for_a_learner_that_reconnects_is_not_answered_on_the_new_link():
    """Found by the simulator (5 servers, seed 20): a learner's connection dropped with a
    sync still waiting; the SYNC then went to its next connection, whose pipeline had
    asked for none, and popped an empty queue."""
    net = ensemble()
    establish(net)
    leader = net.leader
    a = txn(leader.next_zxid())
    net.obey(3, leader.propose([a]))
    assert leader.sync_request(1).send == []  # waits for a's commit
    leader.gone(1)
    assert not any(1 in sids for sids in leader._pending_syncs.values())
    fx = leader.on_persisted(a.zxid)
    net.obey(2, net.learners[2].on_persisted(a.zxid))
    net.run()
    assert not any(to == 1 and t == P.SYNC for _, to, t in net.sent_types)
    assert fx is not None
