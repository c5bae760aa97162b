"""The Prometheus /metrics port: ZooKeeper's metric names, plausible values that follow
client traffic, and the summaries an operator of this server needs (fsync, group-commit
batch size, snapshot duration, event-loop stalls).

Debian's ZooKeeper 3.8 has no Prometheus provider to run (conftest.py says why), so the
names are checked against ZooKeeper 3.9.3's source: ServerMetrics.java (counters and
summaries) and the registerGauge calls of ZooKeeperServer.registerMetrics and
LeaderZooKeeperServer.registerMetrics (zookeeper-server/src/main/java/org/apache/
zookeeper/server/). PrometheusMetricsProvider exports a counter under its bare name, a
gauge as a gauge, and a summary with quantile 0.5 (BASIC) or 0.5/0.9/0.99 (ADVANCED).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from prometheus_client.parser import text_string_to_metric_families

from conformance_tests.servers import HOST, free_port, start_zkcompat

from .conftest import PROMETHEUS_PROVIDER, AdminServer, http_get

pytestmark = pytest.mark.timeout(120)

# ZooKeeper 3.9.3: ZooKeeperServer.registerMetrics and LeaderZooKeeperServer.registerMetrics.
ZOOKEEPER_GAUGES = {
    "approximate_data_size", "auth_failed_count", "avg_latency", "connection_drop_probability",
    "ephemerals_count", "global_sessions", "last_client_response_size", "local_sessions",
    "max_client_response_size", "max_file_descriptor_count", "max_latency", "min_client_response_size",
    "min_latency", "non_mtls_local_conn_count", "non_mtls_remote_conn_count",
    "num_alive_connections", "open_file_descriptor_count", "outstanding_requests",
    "outstanding_tls_handshake", "packets_received", "packets_sent", "quorum_size", "uptime",
    "watch_count", "znode_count",
    # the leader's
    "learners", "synced_followers", "synced_non_voting_followers", "synced_observers",
    "pending_syncs", "leader_uptime", "last_proposal_size", "min_proposal_size",
    "max_proposal_size",
}
# ServerMetrics.java: getCounter(...) names this server has.
ZOOKEEPER_COUNTERS = {"commit_count", "digest_mismatches_count", "proposal_count",
                      "learner_proposal_received_count", "learner_commit_received_count",
                      "snap_count", "diff_count", "looking_count",
                      # the client-port limits'
                      "connection_request_count", "connection_rejected",
                      "large_requests_rejected", "tls_handshake_exceeded",
                      "request_throttle_wait_count", "stale_requests", "stale_requests_dropped",
                      "throttled_ops"}
# ServerMetrics.java: getSummary(name, level), True for DetailLevel.ADVANCED.
ZOOKEEPER_SUMMARIES = {
    "readlatency": True, "updatelatency": True, "fsynctime": False,
    "sync_processor_batch_size": False, "snapshottime": False, "election_time": False,
    "proposal_latency": True, "proposal_ack_creation_latency": True,
    "quorum_ack_latency": True, "commit_propagation_latency": True,
    "propagation_latency": True, "follower_sync_time": False, "observer_sync_time": False,
    "unavailable_time": False, "leader_unavailable_time": False,
    "connection_token_deficit": False, "request_throttle_queue_time_ms": True,
}
# Those of the ZAB roles: a standalone server has them all, and none moves (no Leader).
ENSEMBLE_ONLY = {"proposal_count", "learner_proposal_received_count",
                 "learner_commit_received_count", "snap_count", "diff_count", "looking_count",
                 "election_time_count", "proposal_latency_count",
                 "proposal_ack_creation_latency_count", "quorum_ack_latency_count",
                 "commit_propagation_latency_count", "propagation_latency_count",
                 "follower_sync_time_count", "observer_sync_time_count",
                 "unavailable_time_count", "leader_unavailable_time_count"}
# What a Grafana dashboard of a standalone server reads first.
REQUIRED_GAUGES = {"znode_count", "watch_count", "num_alive_connections",
                   "outstanding_requests", "approximate_data_size", "ephemerals_count",
                   "global_sessions", "uptime", "avg_latency", "max_latency", "min_latency",
                   "packets_received", "packets_sent", "open_file_descriptor_count"}
ZKCOMPAT_GAUGES = {"zkcompat_event_loop_max_stall_ms"}
# prometheus_client's process and Python collectors (exportJvmInfo's counterpart).
PROCESS_PREFIXES = ("process_", "python_")
SNAP_COUNT = 10  # a snapshot every 5-10 txns: snapshottime gets observations
ZNODES = 140  # past zxid 128: the hash command logs a digest there
CLIENT_TIMEOUT_S = 15.0


@pytest.fixture(scope="module")
def metrics_server(tmp_path_factory) -> Iterator[AdminServer]:
    admin_port, metrics_port = free_port(), free_port()
    cfg = {"admin.enableServer": "true", "admin.serverAddress": HOST, "admin.serverPort": admin_port,
           "metricsProvider.className": PROMETHEUS_PROVIDER, "metricsProvider.httpHost": HOST,
           "metricsProvider.httpPort": metrics_port, "snapCount": SNAP_COUNT}
    server = start_zkcompat(tmp_path_factory.mktemp("metrics"), 200, cfg)
    try:
        yield AdminServer(server, admin_port, metrics_port)
    finally:
        server.stop()


def scrape(server: AdminServer) -> dict:
    """{family name: (type, {sample name + labels: value})}."""
    out = {}
    for family in text_string_to_metric_families(server.metrics()):
        samples = {}
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            samples[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
        out[family.name] = (family.type, samples)
    return out


def value(metrics: dict, name: str) -> float:
    """A sample without labels: a gauge or counter, or a summary's NAME_count/_sum."""
    family = name.removesuffix("_count").removesuffix("_sum")
    samples = metrics[family if family in metrics else name][1]
    # prometheus_client's parser names a counter's sample NAME_total, whatever the text says
    return samples[name] if name in samples else samples[f"{name}_total"]


def traffic(server: AdminServer, n: int) -> None:
    client = KazooClient(server.server.connect_string, timeout=CLIENT_TIMEOUT_S)
    client.start(timeout=CLIENT_TIMEOUT_S)
    try:
        client.ensure_path("/metrics-test")
        for i in range(n):
            client.create(f"/metrics-test/n{i}", b"x" * 10, sequence=True)
            client.get("/metrics-test")
        client.get_children("/metrics-test", watch=lambda e: None)
    finally:
        client.stop()
        client.close()


def test_names_are_zookeepers(metrics_server):
    metrics = scrape(metrics_server)
    ours = {n for n in metrics if not n.startswith(PROCESS_PREFIXES)}
    known = ZOOKEEPER_GAUGES | ZOOKEEPER_COUNTERS | set(ZOOKEEPER_SUMMARIES) | ZKCOMPAT_GAUGES
    assert not ours - known, f"names ZooKeeper does not have: {sorted(ours - known)}"
    assert REQUIRED_GAUGES <= ours, sorted(REQUIRED_GAUGES - ours)
    assert set(ZOOKEEPER_SUMMARIES) | ZOOKEEPER_COUNTERS <= ours
    for name in ours & ZOOKEEPER_GAUGES:
        assert metrics[name][0] == "gauge", name
    for name, advanced in ZOOKEEPER_SUMMARIES.items():
        kind, samples = metrics[name]
        assert kind == "summary", name
        quantiles = {k for k in samples if "quantile=" in k}
        expected = {"0.5", "0.9", "0.99"} if advanced else {"0.5"}
        assert quantiles == {f"{name}{{quantile={q}}}" for q in expected}, name
        assert {f"{name}_count", f"{name}_sum"} <= set(samples), name
    assert any(n.startswith("process_") for n in metrics)


def test_counters_keep_zookeepers_bare_names(metrics_server):
    text = metrics_server.metrics()
    for name in ZOOKEEPER_COUNTERS:
        assert f"# TYPE {name} counter\n" in text
        assert f"\n{name} " in text and f"{name}_total" not in text


@pytest.fixture(scope="module")
def scrapes(metrics_server) -> tuple[dict, dict]:
    """Scrapes before and after ZNODES creates and reads."""
    before = scrape(metrics_server)
    traffic(metrics_server, ZNODES)
    time.sleep(0.3)  # the client's close is answered before the scrape
    return before, scrape(metrics_server)


def test_values_follow_traffic(scrapes):
    before, after = scrapes
    assert value(after, "znode_count") - value(before, "znode_count") == ZNODES + 1
    assert value(after, "approximate_data_size") >= value(before, "approximate_data_size")
    grew = {n: value(after, f"{n}_count") - value(before, f"{n}_count")
            for n in ("readlatency", "updatelatency", "fsynctime", "sync_processor_batch_size")}
    assert grew["readlatency"] >= ZNODES + 1, grew
    # ZNODES creates, ensure_path's create, the session's createSession and closeSession
    assert grew["updatelatency"] >= ZNODES + 1, grew
    assert grew["fsynctime"] >= 1 and grew["sync_processor_batch_size"] >= 1, grew
    txns = (value(after, "sync_processor_batch_size_sum")
            - value(before, "sync_processor_batch_size_sum"))
    assert txns >= ZNODES + 3, txns  # every txn is in exactly one log sync
    assert value(after, "snapshottime_count") >= 1  # snapCount=10
    for name in ("readlatency", "updatelatency", "fsynctime"):
        for q in ("0.5",):
            v = after[name][1][f"{name}{{quantile={q}}}"]
            assert not math.isnan(v) and 0 <= v < 10_000, (name, v)
    assert value(after, "commit_count") == 0  # standalone: no Leader, as ZooKeeper
    assert {n: value(after, n) for n in ENSEMBLE_ONLY} == dict.fromkeys(ENSEMBLE_ONLY, 0)
    assert value(after, "packets_received") > value(before, "packets_received")
    assert value(after, "uptime") > value(before, "uptime")
    assert 0 <= value(after, "zkcompat_event_loop_max_stall_ms") < 60_000


def test_monitor_command_shows_the_same_summaries(metrics_server):
    metrics = scrape(metrics_server)
    monitor = metrics_server.get("monitor")
    for name in ZOOKEEPER_SUMMARIES:
        assert monitor[f"cnt_{name}"] >= value(metrics, f"{name}_count"), name
    assert monitor["znode_count"] == value(metrics, "znode_count")


def test_hash_logs_the_digest_every_128th_zxid(metrics_server, scrapes):
    digests = metrics_server.get("hash")["digests"]
    assert digests, "no digest logged after more than 128 txns"
    for d in digests:
        assert list(d) == ["zxid", "digest_version", "digest"]
        assert d["zxid"] % 128 == 0 and d["digest_version"] == 2 and isinstance(d["digest"], int)


def test_metrics_port_off_unless_configured(tmp_path):
    port = free_port()
    server = start_zkcompat(tmp_path, 200, {"metricsProvider.httpPort": port})
    try:
        with pytest.raises(OSError):
            http_get(port, "/metrics")
    finally:
        server.stop()
