"""Prometheus metrics as ZooKeeper's PrometheusMetricsProvider names them, read when scraped:
a collector turns what the server already keeps (admin.Admin's facts, ServerStats'
summaries) into metric families, so a request pays only what ServerStats records (a
deque append per flush). /metrics is an aiohttp handler on the server's own loop.

Names are ZooKeeper 3.9's (ServerMetrics.java; the gauges of ZooKeeperServer
.registerMetrics and LeaderZooKeeperServer.registerMetrics), so the community's Grafana
dashboard and alert rules find them. Counters keep their bare names ("commit_count", as
prometheus simpleclient 0.9 in ZooKeeper writes them), not the "_total" that
prometheus_client would append.
"""

import math
from operator import attrgetter

from aiohttp import web
from prometheus_client.core import GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.registry import CollectorRegistry
from prometheus_client.utils import floatToGoString

from zkcompat.server.stats import Summary

METRICS_PATH = "/metrics"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# PrometheusMetricsProvider.PrometheusSummary: BASIC summaries report the median only.
QUANTILES_BASIC = (0.5,)
QUANTILES_ADVANCED = (0.5, 0.9, 0.99)
# DefaultMetricsProvider's AvgMinMaxPercentileCounter, as mntr and the monitor command show
# an ADVANCED summary.
MONITOR_PERCENTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("p999", 0.999))
# The zkcompat gauge beside ZooKeeper's: what ZooKeeper's JvmPauseMonitor tells of a JVM.
LOOP_STALL_GAUGE = "zkcompat_event_loop_max_stall_ms"
# approximate_data_size walks every znode (admin.py): a scrape recomputes it at most this
# often, so a 15 s scrape of a million znodes costs one ~50 ms walk a minute.
DATA_SIZE_MAX_AGE_S = 60.0

# (name, ServerStats attribute, ADVANCED?) - ServerMetrics' getSummary(name, level). Every
# server has every one, as ZooKeeper's ServerMetrics has; the ensemble's stay empty on a
# standalone server, and each member fills those of the roles it plays (stats.QuorumStats).
SUMMARIES = (
    ("readlatency", "read_latency", True),
    ("updatelatency", "update_latency", True),
    ("fsynctime", "fsync_time", False),
    ("sync_processor_batch_size", "sync_batch_size", False),
    ("snapshottime", "snapshot_time", False),
    ("election_time", "election_time", False),
    ("proposal_latency", "quorum.proposal_latency", True),
    ("proposal_ack_creation_latency", "quorum.proposal_ack_creation_latency", True),
    ("quorum_ack_latency", "quorum.quorum_ack_latency", True),
    ("commit_propagation_latency", "quorum.commit_propagation_latency", True),
    ("propagation_latency", "quorum.propagation_latency", True),
    ("follower_sync_time", "quorum.follower_sync_time", False),
    ("observer_sync_time", "quorum.observer_sync_time", False),
    ("unavailable_time", "quorum.unavailable_time", False),
    ("leader_unavailable_time", "quorum.leader_unavailable_time", False),
)
# (name, ServerStats attribute) - ServerMetrics' getCounter(name), but digest_mismatches_count,
# which the term's pipeline keeps.
COUNTERS = (
    ("commit_count", "commit_count"),
    ("proposal_count", "quorum.counters.proposal_count"),
    ("learner_proposal_received_count", "quorum.counters.learner_proposal_received_count"),
    ("learner_commit_received_count", "quorum.counters.learner_commit_received_count"),
    ("snap_count", "quorum.counters.snap_count"),
    ("diff_count", "quorum.counters.diff_count"),
    ("looking_count", "quorum.looking_count"),
)
# The client-port limits' (server/limits.py, server/throttle.py), by the same ServerMetrics
# names: (name, ClientLimits attribute) and (name, RequestThrottler attribute), 0 when the
# request throttler is off.
LIMIT_COUNTERS = (
    ("connection_request_count", "connection_requests"),
    ("connection_rejected", "connections_rejected"),
    ("large_requests_rejected", "large_requests_rejected"),
    ("tls_handshake_exceeded", "tls_handshakes_exceeded"),
)
THROTTLER_COUNTERS = (
    ("request_throttle_wait_count", "waits"),
    ("stale_requests", "stale_passed"),
    ("stale_requests_dropped", "dropped"),
    ("throttled_ops", "throttled_ops"),
)
_SUMMARY_OF = [(name, attrgetter(attr), advanced) for name, attr, advanced in SUMMARIES]
_COUNTER_OF = [(name, attrgetter(attr)) for name, attr in COUNTERS]
_LIMIT_COUNTER_OF = [(name, attrgetter(attr)) for name, attr in LIMIT_COUNTERS]
_THROTTLER_COUNTER_OF = [(name, attrgetter(attr)) for name, attr in THROTTLER_COUNTERS]
_NO_SUMMARY = Summary()  # the request throttler's queue time while there is none
# The monitor values that are not ZooKeeper gauges: dumpMonitorValues' own (version,
# server_state, peer_state, observer_master_id), and a counter.
_NOT_GAUGES = frozenset({"version", "server_state", "peer_state", "observer_master_id",
                         "digest_mismatches_count"})


def summaries(server) -> list[tuple[str, Summary, bool]]:
    st = server.stats
    rows = [(name, get(st), advanced) for name, get, advanced in _SUMMARY_OF]
    limits = server.limits
    throttler = limits.request_throttler
    # connection_token_deficit is BASIC, request_throttle_queue_time_ms ADVANCED
    rows += [("connection_token_deficit", limits.connection_token_deficit, False),
             ("request_throttle_queue_time_ms",
              _NO_SUMMARY if throttler is None else throttler.queue_time, True)]
    return rows


def counters(server) -> list[tuple[str, int]]:
    st = server.stats
    rows = [(name, get(st)) for name, get in _COUNTER_OF]
    limits = server.limits
    rows += [(name, get(limits)) for name, get in _LIMIT_COUNTER_OF]
    throttler = limits.request_throttler
    rows += [(name, 0 if throttler is None else get(throttler))
             for name, get in _THROTTLER_COUNTER_OF]
    return rows


def monitor_summaries(server) -> list[tuple[str, object]]:
    """The summaries as mntr and the monitor command list them (avg_, min_, max_, cnt_,
    sum_ and, for ADVANCED ones, p50_ ... p999_), and the counters beside them."""
    _note_snapshot(server)
    rows: list[tuple[str, object]] = counters(server)
    for name, s, advanced in summaries(server):
        rows += [(f"avg_{name}", round(s.avg, 4)), (f"min_{name}", s.min),
                 (f"max_{name}", s.max), (f"cnt_{name}", s.count),
                 (f"sum_{name}", int(s.total))]
        if advanced:
            values = s.quantiles(tuple(q for _, q in MONITOR_PERCENTILES))
            rows += [(f"{p}_{name}", 0 if math.isnan(v) else int(v))
                     for (p, _), v in zip(MONITOR_PERCENTILES, values, strict=True)]
    return rows


def _note_snapshot(server) -> None:
    """The snapshotter keeps its last snapshot's duration; a new one joins snapshottime."""
    last = server.snapshotter.last
    st = server.stats
    if last is not None and last is not getattr(st, "_snapshot_seen", None):
        st._snapshot_seen = last
        st.snapshot_time.observe(last[2] * 1000)


class ZooKeeperCollector:
    """A prometheus_client collector over one server's facts, read at scrape time."""

    def __init__(self, server):
        self.server = server

    def collect(self):
        server = self.server
        _note_snapshot(server)
        if server.serving and server.pipeline is not None:
            for name, value in server.admin.monitor_values(DATA_SIZE_MAX_AGE_S):
                if name not in _NOT_GAUGES:
                    # PrometheusGaugeWrapper.sample: a gauge with no value (a follower's
                    # synced_observers without an ObserverMaster) reads 0
                    yield _gauge(name, 0 if value is None else value)
            yield _counter("digest_mismatches_count", server.pipeline.stats.digest_mismatches)
        for name, value in counters(server):
            yield _counter(name, value)
        for name, s, advanced in summaries(server):
            qs = QUANTILES_ADVANCED if advanced else QUANTILES_BASIC
            family = SummaryMetricFamily(name, name, count_value=s.count, sum_value=s.total)
            for q, v in zip(qs, s.quantiles(qs), strict=True):
                family.add_sample(name, {"quantile": str(q)}, v)
            yield family
        yield _gauge(LOOP_STALL_GAUGE, server.loopmon.max_stall_ms,
                     "longest event-loop stall since start, ms (zkcompat)")


def _gauge(name: str, value, doc: str | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc or name, value=value)


def _counter(name: str, value) -> Metric:
    m = Metric(name, name, "counter")
    m.add_sample(name, {}, value)
    return m


def registry_for(server, export_process_info: bool = True) -> CollectorRegistry:
    """The server's collector, and (exportJvmInfo's counterpart) the process and Python
    collectors, which name their metrics as simpleclient's DefaultExports does process_*."""
    from prometheus_client import gc_collector, platform_collector, process_collector  # noqa: PLC0415

    registry = CollectorRegistry(auto_describe=False)
    registry.register(ZooKeeperCollector(server))
    if export_process_info:
        process_collector.ProcessCollector(registry=registry)
        platform_collector.PlatformCollector(registry=registry)
        gc_collector.GCCollector(registry=registry)
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    """The text format 0.0.4, with each family's TYPE under the name its samples carry."""
    out = []
    for metric in registry.collect():
        samples = [s for s in metric.samples if not s.name.endswith("_created")]
        tname = metric.name
        if metric.type == "counter" and any(s.name == f"{metric.name}_total" for s in samples):
            tname = f"{metric.name}_total"
        mtype = {"unknown": "untyped", "info": "gauge"}.get(metric.type, metric.type)
        doc = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
        out.append(f"# HELP {tname} {doc}\n# TYPE {tname} {mtype}\n")
        for s in samples:
            labels = ""
            if s.labels:
                labels = "{" + ",".join(
                    '{}="{}"'.format(k, v.replace("\\", r"\\").replace("\n", r"\n")
                                     .replace('"', r"\""))
                    for k, v in sorted(s.labels.items())) + "}"
            out.append(f"{s.name}{labels} {floatToGoString(s.value)}\n")
    return "".join(out).encode()


def metrics_app(registry: CollectorRegistry) -> web.Application:
    async def metrics(request: web.Request) -> web.Response:
        return web.Response(body=exposition(registry), headers={"Content-Type": CONTENT_TYPE})

    app = web.Application()
    app.router.add_get(METRICS_PATH, metrics)
    return app
