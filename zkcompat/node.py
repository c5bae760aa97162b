"""One server process, wired from a Config: standalone (an ensemble of one) or a member of
an ensemble (zkcompat/quorum.py runs its terms); both serve through the same Pipeline."""

import asyncio
import gc
import logging
import os
import sys
from dataclasses import dataclass, field

from zkcompat.config import Config
from zkcompat.quorum import QuorumPeer
from zkcompat.server.admin import Admin
from zkcompat.server.connection import Connection
from zkcompat.server.expirer import run_expirer
from zkcompat.server.loopmon import LoopMonitor
from zkcompat.server.pipeline import Pipeline
from zkcompat.server.reaper import run_reaper
from zkcompat.server.roles import pipeline_class
from zkcompat.server.stats import ServerStats
from zkcompat.store.datadir import DataDir
from zkcompat.store.snapshotter import Snapshotter
from zkcompat.zab.leader import Leader
from zkcompat.zab.peer import zxid_epoch

log = logging.getLogger(__name__)

# The txn log's writer thread needs the GIL for a moment to start each sync and again to
# report it done; while the loop thread is busy it waits up to the switch interval (5 ms
# by default) each time. At 0.5 ms a sync's round trip under a busy loop fell from a p90
# of 8-12 ms to ~4 ms, and ephemeral create+delete at 64x16 gained ~9% (on 2 cores). At
# 0.1 ms ephemeral create+delete at 8x32, which waits on syncs, not on the CPU, gained 8%
# more (8 alternating runs; 6 won). Only a thread that waits for the GIL forces a switch.
GIL_SWITCH_INTERVAL_S = 0.0001
# Python's default (700, 10, 10) collects the young generation every 700 net allocations,
# so each batch of in-flight requests is scanned, promoted, and counted towards full
# collections, which scan every znode. In process, creating 1M znodes: 42 µs per create
# and full-collection pauses of up to 400 ms by default; 26 µs and pauses of ~15-20 ms at
# these values. Ephemeral create+delete: 9% fewer instructions per request (cachegrind).
GC_THRESHOLDS = (50_000, 20, 100)
# A standalone ZooKeeper tracks sessions as server 1 (createSessionTrackerServerId),
# whatever its myid says; an ensemble member uses its myid.
STANDALONE_SERVER_ID = 1


@dataclass(eq=False)
class ServerContext:
    """What every connection of this server shares."""

    config: Config
    pipeline: Pipeline | None
    datadir: DataDir
    snapshotter: Snapshotter
    tree: object = None
    mode: str = "standalone"  # what srvr says: standalone, leader, follower, observer
    serving: bool = True  # an ensemble member serves clients only while its role does
    expirer: asyncio.Task | None = None
    quorum_config: bytes | None = None  # an ensemble's membership, as ZooKeeper prints it
    connections: set = field(default_factory=set)
    admin: Admin | None = None
    loopmon: LoopMonitor = field(default_factory=LoopMonitor)
    stats: ServerStats = field(default_factory=ServerStats)


def build_standalone(config: Config) -> ServerContext:
    ctx = _build(config)
    last = ctx.tree.last_processed_zxid
    peer = Leader.standalone(STANDALONE_SERVER_ID, zxid_epoch(last), last)
    ctx.pipeline = _pipeline(ctx, ctx.tree, peer)
    ctx.pipeline.restore_sessions()
    return ctx


def _build(config: Config) -> ServerContext:
    datadir = DataDir(config.data_dir, config.data_log_dir, sync=config.force_sync)
    tree = datadir.recover()
    tree.set_digest_enabled(config.digest_enabled)  # zookeeper.digest.enabled
    gc.freeze()  # the recovered tree is long-lived: keep it out of every full collection
    snapshotter = Snapshotter(tree, datadir, config.snap_count, config.snap_retain_count,
                              purge=config.purge_interval_hours > 0)
    ctx = ServerContext(config, None, datadir, snapshotter, tree)
    ctx.admin = Admin(ctx)
    return ctx


def _pipeline(ctx: ServerContext, tree, peer, shell=None) -> Pipeline:
    config = ctx.config
    pipeline = pipeline_class(peer)(tree, peer, ctx.datadir.txnlog, config.tick_time_ms,
                        config.server_id if config.is_ensemble else STANDALONE_SERVER_ID,
                        config.extended_types_enabled,
                        config.enforce_quota, shell)
    pipeline.on_applied = ctx.snapshotter.txn_applied
    pipeline.on_fatal = _stop_acknowledging
    return pipeline


def _stop_acknowledging() -> None:
    """The log cannot sync: no write may be acknowledged again. Exit at once; clients see
    their connections drop and go to another server (ZooKeeper exits likewise)."""
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stderr.flush()
    os._exit(3)


class _Listener(Connection):
    """Connection that also enforces maxClientCnxns per client address."""

    def connection_made(self, transport) -> None:
        limit = self.server.config.max_client_cnxns
        peer = transport.get_extra_info("peername")
        if limit and peer:
            same = sum(1 for c in self.server.connections if c.remote.rsplit(":", 1)[0] == peer[0])
            if same >= limit:
                log.warning("event=too_many_connections remote=%s limit=%d", peer[0], limit)
                transport.close()
                self.transport = None
                self._state = "closed"
                return
        super().connection_made(transport)


def _refuse_connection() -> asyncio.Protocol:
    return _NotServing()


class _NotServing(asyncio.Protocol):
    """A client of a member that is between roles (electing, syncing): closed at once, as
    ZooKeeper closes it, so the client tries its next server."""

    def connection_made(self, transport) -> None:
        transport.close()


async def serve(config: Config, ready: asyncio.Future | None = None) -> None:
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    gc.set_threshold(*GC_THRESHOLDS)
    if not config.force_sync:
        log.warning("event=force_sync_off detail=%r",
                    "forceSync=no: acknowledged writes can be lost on power failure")
    if config.is_ensemble:
        ctx = _build(config)
        ctx.serving = False
        ctx.mode = "looking"
        member = QuorumPeer(config, ctx, ctx.datadir,
                            lambda tree, peer, shell: _pipeline(ctx, tree, peer, shell))
    else:
        ctx = build_standalone(config)
        member = None
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: _Listener(ctx) if ctx.serving else _refuse_connection(),
        config.client_port_address, config.client_port, reuse_address=True,
    )
    addr = server.sockets[0].getsockname()
    log.info("event=listening address=%s port=%d mode=%s data_dir=%s zxid=0x%x",
             addr[0], addr[1], "ensemble" if member else "standalone", config.data_dir,
             ctx.tree.last_processed_zxid)
    if ready is not None:
        ready.set_result(addr)
    ctx.loopmon.start()
    tasks = [asyncio.create_task(run_reaper(
        lambda: ctx.pipeline if ctx.serving and ctx.pipeline.leading else None,
        config.container_check_interval_ms, config.container_max_per_minute,
        config.container_max_never_used_ms))]
    if member is None:
        ctx.expirer = asyncio.create_task(run_expirer(ctx.pipeline, config.tick_time_ms))
        tasks.append(ctx.expirer)
    else:
        tasks.append(asyncio.create_task(member.run()))
    try:
        async with server:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()
    finally:
        for task in tasks:
            task.cancel()
        ctx.loopmon.stop()
