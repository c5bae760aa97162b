"""Measurements, each producing table rows: closed-loop throughput of a workload on any
target (managed or external, one server or an ensemble), and recovery (load N znodes,
restart, time until serving, RSS) on managed servers."""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from bench import wire
from bench.loadgen import LoadPlan, run_load
from bench.servers import ManagedServer, Target
from bench.workloads import WORKLOADS, CreateWorkload

MB = 1 << 20
RSS_SETTLE_S = 2.0  # let a just-loaded server finish what it does after the last reply


@dataclass
class Row:
    section: str
    metric: str
    values: dict[str, float | None] = field(default_factory=dict)  # target name -> value
    fmt: str = "{:,.0f}"
    note: str = ""


@dataclass
class ClientShape:
    processes: int = 2
    sessions: int = 8
    inflight: int = 32


@dataclass(frozen=True)
class Level:
    """A client level: `sessions` in all, `inflight` requests outstanding on each, spread
    over up to `processes` client processes (fewer when they do not divide evenly)."""

    sessions: int
    inflight: int

    @property
    def name(self) -> str:
        return f"{self.sessions}x{self.inflight}"

    @classmethod
    def parse(cls, text: str) -> Level:
        s, sep, i = text.strip().lower().partition("x")
        if not sep or not s.isdigit() or not i.isdigit() or int(s) < 1 or int(i) < 1:
            raise ValueError(f"{text!r} is not SESSIONSxINFLIGHT (like 8x32)")
        return cls(int(s), int(i))

    def shape(self, processes: int) -> ClientShape:
        p = max(1, min(processes, self.sessions))
        while self.sessions % p:
            p -= 1
        return ClientShape(p, self.sessions // p, self.inflight)


SATURATED = 0.9  # a client process busier than this (of one core) limited the load
CLIENT_SHARE = 0.25  # with every core busy, clients above this share of the use crowd the server


def throughput(targets: list[Target], workload: str, shape: ClientShape | Level,
               duration_s: float, warmup_s: float, repeats: int, log=print,
               processes: int = 2) -> list[Row]:
    """Median over `repeats` runs, alternating targets so drift hits both alike. `shape`
    is a ClientShape or a Level (spread over `processes`)."""
    level = shape.name if isinstance(shape, Level) else None
    if isinstance(shape, Level):
        shape = shape.shape(processes)
    runs: dict[str, list] = {t.name: [] for t in targets}
    for rep in range(repeats):
        for t in targets:
            wl = WORKLOADS[workload](root=f"/bench-{workload}-{uuid.uuid4().hex[:8]}")
            plan = LoadPlan(wl, t.addresses, shape.processes, shape.sessions, shape.inflight,
                            duration_s, warmup_s,
                            server_pids=t.pids)
            res = run_load(plan)
            runs[t.name].append(res)
            gen = f"{res.generator_cpu:.0%}" if res.generator_cpu is not None else "-"
            log(f"  {wl.describe()}{' @ ' + level if level else ''} on {t.name} "
                f"(run {rep + 1}/{repeats}): {res.throughput:,.0f} ops/s, "
                f"p50 {res.percentile(0.5):.2f} ms, p99 {res.percentile(0.99):.2f} ms, "
                f"generator {gen}, errors {dict(res.errors) or 'none'}")
    title = WORKLOADS[workload](root="/x").describe()
    if level:
        title += f" @ {level}"
    rows = [
        Row(title, "throughput (ops/s)", fmt="{:,.0f}"),
        Row(title, "latency p50 (ms)", fmt="{:.2f}"),
        Row(title, "latency p99 (ms)", fmt="{:.2f}"),
        Row(title, "latency p999 (ms)", fmt="{:.2f}"),
        Row(title, "server CPU s / 1,000 ops", fmt="{:.3f}"),
        Row(title, "server RSS (MB)", fmt="{:,.0f}"),
        Row(title, "generator busiest process CPU (%)", fmt="{:.0f}"),
        Row(title, "all client processes CPU (cores)", fmt="{:.2f}"),
        Row(title, "error replies", fmt="{:,.0f}"),
    ]
    for name, results in runs.items():
        best = sorted(results, key=lambda r: r.throughput)[(len(results) - 1) // 2]  # median run (lower of two)
        rows[0].values[name] = best.throughput
        rows[1].values[name] = best.percentile(0.5)
        rows[2].values[name] = best.percentile(0.99)
        rows[3].values[name] = best.percentile(0.999)
        rows[4].values[name] = best.cpu_per_kop
        rows[5].values[name] = best.server_rss / MB if best.server_rss else None
        rows[6].values[name] = best.generator_cpu * 100 if best.generator_cpu is not None \
            else None
        rows[7].values[name] = best.generator_cpu_all
        rows[8].values[name] = sum(sum(r.errors.values()) for r in results)
    return rows


def warm_up(targets: list[Target], seconds: float, processes: int = 2) -> None:
    """Unmeasured 90/10 load at 8x32 on every target, so ZooKeeper's JIT has compiled its
    hot paths before the first measured case (Python has nothing to warm)."""
    shape = Level(8, 32).shape(processes)
    for t in targets:
        wl = WORKLOADS["mix"](root=f"/bench-warmup-{uuid.uuid4().hex[:8]}")
        run_load(LoadPlan(wl, t.addresses, shape.processes, shape.sessions, shape.inflight,
                          seconds, 0.0, latencies=False))


def saturation_lines(rows: list[Row], cores: int | None = None) -> list[str]:
    """Cases where a client process was near a full core, or where the client processes
    and the server together kept every core busy: there the generator, not the server
    alone, may have set the throughput."""
    cores = cores or os.cpu_count() or 1
    by_case: dict[str, dict[str, Row]] = {}
    for row in rows:
        by_case.setdefault(row.section, {})[row.metric] = row
    out = []
    for section, metrics in by_case.items():
        busiest = metrics.get("generator busiest process CPU (%)")
        if busiest is None:
            continue
        for name, value in busiest.values.items():
            if value is None:
                continue
            ops = metrics["throughput (ops/s)"].values.get(name)
            per_kop = metrics["server CPU s / 1,000 ops"].values.get(name)
            clients = metrics["all client processes CPU (cores)"].values.get(name)
            server = ops * per_kop / 1000 if ops and per_kop is not None else None
            used = (clients or 0.0) + (server or 0.0)
            if value >= SATURATED * 100:
                out.append(f"{section} on {name}: busiest client process at {value:.0f}% "
                           "of a core")
            elif server is not None and used >= SATURATED * cores:
                who = ("the clients took cores the server could use" if clients
                       and clients >= CLIENT_SHARE * used else "server-bound, not the generator")
                out.append(f"{section} on {name}: all cores busy, clients {clients:.2f} + "
                           f"server {server:.2f} of {cores} ({who})")
    return out


def recovery(servers: list[ManagedServer], znodes: int, shape: ClientShape,
             log=print, restart: bool = True) -> list[Row]:
    """Per server: start empty, load `znodes` creates of 100 B (pipelined), RSS per znode,
    stop, restart, time until a session reads a loaded node, check every znode is back,
    RSS. With restart=False only the load and its memory (the znodes scale check)."""
    section = (f"recovery, {znodes:,} znodes x 100 B" if restart
               else f"scale: {znodes:,} znodes x 100 B in memory")
    names = ["empty start until serving (s)", "load, pipelined creates (ops/s)",
             "RSS before load (MB)", "RSS after load (MB)", "RSS per znode after load (B)",
             "JVM live heap per znode, after a full GC (B)"]
    fmts = ["{:.2f}", "{:,.0f}", "{:,.0f}", "{:,.0f}", "{:,.0f}", "{:,.0f}"]
    if restart:
        names += ["dataDir on disk (MB)", "restart until serving (s)", "RSS after restart (MB)",
                  "RSS per znode after restart (B)"]
        fmts += ["{:,.0f}", "{:.2f}", "{:,.0f}", "{:,.0f}"]
    rows = [Row(section, n, fmt=f) for n, f in zip(names, fmts, strict=True)]
    for server in servers:
        wl = CreateWorkload(root="/recovery")
        plan = LoadPlan(wl, [("127.0.0.1", server.port)], shape.processes, shape.sessions,
                        shape.inflight, duration_s=None, warmup_s=0.0, total_requests=znodes,
                        latencies=False)
        first = wl.path(plan.slots()[0], 0)
        try:
            empty = server.start("/")
            time.sleep(RSS_SETTLE_S)
            rss_empty = server.rss_bytes()
            heap_empty = server.live_heap_bytes()
            res = run_load(plan)
            load_s = res.seconds
            if res.errors or res.total_replies != znodes:
                raise RuntimeError(f"load on {server.kind}: {res.total_replies} replies, "
                                   f"errors {dict(res.errors)}")
            time.sleep(RSS_SETTLE_S)
            rss_loaded = server.rss_bytes()
            heap_loaded = server.live_heap_bytes()
            values = [empty, znodes / load_s, rss_empty / MB, rss_loaded / MB,
                      (rss_loaded - rss_empty) / znodes,
                      (heap_loaded - heap_empty) / znodes
                      if heap_loaded is not None and heap_empty is not None else None]
            if restart:
                server.stop()
                disk = server.disk_bytes()
                restart_s = server.start(first)
                rss_after = server.rss_bytes()
                counted = _count(server, plan)
                if counted != znodes:
                    raise RuntimeError(f"{server.kind} recovered {counted} of {znodes} znodes")
                values += [disk / MB, restart_s, rss_after / MB, (rss_after - rss_empty) / znodes]
        finally:
            server.stop()
        line = (f"  {'recovery' if restart else 'znodes'} on {server.kind}: load "
                f"{znodes / load_s:,.0f} ops/s, RSS {rss_empty / MB:,.0f} -> "
                f"{rss_loaded / MB:,.0f} MB ({values[4]:,.0f} B per znode)")
        if restart:
            line += f", restart {restart_s:.2f} s, RSS after restart {rss_after / MB:,.0f} MB"
        log(line)
        for row, value in zip(rows, values, strict=True):
            row.values[server.kind] = value
    return rows


def _count(server: ManagedServer, plan: LoadPlan) -> int:
    s = wire.SyncSession("127.0.0.1", server.port)
    try:
        total = 0
        for slot in plan.slots():
            stat = s.stat(f"{plan.workload.root}/{slot.tag}")
            total += stat.numChildren if stat is not None else 0
        return total
    finally:
        s.close()


def managed(kind: str, workdir: Path) -> ManagedServer:
    return ManagedServer(kind, workdir / kind)
