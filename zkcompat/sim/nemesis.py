"""Faults: a plan drawn from the seed before the run starts, then carried out in order.

Each fault starts at its time (maybe while an earlier one still holds), holds for a
while, and heals (crashed servers restart,
cuts are removed, disks speed up). Kinds, weighted per profile:
  crash        one random server crashes (loses its unsynced writes) and restarts
  crash_leader the serving leader crashes and restarts
  crash_follower  a server other than the serving leader crashes and restarts
  power        every server crashes at once (a power failure) and all restart
  isolate      the serving leader is cut off from every other server, both ways
  split        a random minority and majority are cut apart
  oneway       one server cannot hear the others (it still reaches them)
  bridge       two halves that only one server connects
  reset        every connection between two servers drops (a lost segment)
  slow_disk    one server's fsyncs take 50-200 ms longer
  slow_leader_disk  the same, for the serving leader
  pause        one server is frozen (SIGSTOP: no timer fires, nothing it was sent is read)
               for longer than the session timeout and syncLimit, then resumed (SIGCONT)
  pause_leader the same, for the serving leader
  clock_jump   one server's wall clock steps forward or back by up to 10 s (and maybe its
               monotonic clock forward, as after a VM stall); the wall clock steps back
               when the fault heals. Safety must not depend on clocks: only sessions may
               expire early.
  fsync_fail   one server's next fsync fails: the server exits at once, as ZooKeeper's
               does (the failed batch may or may not have reached the platter), and is
               restarted when the fault heals
  newleader_power  a follower misses writes, then rejoins with a slow disk as the leader
               crashes, so it syncs into a new epoch by DIFF; the power fails while its
               fsync runs, and the new leader comes back last (the window a learner that
               ACKs NEWLEADER before its sync txns are durable loses acknowledged writes in)
  reconfig     a super session asks the serving leader to remove a voter (maybe itself),
               add back one a reconfig left out, or make an observer a participant
               (sim/reconfig.py); the "reconfig" profile mixes it with crashes, partitions
               and pauses, and turns reconfigEnabled on
  stale_leader the leader (with a follower of it, 5+ servers) is cut off from the other
               voters and frozen while they elect and write; it resumes unaware and is
               asked sync + getData (probe.py): stale unless quorumSync is on
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

from zkcompat.sim.probe import StaleLeaderProbe
from zkcompat.sim.reconfig import reconfig_once

PROFILES: dict[str, dict[str, float]] = {
    "none": {},
    "crash": {"crash": 3, "crash_leader": 3, "crash_follower": 2, "power": 1},
    "partition": {"isolate": 3, "split": 3, "oneway": 1, "bridge": 1, "reset": 1},
    "power": {"power": 1},
    "pause": {"pause": 1, "pause_leader": 1},
    "clock": {"clock_jump": 1},
    "fsync": {"fsync_fail": 1},
    "newleader": {"newleader_power": 1},
    # Not in "all": without quorumSync a stale read is ZooKeeper's behaviour (ZOOKEEPER-1675),
    # which the linearizability check reports.
    "stale_leader": {"stale_leader": 1},
    # Membership changes while servers crash, partitions come and go and leaders change.
    "reconfig": {"reconfig": 4, "crash": 1, "crash_leader": 1, "isolate": 1, "split": 1,
                 "pause_leader": 1, "power": 1},
    "all": {"crash": 2, "crash_leader": 2, "crash_follower": 1, "power": 1, "isolate": 2, "split": 2, "oneway": 1,
            "bridge": 1, "reset": 1, "slow_disk": 1, "slow_leader_disk": 1, "pause": 1,
            "pause_leader": 1, "clock_jump": 1, "fsync_fail": 1, "newleader_power": 1},
}
FIRST_FAULT_S = (1.0, 3.0)
GAP_S = (0.5, 3.0)
HOLD_S = (0.3, 5.0)
# A pause outlasts the session timeout (clients.SESSION_TIMEOUT_MS, 4 s) and syncLimit
# (5 ticks of 200 ms): the leader drops the paused follower, sessions may expire.
PAUSE_HOLD_S = (4.5, 7.0)
CLOCK_JUMP_MS_MAX = 10_000
FSYNC_FAIL_SLOW_MS = 30  # the failing fsync takes this long first (an I/O error is slow)
# newleader_power: the follower misses writes for LAG_S, its fsyncs then take SLOW_MS
# longer, the power fails POWER_AFTER_S after the leader crashed, and the server that led
# at that moment restarts LATE_S after the others.
NEWLEADER_LAG_S = (1.0, 2.5)
NEWLEADER_SLOW_MS = (300, 900)
NEWLEADER_POWER_AFTER_S = (0.2, 1.2)
NEWLEADER_LATE_S = (2.0, 3.0)
LONG_HOLDS = {"pause": PAUSE_HOLD_S, "pause_leader": PAUSE_HOLD_S,
              "newleader_power": (4.0, 6.0), "stale_leader": (5.0, 6.0)}


@dataclass(frozen=True)
class Fault:
    at_s: float
    kind: str
    hold_s: float
    pick: int  # which server (or which split) the fault takes, drawn with the plan


def plan(rng, duration_s: float, profile: str) -> list[Fault]:
    weights = PROFILES[profile]
    if not weights:
        return []
    kinds = sorted(weights)
    faults = []
    t = rng.uniform(*FIRST_FAULT_S)
    while True:
        hold = rng.uniform(*HOLD_S)
        if t + hold >= duration_s:
            return faults
        kind = rng.choices(kinds, [weights[k] for k in kinds])[0]
        if kind in LONG_HOLDS:
            hold = rng.uniform(*LONG_HOLDS[kind])
            if t + hold >= duration_s:
                return faults
        faults.append(Fault(round(t, 3), kind, round(hold, 3), rng.randrange(1 << 30)))
        # Half the time the next fault starts while this one still holds: bugs live in
        # combinations (a follower rejoining while the leader's disk lags).
        t += rng.uniform(*GAP_S) + (hold if rng.random() < 0.5 else 0.0)


class Nemesis:
    def __init__(self, cluster, faults: list[Fault]):
        self.cluster = cluster
        self.faults = faults
        self.scripted_busy = False

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        running = []
        for f in self.faults:
            await asyncio.sleep(max(0.0, f.at_s - loop.time()))
            running.append(loop.create_task(self._hold(f)))
        await asyncio.gather(*running)

    async def _hold(self, f: Fault) -> None:
        if f.kind == "newleader_power":
            await self._newleader_power(f)
            return
        if f.kind == "reconfig":
            await reconfig_once(self.cluster, f.pick)
            return
        if f.kind == "stale_leader":
            if self.scripted_busy:  # one script at a time: each needs the ensemble whole
                self.cluster.trace("nemesis stale_leader: another still runs, nothing done")
                return
            self.scripted_busy = True
            try:
                await StaleLeaderProbe(self, f).run()
            finally:
                self.scripted_busy = False
            return
        heal = self.start(f)
        await asyncio.sleep(f.hold_s)
        heal()

    async def _newleader_power(self, f: Fault) -> None:
        """A scripted sequence (see the module docstring); every delay comes from f.pick."""
        c = self.cluster
        c.trace(f"nemesis {f.kind} hold={f.hold_s}s")
        rng = random.Random(f.pick)
        leader = c.serving_leader()
        if leader is None:
            c.trace("nemesis newleader_power: no serving leader, nothing done")
            return
        others = [s for s in c.servers if s is not leader and s.up]
        if not others:
            return
        lagging = others[rng.randrange(len(others))]
        lagging.crash("newleader_power: lagging follower")
        await asyncio.sleep(rng.uniform(*NEWLEADER_LAG_S))
        lagging.disk.slow_ms = rng.uniform(*NEWLEADER_SLOW_MS)
        leader.crash("newleader_power: leader")
        self._restart([lagging])  # unless an overlapping fault restarted it already
        await asyncio.sleep(rng.uniform(*NEWLEADER_POWER_AFTER_S))
        late = c.serving_leader()
        down = [s for s in c.servers if s.up]
        for s in down:
            s.crash("newleader_power: power failure")
        lagging.disk.slow_ms = 0.0
        await asyncio.sleep(0.1)
        first = [s for s in c.servers if s is not late]
        c.trace(f"nemesis newleader_power restarts {[s.host for s in first]} first")
        self._restart(first)
        await asyncio.sleep(rng.uniform(*NEWLEADER_LATE_S))
        self._restart(c.servers)

    def start(self, f: Fault):
        c = self.cluster
        servers = c.servers
        n = len(servers)
        hosts = [s.host for s in servers]
        c.trace(f"nemesis {f.kind} hold={f.hold_s}s")
        if f.kind in ("crash", "crash_leader", "crash_follower"):
            target = servers[f.pick % n]
            if f.kind == "crash_leader":
                target = c.serving_leader() or target
            elif f.kind == "crash_follower":
                others = [s for s in servers if s is not c.serving_leader()]
                target = others[f.pick % len(others)]
            target.crash(f.kind)
            return lambda: self._restart([target])
        if f.kind == "power":
            down = [s for s in servers if s.up]
            for s in down:
                s.crash("power failure")
            return lambda: self._restart(down)
        if f.kind == "isolate":
            leader = c.serving_leader() or servers[f.pick % n]
            return self._cut(_isolate(leader.host, hosts))
        if f.kind == "split":
            k = 1 + f.pick % (n // 2)  # minority size
            order = sorted(hosts, key=lambda h: hash_pick(f.pick, h))
            return self._cut(_between(order[:k], order[k:]))
        if f.kind == "oneway":
            victim = hosts[f.pick % n]
            return self._cut({(o, victim) for o in hosts if o != victim})
        if f.kind == "bridge":
            order = sorted(hosts, key=lambda h: hash_pick(f.pick, h))
            rest = order[1:]
            half = len(rest) // 2
            return self._cut(_between(rest[:half], rest[half:]))  # only `bridge` reaches both
        if f.kind == "reset":
            ia = f.pick % n
            ib = (ia + 1 + (f.pick // n) % (n - 1)) % n
            c.network.reset_between(hosts[ia], hosts[ib])
            return _nothing
        if f.kind in ("slow_disk", "slow_leader_disk"):
            target = servers[f.pick % n]
            if f.kind == "slow_leader_disk":
                target = c.serving_leader() or target
            target.disk.slow_ms = 50 + (f.pick % 150)
            return lambda: setattr(target.disk, "slow_ms", 0.0)
        if f.kind in ("pause", "pause_leader"):
            target = servers[f.pick % n]
            if f.kind == "pause_leader":
                target = c.serving_leader() or target
            return self._pause(target)
        if f.kind == "clock_jump":
            return self._clock_jump(f)
        if f.kind == "fsync_fail":
            target = servers[f.pick % n]
            if (f.pick >> 20) & 1:
                target = c.serving_leader() or target
            return self._fsync_fail(target)
        raise ValueError(f"unknown fault {f.kind}")

    def _pause(self, target):
        node = target.node
        if not target.up:
            return _nothing
        self.cluster.loop.pause_node(node)
        self.cluster.trace(f"nemesis paused {target.host}")

        def heal() -> None:
            if node.paused:
                self.cluster.loop.resume_node(node)
                self.cluster.trace(f"nemesis resumed {target.host}")
        return heal

    def _clock_jump(self, f: Fault):
        c = self.cluster
        target = c.servers[f.pick % len(c.servers)]
        if (f.pick >> 22) & 1:
            target = c.serving_leader() or target
        jump_ms = 1 + (f.pick & 0xFFFF) % CLOCK_JUMP_MS_MAX  # bits 20-22 choose the rest
        wall_ms = -jump_ms if (f.pick >> 20) & 1 else jump_ms
        mono_ms = jump_ms if (f.pick >> 21) & 1 else 0
        target.jump_clock(wall_ms, mono_ms)

        def heal() -> None:
            target.jump_clock(-target.wall_offset_ms, 0)  # NTP steps the wall clock back
        return heal

    def _fsync_fail(self, target):
        target.disk.fail_syncs = 1
        target.disk.fail_slow_ms = FSYNC_FAIL_SLOW_MS
        self.cluster.trace(f"nemesis {target.host}'s next fsync fails")

        def heal() -> None:
            target.disk.fail_syncs = 0
            self._restart([target])
        return heal

    def _cut(self, cuts: set[tuple[str, str]]):
        net = self.cluster.network
        net.set_cuts(net.cuts | cuts)
        self.cluster.trace(f"nemesis cut {sorted(cuts)}")

        def heal() -> None:
            net.set_cuts(net.cuts - cuts)
            self.cluster.trace("nemesis healed the partition")
        return heal

    def _restart(self, servers) -> None:
        for s in servers:
            if not s.up:
                s.start()

    def heal_all(self) -> None:
        self.cluster.network.set_cuts(set())
        for s in self.cluster.servers:
            s.disk.slow_ms = 0.0
            s.disk.fail_syncs = 0
            if s.node is not None and s.node.paused:
                self.cluster.loop.resume_node(s.node)
            if s.wall_offset_ms:
                s.jump_clock(-s.wall_offset_ms, 0)
        self._restart(self.cluster.servers)


def hash_pick(pick: int, host: str) -> int:
    """A deterministic shuffle key (Python's str hash is salted per process)."""
    v = pick
    for ch in host.encode():
        v = (v * 1_000_003 + ch) & 0xFFFFFFFF
    return v


def _isolate(host: str, hosts: list[str]) -> set[tuple[str, str]]:
    return {(host, o) for o in hosts if o != host} | {(o, host) for o in hosts if o != host}


def _between(a: list[str], b: list[str]) -> set[tuple[str, str]]:
    return {(x, y) for x in a for y in b} | {(y, x) for x in a for y in b}


def _nothing() -> None:
    pass
