"""Every AdminServer command of a standalone zkcompat against a real ZooKeeper 3.8's Jetty
AdminServer after the same client traffic: the same field names in the same order, the
same JSON types, and the same values where they do not depend on the server (paths,
counts, limits, the `command` and `error` of each response)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from zkcompat.config import Config
from zkcompat.peer.node import build_standalone
from zkcompat.server.admin import NOT_SERVING
from zkcompat.server.adminhttp import AdminHttp

pytestmark = pytest.mark.timeout(120)  # the first test starts a ZooKeeper JVM

# What zkcompat does not report, and why (docs/admin-and-metrics.md).
SERVER_STATS_NOT_KEPT = {
    "client_response_stats",  # reply sizes are not recorded per reply (hot path)
    "auth_failed_count",  # failed authentications are not counted
}
RESPONSE_NOT_KEPT = {"client_response"}  # the same reply sizes, at the top level
# Environment.list's JVM entries, which a Python process has no counterpart for.
ENVIRONMENT_JVM_ONLY = {"java.version", "java.vendor", "java.home", "java.class.path",
                        "java.library.path", "java.io.tmpdir", "java.compiler"}
# Names each command answers to (Commands.java), primary first.
ALIASES = {
    "connection_stat_reset": ["crst"], "configuration": ["conf", "config"],
    "connections": ["cons"], "environment": ["env", "envi"], "get_trace_mask": ["gtmk"],
    "initial_configuration": ["icfg"], "is_read_only": ["isro"], "last_snapshot": ["lsnp"],
    "leader": ["lead"], "monitor": ["mntr"], "observer_connection_stat_reset": ["orst"],
    "server_stats": ["srvr"], "stats": ["stat"], "stat_reset": ["srst"],
    "observers": ["obsr"], "system_properties": ["sysp"], "watches": ["wchc"],
    "watches_by_path": ["wchp"], "watch_summary": ["wchs"], "set_trace_mask": ["stmk"],
}
RESETS = {"stat_reset", "connection_stat_reset"}  # test_resets, last: they zero counters
# mntr/monitor keys dashboards and alerts read (ZooKeeperServer.registerMetrics and the
# 3.4 admin guide's list): zkcompat must have every one.
MONITOR_REQUIRED = {
    "version", "server_state", "avg_latency", "max_latency", "min_latency",
    "packets_received", "packets_sent", "num_alive_connections", "outstanding_requests",
    "znode_count", "watch_count", "ephemerals_count", "approximate_data_size",
    "open_file_descriptor_count", "max_file_descriptor_count", "global_sessions", "uptime",
    "local_sessions", "digest_mismatches_count", "commit_count",
    "avg_readlatency", "p99_readlatency", "cnt_readlatency", "avg_updatelatency",
    "p99_updatelatency", "cnt_updatelatency", "avg_fsynctime", "cnt_fsynctime",
    "avg_snapshottime", "avg_sync_processor_batch_size", "avg_election_time",
}


def shape(value):
    """A JSON value's structure: types of scalars, keys of maps, the shape of a list's
    first element (ints and floats apart, as Jackson writes long and double apart)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def both(pair, command: str, query: str = "") -> tuple[dict, dict]:
    zk, ours = pair
    return zk.get(command, query), ours.get(command, query)


def test_command_links_list_the_same_commands(pair):
    zk, ours = pair
    assert ours.links() == zk.links()


@pytest.mark.parametrize("command", ["ruok", "leader", "observers", "voting_view", "zabstate",
                                     "is_read_only", "observer_connection_stat_reset",
                                     "get_trace_mask", "watch_summary", "no_such_command",
                                     "hash"])
def test_answer_equals_zookeepers(pair, command):
    zk, ours = both(pair, command)
    assert list(ours.items()) == list(zk.items())


@pytest.mark.parametrize("query", ["", "?traceMask=abc", "?traceMask=306"])
def test_set_trace_mask(pair, query):
    zk, ours = both(pair, "set_trace_mask", query)
    assert list(ours.items()) == list(zk.items())


@pytest.mark.parametrize("primary", sorted(set(ALIASES) - RESETS))
def test_aliases_answer_with_the_primary_name(pair, primary):
    zk, ours = pair
    for alias in ALIASES[primary]:
        assert ours.get(alias)["command"] == zk.get(alias)["command"] == primary


def test_configuration(pair):
    zk, ours = both(pair, "configuration")
    assert shape(ours) == shape(zk)
    assert list(ours) == list(zk)
    same = ("tick_time", "max_client_cnxns", "min_session_timeout", "max_session_timeout",
            "server_id", "client_port_listen_backlog", "command", "error")
    assert {k: ours[k] for k in same} == {k: zk[k] for k in same}
    assert ours["client_port"] == pair[1].server.port
    assert Path(ours["data_dir"]).is_relative_to(pair[1].server.workdir.resolve())


def test_connections(pair, scenario):
    zk, ours = both(pair, "connections")
    assert shape(ours) == shape(zk)
    assert list(ours["connections"][0]) == list(zk["connections"][0])
    for server, answer in (("zookeeper", zk), ("zkcompat", ours)):
        mine = [c for c in answer["connections"]
                if c["session_id"] == scenario[server].session_id]
        assert len(mine) == 1, (server, answer)
        assert mine[0]["session_timeout"] == 4000  # maxSessionTimeout = 20 ticks
        assert mine[0]["outstanding_requests"] == 0


@pytest.mark.parametrize("command", ["server_stats", "stats"])
def test_server_stats(pair, command):
    zk, ours = both(pair, command)
    zk_shape = shape(zk)
    for key in RESPONSE_NOT_KEPT:
        del zk_shape[key]
    for key in SERVER_STATS_NOT_KEPT:
        del zk_shape["server_stats"][key]
    assert shape(ours) == zk_shape
    assert list(ours) == list(zk_shape)
    assert ours["server_stats"]["server_state"] == zk["server_stats"]["server_state"]
    assert ours["node_count"] == zk["node_count"]
    assert ours["read_only"] is zk["read_only"] is False
    assert ours["server_stats"]["packets_received"] > 0


def test_monitor(pair):
    zk, ours = both(pair, "monitor")
    missing = MONITOR_REQUIRED - set(ours)
    assert not missing, missing
    extra = set(ours) - set(zk)
    assert not extra, f"keys ZooKeeper's monitor does not have: {sorted(extra)}"
    wrong = {k: (type(v).__name__, type(zk[k]).__name__) for k, v in ours.items()
             if type(v) is not type(zk[k])}
    assert not wrong, wrong
    same = ("server_state", "ephemerals_count", "num_alive_connections", "znode_count",
            "global_sessions", "watch_count", "outstanding_requests", "local_sessions",
            "approximate_data_size", "digest_mismatches_count", "command", "error")
    assert {k: ours[k] for k in same} == {k: zk[k] for k in same}
    assert ours["cnt_readlatency"] >= 3 and ours["cnt_updatelatency"] >= 2


def test_dirs_and_last_snapshot(pair):
    for command in ("dirs", "last_snapshot"):
        zk, ours = both(pair, command)
        assert shape(ours) == shape(zk) and list(ours) == list(zk), command


def test_dump(pair, scenario):
    zk, ours = both(pair, "dump")
    for server, answer in (("zookeeper", zk), ("zkcompat", ours)):
        sid = scenario[server].session_id
        assert answer["session_id_to_ephemeral_paths"][str(sid)] == ["/admin-a/b"], server
        expiring = [s for sids in answer["expiry_time_to_session_ids"].values() for s in sids]
        assert sid in expiring, server
        assert all(k.lstrip("-").isdigit() for k in answer["expiry_time_to_session_ids"])
    assert list(ours) == list(zk)


def test_watches(pair, scenario):
    zk, ours = both(pair, "watches")
    for server, answer in (("zookeeper", zk), ("zkcompat", ours)):
        paths = answer["session_id_to_watched_paths"][str(scenario[server].session_id)]
        assert sorted(paths) == ["/admin-a", "/admin-nope"], server
    assert list(ours) == list(zk)


def test_watches_by_path(pair, scenario):
    zk, ours = both(pair, "watches_by_path")
    assert ours["path_to_session_ids"].keys() == zk["path_to_session_ids"].keys()
    for server, answer in (("zookeeper", zk), ("zkcompat", ours)):
        for sids in answer["path_to_session_ids"].values():
            assert sids == [scenario[server].session_id], server
    assert list(ours) == list(zk)


def test_environment(pair):
    zk, ours = both(pair, "environment")
    assert set(zk) - set(ours) == ENVIRONMENT_JVM_ONLY
    assert set(ours) <= set(zk)
    assert all(isinstance(v, str) for k, v in ours.items() if k not in ("command", "error"))
    assert (ours["command"], ours["error"]) == (zk["command"], zk["error"])


def test_system_properties(pair):
    zk, ours = both(pair, "system_properties")
    assert all(isinstance(v, str) for k, v in ours.items() if k not in ("command", "error"))
    # zoo.cfg keys QuorumPeerConfig does not parse become zookeeper.KEY; ZooKeeper's
    # zookeeper.jmx.log4j.disable comes from the test's java -D flag.
    zk_cfg = {k: v for k, v in zk.items()
              if k.startswith("zookeeper.") and k != "zookeeper.jmx.log4j.disable"}
    ours_cfg = {k: v for k, v in ours.items() if k.startswith("zookeeper.")}
    ours_cfg.pop("zookeeper.admin.serverPort"), zk_cfg.pop("zookeeper.admin.serverPort")
    assert ours_cfg == zk_cfg
    assert list(ours)[-2:] == ["command", "error"]


def test_initial_configuration_is_the_file(pair):
    for server in pair:
        answer = server.get("initial_configuration")
        assert answer["initial_configuration"] == server.server.config_path.read_text()


def test_resets(pair):
    """stat_reset (srst) zeroes the server's counters, connection_stat_reset (crst) each
    connection's."""
    for server in pair:
        before = server.get("server_stats")["server_stats"]
        assert before["packets_received"] > 2, (server.kind, before)
        assert server.get("srst") == {"command": "stat_reset", "error": None}
        stats = server.get("server_stats")["server_stats"]
        assert stats["packets_received"] <= 2, (server.kind, stats)  # a ping may land
        assert server.get("crst") == {"command": "connection_stat_reset", "error": None}
        for c in server.get("connections")["connections"]:
            assert c["packets_received"] <= 2, (server.kind, c)


def test_not_serving_answers_as_zookeeper(tmp_path):
    """A command that needs a running server, asked while none serves (a member between
    roles): Commands.runCommand's error, under the name it was asked by."""
    ctx = build_standalone(Config(data_dir=tmp_path, force_sync=False))
    try:
        admin = AdminHttp(ctx, None)
        ctx.serving = False
        assert admin.run("srvr", {}) == {"command": "srvr", "error": NOT_SERVING}
        assert admin.run("ruok", {}) == {"command": "ruok", "error": NOT_SERVING}
        assert admin.run("envi", {})["error"] is None  # needs no server
        assert admin.run("zabstate", {}) == {"voting": False, "zabstate": "",
                                             "command": "zabstate", "error": None}
        ctx.serving = True
        assert admin.run("srvr", {})["error"] is None
    finally:
        ctx.snapshotter.close()
        ctx.datadir.close()


def test_admin_server_off_unless_enabled(tmp_path):
    """admin.enableServer=false leaves the port closed; the client port serves."""
    from conformance_tests.servers import free_port, start_zkcompat  # noqa: PLC0415

    port = free_port()
    server = start_zkcompat(tmp_path, 200, {"admin.enableServer": "false",
                                            "admin.serverPort": port})
    try:
        assert server.four_letter_word("ruok") == "imok"
        with pytest.raises(OSError):
            asyncio.run(asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5))
    finally:
        server.stop()
