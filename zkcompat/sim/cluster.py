"""One seed's run: an ensemble of simulated servers, clients and a nemesis on one virtual
loop; then every fault heals, the ensemble settles, and the checks run.

    result = run_seed(seed, servers=3)     # a RunResult: ok, failures, trace lines
"""

from __future__ import annotations

import asyncio
import logging
import random
import traceback
from dataclasses import dataclass, field

from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.sim import checks
from zkcompat.sim.bare_session import BareSession
from zkcompat.sim.bugs import BUGS
from zkcompat.sim.clients import OPEN_ACL, SETUP_PATHS, SimClient
from zkcompat.sim.history import HistoryRecorder
from zkcompat.sim.locks import check_acquisitions, check_fencing
from zkcompat.sim.loop import Deadlock, Node, VirtualLoop, run_virtual, teardown
from zkcompat.sim.nemesis import PROFILES, Nemesis, plan
from zkcompat.sim.network import SimNetwork
from zkcompat.sim.server import SimServer
from zkcompat.sim.watchlog import check_watches

DURATION_S = 15.0
SETTLE_MAX_S = 40.0
SETTLE_POLL_S = 0.25
CLIENTS = 4
FAILURES_MAX = 20


@dataclass
class RunResult:
    seed: int
    servers: int
    failures: list[str]
    trace: list[str]
    operations: int = 0
    virtual_s: float = 0.0
    stats: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures


class Cluster:
    def __init__(self, seed: int, n_servers: int = 3, *, profile: str = "all",
                 clients: int = CLIENTS, duration_s: float = DURATION_S,
                 bug: str | None = None, faults=None,
                 fsync_ms: tuple[float, float] | None = None, quorum_sync: bool = False):
        self.seed = seed
        self.n_servers = n_servers
        self.quorum_sync = quorum_sync  # zoo.cfg's quorumSync on every server
        # reconfigEnabled on every server when the faults may change the membership
        self.reconfig = "reconfig" in PROFILES.get(profile, {}) or any(
            f.kind == "reconfig" for f in faults or ())
        self.loop = VirtualLoop()
        self.network = SimNetwork(self.loop, self.child_rng("network"), self.trace)
        self.loop.network = self.network
        self.control = Node("control")
        self.lines: list[str] = []
        self.ended = False
        self.failures: list[str] = []
        self.history = HistoryRecorder()
        self._event = 0
        self.acked_writes = []
        self.watch_log: list = []  # watchlog records, every client's, in arrival order
        self.lock_acquired: list = []
        self.lock_fenced: list = []
        self.digests: dict[int, tuple[int, str]] = {}
        self.leaders: dict[int, str] = {}  # epoch -> host that served as its leader
        self.probes = 0  # stale_leader probes run so far (probe.py)
        self.probe_nodes: list[Node] = []
        self.duration_s = duration_s
        self.servers = [SimServer(self, sid) for sid in range(1, n_servers + 1)]
        self.servers_by_sid = {s.sid: s for s in self.servers}
        if fsync_ms is not None:
            for s in self.servers:
                s.disk.fsync_ms = fsync_ms
        if bug not in (None, *BUGS):
            raise ValueError(f"unknown bug {bug!r}")
        self.bug = bug
        if bug == "ack_before_fsync":
            for s in self.servers:
                s.ack_before_durable = True
        self.clients = [SimClient(self, i, self.child_rng(f"client{i}"))
                        for i in range(1, clients + 1)]
        self.faults = faults if faults is not None else plan(
            self.child_rng("nemesis"), duration_s, profile)
        self.nemesis = Nemesis(self, self.faults)

    def child_rng(self, name: str) -> random.Random:
        """An rng of its own per consumer: one's draws never shift another's."""
        return random.Random(f"{self.seed}/{name}")

    # -- what everything reports --------------------------------------------------------

    def trace(self, text: str) -> None:
        if self.ended:
            return
        self.lines.append(f"{self.loop.time():9.4f} {text}")

    def fail(self, text: str) -> None:
        if len(self.failures) < FAILURES_MAX:
            self.failures.append(f"t={self.loop.time():.4f} {text}")
        self.trace(f"FAIL {text}")

    def event_time(self) -> int:
        """History timestamps: the order events happened in, strictly increasing."""
        self._event += 1
        return self._event

    def acked(self, write) -> None:
        self.acked_writes.append(write)

    def observe_apply(self, server, zxid: int, digest: int, leading: bool, peer) -> None:
        seen = self.digests.get(zxid)
        if seen is None:
            self.digests[zxid] = (digest, server.host)
        elif seen[0] != digest:
            self.fail(f"replicas disagree at zxid 0x{zxid:x}: {seen[1]} has digest "
                      f"{seen[0]}, {server.host} has {digest}")
        if leading:
            self.observe_leader(server, zxid >> 32)

    def observe_leader(self, server, epoch: int) -> None:
        other = self.leaders.setdefault(epoch, server.host)
        if other != server.host:
            self.fail(f"two leaders in epoch {epoch}: {other} and {server.host}")

    def observe_activation(self, server, new, leading: bool) -> None:
        """A config becomes committed in a term only once its reconfig txn is (a config of
        an epoch's NEWLEADER, counter 0, has no txn of its own): applied on that server
        first, and, on the leader, durable on a quorum of the new config's voters (every
        txn from the reconfig on needs both quorums)."""
        zxid = new.version
        if not zxid & 0xFFFFFFFF:
            return
        tree = server.tree
        if tree is not None and tree.last_processed_zxid < zxid:
            self.fail(f"{server.host} activated config 0x{zxid:x} before applying its txn "
                      f"(applied up to 0x{tree.last_processed_zxid:x})")
        if leading:
            durable = [sid for sid in new.voters
                       if zxid in self.servers_by_sid[sid].disk.entries]
            if not new.contains_quorum(durable):
                self.fail(f"{server.host} committed config 0x{zxid:x} with only "
                          f"{sorted(durable)} of its voters {sorted(new.voters)} holding it")

    def on_crash(self, server) -> None:
        pass

    def serving_leader(self):
        for s in self.servers:
            if s.up and s.ctx is not None and s.ctx.serving and s.mode == "leader":
                return s
        return None

    # -- the run ------------------------------------------------------------------------

    async def main(self) -> None:
        loop = asyncio.get_running_loop()
        for s in self.servers:
            s.start()
        self.trace(f"faults {[(f.at_s, f.kind, f.hold_s) for f in self.faults]}")
        if not await self.control.run(loop.create_task, self._setup()):
            self.fail("no leader served the setup writes within "
                      f"{SETTLE_MAX_S}s of a fault-free start")
            return
        start = loop.time()
        until = start + self.duration_s
        self.nemesis.faults = [f.__class__(f.at_s + start, f.kind, f.hold_s, f.pick)
                               for f in self.faults]
        tasks = [c.node.run(loop.create_task, c.run(until)) for c in self.clients]
        tasks.append(self.control.run(loop.create_task, self.nemesis.run()))
        await asyncio.gather(*tasks)
        self.trace("nemesis heals everything")
        self.nemesis.heal_all()
        await self.control.run(loop.create_task, self._settle())

    async def _settle(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_MAX_S
        while loop.time() < deadline:
            if not checks.check_converged(self.servers) and self._all_serving():
                self.trace("ensemble settled")
                return
            await asyncio.sleep(SETTLE_POLL_S)
        self.fail(checks.check_converged(self.servers)[0] if checks.check_converged(
            self.servers) else "ensemble did not settle: not every server serves")

    def _all_serving(self) -> bool:
        return all(s.up and s.ctx is not None and s.ctx.serving for s in self.servers)

    async def _setup(self) -> bool:
        """Create the clients' directories through whichever server serves first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_MAX_S
        while loop.time() < deadline:
            leader = self.serving_leader()
            if leader is not None and await _setup_via(leader.host):
                self.trace(f"setup done via {leader.host}")
                return True
            await asyncio.sleep(SETTLE_POLL_S)
        return False

    def final_checks(self) -> None:
        live = [s for s in self.servers if s.up]
        ops = self.history.operations()
        self.failures += checks.check_chains_agree(live)
        self.failures += checks.check_acked_writes(self.acked_writes, live)
        self.failures += checks.check_linearizable(ops, SETUP_PATHS)
        self.failures += check_watches(self.watch_log)
        self.failures += check_acquisitions(self.lock_acquired)
        self.failures += check_fencing(self.lock_fenced)
        if self.reconfig:
            self.failures += checks.check_configs_agree(live)

    def run(self) -> RunResult:
        zk_log = logging.getLogger("zkcompat")
        level = zk_log.level
        zk_log.setLevel(logging.CRITICAL)  # a run's servers log thousands of lines
        self.loop.set_exception_handler(self._loop_exception)
        try:
            run_virtual(self.loop, self.main())
        except Deadlock as e:
            self.fail(str(e))
        except Exception as e:  # noqa: BLE001 - the simulator's own bug, reported with its seed
            self.fail(f"simulator error: {type(e).__name__}: {e}\n{traceback.format_exc()}")
        finally:
            zk_log.setLevel(level)
        if not self.failures or all("did not" not in f for f in self.failures):
            self.final_checks()
        ops = self.history.operations()
        stats = {"ops": len(ops), "known": sum(1 for o in ops if o.outcome_known),
                 "acked_writes": len(self.acked_writes), "faults": len(self.faults),
                 "watch_events": sum(1 for w in self.watch_log if type(w).__name__ == "Event"),
                 "locks": len({a.token for a in self.lock_acquired}),
                 "fenced": len(self.lock_fenced),
                 "max_zxid": max(self.digests, default=0)}
        self.trace(f"end ops={stats['ops']} known={stats['known']} "
                   f"acked_writes={stats['acked_writes']} max_zxid=0x{stats['max_zxid']:x}")
        result = RunResult(self.seed, self.n_servers, list(self.failures), self.lines,
                           len(ops), self.loop.time(), stats)
        self.ended = True
        nodes = [n for s in self.servers for n in s.nodes] + [c.node for c in self.clients]
        nodes += self.probe_nodes
        self.loop.close()
        teardown(self.loop, nodes + [self.control])
        return result

    def _loop_exception(self, loop, context) -> None:
        exc = context.get("exception")
        msg = context.get("message", "")
        if exc is None and "destroyed but it is pending" in msg:
            return  # a crashed node's task, dropped with its node
        if isinstance(exc, (ConnectionError, TimeoutError)):
            return
        where = ""
        if exc is not None and exc.__traceback__ is not None:
            tb = traceback.extract_tb(exc.__traceback__)
            where = " at " + " <- ".join(f"{f.filename.rsplit('/', 2)[-1]}:{f.lineno} {f.name}"
                                         for f in reversed(tb[-4:]))
        self.fail(f"unhandled in the loop: {msg} {type(exc).__name__ if exc else ''}: {exc}"
                  f"{where}")


async def _setup_via(host: str) -> bool:
    """A bare session that creates SETUP_PATHS (NODEEXISTS counts as done)."""
    session = await BareSession.open(host)
    if session is None:
        return False
    try:
        for i, path in enumerate(SETUP_PATHS, 1):
            session.send(i, OpCode.CREATE, r.CreateRequest(path, b"", OPEN_ACL, 0))
            data = await session.reply(2.0)
            if data is None:
                return False
            err = int.from_bytes(data[12:16], "big", signed=True)
            if err not in (0, -110):  # OK, NODEEXISTS
                return False
        session.send(len(SETUP_PATHS) + 1, OpCode.CLOSE_SESSION)
        await session.reply(2.0)
        return True
    except TimeoutError:
        return False
    finally:
        session.close()


def run_seed(seed: int, servers: int = 3, **options) -> RunResult:
    return Cluster(seed, servers, **options).run()
