"""scripts/bench still works: its argument parsing, and a tiny run on zkcompat alone (the
real benchmark is never run by the test suite; speed is not asserted here)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from zkcompat.bench import cli, scenarios, sessions
from zkcompat.bench.loadgen import LoadPlan, run_load
from zkcompat.bench.servers import ManagedServer
from zkcompat.bench.workloads import WORKLOADS

REPO_ROOT = Path(__file__).resolve().parents[2]
TINY_RUN_TIMEOUT_S = 120


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


@pytest.fixture(scope="module")
def zkcompat_server(tmp_path_factory):
    server = ManagedServer("zkcompat", tmp_path_factory.mktemp("bench-server"))
    server.start("/")
    yield server
    server.stop()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", [n for n in WORKLOADS if n != "create"])
def test_each_workload_runs_without_errors(zkcompat_server, name):
    wl = WORKLOADS[name](root=f"/smoke-{name}")
    plan = LoadPlan(wl, [("127.0.0.1", zkcompat_server.port)], processes=2, sessions=2,
                    inflight=4, duration_s=0.4, warmup_s=0.1, server_pid=zkcompat_server.pid)
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
