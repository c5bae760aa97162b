"""Request counters and latencies, server-wide and per connection (ZooKeeper's ServerStats
and ServerCnxn stats), as srvr, stat, cons and mntr report them. Latencies in ms."""

import time

from zkcompat.jute.constants import OpCode

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


# FileTxnLog's fsync.warningthresholdms default: a slower sync counts as "exceeded".
FSYNC_WARNING_THRESHOLD_MS = 1000


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
    """ServerStats, and the per-request summaries ZooKeeper's ServerMetrics keeps beside it
    (readlatency, updatelatency: ServerStats.updateLatency splits them the same way). srst
    resets the first, as ZooKeeper's does, not the summaries."""

    def __init__(self):
        self.packets_received = 0
        self.packets_sent = 0
        self.latency = Latency()
        self.read_latency = Summary()
        self.update_latency = Summary()
        # Kept once per event, never per request: each log sync (node.py wires the txn
        # log's on_write), each snapshot, each election; commits while leading.
        self.fsync_time = Summary()  # fsynctime, ms
        self.sync_batch_size = Summary()  # sync_processor_batch_size: txns per log sync
        self.snapshot_time = Summary()  # snapshottime, ms
        self.election_time = Summary()  # election_time, ms
        self.commit_count = 0  # commit_count: txns committed while leading an ensemble
        self.fsync_threshold_exceeded = 0

    def log_written(self, write_ms: float, txns: int) -> None:
        self.fsync_time.observe(write_ms)
        self.sync_batch_size.observe(txns)
        if write_ms > FSYNC_WARNING_THRESHOLD_MS:
            self.fsync_threshold_exceeded += 1

    def reset(self) -> None:
        self.packets_received = 0
        self.packets_sent = 0
        self.latency.reset()
        self.fsync_threshold_exceeded = 0


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


# Bucket upper bounds of a Summary, in its unit (ms for latencies): 0, 1, 3, 7, ... 2^22-1
# (~70 min); a value v lands in bucket v.bit_length(). A quantile is reported as the upper bound of the bucket it falls in, so it is
# at most 2x off (ZooKeeper's Prometheus summaries promise 1-5%; Grafana shows the trend).
SUMMARY_BOUNDS = (0,) + tuple(2 ** i - 1 for i in range(1, 23))
SUMMARY_WINDOWS = 5  # prometheus simpleclient's ageBuckets: quantiles over the last ~10 min
SUMMARY_WINDOW_S = 120.0  # maxAgeSeconds 600 / ageBuckets 5


class Summary:
    """A ZooKeeper summary (count, sum, quantiles) kept as counts per power-of-2 bucket.
    observe() is an index and two adds; quantiles come from the last SUMMARY_WINDOWS
    windows, rotated when read (a scrape), never on the hot path."""

    __slots__ = ("count", "total", "min", "max", "_windows", "_current", "_rotated")

    def __init__(self):
        self.count = 0
        self.total = 0
        self.min = 0
        self.max = 0
        self._windows = [[0] * len(SUMMARY_BOUNDS) for _ in range(SUMMARY_WINDOWS)]
        self._current = self._windows[0]
        self._rotated = time.monotonic()

    def observe(self, value: float, n: int = 1) -> None:
        """n observations of `value` (a flush of n replies counts each at their mean)."""
        v = int(value)
        i = v.bit_length() if v > 0 else 0
        self._current[i if i < len(SUMMARY_BOUNDS) else -1] += n
        if value > self.max:
            self.max = v
        if value < self.min or not self.count:
            self.min = v
        self.count += n
        self.total += value * n

    @property
    def avg(self) -> float:
        return self.total / self.count if self.count else 0.0

    def quantiles(self, qs: tuple[float, ...], now: float | None = None) -> list[float]:
        """Each q's bucket bound over the recent windows; NaN with no recent observation
        (as a Prometheus summary reports an empty window)."""
        self._rotate(time.monotonic() if now is None else now)
        counts = [sum(col) for col in zip(*self._windows, strict=True)]
        seen = sum(counts)
        out = []
        for q in qs:
            if not seen:
                out.append(float("nan"))
                continue
            rank, acc = q * seen, 0
            for bound, c in zip(SUMMARY_BOUNDS, counts, strict=True):
                acc += c
                if acc >= rank and c:
                    out.append(float(bound))
                    break
        return out

    def _rotate(self, now: float) -> None:
        while now - self._rotated >= SUMMARY_WINDOW_S:
            self._rotated += SUMMARY_WINDOW_S
            oldest = self._windows.pop()
            oldest[:] = [0] * len(SUMMARY_BOUNDS)
            self._windows.insert(0, oldest)
            self._current = oldest
            if now - self._rotated > SUMMARY_WINDOW_S * SUMMARY_WINDOWS:
                self._rotated = now  # idle for longer than every window: all are empty
