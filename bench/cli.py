"""scripts/bench: zkcompat and Apache ZooKeeper, started in the same run with the same
zoo.cfg (forceSync=yes, standalone), measured alike, printed side by side with the ratio.

Each workload (getData, exists, getChildren of 100, setData, 90/10 mix, ephemeral-sequential
create+delete) runs at each level (sessions x requests in flight: 1x1, 8x32, 64x16) on
each server in turn: ops/s, p50/p99/p999, server CPU s per 1,000 ops, RSS, client CPU.
Then a watch fan-out to 1,000 sessions, 1,000 idle pinging sessions beside a small load,
recovery of N znodes (with RSS per znode), and a line naming the cases the load generator
may have limited.

--scale adds the scale checks, each on freshly started servers, reported and never
asserted: 10,000 sessions pinging every 3.3 s (10 s timeout) held 20 s (server CPU, RSS,
ping latency), RSS per znode for N znodes (unless recovery already reports it), 500,000
getData watches (100 sessions x 5,000 nodes: time, CPU, RSS per watch), and one setData
watched by 10,000 sessions (until every NodeDataChanged arrived). --quick scales them down.

--scale-ensemble adds the ensemble scale suite: a 3-server ensemble of each kind in turn is
loaded with N znodes of 1 KB (full 1,000,000, quick 100,000) under thousands of parents,
some deep, through the client API (creates per second, RSS per server and per znode); then
one follower restarts on its own data (until it serves), and one is wiped and rejoins by a
SNAP (until it serves, MB/s, the leader's getData p99 meanwhile). Then, on the same
ensemble, S sessions per server (full 12,000, quick 3,000) with 5 watches each (RSS per
session and per watch, ping p99), a steady offered load beside them (50,000 getData/s and
2,000 setData/s for 60 s: achieved rates, p50/p99/p999, event-loop stalls), one setData
watched by every session (until the last event), and kill -9 of the leader (first
acknowledged write, every session reconnected, none expired). --scale-phases picks
phases. ZooKeeper gets a heap sized from N, printed with the figures.

  scripts/bench                 full: 3 x 15 s per case, recovery of 1,000,000 znodes
  scripts/bench --quick         1.5 s per case, 100,000 znodes (under 3 minutes)
  scripts/bench --scale --workloads '' --fanout 0 --idle 0 --no-recovery
                                the scale checks alone (about 6 minutes)
  scripts/bench --scale-ensemble --scale-znodes 100000 --workloads '' --fanout 0 --idle 0 \
      --no-recovery             the ensemble scale suite alone, 100,000 znodes
  scripts/bench --scale-ensemble --scale-znodes 20000 --scale-sessions-per-server 3000 \
      --scale-steady-s 15 --workloads '' --fanout 0 --idle 0 --no-recovery
                                all of it, reduced (about 3 minutes)
  scripts/bench --workloads get --levels 1x1 --fanout 0 --idle 0 --no-recovery
  scripts/bench --connect zkc=127.0.0.1:2181,127.0.0.1:2182 --workloads set
                                an ensemble already running: no CPU or RSS for it
  scripts/bench --ensemble 3 --workloads set,get,mix --levels 8x32,64x16 --fanout 0 --idle 0
                                ensembles of 3 of each kind started by the run (CPU and RSS
                                summed over the members; fan-out and idle sessions on the
                                first one), then the failover rounds (kill -9 of the leader
                                to the first acknowledged write).

--help, --dry-run and bad arguments install nothing. A real run first says what it lacks
and then installs it: the virtualenv .venv with zkcompat (pip), and, when it starts Apache
ZooKeeper, Debian's zookeeper packages and a JDK (scripts/install-zookeeper
--reference-only, as root or with sudo).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from bench import ensemble_scale, ensemble_sessions, failover, report, scale, scenarios, sessions
from bench.servers import (
    ENSEMBLE_KINDS,
    ENSEMBLE_SIZES,
    ManagedEnsemble,
    ManagedServer,
    Target,
    parse_connect_string,
)
from bench.workloads import DEFAULT_WORKLOADS, WORKLOADS

KINDS = ("zkcompat", "zookeeper")
FULL = {"duration": 15.0, "warmup": 3.0, "repeats": 3, "znodes": 1_000_000,
        "fanout_rounds": 20, "server_warmup": 15.0,
        "scale_sessions": 10_000, "scale_hold": 20.0, "scale_watches": 500_000,
        "scale_fanout": 10_000, "scale_rounds": 5, "scale_znodes": 1_000_000,
        "scale_sessions_per_server": 12_000, "scale_steady_s": 60.0}
QUICK = {"duration": 1.5, "warmup": 0.5, "repeats": 1, "znodes": 100_000, "fanout_rounds": 5,
         "server_warmup": 4.0,
         "scale_sessions": 10_000, "scale_hold": 8.0, "scale_watches": 50_000,
         "scale_fanout": 10_000, "scale_rounds": 3, "scale_znodes": 100_000,
         "scale_sessions_per_server": 3_000, "scale_steady_s": 15.0}
LEVELS = "1x1,8x32,64x16"  # sessions x requests in flight per session
# scripts/bench first runs this module with PARSE_ONLY_ENV set, before it installs anything:
# --help, a usage error (2) and --dry-run end there; a real run exits with one of these,
# which tell the script what to install (a venv, and the reference ZooKeeper or not).
PARSE_ONLY_ENV = "ZKCOMPAT_BENCH_PARSE_ONLY"
EXIT_RUN = 10  # a real run of zkcompat (and --connect targets) only
EXIT_RUN_WITH_ZOOKEEPER = 11  # a real run that starts Apache ZooKeeper too


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="scripts/bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="short runs, 100k znodes")
    p.add_argument("--servers", default=",".join(KINDS),
                   help="servers this run starts (comma separated, of %(default)s; '' for none)")
    p.add_argument("--connect", action="append", default=[], metavar="NAME=HOST:PORT[,...]",
                   help="also measure a running server or ensemble (throughput only)")
    p.add_argument("--ensemble", type=int, default=1, metavar="N",
                   help="start each of --servers as an ensemble of N (3, 5 or 7) on loopback "
                   "instead of standalone (default %(default)s: standalone; of "
                   f"{', '.join(ENSEMBLE_KINDS)}; without recovery and --scale, "
                   "which measure one server; with the failover rounds)")
    p.add_argument("--failover-rounds", type=int, default=failover.ROUNDS_DEFAULT, metavar="N",
                   help="with --ensemble: rounds of kill -9 of the leader, timed to the first "
                   "acknowledged write after it (default %(default)s; 0: none)")
    p.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS),
                   help=f"throughput workloads (of {', '.join(WORKLOADS)}; '' for none; "
                   "default %(default)s)")
    p.add_argument("--levels", default=LEVELS,
                   help="client levels for each workload, SESSIONSxINFLIGHT, sessions spread "
                   "over --processes (default %(default)s)")
    p.add_argument("--fanout", type=int, default=1000, metavar="N",
                   help="watch fan-out to N sessions (default %(default)s; 0 to skip)")
    p.add_argument("--fanout-rounds", type=int, help="setData rounds of the fan-out (full 20)")
    p.add_argument("--idle", type=int, default=1000, metavar="N",
                   help="N idle pinging sessions beside a small load (default %(default)s; "
                   "0 to skip)")
    p.add_argument("--no-recovery", action="store_true", help="skip the recovery scenario")
    p.add_argument("--scale", action="store_true",
                   help="also run the scale checks (sessions, znodes, watches, fan-out) on "
                   "freshly started servers; off by default")
    p.add_argument("--scale-sessions", type=int, metavar="N",
                   help="scale: pinging sessions held (full and quick 10,000; 0 to skip)")
    p.add_argument("--scale-hold", type=float, metavar="SECONDS",
                   help="scale: how long the sessions are held (full 20, quick 8)")
    p.add_argument("--scale-watches", type=int, metavar="N",
                   help="scale: getData watches, over 100 sessions (full 500,000, quick "
                   "50,000; 0 to skip)")
    p.add_argument("--scale-fanout", type=int, metavar="N",
                   help="scale: sessions watching the changed node (full and quick 10,000; "
                   "0 to skip)")
    p.add_argument("--scale-rounds", type=int, help="scale: setData rounds of the fan-out "
                   "(full 5, quick 3)")
    p.add_argument("--scale-ensemble", action="store_true",
                   help="also run the ensemble scale suite (load N znodes of 1 KB, restart a "
                   "follower, wipe one and let it rejoin) on an ensemble of each kind; off by "
                   "default")
    p.add_argument("--scale-znodes", type=int, metavar="N",
                   help="ensemble scale: znodes loaded (full 1,000,000, quick 100,000)")
    p.add_argument("--scale-data-bytes", type=int, default=ensemble_scale.DATA_BYTES,
                   metavar="B", help="ensemble scale: data per znode (default %(default)s)")
    p.add_argument("--scale-parents", type=int, metavar="N",
                   help="ensemble scale: parents the znodes spread over (default one per "
                   f"{ensemble_scale.ZNODES_PER_PARENT} znodes, at most "
                   f"{ensemble_scale.PARENTS_MAX:,})")
    p.add_argument("--scale-ensemble-servers", type=int, default=3, metavar="N",
                   help="ensemble scale: servers per ensemble (3, 5 or 7; default %(default)s)")
    p.add_argument("--scale-phases", default=",".join(ensemble_scale.PHASES),
                   help="ensemble scale: the phases to run, in this order whatever the order "
                   "given (default %(default)s; load always; steady, fanout and failover "
                   "need sessions)")
    p.add_argument("--scale-sessions-per-server", type=int, metavar="N",
                   help="ensemble scale: sessions held on each server, 5 watches each "
                   "(full 12,000, quick 3,000)")
    p.add_argument("--scale-read-rate", type=float, default=50_000.0, metavar="PER_S",
                   help="ensemble scale: getData/s offered in the steady phase "
                   "(default %(default)g)")
    p.add_argument("--scale-write-rate", type=float, default=2_000.0, metavar="PER_S",
                   help="ensemble scale: setData/s offered in the steady phase "
                   "(default %(default)g)")
    p.add_argument("--scale-steady-s", type=float, metavar="SECONDS",
                   help="ensemble scale: how long the steady load runs (full 60, quick 15)")
    p.add_argument("--scale-heap-mb", type=int, metavar="MB",
                   help="ensemble scale: ZooKeeper's -Xmx per server (default sized from "
                   "--scale-znodes, at least 1,024)")
    p.add_argument("--znodes", type=int, help="znodes for recovery and for --scale's RSS per "
                   "znode (full 1,000,000, quick 100,000)")
    p.add_argument("--duration", type=float, help="seconds per throughput run (full 15)")
    p.add_argument("--warmup", type=float, help="unmeasured seconds at the start of a run")
    p.add_argument("--server-warmup", type=float, metavar="SECONDS",
                   help="unmeasured mixed load on each server before the first case, for "
                   "ZooKeeper's JIT (full 15, quick 4; 0 for none)")
    p.add_argument("--repeats", type=int, help="runs per workload and server; the median counts")
    p.add_argument("--processes", type=int, default=2, help="client processes (at most)")
    p.add_argument("--sessions", type=int, default=8,
                   help="sessions per client process when loading recovery's znodes")
    p.add_argument("--inflight", type=int, default=32,
                   help="requests in flight per session when loading recovery's znodes")
    p.add_argument("--workdir", type=Path, help="where dataDirs go (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the workdir afterwards")
    p.add_argument("--json", type=Path, help="also write the rows as JSON here")
    p.add_argument("--dry-run", action="store_true", help="print the resolved plan and exit")
    return p


def resolve(argv: list[str] | None = None) -> argparse.Namespace:
    p = parser()
    args = p.parse_args(argv)
    defaults = QUICK if args.quick else FULL
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.servers = [s for s in (x.strip() for x in args.servers.split(",")) if s]
    args.workloads = [w for w in (x.strip() for x in args.workloads.split(",")) if w]
    for s in args.servers:
        if s not in KINDS:
            p.error(f"--servers: unknown server {s!r} (known: {', '.join(KINDS)})")
    for w in args.workloads:
        if w not in WORKLOADS:
            p.error(f"--workloads: unknown workload {w!r} (known: {', '.join(WORKLOADS)})")
    try:
        args.levels = [scenarios.Level.parse(x) for x in args.levels.split(",") if x.strip()]
    except ValueError as e:
        p.error(f"--levels: {e}")
    if args.workloads and not args.levels:
        p.error("--levels: none given")
    external = []
    for spec in args.connect:
        name, sep, hosts = spec.partition("=")
        try:
            if not sep or not name:
                raise ValueError("expected NAME=HOST:PORT[,HOST:PORT...]")
            external.append((name, parse_connect_string(hosts)))
        except ValueError as e:
            p.error(f"--connect {spec!r}: {e}")
    args.external = external
    if not args.servers and not external:
        p.error("nothing to measure: no --servers and no --connect")
    if args.fanout < 0 or args.idle < 0:
        p.error("--fanout and --idle must not be negative")
    if min(args.scale_sessions, args.scale_watches, args.scale_fanout) < 0 \
            or args.scale_hold <= 0 or args.scale_rounds < 1:
        p.error("--scale-sessions, --scale-watches and --scale-fanout must not be negative, "
                "--scale-hold must be positive and --scale-rounds at least 1")
    if args.scale and not args.servers:
        p.error("--scale needs servers this run starts (--servers)")
    if args.scale_ensemble:
        if not args.servers:
            p.error("--scale-ensemble needs servers this run starts (--servers)")
        if args.scale_ensemble_servers not in ENSEMBLE_SIZES:
            p.error(f"--scale-ensemble-servers: an ensemble here has "
                    f"{', '.join(map(str, ENSEMBLE_SIZES))} servers")
        if args.scale_znodes < 1 or args.scale_data_bytes < 0 \
                or (args.scale_parents is not None and args.scale_parents < 1) \
                or (args.scale_heap_mb is not None and args.scale_heap_mb < 64):
            p.error("--scale-znodes and --scale-parents must be at least 1, "
                    "--scale-data-bytes not negative, --scale-heap-mb at least 64")
        phases = [x.strip() for x in args.scale_phases.split(",") if x.strip()]
        unknown = [x for x in phases if x not in ensemble_scale.PHASES]
        if unknown or "load" not in phases:
            p.error(f"--scale-phases: of {', '.join(ensemble_scale.PHASES)}, load among "
                    f"them{f'; unknown {unknown}' if unknown else ''}")
        if "sessions" not in phases and set(phases) & set(ensemble_scale.NEED_SESSIONS):
            p.error(f"--scale-phases: {', '.join(ensemble_scale.NEED_SESSIONS)} run on the "
                    "sessions phase's sessions: add sessions")
        args.scale_phases = tuple(x for x in ensemble_scale.PHASES if x in phases)
        if args.scale_sessions_per_server < 1 or args.scale_read_rate <= 0 \
                or args.scale_write_rate <= 0 or args.scale_steady_s <= 0:
            p.error("--scale-sessions-per-server must be at least 1, --scale-read-rate, "
                    "--scale-write-rate and --scale-steady-s positive")
    if args.ensemble != 1:
        if args.ensemble not in ENSEMBLE_SIZES:
            p.error(f"--ensemble: {args.ensemble} servers; an ensemble here has "
                    f"{', '.join(map(str, ENSEMBLE_SIZES))}")
        for s in args.servers:
            if s not in ENSEMBLE_KINDS:
                p.error(f"--ensemble: {s} cannot run as an ensemble here (only "
                        f"{', '.join(ENSEMBLE_KINDS)}); measure a running ensemble with "
                        "--connect")
        if args.scale:
            p.error("--ensemble: the scale checks measure one server; leave out --scale")
        args.no_recovery = True  # recovery measures one server's restart
    for name in ("znodes", "processes", "sessions", "inflight", "repeats", "fanout_rounds"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.duration <= args.warmup:
        p.error("--duration must be longer than --warmup")
    return args


def plan_of(args: argparse.Namespace) -> dict:
    return {
        "mode": "quick" if args.quick else "full",
        "servers": args.servers,
        "ensemble": args.ensemble,
        "external": {name: addrs for name, addrs in args.external},
        "workloads": args.workloads,
        "levels": [lv.name for lv in args.levels],
        "fanout": args.fanout or None, "fanout_rounds": args.fanout_rounds,
        "idle": args.idle or None,
        "recovery": None if args.no_recovery or not args.servers else args.znodes,
        "scale": None if not args.scale else {
            "sessions": args.scale_sessions, "hold_s": args.scale_hold,
            "znodes": None if not args.no_recovery else args.znodes,
            "watches": args.scale_watches, "fanout": args.scale_fanout,
            "fanout_rounds": args.scale_rounds},
        "scale_ensemble": None if not args.scale_ensemble else {
            "servers": args.scale_ensemble_servers, "znodes": args.scale_znodes,
            "data_bytes": args.scale_data_bytes,
            "parents": _ensemble_sizes(args).parent_count,
            "zookeeper_heap_mb": _ensemble_sizes(args).zookeeper_heap_mb,
            "phases": list(args.scale_phases),
            "sessions_per_server": args.scale_sessions_per_server,
            "read_rate": args.scale_read_rate, "write_rate": args.scale_write_rate,
            "steady_s": args.scale_steady_s},
        "server_warmup_s": args.server_warmup,
        "duration_s": args.duration, "warmup_s": args.warmup, "repeats": args.repeats,
        "clients": {"processes": args.processes, "sessions": args.sessions,
                    "inflight": args.inflight},
    }


def _ensemble_sizes(args: argparse.Namespace) -> ensemble_scale.EnsembleScaleSizes:
    return ensemble_scale.EnsembleScaleSizes(
        znodes=args.scale_znodes, data_bytes=args.scale_data_bytes,
        parents=args.scale_parents, servers=args.scale_ensemble_servers,
        heap_mb=args.scale_heap_mb, phases=tuple(args.scale_phases),
        sessions=ensemble_sessions.SessionSizes(
            per_server=args.scale_sessions_per_server, read_rate=args.scale_read_rate,
            write_rate=args.scale_write_rate, steady_s=args.scale_steady_s))


def main(argv: list[str] | None = None) -> int:
    args = resolve(argv)
    plan = plan_of(args)
    if args.dry_run:
        print(json.dumps(plan, indent=2))
        return 0
    if os.environ.get(PARSE_ONLY_ENV):
        return EXIT_RUN_WITH_ZOOKEEPER if "zookeeper" in args.servers else EXIT_RUN
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="zkcompat-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    shape = scenarios.ClientShape(args.processes, args.sessions, args.inflight)
    topology = "standalone" if args.ensemble == 1 else f"ensembles of {args.ensemble}"
    print(f"zkcompat bench ({plan['mode']}): {platform.python_version()} on "
          f"{os.cpu_count()} cores; forceSync=yes, {topology}; levels (sessions x in flight) "
          f"{', '.join(plan['levels'])} over up to {args.processes} client processes; "
          f"workdir {workdir}",
          flush=True)
    rows: list[scenarios.Row] = []
    scale_failures: list[str] = []
    started = time.monotonic()
    managed: list[ManagedServer | ManagedEnsemble] = []
    try:
        targets = [Target(name, addrs) for name, addrs in args.external]
        failover_rounds = args.failover_rounds if args.ensemble > 1 else 0
        if args.workloads or args.fanout or args.idle or failover_rounds:
            for kind in args.servers:
                server = (ManagedServer(kind, workdir / "writes" / kind) if args.ensemble == 1
                          else ManagedEnsemble(kind, workdir / "writes" / kind, args.ensemble))
                managed.append(server)
                server.start("/")
                targets.append(server.target())
            if args.server_warmup > 0:
                print(f"server warm-up: {args.server_warmup:g} s of 90/10 at 8x32 each",
                      flush=True)
                scenarios.warm_up(targets, args.server_warmup, args.processes)
            for wl in args.workloads:
                print(f"throughput: {wl}", flush=True)
                for level in args.levels:
                    rows += scenarios.throughput(targets, wl, level, args.duration,
                                                 args.warmup, args.repeats, log=_log,
                                                 processes=args.processes)
            if args.fanout:
                print(f"watch fan-out: {args.fanout:,} sessions", flush=True)
                rows += sessions.fanout(targets, args.fanout, args.fanout_rounds, log=_log)
            if args.idle:
                print(f"idle sessions: {args.idle:,}", flush=True)
                rows += sessions.idle(targets, args.idle, max(args.duration, 6.0), args.warmup,
                                      log=_log)
            ensembles = [m for m in managed if isinstance(m, ManagedEnsemble)]
            if ensembles and failover_rounds:
                print(f"failover: {failover_rounds} rounds", flush=True)
                rows += failover.failover(ensembles, failover_rounds, log=_log)
            for server in managed:
                server.stop()
        if plan["scale"]:
            sizes = scale.ScaleSizes(
                sessions=args.scale_sessions, hold_s=args.scale_hold,
                znodes=plan["scale"]["znodes"], watches=args.scale_watches,
                fanout=args.scale_fanout, fanout_rounds=args.scale_rounds,
                processes=args.processes)
            rows += scale.run(args.servers, workdir / "scale", sizes, shape, log=_log,
                              failures=scale_failures)
        if plan["scale_ensemble"]:
            rows += ensemble_scale.run(args.servers, workdir / "scale-ensemble",
                                       _ensemble_sizes(args), shape, log=_log,
                                       failures=scale_failures)
        if plan["recovery"]:
            print(f"recovery: {args.znodes:,} znodes", flush=True)
            servers = [ManagedServer(k, workdir / "recovery" / k) for k in args.servers]
            managed += servers
            rows += scenarios.recovery(servers, args.znodes, shape, log=_log)
    except Exception as e:  # noqa: BLE001 - one line, the servers stopped, a non-zero exit
        print(f"bench failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    finally:
        for server in managed:
            server.stop()
        if not args.keep and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    names = [name for name, _ in args.external] + list(args.servers)
    print()
    print(report.table(rows, names))
    saturated = scenarios.saturation_lines(rows) + sessions.fanout_saturated(rows)
    print(f"\ngenerator saturated (a client process at >= {scenarios.SATURATED:.0%} of a core, "
          f"or clients + server >= {scenarios.SATURATED:.0%} of all {os.cpu_count()} cores, "
          "which they share): " + ("none" if not saturated else ""))
    for line in saturated:
        print(f"  {line}")
    if plan["scale"] or plan["scale_ensemble"]:
        print("\nscale checks that failed: " + ("none" if not scale_failures else ""))
        for line in scale_failures:
            print(f"  {line}")
    print(f"\n({time.monotonic() - started:.0f} s; ratios are zkcompat/zookeeper: above 1 is "
          "more for zkcompat, so better for throughput and worse for time, latency and RSS)")
    if args.json:
        args.json.write_text(json.dumps({"plan": plan, "rows": [asdict(r) for r in rows],
                                         "generator_saturated": saturated,
                                         "scale_failures": scale_failures},
                                        indent=2))
    return 0


def _log(line: str) -> None:
    print(line, flush=True)
