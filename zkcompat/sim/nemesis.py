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
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

PROFILES: dict[str, dict[str, float]] = {
    "none": {},
    "crash": {"crash": 3, "crash_leader": 3, "crash_follower": 2, "power": 1},
    "partition": {"isolate": 3, "split": 3, "oneway": 1, "bridge": 1, "reset": 1},
    "power": {"power": 1},
    "all": {"crash": 2, "crash_leader": 2, "crash_follower": 1, "power": 1, "isolate": 2, "split": 2, "oneway": 1,
            "bridge": 1, "reset": 1, "slow_disk": 1, "slow_leader_disk": 1},
}
FIRST_FAULT_S = (1.0, 3.0)
GAP_S = (0.5, 3.0)
HOLD_S = (0.3, 5.0)


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
        faults.append(Fault(round(t, 3), kind, round(hold, 3), rng.randrange(1 << 30)))
        # Half the time the next fault starts while this one still holds: bugs live in
        # combinations (a follower rejoining while the leader's disk lags).
        t += rng.uniform(*GAP_S) + (hold if rng.random() < 0.5 else 0.0)


class Nemesis:
    def __init__(self, cluster, faults: list[Fault]):
        self.cluster = cluster
        self.faults = faults

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        running = []
        for f in self.faults:
            await asyncio.sleep(max(0.0, f.at_s - loop.time()))
            running.append(loop.create_task(self._hold(f)))
        await asyncio.gather(*running)

    async def _hold(self, f: Fault) -> None:
        heal = self.start(f)
        await asyncio.sleep(f.hold_s)
        heal()

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
        raise ValueError(f"unknown fault {f.kind}")

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
