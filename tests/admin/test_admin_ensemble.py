"""The ensemble commands (leader, voting_view, zabstate, observers, monitor's role rows)
and each role's metrics, on one zkcompat ensemble of three voters and an observer, each
member with its own AdminServer and /metrics port. The shapes are ZooKeeper 3.9's
(Commands.java: LeaderCommand, VotingViewCommand.QuorumServerView, ZabStateCommand,
SyncedObserverConsCommand, LearnerHandler.getLearnerHandlerInfo); the metrics are
ServerMetrics' ZAB ones and the gauges Leader-, Follower- and QuorumZooKeeperServer
register. test_admin_mixed.py compares the same with ZooKeeper 3.8's own members."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from conformance_tests.servers import HOST
from zkcompat.cli import ensemble_state
from zkcompat.cli.ensemble_plan import free_ports, plan, ports_of, write_files
from zkcompat.cli.ensemble_process import spawn, stop_members, wait_serving

from .conftest import PROMETHEUS_PROVIDER, http_get
from .test_metrics import scrape, value

pytestmark = pytest.mark.timeout(180)

VOTERS, OBSERVERS = 3, 1
START_TIMEOUT_S = 90.0
SERVING_MODES = frozenset({"leader", "follower", "observer"})
CLIENT_TIMEOUT_S = 15.0
WRITES = 20


class Member:
    """One member of the ensemble and its HTTP ports."""

    def __init__(self, m: ensemble_state.Member):
        self.m = m
        self.sid = m.sid
        self.admin_port = m.admin_port
        self.metrics_port = int(m.settings["metricsProvider.httpPort"])

    def get(self, command: str) -> dict:
        import json  # noqa: PLC0415

        return json.loads(http_get(self.admin_port, f"/commands/{command}"))

    def metrics(self) -> str:
        return http_get(self.metrics_port, "/metrics")


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory) -> Iterator[tuple[ensemble_state.Ensemble, list[Member]]]:
    directory = Path(tmp_path_factory.mktemp("admin_ensemble")).resolve()
    ens = plan(directory, VOTERS, "zkcompat", {}, observers=OBSERVERS)
    metrics_ports = free_ports(len(ens.members), avoid=ports_of(ens))
    for m, metrics_port in zip(ens.members.values(), metrics_ports, strict=True):
        m.settings = {"metricsProvider.className": PROMETHEUS_PROVIDER,
                      "metricsProvider.httpHost": HOST, "metricsProvider.httpPort": metrics_port}
    write_files(ens)
    try:
        for m in ens.members.values():
            m.pid = spawn(m.kind, m)
            ensemble_state.save_state(directory, ens)
        why = wait_serving(list(ens.members.values()), SERVING_MODES, START_TIMEOUT_S)
        assert not why, why
        yield ens, [Member(m) for m in ens.members.values()]
    finally:
        left = stop_members(list(ens.members.values()))
        assert not left, left


@pytest.fixture(scope="module")
def written(ensemble) -> list[Member]:
    """WRITES creates through one server, then every member has synced them."""
    ens, members = ensemble
    client = KazooClient(ens.connect_string, timeout=CLIENT_TIMEOUT_S)
    client.start(timeout=CLIENT_TIMEOUT_S)
    try:
        for i in range(WRITES):
            client.create(f"/admin-ensemble-{i}", b"v")
        client.sync("/")
    finally:
        client.stop()
        client.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if len({m.get("zabstate")["last_zxid"] for m in members}) == 1:
            break
        time.sleep(0.2)
    return members


def the_leader(members: list[Member]) -> Member:
    leaders = [m for m in members if m.get("leader")["is_leader"]]
    assert len(leaders) == 1, [m.get("leader") for m in members]
    return leaders[0]


def test_leader(written):
    leader = the_leader(written)
    for m in written:
        answer = m.get("leader")
        assert list(answer) == ["is_leader", "leader_id", "leader_ip", "command", "error"]
        assert answer["leader_id"] == leader.sid
        assert answer["leader_ip"] == HOST
        assert answer["is_leader"] is (m is leader)
        assert answer["error"] is None


def test_voting_view(ensemble):
    ens, members = ensemble
    expected = {
        str(m.sid): {"server_addresses": [f"{HOST}:{m.quorum_port}"],
                     "election_addresses": [f"{HOST}:{m.election_port}"],
                     "client_address": f"{HOST}:{m.client_port}",
                     "learner_type": "participant"}
        for m in ens.members.values() if not m.observer}
    for m in members:
        assert m.get("voting_view") == {"current_config": expected, "command": "voting_view",
                                        "error": None}


def test_zabstate(ensemble, written):
    ens, members = ensemble
    leader = the_leader(written)
    zxids = set()
    for m in members:
        em = ens.members[m.sid]
        answer = m.get("zabstate")
        assert list(answer) == ["myid", "is_leader", "quorum_address", "election_address",
                                "client_address", "voting", "last_zxid", "zab_epoch",
                                "zab_counter", "zabstate", "command", "error"]
        assert answer["myid"] == m.sid
        assert answer["is_leader"] is (m is leader)
        # a MultipleAddresses as Jackson writes it (test_admin_mixed.py: as ZooKeeper's)
        for key, port in (("quorum_address", em.quorum_port),
                          ("election_address", em.election_port)):
            assert answer[key]["all_addresses"] == [f"{HOST}:{port}"]
            assert answer[key]["one"] == answer[key]["reachable_or_one"] == f"{HOST}:{port}"
            assert answer[key]["wildcard_addresses"] == [f"0.0.0.0:{port}"]
        assert answer["client_address"] == f"{HOST}:{em.client_port}"
        assert answer["voting"] is (not em.observer)
        assert answer["zabstate"] == "broadcast"
        zxid = int(answer["last_zxid"], 16)
        assert (answer["zab_epoch"], answer["zab_counter"]) == (zxid >> 32, zxid & 0xFFFFFFFF)
        assert answer["zab_counter"] >= WRITES
        zxids.add(zxid)
    assert len(zxids) == 1  # every member has applied the same history


def test_observers(ensemble, written):
    ens, members = ensemble
    leader = the_leader(written)
    observer_sids = [m.sid for m in ens.members.values() if m.observer]
    answer = leader.get("observers")
    assert answer["synced_observers"] == len(observer_sids)
    assert [o["sid"] for o in answer["observers"]] == observer_sids
    for o in answer["observers"]:
        assert o["remote_socket_address"].startswith(f"/{HOST}:")
        assert isinstance(o["last_zxid"], int) and o["last_zxid"] >= 0
    for m in members:
        if m is not leader:
            assert m.get("observers") == {"synced_observers": 0, "observers": [],
                                          "command": "observers", "error": None}


def test_monitor_leader_rows(ensemble, written):
    ens, members = ensemble
    leader = the_leader(written)
    monitor = leader.get("monitor")
    assert monitor["server_state"] == "leader"
    assert monitor["peer_state"] == "leading - broadcast"
    assert monitor["learners"] == VOTERS - 1 + OBSERVERS
    assert monitor["synced_followers"] == VOTERS - 1
    assert monitor["synced_observers"] == OBSERVERS
    assert monitor["commit_count"] >= WRITES
    assert monitor["proposal_count"] >= WRITES
    assert monitor["quorum_size"] == VOTERS  # QuorumPeer.getQuorumSize: the voters
    assert monitor["leader_uptime"] > 0
    # every learner synced once (empty histories: DIFF), none by SNAP
    assert (monitor["snap_count"], monitor["diff_count"]) == (0, VOTERS - 1 + OBSERVERS)
    assert 0 < monitor["min_proposal_size"] <= monitor["max_proposal_size"]
    assert monitor["min_proposal_size"] <= monitor["last_proposal_size"]
    # each txn's own ACK and the quorum's, on the leader only
    assert monitor["cnt_quorum_ack_latency"] >= WRITES
    assert monitor["cnt_proposal_ack_creation_latency"] >= WRITES
    assert monitor["cnt_propagation_latency"] >= WRITES
    assert monitor["cnt_proposal_latency"] == monitor["cnt_commit_propagation_latency"] == 0
    assert monitor["cnt_leader_unavailable_time"] == monitor["cnt_unavailable_time"] == 1
    for m in members:
        if m is not leader:
            answer = m.get("monitor")
            assert answer["server_state"] in ("follower", "observer")
            assert "learners" not in answer and answer["commit_count"] == 0
            assert answer["proposal_count"] == 0 and "leader_uptime" not in answer


def test_monitor_learner_rows(ensemble, written):
    ens, members = ensemble
    leader = the_leader(written)
    for m in members:
        if m is leader:
            continue
        answer = m.get("monitor")
        observer = ens.members[m.sid].observer
        assert answer["quorum_size"] == VOTERS
        assert answer["cnt_unavailable_time"] == 1 and answer["cnt_leader_unavailable_time"] == 0
        assert answer["cnt_commit_propagation_latency"] >= WRITES
        assert answer["cnt_propagation_latency"] >= WRITES
        assert answer["learner_commit_received_count"] >= WRITES
        assert answer["cnt_quorum_ack_latency"] == 0
        if observer:
            # ObserverZooKeeperServer: no synced_observers; INFORMs, never PROPOSALs
            assert answer["peer_state"] == "observing - broadcast"
            assert answer["observer_master_id"] == leader.sid
            assert "synced_observers" not in answer
            assert (answer["cnt_observer_sync_time"], answer["cnt_follower_sync_time"]) == (1, 0)
            assert answer["learner_proposal_received_count"] == 0
            assert answer["cnt_proposal_latency"] == 0
            assert answer["cnt_proposal_ack_creation_latency"] == 0
        else:
            assert answer["peer_state"] == "following - broadcast"
            assert "observer_master_id" not in answer
            assert "synced_observers" not in answer  # null without an ObserverMaster: left out
            assert (answer["cnt_follower_sync_time"], answer["cnt_observer_sync_time"]) == (1, 0)
            assert answer["learner_proposal_received_count"] >= WRITES
            assert answer["cnt_proposal_latency"] >= WRITES
            assert answer["cnt_proposal_ack_creation_latency"] >= WRITES


def srvr(m: Member, ens) -> str:
    with socket.create_connection((HOST, ens.members[m.sid].client_port), timeout=10) as s:
        s.sendall(b"srvr")
        return b"".join(iter(lambda: s.recv(65536), b"")).decode()


def test_the_leaders_proposal_sizes(ensemble, written):
    ens, members = ensemble
    leader = the_leader(written)
    monitor = leader.get("monitor")
    sizes = (f"{monitor['last_proposal_size']}/{monitor['min_proposal_size']}/"
             f"{monitor['max_proposal_size']}")
    assert srvr(leader, ens).endswith(f"Proposal sizes last/min/max: {sizes}\n")
    stats = leader.get("server_stats")
    # SrvrCommand puts proposal_stats after the server's stats, before node_count
    assert list(stats) == ["version", "read_only", "server_stats", "proposal_stats", "node_count",
                           "command", "error"]
    assert stats["proposal_stats"] == {"last_buffer_size": monitor["last_proposal_size"],
                                       "min_buffer_size": monitor["min_proposal_size"],
                                       "max_buffer_size": monitor["max_proposal_size"]}
    for m in members:
        if m is not leader:
            assert "Proposal sizes" not in srvr(m, ens)
            assert "proposal_stats" not in m.get("server_stats")


def test_leader_metrics(ensemble, written):
    ens, members = ensemble
    leader = the_leader(written)
    metrics = scrape(leader)
    assert value(metrics, "learners") == VOTERS - 1 + OBSERVERS
    assert value(metrics, "synced_followers") == VOTERS - 1
    assert value(metrics, "synced_observers") == OBSERVERS
    assert value(metrics, "quorum_size") == VOTERS
    assert value(metrics, "commit_count") >= WRITES
    assert value(metrics, "leader_uptime") > 0
    assert value(metrics, "quorum_ack_latency_count") >= WRITES
    assert value(metrics, "proposal_count") >= WRITES
    for m in members:
        metrics = scrape(m)
        assert value(metrics, "election_time_count") >= 1, m.sid
        assert value(metrics, "looking_count") >= 1, m.sid
        assert value(metrics, "znode_count") >= WRITES
        assert value(metrics, "quorum_size") == VOTERS
        assert "peer_state" not in metrics and "observer_master_id" not in metrics
        if m is not leader:
            assert "learners" not in metrics and "synced_followers" not in metrics
            assert "leader_uptime" not in metrics
            assert value(metrics, "commit_propagation_latency_count") >= WRITES
        if not ens.members[m.sid].observer and m is not leader:
            assert value(metrics, "synced_observers") == 0  # null reads 0, as ZooKeeper's
            assert value(metrics, "proposal_latency_count") >= WRITES
