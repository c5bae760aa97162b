"""Request counters and latencies, server-wide and per connection (ZooKeeper's ServerStats
and ServerCnxn stats), as srvr, stat, cons and mntr report them. Latencies in ms."""

from __future__ import annotations

import collections
import time

from zkcompat.jute.constants import OpCode
from zkcompat.zab.peer import ZabCounters

# FinalRequestProcessor's lastOp names.
OP_NAMES = {
    OpCode.PING: "PING", OpCode.CREATE_SESSION: "SESS", OpCode.MULTI: "MULT",
    OpCode.MULTI_READ: "MLTR", OpCode.CREATE: "CREA", OpCode.CREATE2: "CREA",
    OpCode.CREATE_TTL: "CREA", OpCode.CREATE_CONTAINER: "CREA", OpCode.DELETE: "DELE",
    OpCode.DELETE_CONTAINER: "DELE", OpCode.SET_DATA: "SETD", OpCode.RECONFIG: "RECO",
    OpCode.SET_ACL: "SETA", OpCode.CLOSE_SESSION: "CLOS", OpCode.SYNC: "SYNC",
    OpCode.CHECK: "CHEC", OpCode.EXISTS: "EXIS", OpCode.GET_DATA: "GETD",
    OpCode.SET_WATCHES: "SETW", OpCode.SET_WATCHES2: "STW2", OpCode.ADD_WATCH: "ADDW",
    OpCode.GET_ACL: "GETA", OpCode.GET_CHILDREN: "GETC", OpCode.GET_CHILDREN2: "GETC",
    OpCode.GET_ALL_CHILDREN_NUMBER: "GETACN", OpCode.CHECK_WATCHES: "CHKW",
    OpCode.REMOVE_WATCHES: "REMW", OpCode.WHO_AM_I: "HOMI", OpCode.GET_EPHEMERALS: "GETE",
}


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class Latency:
    """Min, max and total of request latencies. Connection.reply updates it inline, once
    per request, for the connection and for the server."""

    __slots__ = ("count", "total", "min", "max")

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.count = 0
        self.total = 0
        self.min = 0
        self.max = 0

    @property
    def avg(self) -> float:
        return self.total / self.count if self.count else 0.0


class ServerStats:
    """ServerStats, and the summaries ZooKeeper's ServerMetrics keeps beside it. srst
    resets the first, as ZooKeeper's does, not the summaries.

    readlatency and updatelatency are split as ServerStats.updateLatency splits them: the
    connection records each flush's writes in update_latency and appends its reads'
    (sum, n) to read_recent; the reads' count and sum are all replies' (latency, kept
    since start across resets) less the writes'. The txn log (`log`, node.py sets it)
    keeps each sync's write time and size itself (fsynctime, sync_processor_batch_size).
    """

    def __init__(self):
        self.packets_received = 0
        self.packets_sent = 0
        self.latency = Latency()
        self.update_latency = Summary()
        self.read_recent = collections.deque(maxlen=SUMMARY_RECENT_MAX)
        self.snapshot_time = Summary()  # snapshottime, ms
        self.election_time = Summary()  # election_time, ms
        self.quorum = QuorumStats()  # an ensemble member's ZAB counters and timings
        self.commit_count = 0  # commit_count: txns committed while leading an ensemble
        self.log = None  # the TxnLog
        self._before_reset = (0, 0)  # latency's count and total before the resets
        self._slow_writes_before_reset = 0

    @property
    def read_latency(self) -> Summary:
        count, total = self._before_reset
        s = Summary(self.read_recent)
        s.count = count + self.latency.count - self.update_latency.count
        s.total = total + self.latency.total - self.update_latency.total
        return s

    def _log_stat(self, key: str, default=0):
        return self.log.stats.get(key, default) if self.log is not None else default

    @property
    def fsync_time(self) -> Summary:
        s = Summary([] if self.log is None else [(ms, 1) for ms, _ in self.log.recent_writes])
        s.count, s.total = self._log_stat("batches"), self._log_stat("write_ms", 0.0)
        return s

    @property
    def sync_batch_size(self) -> Summary:
        s = Summary([] if self.log is None else [(n, 1) for _, n in self.log.recent_writes])
        s.count, s.total = self._log_stat("batches"), self._log_stat("txns")
        return s

    @property
    def fsync_threshold_exceeded(self) -> int:
        return self._log_stat("slow_writes") - self._slow_writes_before_reset

    def reset(self) -> None:
        count, total = self._before_reset
        self._before_reset = (count + self.latency.count, total + self.latency.total)
        self._slow_writes_before_reset = self._log_stat("slow_writes")
        self.packets_received = 0
        self.packets_sent = 0
        self.latency.reset()


class ConnectionStats:
    __slots__ = ("received", "sent", "last_op", "established_ms", "last_cxid", "last_zxid",
                 "last_response_ms", "last_latency", "latency")

    def __init__(self):
        self.received = 0
        self.sent = 0
        self.last_op = "NA"
        self.established_ms = int(time.time() * 1000)
        self.last_cxid = -1
        self.last_zxid = -1
        self.last_response_ms = 0
        self.last_latency = 0
        self.latency = Latency()

    def reset(self) -> None:
        self.received = self.sent = 0
        self.last_op = "NA"
        self.last_cxid = self.last_zxid = -1
        self.last_response_ms = self.last_latency = 0
        self.latency.reset()


SUMMARY_RECENT_MAX = 4096  # observations a Summary's quantiles, min and max come from


class Summary:
    """A ZooKeeper summary: count and sum of every observation; quantiles, min and max of
    the last SUMMARY_RECENT_MAX, worked out when read (a scrape), never when observed.
    `recent` holds (sum, n) pairs: n observations whose mean is sum / n, as one flush of n
    replies is recorded. A hot path adds to it inline, without a call:
        s.count += n; s.total += total; s.recent.append((total, n))
    """

    __slots__ = ("count", "total", "recent")

    def __init__(self, recent=None):
        self.count = 0
        self.total = 0.0
        self.recent = collections.deque(maxlen=SUMMARY_RECENT_MAX) if recent is None else recent

    def observe(self, value: float, n: int = 1) -> None:
        self.count += n
        self.total += value * n
        self.recent.append((value * n, n))

    @property
    def avg(self) -> float:
        return self.total / self.count if self.count else 0.0

    def _means(self) -> list[tuple[float, int]]:
        return sorted((t / n, n) for t, n in self.recent if n)

    @property
    def min(self) -> int:
        means = self._means()
        return int(means[0][0]) if means else 0

    @property
    def max(self) -> int:
        means = self._means()
        return int(means[-1][0]) if means else 0

    def quantiles(self, qs: tuple[float, ...]) -> list[float]:
        """Each q of the recent observations (NaN when there is none, as a Prometheus
        summary reports an empty window)."""
        means = self._means()
        seen = sum(n for _, n in means)
        out = []
        for q in qs:
            if not seen:
                out.append(float("nan"))
                continue
            rank, acc = q * seen, 0
            for mean, n in means:
                acc += n
                if acc >= rank:
                    out.append(float(mean))
                    break
        return out


class QuorumStats:
    """The ensemble's part of ServerMetrics, kept for the server's life across its terms.
    The ZAB roles count into `counters` as they step (they have no clock); the asyncio
    shell around them times what needs a clock: quorum.py the member's own phases (LOOKING,
    a learner's sync, the time without a serving role), and the ensemble roles' pipelines
    (server/roles.py) each txn's latency from its time (the leader's wall clock when its
    prep made it) to its proposal, ACK and commit here, one (sum, n) per batch as the
    request latencies are. A standalone server records none of it, as ZooKeeper's has no
    Leader or Learner to. Times in ms."""

    def __init__(self):
        self.counters = ZabCounters()
        self.looking_count = 0  # QuorumPeer.run: each time the member starts LOOKING
        # Per txn (ADVANCED summaries): Follower.processPacket's PROPOSAL (broadcast);
        # the ACK made once the txn is durable, the leader's own too (Ack- and
        # SendAckRequestProcessor); the leader's commit, once a quorum has ACKed; a learner's
        # commit (COMMIT, or an observer's INFORM); and its apply on any ensemble member
        # (FinalRequestProcessor), which here follows the commit at once.
        self.proposal_latency = Summary()
        self.proposal_ack_creation_latency = Summary()
        self.quorum_ack_latency = Summary()
        self.commit_propagation_latency = Summary()
        self.propagation_latency = Summary()
        # Per phase (BASIC): a learner's sync, LEADERINFO to UPTODATE (Follower.followLeader,
        # Observer.observeLeader); the time from leaving a serving role (or start) to serving
        # again (QuorumPeer.setZabState(BROADCAST)), and that of the ones that end leading.
        self.follower_sync_time = Summary()
        self.observer_sync_time = Summary()
        self.unavailable_time = Summary()
        self.leader_unavailable_time = Summary()
        self._unavailable_since: float | None = None  # the loop's clock, s
        self.leading_since: float | None = None  # Leader.leaderStartTime (leader_uptime)

    def looking(self, now_s: float) -> None:
        self.looking_count += 1
        if self._unavailable_since is None:
            self._unavailable_since = now_s

    def serving(self, now_s: float, leading: bool, observer: bool,
                sync_started_s: float | None) -> tuple[int, int | None]:
        """A role starts serving: the time it was unavailable and, for a learner, the time
        its sync took (both ms, for the log too)."""
        unavailable_ms = 0
        if self._unavailable_since is not None:
            unavailable_ms = round((now_s - self._unavailable_since) * 1000)
            self._unavailable_since = None
            self.unavailable_time.observe(unavailable_ms)
            if leading:
                self.leader_unavailable_time.observe(unavailable_ms)
        if leading:
            self.leading_since = now_s
            return unavailable_ms, None
        if sync_started_s is None:
            return unavailable_ms, None
        sync_ms = round((now_s - sync_started_s) * 1000)
        (self.observer_sync_time if observer else self.follower_sync_time).observe(sync_ms)
        return unavailable_ms, sync_ms

    def leader_uptime_ms(self, now_s: float) -> int:
        return 0 if self.leading_since is None else round((now_s - self.leading_since) * 1000)


def observe_since(summary: Summary, txns, now_ms: int) -> tuple[int, int]:
    """Each txn's latency from its time to now_ms into `summary`, as one (sum, n) entry;
    a negative one (the leader's clock ahead of ours) is dropped, as Request.logLatency
    drops it. Returns what it added, for a second summary of the same moment."""
    total = n = 0
    for txn in txns:
        latency = now_ms - txn.hdr.time
        if latency >= 0:
            total += latency
            n += 1
    if n:
        add_observed(summary, (total, n))
    return total, n


def add_observed(summary: Summary, observed: tuple[int, int]) -> None:
    total, n = observed
    if n:
        summary.count += n
        summary.total += total
        summary.recent.append(observed)
