"""The quorum latencies of ZooKeeper's ServerMetrics, timed from what a role's shell
obeys: an ensemble leader times its txns' ACKs and commits (Leader), a learner the
proposals and commits it is sent (Follower, Observer). A standalone server has no Leader
in ZooKeeper, and times none of them.

Each txn's latency runs from its time (the leader's wall clock when prep built it) to the
wall clock here, as ZooKeeper measures it across servers.
"""

from collections import deque

from zkcompat.server.stats import QuorumStats, add_observed, observe_since


class _AckTimes:
    """proposal_ack_creation_latency: the txns this server logged, from their time to the
    ACK their fsync lets it make (Ack- and SendAckRequestProcessor). The batches wait here
    as they wait in the txn log: every one is synced, or the term ends."""

    def __init__(self, wall_ms):
        self._wall_ms = wall_ms
        self._batches: deque[list] = deque()  # persisted, not yet durable, in zxid order

    def persisting(self, txns: list) -> None:
        self._batches.append(txns)

    def durable(self, zxid: int, summary) -> None:
        batches = self._batches
        if batches and batches[0][-1].zxid <= zxid:
            now = self._wall_ms()
            while batches and batches[0][-1].zxid <= zxid:
                observe_since(summary, batches.popleft(), now)


class LeaderTiming:
    def __init__(self, stats: QuorumStats | None, wall_ms):
        self.stats = stats or QuorumStats()
        self._wall_ms = wall_ms
        self._ack_times = _AckTimes(wall_ms)

    def effects(self, fx) -> None:
        if fx.persist:
            self._ack_times.persisting(fx.persist)
        if fx.deliver:  # a quorum has ACKed them (Leader.tryToCommit); applied next
            qs = self.stats
            add_observed(qs.propagation_latency,
                         observe_since(qs.quorum_ack_latency, fx.deliver, self._wall_ms()))

    def durable(self, zxid: int) -> None:
        self._ack_times.durable(zxid, self.stats.proposal_ack_creation_latency)


class LearnerTiming:
    """What the leader sent once broadcast has begun (what a sync sends is history, timed
    by follower_sync_time): a follower's proposals as they arrive and as they are ACKed,
    every learner's commits."""

    def __init__(self, role, stats: QuorumStats | None, wall_ms):
        self.role = role  # the Learner: its phase says whether broadcast has begun
        self.stats = stats or QuorumStats()
        self._wall_ms = wall_ms
        self._ack_times = _AckTimes(wall_ms)

    def effects(self, fx) -> None:
        role = self.role
        if role.phase == "broadcast" and (fx.persist or fx.deliver):
            qs = self.stats
            now = self._wall_ms()
            if fx.persist and not role.observer:  # an observer's INFORMs are commits
                observe_since(qs.proposal_latency, fx.persist, now)
                self._ack_times.persisting(fx.persist)
            if fx.deliver:
                add_observed(qs.propagation_latency,
                             observe_since(qs.commit_propagation_latency, fx.deliver, now))

    def durable(self, zxid: int) -> None:
        self._ack_times.durable(zxid, self.stats.proposal_ack_creation_latency)
