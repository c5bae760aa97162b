"""scripts/bench still works: its argument parsing, and a tiny run on zkcompat alone (the
real benchmark is never run by the test suite; speed is not asserted here)."""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from bench import cli, scenarios, sessions
from bench.loadgen import LoadPlan, run_load
from bench.servers import ManagedEnsemble
from bench.workloads import WORKLOADS

REPO_ROOT = Path(__file__).resolve().parents[2]
TINY_RUN_TIMEOUT_S = 120
SCALE_RUN_TIMEOUT_S = 60
ENSEMBLE_SESSIONS_RUN_TIMEOUT_S = 180  # the reduced suite with sessions: ~70 s on an idle box


def test_quick_plan():
    args = cli.resolve(["--quick"])
    plan = cli.plan_of(args)
    assert plan["mode"] == "quick" and plan["recovery"] == 100_000
    assert plan["servers"] == ["zkcompat", "zookeeper"]
    assert plan["workloads"] == ["get", "exists", "children", "set", "mix", "ephemeral"]
    assert plan["levels"] == ["1x1", "8x32", "64x16"]
    assert cli.plan_of(cli.resolve([]))["recovery"] == 1_000_000


def test_external_ensemble_and_overrides():
    args = cli.resolve(["--servers", "", "--connect", "ens=127.0.0.1:2181,127.0.0.1:2182",
                        "--workloads", "set", "--duration", "3", "--warmup", "1"])
    plan = cli.plan_of(args)
    assert plan["external"] == {"ens": [("127.0.0.1", 2181), ("127.0.0.1", 2182)]}
    assert plan["recovery"] is None and plan["duration_s"] == 3.0


def test_an_ensemble_plan_has_no_recovery():
    plan = cli.plan_of(cli.resolve(["--servers", "zookeeper", "--ensemble", "5"]))
    assert plan["ensemble"] == 5 and plan["recovery"] is None
    assert cli.plan_of(cli.resolve([]))["ensemble"] == 1


@pytest.mark.parametrize("argv", [
    ["--servers", "etcd"],
    ["--workloads", "nope"],
    ["--connect", "127.0.0.1:2181"],
    ["--servers", ""],
    ["--duration", "1", "--warmup", "2"],
    ["--znodes", "0"],
    ["--levels", "8"],
    ["--levels", "0x4"],
    ["--levels", ""],
    ["--scale", "--scale-hold", "0"],
    ["--scale", "--scale-sessions", "-1"],
    ["--scale", "--servers", "", "--connect", "zk=127.0.0.1:2181"],
    ["--ensemble", "4"],  # an ensemble has 3, 5 or 7 servers
    ["--servers", "zookeeper", "--ensemble", "2"],
    ["--servers", "zookeeper", "--ensemble", "3", "--scale"],
])
def test_bad_arguments_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as e:
        cli.resolve(argv)
    assert e.value.code == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.timeout(TINY_RUN_TIMEOUT_S + 30)
def test_tiny_run_on_zkcompat_prints_the_table(tmp_path):
    out_json = tmp_path / "rows.json"
    result = subprocess.run(
        [str(REPO_ROOT / "scripts" / "bench"), "--servers", "zkcompat", "--duration", "1.5",
         "--warmup", "0.5", "--repeats", "1", "--znodes", "2000", "--processes", "1",
         "--sessions", "2", "--inflight", "4", "--workloads", "create", "--levels", "2x4", "--fanout", "0", "--idle", "0",
         "--server-warmup", "0.5",
         "--workdir", str(tmp_path / "w"),
         "--json", str(out_json)],
        capture_output=True, text=True, timeout=TINY_RUN_TIMEOUT_S, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "throughput (ops/s)" in result.stdout
    assert "restart until serving (s)" in result.stdout
    rows = json.loads(out_json.read_text())["rows"]
    by_metric = {(r["section"], r["metric"]): r["values"]["zkcompat"] for r in rows}
    assert by_metric[("create (100 B) @ 2x4", "throughput (ops/s)")] > 0
    assert by_metric[("create (100 B) @ 2x4", "error replies")] == 0
    assert by_metric[("create (100 B) @ 2x4", "server CPU s / 1,000 ops")] > 0
    assert by_metric[("recovery, 2,000 znodes x 100 B", "RSS after restart (MB)")] > 1
    assert isinstance(json.loads(out_json.read_text())["generator_saturated"], list)


def test_levels_split_over_processes():
    assert scenarios.Level.parse("64x16").shape(2) == scenarios.ClientShape(2, 32, 16)
    assert scenarios.Level.parse("1x1").shape(4) == scenarios.ClientShape(1, 1, 1)
    assert scenarios.Level.parse("9x2").shape(2) == scenarios.ClientShape(1, 9, 2)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", [n for n in WORKLOADS if n != "create"])
def test_each_workload_runs_without_errors(zkcompat_server, name):
    wl = WORKLOADS[name](root=f"/smoke-{name}")
    plan = LoadPlan(wl, [("127.0.0.1", zkcompat_server.port)], processes=2, sessions=2,
                    inflight=4, duration_s=0.4, warmup_s=0.1, server_pids=[zkcompat_server.pid])
    res = run_load(plan)
    assert res.replies > 0 and not res.errors
    assert res.server_cpu_s is not None and res.server_rss > 0


@pytest.mark.timeout(60)
def test_fanout_and_idle_sessions_on_zkcompat(zkcompat_server):
    targets = [zkcompat_server.target()]
    rows = sessions.fanout(targets, watchers=20, rounds=2, log=lambda _: None)
    by_metric = {row.metric: row.values["zkcompat"] for row in rows}
    assert by_metric["until all events arrived, median round (ms)"] > 0
    rows = sessions.idle(targets, idle_sessions=20, duration_s=0.6, warmup_s=0.1,
                         log=lambda _: None)
    by_metric = {row.metric: row.values["zkcompat"] for row in rows}
    assert by_metric["active throughput (ops/s)"] > 0 and by_metric["sessions lost"] == 0


def test_fanout_and_idle_arguments():
    plan = cli.plan_of(cli.resolve(["--quick", "--fanout", "0", "--idle", "50"]))
    assert plan["fanout"] is None and plan["idle"] == 50 and plan["fanout_rounds"] == 5
    with pytest.raises(SystemExit):
        cli.resolve(["--idle", "-1"])


def test_saturation_lines_name_generator_and_server_bound_cases():
    def case(section, busiest, clients, ops, per_kop):
        values = {"throughput (ops/s)": ops, "server CPU s / 1,000 ops": per_kop,
                  "generator busiest process CPU (%)": busiest,
                  "all client processes CPU (cores)": clients}
        return [scenarios.Row(section, m, {"zk": v}) for m, v in values.items()]

    rows = (case("a", 97, 1.0, 1000, 0.5) + case("b", 40, 0.8, 10_000, 0.1)
            + case("c", 10, 0.1, 10_000, 0.18) + case("d", 10, 0.1, 1000, 0.1))
    lines = scenarios.saturation_lines(rows, cores=2)
    assert len(lines) == 3
    assert lines[0].startswith("a on zk: busiest client process at 97%")
    assert "clients took cores" in lines[1] and "server-bound" in lines[2]


def test_scale_plan():
    plan = cli.plan_of(cli.resolve(["--scale"]))["scale"]
    assert plan == {"sessions": 10_000, "hold_s": 20.0, "znodes": None, "watches": 500_000,
                    "fanout": 10_000, "fanout_rounds": 5}
    plan = cli.plan_of(cli.resolve(["--scale", "--quick", "--no-recovery"]))["scale"]
    assert plan["znodes"] == 100_000 and plan["watches"] == 50_000 and plan["hold_s"] == 8.0
    assert cli.plan_of(cli.resolve([]))["scale"] is None


@pytest.mark.timeout(SCALE_RUN_TIMEOUT_S + 30)
def test_tiny_scale_run_on_zkcompat_reports_every_check(tmp_path):
    out_json = tmp_path / "rows.json"
    result = subprocess.run(
        [sys.executable, "-m", "bench", "--servers", "zkcompat", "--scale",
         "--scale-sessions", "50", "--scale-hold", "3", "--scale-watches", "500",
         "--scale-fanout", "50", "--scale-rounds", "2", "--znodes", "500",
         "--workloads", "", "--fanout", "0", "--idle", "0", "--no-recovery",
         "--workdir", str(tmp_path / "w"), "--json", str(out_json)],
        capture_output=True, text=True, timeout=SCALE_RUN_TIMEOUT_S, stdin=subprocess.DEVNULL,
        cwd=REPO_ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "scale checks that failed: none" in result.stdout
    out = json.loads(out_json.read_text())
    assert out["scale_failures"] == []
    got = {(r["section"], r["metric"]): r["values"]["zkcompat"] for r in out["rows"]}

    sessions_ = "scale: 50 sessions, ping every 3.3 s, held 3 s"
    assert got[(sessions_, "sessions opened")] == 50
    assert got[(sessions_, "sessions lost")] == 0
    assert got[(sessions_, "pings answered while held")] > 0
    assert got[(sessions_, "ping latency p99 (ms)")] > 0
    assert got[(sessions_, "server CPU while held (cores)")] >= 0
    assert got[(sessions_, "server RSS with sessions (MB)")] > 1

    znodes = "scale: 500 znodes x 100 B in memory"
    assert got[(znodes, "RSS after load (MB)")] > 1
    assert math.isfinite(got[(znodes, "RSS per znode after load (B)")])
    assert got[(znodes, "JVM live heap per znode, after a full GC (B)")] is None

    watches = "scale: 500 watches (100 sessions x 5 nodes)"
    assert got[(watches, "watches set")] == 500
    assert got[(watches, "error replies")] == 0 and got[(watches, "sessions lost")] == 0
    assert got[(watches, "register all, pipelined (s)")] > 0
    assert math.isfinite(got[(watches, "RSS per watch (B)")])

    fan = "scale: one setData watched by 50 sessions"
    assert got[(fan, "until all events arrived, median round (ms)")] > 0
    assert got[(fan, "setData reply, median round (ms)")] > 0


def test_scale_ensemble_plan():
    plan = cli.plan_of(cli.resolve(["--scale-ensemble"]))["scale_ensemble"]
    assert plan == {"servers": 3, "znodes": 1_000_000, "data_bytes": 1024, "parents": 3_333,
                    "zookeeper_heap_mb": 3_442,
                    "phases": ["load", "restart", "rejoin", "sessions", "steady", "fanout",
                               "failover"],
                    "sessions_per_server": 12_000, "read_rate": 50_000, "write_rate": 2_000,
                    "steady_s": 60}
    plan = cli.plan_of(cli.resolve(["--scale-ensemble", "--quick"]))["scale_ensemble"]
    assert plan["znodes"] == 100_000 and plan["zookeeper_heap_mb"] == 1024
    plan = cli.plan_of(cli.resolve(["--scale-ensemble", "--scale-znodes", "2000",
                                    "--scale-heap-mb", "256"]))["scale_ensemble"]
    assert plan["parents"] == 10 and plan["zookeeper_heap_mb"] == 256
    plan = cli.plan_of(cli.resolve(["--scale-ensemble", "--scale-phases", "failover,load,sessions",
                                    "--scale-sessions-per-server", "500"]))["scale_ensemble"]
    assert plan["phases"] == ["load", "sessions", "failover"]
    assert plan["sessions_per_server"] == 500
    assert cli.plan_of(cli.resolve([]))["scale_ensemble"] is None


@pytest.mark.parametrize("argv", [
    ["--scale-ensemble", "--scale-znodes", "0"],
    ["--scale-ensemble", "--scale-ensemble-servers", "4"],
    ["--scale-ensemble", "--servers", "", "--connect", "zk=127.0.0.1:2181"],
    ["--scale-ensemble", "--scale-phases", "restart,rejoin"],  # no load
    ["--scale-ensemble", "--scale-phases", "load,fanout"],  # fan-out to whom?
    ["--scale-ensemble", "--scale-phases", "load,nap"],
    ["--scale-ensemble", "--scale-sessions-per-server", "0"],
])
def test_bad_scale_ensemble_arguments_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as e:
        cli.resolve(argv)
    assert e.value.code == 2


@pytest.mark.timeout(SCALE_RUN_TIMEOUT_S + 30)
def test_tiny_ensemble_scale_run_on_zkcompat_reports_every_phase(tmp_path):
    """Load, restart and rejoin on a 3-server zkcompat ensemble: every figure is there and
    sane, and the wiped follower came back with every znode the leader has."""
    out_json = tmp_path / "rows.json"
    result = subprocess.run(
        [sys.executable, "-m", "bench", "--servers", "zkcompat", "--scale-ensemble",
         "--scale-znodes", "2000", "--processes", "1", "--sessions", "4", "--inflight", "16",
         "--scale-phases", "load,restart,rejoin",
         "--workloads", "", "--fanout", "0", "--idle", "0", "--no-recovery",
         "--workdir", str(tmp_path / "w"), "--json", str(out_json)],
        capture_output=True, text=True, timeout=SCALE_RUN_TIMEOUT_S, stdin=subprocess.DEVNULL,
        cwd=REPO_ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "scale checks that failed: none" in result.stdout, result.stdout
    rows = json.loads(out_json.read_text())["rows"]
    got = {r["metric"]: r["values"].get("zkcompat") for r in rows
           if r["section"].startswith("ensemble scale")}
    jvm_only = {"ZooKeeper heap given per server (MB)",
                "JVM live heap per znode, leader, after a full GC (B)"}
    assert len(got) == 29
    missing = [m for m, v in got.items() if m not in jvm_only and v is None]
    assert not missing
    assert got["creates per second"] > 0 and got["create latency p99 (ms)"] > 0
    assert got["sessions reconnected during the load"] == 0
    assert got["znodes on the leader (mntr)"] >= 2000 + 10  # the znodes and their parents
    assert got["tree data + paths (mntr approximate_data_size, MB)"] > 2000 * 1024 / (1 << 20)
    assert got["RSS per server after load, mean (MB)"] > 1
    assert got["RSS growth per znode, mean of servers (B)"] > 0
    assert got["until the follower serves (s)"] > 0
    assert got["until the wiped follower serves (s)"] > 0
    assert got["MB/s: that data over the time until it serves"] > 0
    assert got["SNAP streaming on the leader, its log (s)"] >= 0
    assert got["the follower's sync, SNAP installed, its log (s)"] > 0
    assert got["leader getData reads during the rejoin"] > 0
    assert got["leader getData p99 during the rejoin (ms)"] > 0
    restart, rejoin = [r["values"]["zkcompat"] for r in rows
                       if r["metric"] == "its znodes (mntr), as many as the leader's"]
    assert restart == rejoin == got["znodes on the leader (mntr)"]


@pytest.mark.timeout(ENSEMBLE_SESSIONS_RUN_TIMEOUT_S + 30)
def test_reduced_ensemble_scale_run_with_every_session_on_zkcompat(tmp_path):
    """Issue 27's whole suite, reduced (20,000 znodes, 3,000 sessions with 5 watches each):
    only what works or not is asserted, never a timing. The SNAP brings every znode, every
    watch is set, every watcher hears of the fan-out's change, the servers' tree digests
    agree, and when the leader is killed no session expires and every one of its sessions
    finds another server."""
    out_json = tmp_path / "rows.json"
    result = subprocess.run(
        [sys.executable, "-m", "bench", "--servers", "zkcompat", "--scale-ensemble",
         "--scale-znodes", "20000", "--scale-sessions-per-server", "1000",
         "--scale-steady-s", "5", "--scale-read-rate", "5000", "--scale-write-rate", "1000",
         "--workloads", "", "--fanout", "0", "--idle", "0", "--no-recovery",
         "--workdir", str(tmp_path / "w"), "--json", str(out_json)],
        capture_output=True, text=True, timeout=ENSEMBLE_SESSIONS_RUN_TIMEOUT_S,
        stdin=subprocess.DEVNULL, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "scale checks that failed: none" in result.stdout, result.stdout
    rows = json.loads(out_json.read_text())["rows"]

    def phase(name: str) -> dict:
        return {r["metric"]: r["values"].get("zkcompat") for r in rows
                if r["section"].startswith("ensemble scale") and name in r["section"]}

    load, rejoin = phase("load 20,000"), phase("rejoins (SNAP)")
    sessions, steady = phase("3,000 sessions"), phase("offered")
    fan, fail = phase("watched by every session"), phase("kill -9")
    assert load["znodes on the leader (mntr)"] == 20_000 + 66 + 68  # znodes, parents, dirs
    assert rejoin["its znodes (mntr), as many as the leader's"] == 20_134
    assert rejoin["SNAP streaming on the leader, its log (s)"] is not None
    assert sessions["sessions opened (all servers)"] == 3_000
    assert sessions["watches set (data, child, persistent)"] == 15_000
    assert sessions["watch requests failed"] == 0
    assert steady["getData error replies"] == steady["setData error replies"] == 0
    assert steady["held sessions lost"] == 0
    assert steady["zxids whose tree digest every server logged (hash)"] > 0
    assert steady["... of them with digests that differ between servers"] == 0
    assert fan["watchers (live sessions)"] == 3_000
    assert fan["watchers notified, fewest of the rounds"] == 3_000
    assert fail["sessions on the killed leader"] == 1_000
    assert fail["... reconnected to another server"] == 1_000
    assert fail["sessions expired (target 0)"] == 0
    assert fail["sessions still disconnected after 90 s"] == 0


def _srvr(port: int) -> dict[str, str]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"srvr")
        text = b""
        while chunk := s.recv(4096):
            text += chunk
    return dict(line.split(": ", 1) for line in text.decode().splitlines() if ": " in line)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", ["zookeeper", "zkcompat"])
def test_an_ensemble_is_started_measured_and_stopped(tmp_path, kind):
    """The ensemble the bench starts is a real one (one leader, the rest followers, on
    loopback), load spreads over all its members, and its CPU and RSS are summed."""
    ensemble = ManagedEnsemble(kind, tmp_path, 3)
    try:
        ensemble.start("/")
        before = [_srvr(m.port) for m in ensemble.members]
        assert sorted(b["Mode"] for b in before) == ["follower", "follower", "leader"]
        target = ensemble.target()
        assert len(target.addresses) == 3 and len(target.pids) == 3
        wl = WORKLOADS["set"](root="/smoke-ensemble")
        res = run_load(LoadPlan(wl, target.addresses, processes=1, sessions=3, inflight=4,
                                duration_s=1.5, warmup_s=0.5, server_pids=target.pids))
        assert res.replies > 0 and not res.errors
        after = [_srvr(m.port) for m in ensemble.members]
        for b, a in zip(before, after, strict=True):  # each member served a session
            assert int(a["Received"]) - int(b["Received"]) > 100
        assert res.server_cpu_s > 0
        assert res.server_rss > sum(m.rss_bytes() for m in ensemble.members) / 2
    finally:
        ensemble.stop()
    assert not any(m.alive() for m in ensemble.members)


def test_an_unknown_kind_is_not_started_as_an_ensemble(tmp_path):
    with pytest.raises(ValueError, match="cannot run as an ensemble"):
        ManagedEnsemble("etcd", tmp_path, 3)
