"""The scale checks: 10,000 pinging sessions, a million znodes' memory, 500,000 watches,
one change watched by 10,000 sessions. Reported side by side, never asserted; each check
runs on a freshly started server of each kind, so the RSS it reports grew from that check
alone, and a server that falls over fails its own cells, not the run."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench import scenarios, sessions
from bench.loadgen import LoadPlan, cpu_seconds, rss_bytes, run_load
from bench.scenarios import MB, RSS_SETTLE_S, ClientShape, Row
from bench.servers import ManagedServer
from bench.workloads import CreateWorkload, SessionSlot

# kazoo's default session timeout; a client pings every third of it
SESSION_TIMEOUT_MS = 10_000
WATCH_INFLIGHT = 16  # getData-with-watch requests outstanding per watching session


@dataclass
class ScaleSizes:
    sessions: int = 10_000
    hold_s: float = 20.0
    znodes: int | None = 1_000_000  # None: the recovery scenario of the run reports them
    watches: int = 500_000
    watch_sessions: int = 100  # the watches are spread evenly over these
    fanout: int = 10_000
    fanout_rounds: int = 5
    processes: int = 2  # client processes holding the sessions and setting the watches

    @property
    def watch_nodes(self) -> int:
        return max(1, self.watches // self.watch_sessions)


def run(kinds: list[str], workdir: Path, sizes: ScaleSizes, shape: ClientShape,
        log=print, failures: list[str] | None = None) -> list[Row]:
    """Every check on every kind; a check that fails on one kind logs why, appends it to
    `failures` and leaves that kind's cells empty."""
    failures = failures if failures is not None else []
    rows: list[Row] = []
    if sizes.sessions:
        log(f"scale: {sizes.sessions:,} sessions pinging every "
            f"{SESSION_TIMEOUT_MS / 3000:.1f} s, held {sizes.hold_s:g} s")
        rows += _per_kind(kinds, workdir / "sessions", lambda s: held_sessions(s, sizes, log),
                          failures, "sessions", log)
    if sizes.znodes:
        log(f"scale: {sizes.znodes:,} znodes in memory")
        rows += _per_kind(kinds, workdir / "znodes", lambda s: scenarios.recovery(
            [s], sizes.znodes, shape, log=log, restart=False), failures, "znodes", log,
            started=False)
    if sizes.watches:
        log(f"scale: {sizes.watch_nodes * sizes.watch_sessions:,} watches "
            f"({sizes.watch_sessions:,} sessions x {sizes.watch_nodes:,} nodes)")
        rows += _per_kind(kinds, workdir / "watches", lambda s: watches(s, sizes, log),
                          failures, "watches", log)
    if sizes.fanout:
        log(f"scale: one change watched by {sizes.fanout:,} sessions")
        section = f"scale: one setData watched by {sizes.fanout:,} sessions"
        rows += _per_kind(kinds, workdir / "fanout", lambda s: sessions.fanout(
            [s.target()], sizes.fanout, sizes.fanout_rounds, log=log, section=section),
            failures, "fan-out", log)
    return rows


def _per_kind(kinds: list[str], workdir: Path, check: Callable[[ManagedServer], list[Row]],
              failures: list[str], name: str, log, started: bool = True) -> list[Row]:
    """Run `check` on a fresh server of each kind (started here unless `started` is False:
    then the check starts it) and merge the rows; a failure leaves that kind's cells empty."""
    merged: list[Row] = []
    for kind in kinds:
        server = ManagedServer(kind, workdir / kind)
        try:
            if started:
                server.start("/")
            rows = check(server)
        except Exception as e:  # noqa: BLE001 - reported, and the other kinds still run
            failures.append(f"{name} on {kind}: {type(e).__name__}: {e}")
            log(f"  {name} on {kind} FAILED: {type(e).__name__}: {e}")
            continue
        finally:
            server.stop()
        if not merged:
            merged = rows
            continue
        for into, row in zip(merged, rows, strict=True):
            assert (into.section, into.metric) == (row.section, row.metric)
            into.values.update(row.values)
    return merged


def _cpu(pids: list[int]) -> list[float | None]:
    return [cpu_seconds(p) for p in pids]


def _cores(c0: list[float | None], c1: list[float | None], wall_s: float) -> float | None:
    spent = [b - a for a, b in zip(c0, c1, strict=True) if a is not None and b is not None]
    return sum(spent) / wall_s if spent and wall_s > 0 else None


def held_sessions(server: ManagedServer, sizes: ScaleSizes, log=print) -> list[Row]:
    """`sizes.sessions` sessions opened over the client processes, each pinging every
    third of SESSION_TIMEOUT_MS, held `sizes.hold_s`: server CPU and RSS over the hold,
    ping latency, sessions lost."""
    section = (f"scale: {sizes.sessions:,} sessions, ping every "
               f"{SESSION_TIMEOUT_MS / 3000:.1f} s, held {sizes.hold_s:g} s")
    kind = server.kind
    time.sleep(RSS_SETTLE_S)
    rss0 = server.rss_bytes()
    with sessions.HeldSessions(server.target().addresses, sizes.sessions,
                               sizes.processes, SESSION_TIMEOUT_MS) as held:
        opened, errors, open_s = held.start()
        for e in errors:
            log(f"  sessions on {kind}: {e}")
        held.measure()
        t0, c0, g0 = time.monotonic(), cpu_seconds(server.pid), _cpu(held.pids)
        time.sleep(sizes.hold_s)
        t1, c1, g1 = time.monotonic(), cpu_seconds(server.pid), _cpu(held.pids)
        rss1 = rss_bytes(server.pid)
        alive = server.alive()
        lost, pings, late, _, lat = held.stop()
    cpu = (c1 - c0) / (t1 - t0) if c0 is not None and c1 is not None else None
    log(f"  {opened:,} sessions on {kind} (opened in {open_s:.1f} s): server CPU "
        f"{cpu if cpu is not None else float('nan'):.3f} cores, RSS "
        f"{(rss1 or 0) / MB:,.0f} MB, {pings:,} pings p99 {sessions._pct(lat, 0.99):.2f} ms, "
        f"late {late:,}, lost {lost:,}{'' if alive else ', SERVER EXITED'}")
    values = [
        ("sessions opened", "{:,.0f}", opened),
        ("sessions opened per second", "{:,.0f}", opened / open_s if open_s > 0 else None),
        ("server CPU while held (cores)", "{:.3f}", cpu),
        ("server CPU per ping (us)", "{:.0f}",
         cpu * (t1 - t0) / pings * 1e6 if cpu is not None and pings else None),
        ("server RSS before sessions (MB)", "{:,.0f}", rss0 / MB),
        ("server RSS with sessions (MB)", "{:,.0f}", rss1 / MB if rss1 else None),
        ("RSS per session (KB)", "{:.1f}",
         (rss1 - rss0) / opened / 1024 if rss1 and opened else None),
        ("ping latency p50 (ms)", "{:.2f}", sessions._pct(lat, 0.5)),
        ("ping latency p99 (ms)", "{:.2f}", sessions._pct(lat, 0.99)),
        ("pings answered while held", "{:,.0f}", pings),
        ("pings due while one was unanswered", "{:,.0f}", late),
        ("sessions lost", "{:,.0f}", lost + (sizes.sessions - opened)),
        ("client processes CPU (cores)", "{:.2f}", _cores(g0, g1, t1 - t0)),
    ]
    return [Row(section, m, {kind: v}, fmt=f) for m, f, v in values]


def watches(server: ManagedServer, sizes: ScaleSizes, log=print) -> list[Row]:
    """`sizes.watch_sessions` sessions each set a getData watch on every one of
    `sizes.watch_nodes` existing nodes (pipelined): time, server CPU while registering,
    RSS growth per watch (the sessions stay connected until it is read)."""
    nodes = sizes.watch_nodes
    total = nodes * sizes.watch_sessions
    section = f"scale: {total:,} watches ({sizes.watch_sessions:,} sessions x {nodes:,} nodes)"
    kind = server.kind
    address = server.target().addresses[0]
    wl = CreateWorkload(root="/scale-watch")
    run_load(LoadPlan(wl, [address], processes=1, sessions=1, inflight=64, duration_s=None,
                      warmup_s=0.0, total_requests=nodes, latencies=False))
    paths = [wl.path(SessionSlot(0, 0), i) for i in range(nodes)]
    with sessions.HeldSessions([address], sizes.watch_sessions, sizes.processes,
                               SESSION_TIMEOUT_MS, watch_paths=paths,
                               inflight=WATCH_INFLIGHT) as held:
        _, errors, _ = held.start()
        if errors:
            raise RuntimeError(f"watching sessions: {errors[0]}")
        time.sleep(RSS_SETTLE_S)
        rss0 = server.rss_bytes()
        heap0 = server.live_heap_bytes()
        t0, c0, g0 = time.monotonic(), cpu_seconds(server.pid), _cpu(held.pids)
        replies, errs, register_s = held.register()
        t1, c1, g1 = time.monotonic(), cpu_seconds(server.pid), _cpu(held.pids)
        time.sleep(RSS_SETTLE_S)
        rss1 = server.rss_bytes()
        heap1 = server.live_heap_bytes()
        lost, *_ = held.stop()
    cpu_s = c1 - c0 if c0 is not None and c1 is not None else None
    log(f"  {replies:,} watches on {kind}: {register_s:.2f} s, RSS {rss0 / MB:,.0f} -> "
        f"{rss1 / MB:,.0f} MB ({(rss1 - rss0) / max(replies, 1):,.0f} B per watch), "
        f"errors {dict(errs) or 'none'}, lost {lost}")
    values = [
        ("watches set", "{:,.0f}", replies - sum(errs.values())),
        ("register all, pipelined (s)", "{:.2f}", register_s),
        ("watches set per second", "{:,.0f}", replies / register_s if register_s > 0 else None),
        ("server CPU while registering (cores)", "{:.2f}",
         cpu_s / (t1 - t0) if cpu_s is not None else None),
        ("server CPU per watch (us)", "{:.1f}",
         cpu_s / replies * 1e6 if cpu_s is not None and replies else None),
        ("server RSS before watches (MB)", "{:,.0f}", rss0 / MB),
        ("server RSS with watches (MB)", "{:,.0f}", rss1 / MB),
        ("RSS per watch (B)", "{:,.0f}", (rss1 - rss0) / replies if replies else None),
        ("JVM live heap per watch, after a full GC (B)", "{:,.0f}",
         (heap1 - heap0) / replies if replies and heap0 is not None and heap1 is not None
         else None),
        ("error replies", "{:,.0f}", sum(errs.values())),
        ("sessions lost", "{:,.0f}", lost),
        ("client processes CPU (cores)", "{:.2f}", _cores(g0, g1, t1 - t0)),
    ]
    return [Row(section, m, {kind: v}, fmt=f) for m, f, v in values]
