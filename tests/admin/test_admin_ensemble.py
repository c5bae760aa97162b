"""The ensemble commands (leader, voting_view, zabstate, observers, monitor's leader rows)
and the leader's metrics, on one zkcompat ensemble of three voters and an observer, each
member with its own AdminServer and /metrics port. The shapes are ZooKeeper 3.9's
(Commands.java: LeaderCommand, VotingViewCommand.QuorumServerView, ZabStateCommand,
SyncedObserverConsCommand, LearnerHandler.getLearnerHandlerInfo)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from conformance_tests.servers import HOST, free_port
from zkcompat import ensemble_cmd

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

    def __init__(self, m: ensemble_cmd.Member):
        self.m = m
        self.sid = m.sid
        self.admin_port = int(m.settings["admin.serverPort"])
        self.metrics_port = int(m.settings["metricsProvider.httpPort"])

    def get(self, command: str) -> dict:
        import json  # noqa: PLC0415

        return json.loads(http_get(self.admin_port, f"/commands/{command}"))

    def metrics(self) -> str:
        return http_get(self.metrics_port, "/metrics")


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory) -> Iterator[tuple[ensemble_cmd.Ensemble, list[Member]]]:
    directory = Path(tmp_path_factory.mktemp("admin_ensemble")).resolve()
    ens = ensemble_cmd._plan(directory, VOTERS, "zkcompat", {}, observers=OBSERVERS)
    for m in ens.members.values():
        m.settings = {"admin.enableServer": "true", "admin.serverAddress": HOST,
                      "admin.serverPort": free_port(),
                      "metricsProvider.className": PROMETHEUS_PROVIDER,
                      "metricsProvider.httpHost": HOST, "metricsProvider.httpPort": free_port()}
    ensemble_cmd._write_files(ens)
    try:
        for m in ens.members.values():
            m.pid = ensemble_cmd._spawn(m.kind, m)
            ensemble_cmd.save_state(directory, ens)
        why = ensemble_cmd._wait_serving(list(ens.members.values()), SERVING_MODES,
                                         START_TIMEOUT_S)
        assert not why, why
        yield ens, [Member(m) for m in ens.members.values()]
    finally:
        left = ensemble_cmd._stop(list(ens.members.values()))
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
        assert answer["quorum_address"] == f"{HOST}:{em.quorum_port}"
        assert answer["election_address"] == f"{HOST}:{em.election_port}"
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
    assert monitor["learners"] == VOTERS - 1 + OBSERVERS
    assert monitor["synced_followers"] == VOTERS - 1
    assert monitor["synced_observers"] == OBSERVERS
    assert monitor["commit_count"] >= WRITES
    for m in members:
        if m is not leader:
            answer = m.get("monitor")
            assert answer["server_state"] in ("follower", "observer")
            assert "learners" not in answer and answer["commit_count"] == 0


def test_leader_metrics(ensemble, written):
    ens, members = ensemble
    leader = the_leader(written)
    metrics = scrape(leader)
    assert value(metrics, "learners") == VOTERS - 1 + OBSERVERS
    assert value(metrics, "synced_followers") == VOTERS - 1
    assert value(metrics, "synced_observers") == OBSERVERS
    assert value(metrics, "quorum_size") == VOTERS // 2 + 1
    assert value(metrics, "commit_count") >= WRITES
    for m in members:
        metrics = scrape(m)
        assert value(metrics, "election_time_count") >= 1, m.sid
        assert value(metrics, "znode_count") >= WRITES
        if m is not leader:
            assert "learners" not in metrics and "synced_followers" not in metrics
