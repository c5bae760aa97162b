"""The ensemble scale suite (issue 27's first phases): an ensemble of each kind, one after
the other, is loaded with N znodes of 1 KB in a tree of thousands of parents through the
client API; then one follower restarts on its own data, and one is wiped and rejoins (a
SNAP of the whole tree) while a reader times getData on the leader. Reported side by
side, never asserted, except that every phase ends with every znode where it should be."""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from bench import ensemble_sessions, failover, wire
from bench.loadgen import LoadPlan, run_load
from bench.scenarios import MB, RSS_SETTLE_S, ClientShape, Row
from bench.servers import HOST, ManagedEnsemble, ManagedServer
from bench.sessions import BASELINE_S, PacedReader, percentile
from bench.workloads import SessionSlot, Workload
from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode

DATA_BYTES = 1024
ZNODES_PER_PARENT = 300  # 1,000,000 znodes: 3,333 parents
PARENTS_MAX = 5_000
GROUPS = 32  # the top level under the root: /scale/g00 ... /scale/g31
DEEP_EVERY = 10  # one parent in ten lies at the end of a deep chain
DEEP_LEVELS = 5  # /scale/g07/d0/d1/d2/d3/d4/p00017: 8 levels down
# Data is random, from a pool of this many values used in turn: more than a LevelDB block
# or a snappy fragment (64 KiB) holds, so neither server's disk writes of it compress.
DATA_POOL = 256
# ZooKeeper's heap: what a DataNode with its data, path and Stat takes (its leader's live
# heap was data + 380 B per znode of 1 KB at 100,000), doubled for G1's headroom, on a base
# for the server itself; never below the 1 GB the rest of the bench gives it.
HEAP_BASE_MB = 512
HEAP_OVERHEAD_PER_ZNODE_B = 512
HEAP_HEADROOM = 2
HEAP_MIN_MB = 1024
SERVE_TIMEOUT_S = 900.0  # a wiped follower fetching a gigabyte, on a busy box
COUNT_TIMEOUT_S = 30.0  # a follower that serves has every committed znode soon after
# zkcompat's own log lines: the leader's SNAP stream, a learner's sync when it serves
SNAP_SENT = re.compile(r"event=snap_sent .*seconds=([0-9.]+)")
SERVING_SYNC = re.compile(r"event=serving mode=follower .*sync_ms=([0-9]+)")
# ZooKeeper's follower (Learner.syncWithLeader): from the SNAP's arrival to the snapshot
# it writes of it, the last step before it acknowledges NEWLEADER
ZK_SNAP_SYNC = re.compile(r"^(\S+ \S+) .*Getting a snapshot from leader.*?\n"
                          r"(?:.*\n)*?(\S+ \S+) .*Snapshot taken in", re.MULTILINE)
LOG_TIME = "%Y-%m-%d %H:%M:%S,%f"
PHASES = ("load", "restart", "rejoin", "sessions", "steady", "fanout", "failover")
NEED_SESSIONS = ("steady", "fanout", "failover")  # on the sessions that phase opened


@dataclass
class EnsembleScaleSizes:
    znodes: int = 1_000_000
    data_bytes: int = DATA_BYTES
    parents: int | None = None  # None: one per ZNODES_PER_PARENT znodes (one deep at least)
    servers: int = 3
    heap_mb: int | None = None  # ZooKeeper's -Xmx per server; None: sized from znodes
    phases: tuple[str, ...] = PHASES  # in PHASES' order; "load" first, always
    sessions: ensemble_sessions.SessionSizes = field(
        default_factory=ensemble_sessions.SessionSizes)

    @property
    def parent_count(self) -> int:
        if self.parents is not None:
            return self.parents
        return max(DEEP_EVERY, min(PARENTS_MAX, self.znodes // ZNODES_PER_PARENT))

    @property
    def zookeeper_heap_mb(self) -> int:
        if self.heap_mb is not None:
            return self.heap_mb
        per_znode = (self.data_bytes + HEAP_OVERHEAD_PER_ZNODE_B) * HEAP_HEADROOM
        return max(HEAP_MIN_MB, HEAP_BASE_MB + math.ceil(self.znodes * per_znode / MB))


class TreeWorkload(Workload):
    """Creates of `data_bytes` spread round robin over `parents` parents, under GROUPS
    groups, one parent in DEEP_EVERY at the end of a chain DEEP_LEVELS deeper; the parents
    hold `data_bytes` too, so a reader of them reads what a client of the leaves would. The
    data is random (DATA_POOL values), as incompressible for one server as the other."""

    name = "tree"

    def __init__(self, root: str, parents: int, data_bytes: int = DATA_BYTES) -> None:
        super().__init__(root, data_bytes)
        self.parents = [self._parent(i) for i in range(parents)]
        rng = random.Random(27)
        self.pool = [rng.randbytes(data_bytes) for _ in range(DATA_POOL)]

    def describe(self) -> str:
        return f"create ({len(self.data)} B) under {len(self.parents):,} parents"

    def _parent(self, i: int) -> str:
        group = f"{self.root}/g{i % GROUPS:02d}"
        if i % DEEP_EVERY == DEEP_EVERY - 1:
            group += "".join(f"/d{level}" for level in range(DEEP_LEVELS))
        return f"{group}/p{i:05d}"

    def setup(self, session: wire.SyncSession, slots: list[SessionSlot]) -> None:
        super().setup(session, slots)
        # every ancestor once, each before its children, pipelined on one session
        parents = set(self.parents)
        paths: dict[str, None] = {}
        for parent in self.parents:
            parts = parent[len(self.root):].split("/")[1:]
            for i in range(1, len(parts) + 1):
                paths[self.root + "/" + "/".join(parts[:i])] = None
        errs = session.call_many(
            (OpCode.CREATE, r.CreateRequest(p, self.pool[0] if p in parents else b"",
                                            wire.OPEN_ACL, 0)) for p in paths)
        bad = [(p, e) for p, e in zip(paths, errs, strict=True) if e]
        if bad:
            raise wire.WireError(f"creating {len(bad):,} parents failed, first {bad[0]}")

    def requests(self, slot):
        parents, pool, acl = self.parents, self.pool, wire.OPEN_ACL
        start = slot.process * 7919 + slot.session * 104_729  # sessions start apart
        seq = 0
        while True:
            parent = parents[(start + seq) % len(parents)]
            yield OpCode.CREATE, r.CreateRequest(f"{parent}/{slot.tag}-{seq:08d}",
                                                 pool[seq % DATA_POOL], acl, 0)
            seq += 1


def _znode_count(server: ManagedServer) -> int | None:
    value = wire.mntr(HOST, server.port).get("zk_znode_count")
    return int(value) if value is not None else None


def _followers(ensemble: ManagedEnsemble) -> list[ManagedServer]:
    return [m for m in ensemble.members if failover.server_mode(m.port) == "follower"]


def _rejoin_until_serving(follower: ManagedServer, leader: ManagedServer, probe: str,
                          wipe: bool) -> tuple[float, float, float]:
    """Stop a follower (and wipe it), start it: (spawned, serving, serving seconds), where
    serving is the moment it answered a getData of `probe` on its own port and `srvr` said
    follower. Then waits until its znode count is the leader's (nothing writes meanwhile)."""
    follower.stop()
    if wipe:
        follower.wipe()
    spawned = follower.spawn()
    follower.wait_serving(probe, SERVE_TIMEOUT_S)
    deadline = time.monotonic() + SERVE_TIMEOUT_S
    while failover.server_mode(follower.port) != "follower":
        if time.monotonic() > deadline or not follower.alive():
            raise RuntimeError(f"{follower.kind} {follower.myid} serves but is no follower")
        time.sleep(0.02)
    serving = time.monotonic()
    want = _znode_count(leader)
    deadline = serving + COUNT_TIMEOUT_S
    while (got := _znode_count(follower)) != want:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{follower.kind} {follower.myid} has {got} znodes, the leader "
                               f"{want}")
        time.sleep(0.1)
    return spawned, serving, serving - spawned


def _from_log(server: ManagedServer, pattern: re.Pattern) -> float | None:
    """zkcompat only: the number in the last line of the server's log that matches."""
    if server.kind != "zkcompat":
        return None
    try:
        text = (server.workdir / f"{server.kind}.out").read_text(errors="replace")
    except OSError:
        return None
    found = pattern.findall(text)
    return float(found[-1]) if found else None


def _zookeeper_snap_sync_s(follower: ManagedServer) -> float | None:
    """ZooKeeper only: the seconds of its last SNAP's sync, from its log; else None."""
    if follower.kind != "zookeeper":
        return None
    try:
        text = (follower.workdir / "zookeeper.log").read_text(errors="replace")
    except OSError:
        return None
    found = ZK_SNAP_SYNC.findall(text)
    if not found:
        return None
    got, taken = (datetime.strptime(t, LOG_TIME) for t in found[-1])
    return (taken - got).total_seconds()


def _load(ensemble: ManagedEnsemble, wl: TreeWorkload, sizes: EnsembleScaleSizes,
          shape: ClientShape, log) -> list[tuple[str, str, float | None]]:
    members = ensemble.members
    leader = failover.find_leader(ensemble)
    time.sleep(RSS_SETTLE_S)
    rss0 = [m.rss_bytes() for m in members]
    heap0 = leader.live_heap_bytes()
    count0 = _znode_count(leader) or 0
    plan = LoadPlan(wl, ensemble.target().addresses, shape.processes, shape.sessions,
                    shape.inflight, duration_s=None, warmup_s=0.0,
                    total_requests=sizes.znodes, server_pids=ensemble.target().pids)
    t0 = time.monotonic()
    res = run_load(plan)
    wall = time.monotonic() - t0
    if res.errors or res.total_replies != sizes.znodes:
        raise RuntimeError(f"load: {res.total_replies:,} replies, errors {dict(res.errors)}")
    created = (_znode_count(leader) or 0) - count0
    if created < sizes.znodes + len(wl.parents):
        raise RuntimeError(f"load: the leader counts {created:,} new znodes, not "
                           f"{sizes.znodes + len(wl.parents):,} or more")
    time.sleep(RSS_SETTLE_S)
    rss1 = [m.rss_bytes() for m in members]
    heap1 = leader.live_heap_bytes()
    growth = [(b - a) / sizes.znodes for a, b in zip(rss0, rss1, strict=True)]
    data_size = int(wire.mntr(HOST, leader.port).get("zk_approximate_data_size", 0))
    rate = sizes.znodes / res.seconds if res.seconds > 0 else None
    log(f"  load on {ensemble.kind}: {sizes.znodes:,} znodes in {wall:.1f} s "
        f"({rate or 0:,.0f} creates/s, p99 {res.percentile(0.99):.1f} ms), RSS "
        f"{', '.join(f'{b / MB:,.0f}' for b in rss1)} MB, "
        f"{sum(growth) / len(growth):,.0f} B per znode, {res.reconnects} reconnects "
        f"({res.resent_existing} creates sent again found applied)")
    return [
        ("load time, parents included (s)", "{:.1f}", wall),
        ("sessions reconnected during the load", "{:,.0f}", res.reconnects),
        ("creates per second", "{:,.0f}", rate),
        ("create latency p50 (ms)", "{:.2f}", res.percentile(0.5)),
        ("create latency p99 (ms)", "{:.2f}", res.percentile(0.99)),
        ("znodes on the leader (mntr)", "{:,.0f}", _znode_count(leader)),
        ("tree data + paths (mntr approximate_data_size, MB)", "{:,.1f}", data_size / MB),
        ("RSS per server before load, mean (MB)", "{:,.0f}", sum(rss0) / len(rss0) / MB),
        ("RSS per server after load, mean (MB)", "{:,.0f}", sum(rss1) / len(rss1) / MB),
        ("RSS per server after load, max (MB)", "{:,.0f}", max(rss1) / MB),
        ("RSS growth per znode, mean of servers (B)", "{:,.0f}", sum(growth) / len(growth)),
        ("RSS growth per znode, max of servers (B)", "{:,.0f}", max(growth)),
        ("JVM live heap per znode, leader, after a full GC (B)", "{:,.0f}",
         (heap1 - heap0) / sizes.znodes if heap0 is not None and heap1 is not None else None),
    ]


def _restart(ensemble: ManagedEnsemble, wl: TreeWorkload,
             log) -> list[tuple[str, str, float | None]]:
    leader = failover.find_leader(ensemble)
    follower = _followers(ensemble)[0]
    _, _, seconds = _rejoin_until_serving(follower, leader, wl.parents[-1], wipe=False)
    time.sleep(RSS_SETTLE_S)
    rss = follower.rss_bytes()
    log(f"  restart on {ensemble.kind}: follower {follower.myid} serves after {seconds:.2f} s,"
        f" RSS {rss / MB:,.0f} MB")
    return [("until the follower serves (s)", "{:.2f}", seconds),
            ("its znodes (mntr), as many as the leader's", "{:,.0f}", _znode_count(follower)),
            ("its RSS after the restart (MB)", "{:,.0f}", rss / MB)]


def _rejoin(ensemble: ManagedEnsemble, wl: TreeWorkload,
            log) -> list[tuple[str, str, float | None]]:
    leader = failover.find_leader(ensemble)
    follower = _followers(ensemble)[-1]
    data_size = int(wire.mntr(HOST, leader.port).get("zk_approximate_data_size", 0))
    with PacedReader(leader.port, wl.parents) as reader:
        t_base = time.monotonic()
        time.sleep(BASELINE_S)
        spawned, serving, seconds = _rejoin_until_serving(follower, leader, wl.parents[-1],
                                                          wipe=True)
    if reader.failure or reader.errors:
        raise RuntimeError(f"reads on the leader during the rejoin: {reader.errors} errors, "
                           f"{reader.failure or 'no failure'}")
    before = reader.window(t_base, spawned)
    during = reader.window(spawned, serving)
    time.sleep(RSS_SETTLE_S)
    rss = follower.rss_bytes()
    stream_s = _from_log(leader, SNAP_SENT)
    sync_ms = _from_log(follower, SERVING_SYNC)
    sync_s = sync_ms / 1000 if sync_ms is not None else _zookeeper_snap_sync_s(follower)
    log(f"  rejoin on {ensemble.kind}: wiped follower {follower.myid} serves after "
        f"{seconds:.2f} s ({data_size / MB / seconds:,.1f} MB/s of tree data), leader getData "
        f"p99 {percentile(during, 0.99) or float('nan'):.2f} ms over {len(during):,} reads "
        f"(before: {percentile(before, 0.99) or float('nan'):.2f} ms)")
    return [
        ("until the wiped follower serves (s)", "{:.2f}", seconds),
        ("tree data + paths sent (approximate_data_size, MB)", "{:,.1f}", data_size / MB),
        ("MB/s: that data over the time until it serves", "{:,.1f}", data_size / MB / seconds),
        ("SNAP streaming on the leader, its log (s)", "{:.2f}", stream_s),
        ("MB/s: that data over the streaming time", "{:,.1f}",
         data_size / MB / stream_s if stream_s else None),
        ("the follower's sync, SNAP installed, its log (s)", "{:.2f}", sync_s),
        ("leader getData p99 before the rejoin (ms)", "{:.2f}", percentile(before, 0.99)),
        ("leader getData p50 during the rejoin (ms)", "{:.2f}", percentile(during, 0.5)),
        ("leader getData p99 during the rejoin (ms)", "{:.2f}", percentile(during, 0.99)),
        ("leader getData max during the rejoin (ms)", "{:.1f}", percentile(during, 1.0)),
        ("leader getData reads during the rejoin", "{:,.0f}", len(during)),
        ("its znodes (mntr), as many as the leader's", "{:,.0f}", _znode_count(follower)),
        ("its RSS after the rejoin (MB)", "{:,.0f}", rss / MB),
    ]


def run(kinds: list[str], workdir: Path, sizes: EnsembleScaleSizes, shape: ClientShape,
        log=print, failures: list[str] | None = None) -> list[Row]:
    """Every phase on an ensemble of each kind in turn; a phase that fails on one kind logs
    why, appends it to `failures`, and leaves that kind's later cells empty."""
    failures = failures if failures is not None else []
    heap = f"-Xmx{sizes.zookeeper_heap_mb}m"
    n = sizes.servers
    ss = sizes.sessions
    total = ss.per_server * n
    # name -> (section, phase(ensemble, tree workload, the kind's connected sessions))
    every: dict[str, tuple[str, Callable]] = {
        "load": (f"ensemble scale ({n} servers): load {sizes.znodes:,} znodes x "
                 f"{sizes.data_bytes:,} B under {sizes.parent_count:,} parents",
                 lambda e, wl, _c: _load(e, wl, sizes, shape, log)),
        "restart": ("ensemble scale: restart one follower on its own data",
                    lambda e, wl, _c: _restart(e, wl, log)),
        "rejoin": ("ensemble scale: wipe one follower, it rejoins (SNAP)",
                   lambda e, wl, _c: _rejoin(e, wl, log)),
        "sessions": (f"ensemble scale: {total:,} sessions ({ss.per_server:,} per server), "
                     f"{ensemble_sessions.WATCHES_PER_SESSION} watches each",
                     lambda e, wl, c: c.sessions(e, wl.root, wl.parents)),
        "steady": (f"ensemble scale: {ss.read_rate:,.0f} getData/s + {ss.write_rate:,.0f} "
                   f"setData/s offered for {ss.steady_s:g} s, sessions connected",
                   lambda e, wl, c: c.steady(e, wl.root, wl.parents)),
        "fanout": ("ensemble scale: one setData watched by every session "
                   f"({ensemble_sessions.FANOUT_ROUNDS} rounds)",
                   lambda e, wl, c: c.fanout(e, wl.root, wl.parents)),
        "failover": ("ensemble scale: kill -9 of the leader, every session connected",
                     lambda e, wl, c: c.failover(e, wl.root, wl.parents)),
    }
    phases = [every[name] for name in PHASES if name in sizes.phases]
    log(f"ensemble scale: {n} servers of each kind, {sizes.znodes:,} znodes of "
        f"{sizes.data_bytes:,} B; ZooKeeper's heap {heap} per server; phases "
        f"{', '.join(p for p in PHASES if p in sizes.phases)}")
    rows: dict[tuple[str, str], Row] = {}
    for kind in kinds:
        ensemble = ManagedEnsemble(kind, workdir / kind, n, jvm_heap=heap)
        ensemble_sessions.enable_loop_stall_metrics(ensemble)
        wl = TreeWorkload("/scale", sizes.parent_count, sizes.data_bytes)
        connected = ensemble_sessions.Connected(ss, sizes.data_bytes, log)
        try:
            ensemble.start("/")
            for section, phase in phases:
                for metric, fmt, value in phase(ensemble, wl, connected):
                    row = rows.setdefault((section, metric), Row(section, metric, fmt=fmt))
                    row.values[kind] = value
        except Exception as e:  # noqa: BLE001 - reported; the other kind still runs
            failures.append(f"ensemble scale on {kind}: {type(e).__name__}: {e}")
            log(f"  ensemble scale on {kind} FAILED: {type(e).__name__}: {e}")
        finally:
            connected.close()
            ensemble.stop()
    heap_row = Row(phases[0][0], "ZooKeeper heap given per server (MB)", fmt="{:,.0f}",
                   values={"zookeeper": sizes.zookeeper_heap_mb} if "zookeeper" in kinds
                   else {})
    return [heap_row, *rows.values()] if rows else []
