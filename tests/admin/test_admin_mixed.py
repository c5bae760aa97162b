"""The AdminServer of an ensemble member against ZooKeeper 3.8's own, in one mixed ensemble:
servers 1 and 3 are zkcompat, server 2 a real ZooKeeper with its Jetty AdminServer on.

First zkcompat leads (3 and 1 are started first and elect 3 before ZooKeeper's JVM is up),
so a zkcompat follower (1) and a ZooKeeper follower (2) follow the same leader and are sent
the same txns: their answers must be the same, field for field, and their ZAB counters and
summary counts equal. Then the zkcompat leader stops, ZooKeeper's server 2 leads (the
highest sid of equal histories), and its leader's answers are compared with those the
zkcompat leader gave; server 3 comes back as a follower of ZooKeeper's leader.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
from kazoo.client import KazooClient

from conformance_tests.servers import HOST
from zkcompat.cli import ensemble_state, launch
from zkcompat.cli.ensemble_plan import plan, write_files
from zkcompat.cli.ensemble_process import server_mode, spawn, stop_members, wait_serving

from .conftest import SERVLET_API_JAR, http_get

pytestmark = pytest.mark.timeout(300)

KINDS = "zkcompat,zookeeper,zkcompat"
OURS, ZOOKEEPER, FIRST_LEADER = 1, 2, 3
FAST = {"tickTime": 500, "initLimit": 10, "syncLimit": 4}
START_TIMEOUT_S = 120.0  # a JVM starting beside two servers on a loaded 2-core box
CLIENT_TIMEOUT_S = 15.0
WRITES = 15
SERVING = frozenset({"leader", "follower"})
COMMANDS = ("leader", "voting_view", "zabstate", "observers", "monitor", "server_stats",
            "stats", "initial_configuration", "is_read_only")
# Fields zkcompat does not report (docs/admin-and-metrics.md): reply sizes,
# failed authentications, and the ServerMetrics of ZooKeeper's processor threads, reply
# cache, throttling, TLS and JVM, which have no counterpart here.
SERVER_STATS_NOT_KEPT = {"client_response_stats", "auth_failed_count"}
RESPONSE_NOT_KEPT = {"client_response"}
# zk_followers: 3.4's name for `learners`, kept for the tools that still read it.
MONITOR_OURS_ONLY = {"followers"}
# The ZAB counters and summaries: two followers sent the same txns count them alike.
SAME_FOR_FOLLOWERS = (
    "server_state", "peer_state", "quorum_size", "znode_count",
    "commit_count", "proposal_count", "learner_proposal_received_count",
    "learner_commit_received_count", "snap_count", "diff_count", "looking_count",
    "cnt_proposal_latency", "cnt_commit_propagation_latency", "cnt_quorum_ack_latency",
    "cnt_proposal_ack_creation_latency", "cnt_propagation_latency",
    "cnt_follower_sync_time", "cnt_observer_sync_time", "cnt_election_time",
    "cnt_unavailable_time", "cnt_leader_unavailable_time")


class Member:
    def __init__(self, m: ensemble_state.Member):
        self.m = m
        self.sid = m.sid
        self.kind = m.kind
        self.admin_port = m.admin_port

    def get(self, command: str) -> dict:
        return json.loads(http_get(self.admin_port, f"/commands/{command}"))

    def answers(self) -> dict[str, dict]:
        return {c: self.get(c) for c in COMMANDS}

    def four_letter_word(self, word: str) -> str:
        with socket.create_connection((HOST, self.m.client_port), timeout=10) as s:
            s.sendall(word.encode())
            return b"".join(iter(lambda: s.recv(65536), b"")).decode()


def _start(ens, members, sids, modes=SERVING) -> None:
    for sid in sids:
        m = ens.members[sid]
        m.pid = spawn(m.kind, m)
        ensemble_state.save_state(Path(m.data_dir).parent, ens)
    why = wait_serving([ens.members[s] for s in sids], modes, START_TIMEOUT_S)
    assert not why, why


def _mode(ens, sid: int) -> str | None:
    return server_mode(ens.members[sid].client_port)


def _write(ens, prefix: str) -> None:
    client = KazooClient(ens.connect_string, timeout=CLIENT_TIMEOUT_S)
    client.start(timeout=CLIENT_TIMEOUT_S)
    try:
        for i in range(WRITES):
            client.create(f"/{prefix}-{i}", b"v" * (i + 1))
        client.sync("/")
    finally:
        client.stop()
        client.close()


def _agree(members: dict[int, Member]) -> None:
    """Until every member has applied the same last zxid (each learns of the last commit
    at its own pace)."""
    deadline = time.monotonic() + 15
    while len({m.get("zabstate")["last_zxid"] for m in members.values()}) > 1:
        assert time.monotonic() < deadline, {s: m.get("zabstate") for s, m in members.items()}
        time.sleep(0.2)


@pytest.fixture(scope="module")
def phases(tmp_path_factory) -> Iterator[dict[str, dict[int, dict]]]:
    """Every member's answers with zkcompat leading, then with ZooKeeper leading."""
    directory = Path(tmp_path_factory.mktemp("admin_mixed")).resolve()
    ens = plan(directory, 3, KINDS, {})
    for m in ens.members.values():
        m.settings = dict(FAST)
    write_files(ens)
    members = {sid: Member(m) for sid, m in ens.members.items()}
    try:
        with mock.patch.object(launch, "ZOOKEEPER_LOGGING_JARS",
                               (*launch.ZOOKEEPER_LOGGING_JARS, SERVLET_API_JAR)):
            _start(ens, members, (FIRST_LEADER, OURS))
            _start(ens, members, (ZOOKEEPER,))
            assert _mode(ens, FIRST_LEADER) == "leader", "zkcompat's server 3 should lead first"
            _write(ens, "first")
            _agree(members)
            first = {sid: m.answers() | {"srvr": m.four_letter_word("srvr")}
                     for sid, m in members.items()}
            left = stop_members([ens.members[FIRST_LEADER]])
            assert not left, left
            why = wait_serving([ens.members[s] for s in (OURS, ZOOKEEPER)],
                               SERVING, START_TIMEOUT_S)
            assert not why, why
            assert _mode(ens, ZOOKEEPER) == "leader", "ZooKeeper's server 2 should lead next"
            _start(ens, members, (FIRST_LEADER,))
            _write(ens, "second")
            _agree(members)
            second = {sid: m.answers() | {"srvr": m.four_letter_word("srvr")}
                      for sid, m in members.items()}
        yield {"first": first, "second": second}
    finally:
        left = stop_members(list(ens.members.values()))
        assert not left, left


def shape(value):
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def _stats_shape(answer: dict) -> dict:
    out = shape({k: v for k, v in answer.items() if k not in RESPONSE_NOT_KEPT})
    out["server_stats"] = {k: v for k, v in out["server_stats"].items()
                           if k not in SERVER_STATS_NOT_KEPT}
    if out.get("connections"):
        out["connections"] = []  # the clients come and go; test_admin_commands checks them
    return out


def _compare_monitors(ours: dict, zk: dict) -> None:
    extra = set(ours) - set(zk) - MONITOR_OURS_ONLY
    assert not extra, f"keys ZooKeeper's monitor does not have: {sorted(extra)}"
    wrong = {k: (ours[k], zk[k]) for k in set(ours) & set(zk)
             if type(ours[k]) is not type(zk[k])}
    assert not wrong, wrong


def test_followers_answer_as_zookeepers_follower(phases):
    ours, zk = phases["first"][OURS], phases["first"][ZOOKEEPER]
    for command in ("leader", "voting_view", "observers", "is_read_only"):
        assert ours[command] == zk[command], command
    assert ours["leader"]["leader_id"] == FIRST_LEADER
    assert shape(ours["zabstate"]) == shape(zk["zabstate"])
    for key in ("quorum_address", "election_address"):
        assert list(ours["zabstate"][key]) == list(zk["zabstate"][key])
    assert list(ours["zabstate"]) == list(zk["zabstate"])
    for key in ("is_leader", "voting", "last_zxid", "zab_epoch", "zab_counter", "zabstate"):
        assert ours["zabstate"][key] == zk["zabstate"][key], key
    for command in ("server_stats", "stats"):
        assert _stats_shape(ours[command]) == _stats_shape(zk[command]), command
        assert list(_stats_shape(ours[command])) == list(_stats_shape(zk[command])), command
    # null on an ensemble member: QuorumPeerMain never gives the server its zoo.cfg text
    assert ours["initial_configuration"] == zk["initial_configuration"]


def test_a_followers_monitor_is_zookeepers(phases):
    ours, zk = phases["first"][OURS]["monitor"], phases["first"][ZOOKEEPER]["monitor"]
    _compare_monitors(ours, zk)
    assert {k: ours[k] for k in SAME_FOR_FOLLOWERS} == {k: zk[k] for k in SAME_FOR_FOLLOWERS}
    assert ours["learner_proposal_received_count"] >= WRITES
    assert "synced_observers" not in ours and ours["peer_state"] == "following - broadcast"


def test_the_leaders_monitor_and_stats_are_zookeepers(phases):
    ours = phases["first"][FIRST_LEADER]
    zk = phases["second"][ZOOKEEPER]
    _compare_monitors(ours["monitor"], zk["monitor"])
    leader_rows = ("server_state", "peer_state", "learners", "synced_followers",
                   "synced_non_voting_followers", "synced_observers", "pending_syncs",
                   "quorum_size")
    assert {k: ours["monitor"][k] for k in leader_rows} \
        == {k: zk["monitor"][k] for k in leader_rows}
    for key in ("leader_uptime", "last_proposal_size", "min_proposal_size",
                "max_proposal_size", "proposal_count", "commit_count", "cnt_quorum_ack_latency",
                "cnt_proposal_ack_creation_latency", "cnt_leader_unavailable_time"):
        assert ours["monitor"][key] > 0 and zk["monitor"][key] > 0, key
    for command in ("server_stats", "stats"):
        assert _stats_shape(ours[command]) == _stats_shape(zk[command]), command
        assert list(_stats_shape(ours[command])) == list(_stats_shape(zk[command])), command
    assert ours["observers"] == zk["observers"]
    for srvr in (ours["srvr"], zk["srvr"]):
        assert "\nProposal sizes last/min/max: " in srvr, srvr


def test_a_follower_of_zookeepers_leader(phases):
    before, after = phases["first"][OURS]["monitor"], phases["second"][OURS]["monitor"]
    returned = phases["second"][FIRST_LEADER]["monitor"]
    assert phases["second"][OURS]["leader"]["leader_id"] == ZOOKEEPER
    # server 1 looked again and synced with ZooKeeper's leader; 3 came back and synced
    assert after["looking_count"] == before["looking_count"] + 1
    assert after["cnt_follower_sync_time"] == before["cnt_follower_sync_time"] + 1
    assert returned["cnt_follower_sync_time"] == 1 and returned["peer_state"] \
        == "following - broadcast"
    for key in ("cnt_proposal_latency", "cnt_commit_propagation_latency",
                "cnt_proposal_ack_creation_latency", "learner_proposal_received_count"):
        assert after[key] >= before[key] + WRITES, key
