"""One server process, wired from a Config: the standalone role (an ensemble of one)."""

import asyncio
import logging
from dataclasses import dataclass, field

from zkcompat.config import Config
from zkcompat.server.admin import Admin
from zkcompat.server.connection import Connection
from zkcompat.server.pipeline import Pipeline
from zkcompat.server.reaper import run_reaper
from zkcompat.store.volatile import VolatileTxnLog
from zkcompat.tree.datatree import DataTree
from zkcompat.zab.peer import Peer

log = logging.getLogger(__name__)


@dataclass(eq=False)
class ServerContext:
    """What every connection of this server shares."""

    config: Config
    pipeline: Pipeline
    connections: set = field(default_factory=set)
    admin: Admin | None = None


def build_standalone(config: Config) -> ServerContext:
    tree = DataTree()
    txn_log = VolatileTxnLog()
    peer = Peer(epoch=0, last_zxid=tree.last_processed_zxid)
    # A standalone ZooKeeper tracks sessions as server 1 (createSessionTrackerServerId).
    pipeline = Pipeline(tree, peer, txn_log, config.tick_time_ms, config.server_id or 1,
                        config.extended_types_enabled, config.enforce_quota)
    ctx = ServerContext(config, pipeline)
    ctx.admin = Admin(ctx)
    return ctx


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


async def serve(config: Config, ready: asyncio.Future | None = None) -> None:
    ctx = build_standalone(config)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: _Listener(ctx), config.client_port_address, config.client_port,
        reuse_address=True,
    )
    addr = server.sockets[0].getsockname()
    log.info("event=listening address=%s port=%d mode=standalone data_dir=%s durable=%s",
             addr[0], addr[1], config.data_dir, ctx.pipeline.txn_log.durable)
    if not ctx.pipeline.txn_log.durable:
        log.warning("event=volatile_txn_log detail=%r",
                    "the txn log is in memory: data does not survive a restart yet")
    if ready is not None:
        ready.set_result(addr)
    reaper = asyncio.create_task(run_reaper(
        ctx.pipeline, config.container_check_interval_ms, config.container_max_per_minute,
        config.container_max_never_used_ms))
    tick_s = config.tick_time_ms / 1000
    try:
        async with server:
            while True:
                await asyncio.sleep(tick_s)
                ctx.pipeline.expire_sessions()
    finally:
        reaper.cancel()
