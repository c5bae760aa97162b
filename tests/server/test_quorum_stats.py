"""The ensemble's timings (stats.QuorumStats) as ZooKeeper's ServerMetrics defines them: a
member's unavailable time and a learner's sync time from the shell's clock, and each txn's
latency from its time (the leader's wall clock when prep made it) to its proposal, ACK and
commit on a learner, and to its ACK and commit on an ensemble's leader, recorded by the
roles' shells. A standalone server's shell records none of it (no Leader there)."""

import time
from types import SimpleNamespace

from zkcompat.jute import quorum as q
from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.peer import roles
from zkcompat.peer.shell import Alone
from zkcompat.peer.timing import LeaderTiming, LearnerTiming
from zkcompat.server.clock import SYSTEM_CLOCK
from zkcompat.server.pipeline import Pipeline
from zkcompat.server.stats import QuorumStats, Summary, observe_since
from zkcompat.tree.datatree import DataTree
from zkcompat.tree.txn import Txn, encode_proposal
from zkcompat.zab.leader import Leader
from zkcompat.zab.learner import Learner
from zkcompat.zab.peer import Effects, make_zxid

P = q.PacketType
WORLD = [r.ACL(31, r.Id("world", "anyone"))]
AGE_MS = 40  # how long before "now" the leader made the txns of these tests
TICK_MS = 2000


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def create(zxid: int, path: str, made_ms: int) -> Txn:
    return Txn(r.TxnHeader(1, 1, zxid, made_ms, OpCode.CREATE),
               r.CreateTxn(path, b"", WORLD, False, -1))


class Log:
    """The txn log as a pipeline sees it: appends, and syncs the test reports."""

    on_synced = on_sync_failed = None

    def __init__(self):
        self.appended: list[Txn] = []

    def append(self, txns) -> None:
        self.appended += txns


def ctx(log: Log, server_id: int) -> SimpleNamespace:
    """What a role's wiring reads of the server: its settings, txn log and clock."""
    config = SimpleNamespace(server_id=server_id, is_ensemble=True, tick_time_ms=TICK_MS,
                             extended_types_enabled=False, enforce_quota=False,
                             reconfig_enabled=False, standalone_enabled=True)
    return SimpleNamespace(config=config, datadir=SimpleNamespace(txnlog=log),
                           clock=SYSTEM_CLOCK)


class Term(Alone):
    def __init__(self):
        self.quorum_stats = QuorumStats()
        self.sent: list = []
        self.served = False

    def send(self, messages) -> None:
        self.sent += messages

    def serve(self) -> None:
        self.served = True


def test_unavailable_from_looking_to_serving_and_a_learners_sync_time():
    qs = QuorumStats()
    qs.looking(100.0)
    qs.looking(101.0)  # another LOOKING before serving: still unavailable since 100
    assert qs.serving(103.5, leading=False, observer=False, sync_started_s=102.0) == (3500, 1500)
    assert (qs.unavailable_time.count, qs.unavailable_time.total) == (1, 3500)
    assert qs.leader_unavailable_time.count == 0
    assert (qs.follower_sync_time.count, qs.follower_sync_time.total) == (1, 1500)
    qs.looking(200.0)
    assert qs.serving(200.25, leading=False, observer=True, sync_started_s=200.0) == (250, 250)
    assert qs.observer_sync_time.count == 1 and qs.follower_sync_time.count == 1
    qs.looking(300.0)
    assert qs.serving(301.0, leading=True, observer=False, sync_started_s=200.0) == (1000, None)
    assert qs.leader_unavailable_time.count == 1 and qs.unavailable_time.count == 3
    assert qs.leader_uptime_ms(303.5) == 2500
    assert qs.looking_count == 4


def test_latency_since_the_txn_time_drops_a_clock_behind_the_leaders():
    s = Summary()
    now = 10_000
    observed = observe_since(s, [create(1, "/a", now - 30), create(2, "/b", now + 5),
                                 create(3, "/c", now - 10)], now)
    assert observed == (40, 2)
    assert (s.count, s.total, s.quantiles((0.5,))) == (2, 40, [20.0])


def test_the_timing_of_each_role():
    def timing(role):
        return roles.for_role(ctx(Log(), 1), DataTree(), role, Term()).shell.timing

    assert timing(Leader.standalone(1, 1, 0)) is None
    assert type(timing(Leader(1, frozenset((1, 2, 3)), 1, 1, 0))) is LeaderTiming
    assert type(timing(Learner(2, 1, 1, 1, 0))) is LearnerTiming


def _synced_follower(shell: Term, log: Log, history: Txn) -> tuple[Learner, Pipeline]:
    """A follower through DIFF (one history txn, made long ago), NEWLEADER and UPTODATE."""
    learner = Learner(2, 1, 0, 0, 0, counters=shell.quorum_stats.counters)
    pipeline = roles.learner(ctx(log, 2), DataTree(), learner, shell)
    pipeline.shell.obey(learner.start())
    newleader = make_zxid(1, 0)
    for pkt in (q.packet(P.LEADERINFO, newleader, q.int_payload(q.PROTOCOL_VERSION)),
                q.packet(P.DIFF, history.zxid),
                q.packet(P.PROPOSAL, history.zxid, encode_proposal(history)),
                q.packet(P.COMMIT, history.zxid),
                q.packet(P.NEWLEADER, newleader)):
        pipeline.shell.obey(learner.step(pkt))
    pipeline.shell.on_persisted(history.zxid)
    pipeline.shell.obey(learner.step(q.packet(P.UPTODATE)))
    assert shell.served and learner.phase == "broadcast"
    return learner, pipeline


def test_a_follower_times_its_broadcast_proposals_acks_and_commits_not_its_sync():
    shell, log = Term(), Log()
    qs = shell.quorum_stats
    learner, pipeline = _synced_follower(shell, log, create(make_zxid(0, 1), "/old", 1000))
    assert [s.count for s in (qs.proposal_latency, qs.proposal_ack_creation_latency,
                              qs.commit_propagation_latency, qs.propagation_latency)] == [0] * 4
    txns = [create(make_zxid(1, i), f"/n{i}", wall_ms() - AGE_MS) for i in (1, 2)]
    pipeline.shell.obey(Effects(persist=[]))  # nothing to time
    for txn in txns:
        pipeline.shell.obey(learner.step(q.packet(P.PROPOSAL, txn.zxid, encode_proposal(txn))))
    assert qs.proposal_latency.count == 2 and qs.proposal_latency.total >= 2 * AGE_MS
    assert qs.proposal_ack_creation_latency.count == 0  # not durable yet: no ACK
    pipeline.shell.on_persisted(txns[0].zxid)
    assert qs.proposal_ack_creation_latency.count == 1
    pipeline.shell.on_persisted(txns[1].zxid)
    assert qs.proposal_ack_creation_latency.count == 2
    for txn in txns:
        pipeline.shell.obey(learner.step(q.packet(P.COMMIT, txn.zxid)))
    assert "/n2" in pipeline.tree.nodes
    for s in (qs.commit_propagation_latency, qs.propagation_latency):
        assert s.count == 2 and s.total >= 2 * AGE_MS
    assert (qs.counters.learner_proposal_received_count,
            qs.counters.learner_commit_received_count) == (2, 2)


def test_an_observer_times_its_informs_as_commits():
    shell, log = Term(), Log()
    qs = shell.quorum_stats
    learner = Learner(4, 1, 0, 0, 0, observer=True)
    pipeline = roles.learner(ctx(log, 4), DataTree(), learner, shell)
    learner.phase = "broadcast"  # its sync is the follower's, above
    txn = create(make_zxid(1, 1), "/i", wall_ms() - AGE_MS)
    pipeline.shell.obey(learner.step(q.packet(P.INFORM, txn.zxid, encode_proposal(txn))))
    pipeline.shell.on_persisted(txn.zxid)
    assert qs.commit_propagation_latency.count == 1
    assert qs.proposal_latency.count == qs.proposal_ack_creation_latency.count == 0


def test_an_ensemble_leader_times_its_own_ack_and_the_quorums():
    shell, log = Term(), Log()
    qs = shell.quorum_stats
    leader = Leader(1, frozenset((1, 2, 3)), 1, 1, 0)
    pipeline = roles.leader(ctx(log, 1), DataTree(), leader, shell)
    txn = create(make_zxid(1, 1), "/l", wall_ms() - AGE_MS)
    pipeline.shell.obey(Effects(persist=[txn]))
    pipeline.shell.on_persisted(txn.zxid)  # the leader's own ACK; no quorum with it alone
    assert qs.proposal_ack_creation_latency.count == 1 and qs.quorum_ack_latency.count == 0
    pipeline.shell.obey(Effects(deliver=[txn]))  # a follower's ACK made the quorum
    assert qs.quorum_ack_latency.count == qs.propagation_latency.count == 1
    assert qs.quorum_ack_latency.total >= AGE_MS and "/l" in pipeline.tree.nodes
