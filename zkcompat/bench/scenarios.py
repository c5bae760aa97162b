"""Measurements, each producing table rows: closed-loop throughput of a workload on any
target (managed or external, one server or an ensemble), and recovery (load N znodes,
restart, time until serving, RSS) on managed servers."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from zkcompat.bench import wire
from zkcompat.bench.loadgen import LoadPlan, run_load
from zkcompat.bench.servers import ManagedServer, Target
from zkcompat.bench.workloads import WORKLOADS, CreateWorkload

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


def throughput(targets: list[Target], workload: str, shape: ClientShape, duration_s: float,
               warmup_s: float, repeats: int, log=print) -> list[Row]:
    """Median over `repeats` runs, alternating targets so drift hits both alike."""
    runs: dict[str, list] = {t.name: [] for t in targets}
    for rep in range(repeats):
        for t in targets:
            wl = WORKLOADS[workload](root=f"/bench-{workload}-{uuid.uuid4().hex[:8]}")
            plan = LoadPlan(wl, t.addresses, shape.processes, shape.sessions, shape.inflight,
                            duration_s, warmup_s)
            res = run_load(plan)
            runs[t.name].append(res)
            log(f"  {wl.describe()} on {t.name} (run {rep + 1}/{repeats}): "
                f"{res.throughput:,.0f} ops/s, p50 {res.percentile(0.5):.2f} ms, "
                f"p99 {res.percentile(0.99):.2f} ms, errors {dict(res.errors) or 'none'}")
    title = f"{WORKLOADS[workload](root='/x').describe()}"
    rows = [
        Row(title, "throughput (ops/s)", fmt="{:,.0f}"),
        Row(title, "latency p50 (ms)", fmt="{:.2f}"),
        Row(title, "latency p99 (ms)", fmt="{:.2f}"),
        Row(title, "error replies", fmt="{:,.0f}"),
    ]
    for name, results in runs.items():
        best = sorted(results, key=lambda r: r.throughput)[(len(results) - 1) // 2]  # median run (lower of two)
        rows[0].values[name] = best.throughput
        rows[1].values[name] = best.percentile(0.5)
        rows[2].values[name] = best.percentile(0.99)
        rows[3].values[name] = sum(sum(r.errors.values()) for r in results)
    return rows


def recovery(servers: list[ManagedServer], znodes: int, shape: ClientShape,
             log=print) -> list[Row]:
    """Per server: start empty, load `znodes` creates of 100 B (pipelined), stop, restart,
    time until a session reads a loaded node, check every znode is back, RSS."""
    section = f"recovery, {znodes:,} znodes x 100 B"
    names = ("empty start until serving (s)", "load, pipelined creates (ops/s)",
             "RSS after load (MB)", "dataDir on disk (MB)", "restart until serving (s)",
             "RSS after restart (MB)")
    fmts = ("{:.2f}", "{:,.0f}", "{:,.0f}", "{:,.0f}", "{:.2f}", "{:,.0f}")
    rows = [Row(section, n, fmt=f) for n, f in zip(names, fmts, strict=True)]
    for server in servers:
        wl = CreateWorkload(root="/recovery")
        plan = LoadPlan(wl, [("127.0.0.1", server.port)], shape.processes, shape.sessions,
                        shape.inflight, duration_s=None, warmup_s=0.0, total_requests=znodes,
                        latencies=False)
        first = wl.path(plan.slots()[0], 0)
        try:
            empty = server.start("/")
            res = run_load(plan)
            load_s = res.seconds
            if res.errors or res.total_replies != znodes:
                raise RuntimeError(f"load on {server.kind}: {res.total_replies} replies, "
                                   f"errors {dict(res.errors)}")
            time.sleep(RSS_SETTLE_S)
            rss_loaded = server.rss_bytes()
            server.stop()
            disk = server.disk_bytes()
            restart = server.start(first)
            rss_after = server.rss_bytes()
            counted = _count(server, plan)
            if counted != znodes:
                raise RuntimeError(f"{server.kind} recovered {counted} of {znodes} znodes")
        finally:
            server.stop()
        log(f"  recovery on {server.kind}: load {znodes / load_s:,.0f} ops/s, "
            f"restart {restart:.2f} s, RSS {rss_loaded / MB:,.0f} -> {rss_after / MB:,.0f} MB")
        for row, value in zip(rows, (empty, znodes / load_s, rss_loaded / MB, disk / MB, restart,
                                     rss_after / MB), strict=True):
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
