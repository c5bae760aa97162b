"""One simulated ensemble member: the real QuorumPeer (elect, lead or learn, install,
serve, fast-forward), each role's real chain of stages (peer/roles.py) and client
Connection, on a simulated disk and network. Only construction differs from peer/node.py:
the epoch files, the data directory, the clock and the election's rng are the simulation's. A crash kills the node's every callback; a
restart recovers from what the disk holds, as a restarted process does.
"""

from __future__ import annotations

import asyncio
import logging

from zkcompat.config import Config, QuorumServer
from zkcompat.jute.election import ServerState
from zkcompat.peer import roles
from zkcompat.peer.quorum_peer import QuorumPeer
from zkcompat.server.connection import Connection
from zkcompat.server.context import ServerContext
from zkcompat.server.pipeline import Pipeline
from zkcompat.sim.bugs import roles_with
from zkcompat.sim.disk import SimDataDir, SimDisk, SimDynamicConfig, SimEpochs
from zkcompat.sim.loop import Node, Teardown, VirtualClock
from zkcompat.tree.digest import tree_digest
from zkcompat.zab.leader import Leader
from zkcompat.zab.peer import zxid_epoch

log = logging.getLogger(__name__)

TICK_TIME_MS = 200
INIT_LIMIT_TICKS = 10
SYNC_LIMIT_TICKS = 5
CLIENT_PORT = 2181
QUORUM_PORT = 2888
ELECTION_PORT = 3888
# A SNAP streams in slices of this many nodes: the simulator's small trees then take
# several loop turns, with apply and broadcast between them, as a big tree's do on a
# real leader.
SNAP_SLICE_NODES = 3


def host_of(sid: int) -> str:
    return f"s{sid}"


# super:test (sim/reconfig.py's sessions): reconfig is for super alone.
SUPER_DIGEST = "super:D/InIHSb7yEEbrWz8b9l71RjZJU="


def ensemble_config(sid: int, n: int, quorum_sync: bool = False,
                    reconfig: bool = False) -> Config:
    servers = {i: QuorumServer(i, host_of(i), QUORUM_PORT, ELECTION_PORT)
               for i in range(1, n + 1)}
    raw = {"tickTime": str(TICK_TIME_MS), "initLimit": str(INIT_LIMIT_TICKS),
           "syncLimit": str(SYNC_LIMIT_TICKS), "clientPort": str(CLIENT_PORT)}
    for i, s in servers.items():
        raw[f"server.{i}"] = f"{s.host}:{s.quorum_port}:{s.election_port}"
    if quorum_sync:
        raw["quorumSync"] = "true"
    if reconfig:
        raw["reconfigEnabled"] = "true"
    cfg = Config(tick_time_ms=TICK_TIME_MS, client_port=CLIENT_PORT, server_id=sid,
                 servers=servers, init_limit=INIT_LIMIT_TICKS, sync_limit=SYNC_LIMIT_TICKS,
                 quorum_sync=quorum_sync, reconfig_enabled=reconfig,
                 super_digest=SUPER_DIGEST if reconfig else None, raw=raw)
    return cfg.finish()


class OrderedSet(dict):
    """A set that iterates in insertion order (ServerContext.connections): closing a
    server's connections then happens in the same order on every run."""

    def add(self, item) -> None:
        self[item] = None

    def discard(self, item) -> None:
        self.pop(item, None)


class _NoAdmin:
    def is_four_letter_word(self, data: bytes) -> bool:
        return False


class _NoSnapshotter:
    def __init__(self, tree):
        self.tree = tree

    def txn_applied(self, n: int = 1) -> None:
        pass


class _NotServing(asyncio.Protocol):
    """A member between roles closes client connections at once (node._NotServing)."""

    def connection_made(self, transport) -> None:
        transport.close()


class SimQuorumPeer(QuorumPeer):
    """QuorumPeer with the simulation's epoch files, a seeded election rng, small SNAP
    slices, and the zab roles of the run's injected bug (sim/bugs.py), if any."""

    snap_slice_nodes = SNAP_SLICE_NODES

    def __init__(self, config: Config, ctx, datadir: SimDataDir, build_pipeline, rng,
                 bug: str | None = None):
        epochs = SimEpochs(datadir.disk, zxid_epoch(ctx.tree.last_processed_zxid))
        super().__init__(config, ctx, datadir, build_pipeline, epochs=epochs, rng=rng,
                         dynamic_config=SimDynamicConfig(datadir.disk, config.server_id))
        self.leader_class, self.learner_class = roles_with(bug)
        self.sim: SimServer | None = None

    def activate(self, new, designated) -> bool:
        """QuorumPeer.activate, after the cluster saw it happen (its checks of when a
        config may become the committed one)."""
        if new.version > self.membership.version and self.state != ServerState.LOOKING:
            self.sim.cluster.observe_activation(self.sim, new, self.state == ServerState.LEADING)
        return super().activate(new, designated)

    def install(self, what, pipeline: Pipeline) -> None:
        """QuorumPeer.install, and the history the new tree stands for (what the checks
        follow): the leader's up to the SNAP's zxid, or ours cut at the TRUNC's."""
        sim = self.sim
        if what[0] == "snap":
            zxid = what[1]
            leader = sim.cluster.servers_by_sid[self.vote.leader]
            chain = {z: t for z, t in leader.chain.items() if z <= zxid}
            sim.disk.snapshot_chains[zxid] = chain
            sim.cluster.trace(f"{sim.host} install snap zxid=0x{zxid:x}")
        else:
            sim.cluster.trace(f"{sim.host} install trunc zxid=0x{what[1]:x}")
        super().install(what, pipeline)
        if what[0] == "snap":
            sim.chain = dict(chain)
        else:
            sim.chain = sim.recovered_chain()
        sim.track(self.tree)

    def start_serving(self, pipeline: Pipeline) -> None:
        super().start_serving(pipeline)
        sim = self.sim
        epoch = self.epochs.current
        sim.cluster.trace(f"{sim.host} serving mode={self.ctx.mode} epoch={epoch} "
                          f"zxid=0x{self.tree.last_processed_zxid:x}")
        if pipeline.leading:
            sim.cluster.observe_leader(sim, epoch)

    async def _end_term(self, term) -> None:
        self.sim.cluster.trace(f"{self.sim.host} term ended mode={self.ctx.mode} "
                               f"reason={term.reason!r}")
        await super()._end_term(term)


class SimServer:
    """Server `sid` of the cluster across its incarnations (crashes and restarts)."""

    def __init__(self, cluster, sid: int):
        self.cluster = cluster
        self.sid = sid
        self.host = host_of(sid)
        self.disk = SimDisk()
        self.config = ensemble_config(sid, cluster.n_servers, cluster.quorum_sync,
                                      cluster.reconfig)
        self.node: Node | None = None
        self.nodes: list[Node] = []  # every incarnation's, for the teardown
        self.ctx: ServerContext | None = None
        self.peer: SimQuorumPeer | None = None
        self.incarnation = 0
        self.ack_before_durable = False  # injected bug, per server
        # The machine's clocks ahead of the loop's (nemesis clock_jump); they outlive crashes.
        self.wall_offset_ms = 0
        self.mono_offset_ms = 0
        # The history the current tree is the result of: zxid -> (session, cxid, type).
        self.chain: dict[int, tuple[int, int, int]] = {}

    @property
    def up(self) -> bool:
        return self.node is not None and not self.node.dead

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        self.incarnation += 1
        self.node = Node(self.host)
        self.node.wall_offset_ms = self.wall_offset_ms
        self.node.mono_offset_ms = self.mono_offset_ms
        self.nodes.append(self.node)
        self.cluster.network.add_node(self.node)
        self.node.run(self._start)

    def _start(self) -> None:
        cluster = self.cluster
        rng = cluster.child_rng(f"{self.host}.{self.incarnation}")
        datadir = SimDataDir(self.disk, rng, self.ack_before_durable)
        self.datadir = datadir
        try:
            tree = datadir.recover()
        except Exception as e:  # noqa: BLE001 - a server that cannot restart is a finding
            cluster.fail(f"{self.host} cannot recover: {type(e).__name__}: {e}")
            self.node.kill()
            return
        self.chain = self.recovered_chain()
        self.track(tree)
        self.ctx = ctx = ServerContext(self.config, None, datadir, _NoSnapshotter(tree), tree,
                                       clock=VirtualClock(asyncio.get_running_loop()))
        ctx.connections = OrderedSet()
        ctx.admin = _NoAdmin()
        ctx.serving = False
        ctx.mode = "looking"
        self.peer = SimQuorumPeer(self.config, ctx, datadir, self._build_pipeline, rng,
                                  cluster.bug)
        self.peer.sim = self
        cluster.trace(f"{self.host} start incarnation={self.incarnation} "
                      f"zxid=0x{tree.last_processed_zxid:x} "
                      f"epochs={self.disk.accepted_epoch}/{self.disk.current_epoch}")
        loop = asyncio.get_running_loop()
        loop.create_task(self._serve_clients())
        loop.create_task(self._run_peer())

    async def _serve_clients(self) -> None:
        ctx = self.ctx
        await asyncio.get_running_loop().create_server(
            lambda: SimClientConnection(ctx) if ctx.serving else _NotServing(),
            self.host, CLIENT_PORT)

    async def _run_peer(self) -> None:
        try:
            await self.peer.run()
        except (asyncio.CancelledError, Teardown):
            raise
        except BaseException as e:  # noqa: BLE001 - a server's death is a finding
            self.cluster.fail(f"{self.host} QuorumPeer.run died: {type(e).__name__}: {e}")
            raise

    def recovered_chain(self) -> dict[int, tuple[int, int, int]]:
        """What DataDir.recover rebuilt: the newest snapshot's history, then the log."""
        snaps = self.datadir.snapshots.zxids()
        start = snaps[0] if snaps else 0
        chain = dict(self.disk.snapshot_chains.get(start, {}))
        for txn in self.datadir.txnlog.read_from(start):
            chain[txn.zxid] = _ident(txn)
        return chain

    def track(self, tree) -> None:
        """Every txn this tree applies (the pipeline's and the fast-forward's) joins the chain."""
        apply = type(tree).apply.__get__(tree)
        server = self

        def tracked_apply(txn):
            rc = apply(txn)
            server.chain[txn.zxid] = _ident(txn)
            return rc
        tree.apply = tracked_apply

    def jump_clock(self, wall_ms: int, mono_ms: int) -> None:
        """Step this machine's wall clock by wall_ms and its monotonic clock forward by
        mono_ms (never back: CLOCK_MONOTONIC does not go back)."""
        assert mono_ms >= 0, "a monotonic clock never goes back"
        self.wall_offset_ms += wall_ms
        self.mono_offset_ms += mono_ms
        if self.node is not None:
            self.node.wall_offset_ms = self.wall_offset_ms
            self.node.mono_offset_ms = self.mono_offset_ms
        self.cluster.trace(f"{self.host} clock jump wall={wall_ms:+d}ms mono=+{mono_ms}ms "
                           f"(offsets {self.wall_offset_ms:+d}/{self.mono_offset_ms:+d})")

    def crash(self, reason: str) -> None:
        if not self.up:
            return
        self.cluster.trace(f"{self.host} crash reason={reason!r} "
                           f"zxid=0x{self.ctx.tree.last_processed_zxid:x} "
                           f"durable=0x{self.disk.zxids[-1] if self.disk.zxids else 0:x}")
        self.node.kill()
        self.cluster.network.crash(self.host)
        self.cluster.on_crash(self)
        self.ctx = None
        self.peer = None

    # -- the pipeline of each term -----------------------------------------------------

    def _build_pipeline(self, tree, peer, term) -> Pipeline:
        pipeline = roles.for_role(self.ctx, tree, peer, term)
        watch = _TermWatch(self, pipeline, peer)
        pipeline.hook(watch.applied, watch.fatal)
        if isinstance(peer, Leader):
            self.cluster.trace(f"{self.host} leading epochs={self.disk.accepted_epoch}/"
                               f"{self.disk.current_epoch} zxid=0x{tree.last_processed_zxid:x}")
        elif peer is not None:
            self.cluster.trace(f"{self.host} following leader=s{peer.leader_sid} "
                               f"zxid=0x{tree.last_processed_zxid:x}")
        return pipeline

    @property
    def mode(self) -> str:
        return self.ctx.mode if self.up and self.ctx is not None else "down"

    @property
    def tree(self):
        return self.ctx.tree if self.up and self.ctx is not None else None


def _ident(txn) -> tuple[int, int, int]:
    hdr = txn.hdr
    return (hdr.clientId, hdr.cxid, hdr.type)


class _TermWatch:
    """What the cluster's checks hear from one term's pipeline: every applied batch (its
    zxid and tree digest), commits as leader, and a fatal stop (which crashes the node)."""

    def __init__(self, server: SimServer, pipeline: Pipeline, peer):
        self.server = server
        self.pipeline = pipeline
        self.peer = peer

    def applied(self, n: int) -> None:
        s = self.server
        tree = self.pipeline.tree
        s.cluster.observe_apply(s, tree.last_processed_zxid, tree_digest(tree),
                                self.pipeline.leading, self.peer)

    def fatal(self) -> None:
        """node._stop_acknowledging: os._exit from inside the callback. The node dies now,
        so nothing it had scheduled (a failed sync's waiters waking up) ever runs."""
        s = self.server
        if s.up:
            s.crash("on_fatal: the log cannot sync (or apply failed); the process exits")


class SimClientConnection(Connection):
    """The real client Connection; only its peer address comes from the simulation."""
