"""The ensemble scale suite's phases with every session connected (issue 27), on the
ensemble the load phase filled: S sessions per server with 5 watches each (data, child
and persistent), then a steady offered load of reads and writes, one setData watched by
every session, and a kill -9 of the leader with all of them connected. Reported side by
side, never asserted; the phases only fail when a session cannot be opened or a count
cannot be read."""

from __future__ import annotations

import math
import random
import re
import time
import urllib.request
from array import array
from contextlib import ExitStack
from dataclasses import dataclass

from bench import failover, wire
from bench.loadgen import LoadPlan, run_loads
from bench.scenarios import MB, RSS_SETTLE_S
from bench.servers import HOST, ManagedEnsemble, free_port
from bench.sessions import BASELINE_S, HeldSessions, PacedReader, percentile
from bench.workloads import SetDataWorkload, Workload
from zkcompat.config.zoocfg import PROMETHEUS_PROVIDER
from zkcompat.jute import records as r
from zkcompat.jute.constants import AddWatchMode, OpCode

# Kafka's brokers use 18 s, Curator 60 s; a client pings every third of it, so 36,000
# sessions send 3,600 pings/s, and a session the failover moves has 30 s to find a server.
SESSION_TIMEOUT_MS = 30_000
SESSIONS_PER_PROCESS_MAX = 6_000  # a client process's descriptors stay far below 20,000
HOLDER_PROCESSES_MIN = 2
# Each client process connects from its own loopback address, so no source address needs
# more than its share of the ~28,000 ephemeral ports towards a server port.
SOURCE_ADDRESS_FIRST = 11  # 127.0.0.11, 127.0.0.12, ...
WATCHES_PER_SESSION = 5  # see _watches
WATCH_INFLIGHT = WATCHES_PER_SESSION  # a session sends its watches at once
FAN_PATH = "/scale-fanout"
FANOUT_ROUNDS = 3
FANOUT_TIMEOUT_S = 120.0  # until the last event of one round
STEADY_PATH = "/scale-steady"
STEADY_WARMUP_S = 2.0
READ_PROCESSES, READ_SESSIONS, READ_INFLIGHT = 2, 6, 64  # sessions per process
WRITE_PROCESSES, WRITE_SESSIONS, WRITE_INFLIGHT = 1, 6, 32
RECONNECT_LIMIT_S = 3.0 * SESSION_TIMEOUT_MS / 1000  # every session back or expired by then
POLL_S = 0.25
# zkcompat's gauge of its event loop's longest stall (zkcompat.server.metrics), since srst
LOOP_STALL = re.compile(r"^zkcompat_event_loop_max_stall_ms ([0-9.eE+-]+)$", re.MULTILINE)


@dataclass
class SessionSizes:
    per_server: int = 12_000
    read_rate: float = 50_000.0  # offered getData/s, all servers together
    write_rate: float = 2_000.0  # offered setData/s
    steady_s: float = 60.0


def enable_loop_stall_metrics(ensemble: ManagedEnsemble) -> None:
    """zkcompat members serve /metrics (for their loop stall) on a port each; ZooKeeper's
    Debian package has no Prometheus provider, so its members are left as they are."""
    if ensemble.kind != "zkcompat":
        return
    for m in ensemble.members:
        m.extra_cfg.update({"metricsProvider.className": PROMETHEUS_PROVIDER,
                            "metricsProvider.httpHost": HOST,
                            "metricsProvider.httpPort": free_port()})


def _loop_stall_ms(member) -> float | None:
    port = member.extra_cfg.get("metricsProvider.httpPort")
    if port is None or not member.alive():
        return None
    try:
        with urllib.request.urlopen(f"http://{HOST}:{port}/metrics", timeout=10) as resp:
            m = LOOP_STALL.search(resp.read().decode())
    except OSError:
        return None
    return float(m.group(1)) if m else None


def _watch_count(ensemble: ManagedEnsemble) -> int | None:
    counts = [wire.mntr(HOST, m.port).get("zk_watch_count") for m in ensemble.members]
    return sum(int(c) for c in counts) if None not in counts else None


def _digest_log(member) -> dict[int, str]:
    """The `hash` command's digest history: zxid -> the tree's digest after it."""
    out = {}
    for line in (wire.four_letter_word(HOST, member.port, "hash") or "").splitlines():
        zxid, sep, digest = line.partition(":")
        try:
            if sep:
                out[int(zxid.strip(), 16)] = digest.strip()
        except ValueError:
            continue
    return out


def compare_digests(ensemble: ManagedEnsemble) -> tuple[int, int]:
    """(zxids every member has a digest for, how many of them differ between members)."""
    logs = [_digest_log(m) for m in ensemble.members]
    common = set.intersection(*(set(log) for log in logs)) if logs else set()
    differ = sum(1 for z in common if len({log[z] for log in logs}) > 1)
    return len(common), differ


class TreeReadWorkload(Workload):
    """getData of the loaded tree's parents (1 KB each), in a random order per session."""

    name = "tree-read"
    writes = False

    def __init__(self, root: str, parents: list[str]) -> None:
        super().__init__(root, 0)
        self.parents = parents

    def setup(self, session, slots) -> None:
        pass  # the load phase made the tree

    def requests(self, slot):
        rng = random.Random(slot.process * 7919 + slot.session)
        reqs = [r.GetDataRequest(p, False) for p in self.parents]
        while True:
            yield OpCode.GET_DATA, rng.choice(reqs)


def _watches(parents: list[str], inner: list[str]):
    """Session k's five watches: one persistent (addWatch) on FAN_PATH, two data watches
    (getData, exists) on parents of the tree, two child watches (getChildren) on its inner
    nodes (groups and deep chains: the directories a cache of children would watch)."""
    fan = (OpCode.ADD_WATCH, r.AddWatchRequest(FAN_PATH, int(AddWatchMode.PERSISTENT)))

    def watches(k: int) -> list:
        return [fan,
                (OpCode.GET_DATA, r.GetDataRequest(parents[k * 7919 % len(parents)], True)),
                (OpCode.EXISTS, r.ExistsRequest(parents[(k * 104_729 + 1) % len(parents)],
                                                True)),
                (OpCode.GET_CHILDREN, r.GetChildrenRequest(inner[k % len(inner)], True)),
                (OpCode.GET_CHILDREN, r.GetChildrenRequest(inner[k * 31 % len(inner)], True))]
    return watches


def _inner_nodes(root: str, parents: list[str]) -> list[str]:
    inner = set()
    for p in parents:
        parts = p[len(root) + 1:].split("/")[:-1]
        inner.update(f"{root}/{'/'.join(parts[:i])}" for i in range(1, len(parts) + 1))
    return sorted(inner)


class Connected:
    """The sessions of one ensemble, held from the sessions phase to the end of the last
    phase that needs them."""

    def __init__(self, sizes: SessionSizes, data_bytes: int, log) -> None:
        self.sizes = sizes
        self.data_bytes = data_bytes
        self.log = log
        self.held: HeldSessions | None = None
        self.total = 0

    def close(self) -> None:
        if self.held is not None:
            self.held.close()
            self.held = None

    def live(self) -> int:
        assert self.held is not None, "the sessions phase has not run"
        return sum(rep[0] for rep in self.held.command("reconnections"))

    def sessions(self, e: ManagedEnsemble, root: str, parents: list[str]) -> list:
        n = len(e.members)
        self.total = total = self.sizes.per_server * n
        admin = wire.SyncSession(HOST, e.members[0].port)
        try:
            err = admin.create(FAN_PATH, b"0")
            if err:
                raise wire.WireError(f"create {FAN_PATH}: err {err}")
        finally:
            admin.close()
        processes = max(HOLDER_PROCESSES_MIN, math.ceil(total / SESSIONS_PER_PROCESS_MAX))
        self.held = held = HeldSessions(
            [(HOST, m.port) for m in e.members], total, processes, SESSION_TIMEOUT_MS,
            watches=_watches(parents, _inner_nodes(root, parents)), inflight=WATCH_INFLIGHT,
            sources=[f"127.0.0.{SOURCE_ADDRESS_FIRST + i}" for i in range(processes)],
            reconnect=True)
        time.sleep(RSS_SETTLE_S)
        rss0 = [m.rss_bytes() for m in e.members]
        opened, errors, open_s = held.start()
        if errors:
            raise RuntimeError(f"opening {total:,} sessions: {errors[0]}")
        time.sleep(RSS_SETTLE_S)
        rss1 = [m.rss_bytes() for m in e.members]
        replies, errs, register_s = held.register()
        time.sleep(RSS_SETTLE_S)
        rss2 = [m.rss_bytes() for m in e.members]
        watches = replies - sum(errs.values())
        per_server = total / n
        per_session = [(b - a) / per_server for a, b in zip(rss0, rss1, strict=True)]
        per_watch = [(b - a) / (watches / n) for a, b in zip(rss1, rss2, strict=True)]
        held.measure()
        time.sleep(SESSION_TIMEOUT_MS / 3000 + 1)  # every session pings once at least
        pings = held.pings()
        self.log(f"  sessions on {e.kind}: {opened:,} in {open_s:.1f} s over {processes} "
                 f"client processes, {watches:,} watches in {register_s:.1f} s, "
                 f"{sum(per_session) / n / 1024:.1f} KB per session, "
                 f"{sum(per_watch) / n:,.0f} B per watch, ping p99 "
                 f"{percentile(pings, 0.99) or float('nan'):.2f} ms")
        return [
            ("sessions opened (all servers)", "{:,.0f}", opened),
            ("client processes holding them", "{:,.0f}", processes),
            ("sessions opened per second", "{:,.0f}", opened / open_s if open_s else None),
            ("RSS per server with sessions and watches, mean (MB)", "{:,.0f}",
             sum(rss2) / n / MB),
            ("RSS per session, mean of servers (KB)", "{:.2f}", sum(per_session) / n / 1024),
            ("RSS per session, max of servers (KB)", "{:.2f}", max(per_session) / 1024),
            ("watches set (data, child, persistent)", "{:,.0f}", watches),
            ("watch requests failed", "{:,.0f}", sum(errs.values())),
            ("watches set per second", "{:,.0f}", watches / register_s if register_s else None),
            ("watches the servers count (mntr zk_watch_count, sum)", "{:,.0f}",
             _watch_count(e)),
            ("RSS per watch, mean of servers (B)", "{:,.0f}", sum(per_watch) / n),
            ("ping p50, every session, quiet (ms)", "{:.2f}", percentile(pings, 0.5)),
            ("ping p99, every session, quiet (ms)", "{:.2f}", percentile(pings, 0.99)),
            ("pings timed", "{:,.0f}", len(pings)),
        ]

    def steady(self, e: ManagedEnsemble, root: str, parents: list[str]) -> list:
        assert self.held is not None, "the sessions phase has not run"
        sizes = self.sizes
        addresses = [(HOST, m.port) for m in e.members]
        pids = [m.pid for m in e.members]
        plans = [LoadPlan(TreeReadWorkload(root, parents), addresses, READ_PROCESSES,
                          READ_SESSIONS, READ_INFLIGHT, sizes.steady_s + STEADY_WARMUP_S,
                          STEADY_WARMUP_S, rate_per_s=sizes.read_rate, server_pids=pids),
                 LoadPlan(SetDataWorkload(STEADY_PATH, self.data_bytes),
                          addresses, WRITE_PROCESSES, WRITE_SESSIONS, WRITE_INFLIGHT,
                          sizes.steady_s + STEADY_WARMUP_S, STEADY_WARMUP_S,
                          rate_per_s=sizes.write_rate)]
        leader = failover.find_leader(e)
        for m in e.members:
            wire.four_letter_word(HOST, m.port, "srst")  # the loop stall counts from here
        self.held.pings()
        reads, writes = run_loads(plans)
        pings = self.held.pings()
        stalls = {m.myid: _loop_stall_ms(m) for m in e.members}
        followers = [v for m in e.members if m is not leader and (v := stalls[m.myid])
                     is not None]
        lost = self.total - self.live()
        time.sleep(RSS_SETTLE_S)  # every member applies the last writes
        compared, differ = compare_digests(e)
        self.log(f"  steady load on {e.kind}: {reads.throughput:,.0f} reads/s (p99 "
                 f"{reads.percentile(0.99):.2f} ms), {writes.throughput:,.0f} writes/s (p99 "
                 f"{writes.percentile(0.99):.2f} ms), ping p99 "
                 f"{percentile(pings, 0.99) or float('nan'):.2f} ms, loop stall max "
                 f"{ {k: round(v) for k, v in stalls.items() if v is not None} }, sessions "
                 f"lost {lost}; digests at {compared} zxids, "
                 f"{differ} differ")
        rows = []
        for name, res, rate in (("getData", reads, sizes.read_rate),
                                ("setData", writes, sizes.write_rate)):
            rows += [
                (f"{name} offered per second", "{:,.0f}", rate),
                (f"{name} per second achieved", "{:,.0f}", res.throughput),
                (f"{name} not sent: every session had its requests in flight (%)", "{:.1f}",
                 res.missed / res.offered * 100 if res.offered else None),
                (f"{name} p50 (ms)", "{:.2f}", res.percentile(0.5)),
                (f"{name} p99 (ms)", "{:.2f}", res.percentile(0.99)),
                (f"{name} p999 (ms)", "{:.2f}", res.percentile(0.999)),
                (f"{name} error replies", "{:,.0f}", sum(res.errors.values())),
            ]
        return rows + [
            ("server CPU, all servers (cores)", "{:.2f}",
             reads.server_cpu_s / reads.cpu_window_s
             if reads.server_cpu_s is not None and reads.cpu_window_s else None),
            ("ping p99 of the held sessions meanwhile (ms)", "{:.2f}",
             percentile(pings, 0.99)),
            ("event-loop stall max, leader (ms; n/a for ZooKeeper)", "{:.1f}",
             stalls[leader.myid]),
            ("event-loop stall max, worst follower (ms)", "{:.1f}",
             max(followers) if followers else None),
            ("held sessions lost", "{:,.0f}", lost),
            ("zxids whose tree digest every server logged (hash)", "{:,.0f}", compared),
            ("... of them with digests that differ between servers", "{:,.0f}", differ),
        ]

    def fanout(self, e: ManagedEnsemble, root: str, parents: list[str]) -> list:
        assert self.held is not None, "the sessions phase has not run"
        watchers = self.live()
        leader = failover.find_leader(e)
        admin = wire.SyncSession(HOST, leader.port)
        delays: list[float] = []
        alls: list[float] = []
        replies: list[float] = []
        notified: list[int] = []
        windows: list[tuple[float, float]] = []
        try:
            with ExitStack() as stack:
                readers = [stack.enter_context(PacedReader(m.port, parents))
                           for m in e.members if m is not leader]
                t_base = time.monotonic()
                time.sleep(BASELINE_S)
                for rnd in range(FANOUT_ROUNDS):
                    self.held.command("fanout", FAN_PATH)
                    t0 = time.monotonic()
                    err, _ = admin.call(OpCode.SET_DATA, r.SetDataRequest(
                        FAN_PATH, b"%d" % rnd, -1))
                    replies.append((time.monotonic() - t0) * 1000)
                    if err:
                        raise wire.WireError(f"setData {FAN_PATH}: err {err}")
                    times = self._events(watchers, t0 + FANOUT_TIMEOUT_S)
                    notified.append(len(times))
                    delays += [(t - t0) * 1000 for t in times]
                    t_last = max(times, default=t0)
                    alls.append((t_last - t0) * 1000)
                    windows.append((t0, t_last))
                    time.sleep(0.5)
        finally:
            admin.close()
        self.held.command("fanout", None)
        for reader in readers:
            if reader.failure or reader.errors:
                raise RuntimeError(f"reads beside the fan-out: {reader.errors} errors, "
                                   f"{reader.failure or 'no failure'}")
        before = sorted(x for rd in readers for x in rd.window(t_base, windows[0][0]))
        during = sorted(x for rd in readers for t0, t1 in windows for x in rd.window(t0, t1))
        delays.sort()
        self.log(f"  fan-out on {e.kind}: {min(notified):,} of {watchers:,} watchers notified, "
                 f"the last after {max(alls):.0f} ms (p50 {percentile(delays, 0.5):.0f}, p99 "
                 f"{percentile(delays, 0.99):.0f} ms); followers' getData p99 "
                 f"{percentile(during, 0.99) or float('nan'):.2f} ms meanwhile")
        return [
            ("watchers (live sessions)", "{:,.0f}", watchers),
            ("watchers notified, fewest of the rounds", "{:,.0f}", min(notified)),
            ("watchers not notified, most of the rounds", "{:,.0f}", watchers - min(notified)),
            ("setData reply, median round (ms)", "{:.1f}", sorted(replies)[len(replies) // 2]),
            ("until one watcher has its event, p50 (ms)", "{:.1f}", percentile(delays, 0.5)),
            ("until one watcher has its event, p99 (ms)", "{:.1f}", percentile(delays, 0.99)),
            ("until the last watcher has its event, median round (ms)", "{:.1f}",
             sorted(alls)[len(alls) // 2]),
            ("until the last watcher has its event, worst round (ms)", "{:.1f}", max(alls)),
            ("followers' getData p99 before (ms)", "{:.2f}", percentile(before, 0.99)),
            ("followers' getData p99 while events go out (ms)", "{:.2f}",
             percentile(during, 0.99)),
            ("followers' getData reads while events go out", "{:,.0f}", len(during)),
        ]

    def _events(self, expected: int, deadline: float) -> list[float]:
        """Every client process's event arrival times for this round, once `expected` have
        arrived or the deadline passed."""
        while True:
            times = array("d")
            for got in self.held.command("events"):
                times.frombytes(got)
            if len(times) >= expected or time.monotonic() > deadline:
                return list(times)
            time.sleep(POLL_S)

    def failover(self, e: ManagedEnsemble, root: str, parents: list[str]) -> list:
        assert self.held is not None, "the sessions phase has not run"
        held = self.held
        n = len(e.members)
        leader = failover.find_leader(e)
        dead = e.members.index(leader)
        # session k started on address k % n, and none has moved before this phase
        on_dead = sum(1 for k in range(self.total) if k % n == dead)
        held.command("forget_moves")
        seen: dict = {}

        def while_down(_leader, killed: float) -> None:
            deadline = killed + RECONNECT_LIMIT_S
            while True:
                reps = held.command("reconnections")
                down = [d for rep in reps for d in rep[1]]
                moves = [mv for rep in reps for mv in rep[2]]
                expired = sum(rep[3] for rep in reps)
                from_dead = [mv for mv in moves if mv[2] == dead]
                if (len(from_dead) + expired >= on_dead and not down) \
                        or time.monotonic() > deadline:
                    seen.update(killed=killed, down=down, moves=moves, expired=expired,
                                from_dead=from_dead, at=time.monotonic(),
                                gave_up=[g for rep in reps for g in rep[4]])
                    return
                time.sleep(POLL_S)

        acked = failover.one_round(e, while_down)
        killed = seen["killed"]
        back_dead = sorted((mv[1] - killed) * 1000 for mv in seen["from_dead"])
        others = sorted((mv[1] - killed) * 1000 for mv in seen["moves"] if mv[2] != dead)
        self.log(f"  failover on {e.kind}: first write {acked * 1000:.0f} ms after kill -9, "
                 f"{len(back_dead):,} of {on_dead:,} sessions of the dead leader back after "
                 f"{max(back_dead, default=float('nan')):,.0f} ms, {len(others):,} others "
                 f"moved, expired {seen['expired']}, still down {len(seen['down'])}, "
                 f"unanswered attempts (server, s after the kill) "
                 f"{[(g[0] + 1, round(g[1] - killed, 2)) for g in seen['gave_up']][:10]}")
        return [
            ("first acknowledged write after kill -9 (ms)", "{:,.0f}", acked * 1000),
            ("sessions on the killed leader", "{:,.0f}", on_dead),
            ("... reconnected to another server", "{:,.0f}", len(back_dead)),
            ("... until the last of them reconnected (ms)", "{:,.0f}",
             back_dead[-1] if back_dead and len(back_dead) == on_dead else None),
            ("... reconnect p50 (ms)", "{:,.0f}", percentile(back_dead, 0.5)),
            ("... reconnect p99 (ms)", "{:,.0f}", percentile(back_dead, 0.99)),
            ("sessions of the other servers that reconnected too", "{:,.0f}", len(others)),
            ("... until the last of those reconnected (ms)", "{:,.0f}",
             others[-1] if others else None),
            ("sessions expired (target 0)", "{:,.0f}", seen["expired"]),
            (f"sessions still disconnected after {RECONNECT_LIMIT_S:g} s", "{:,.0f}",
             len(seen["down"])),
            ("reconnect attempts a server accepted and never answered (given up after "
             f"{SESSION_TIMEOUT_MS / 1000 / n:g} s)", "{:,.0f}", len(seen["gave_up"])),
        ]
