"""One server process, wired from a Config: standalone (an ensemble of one) or a member of
an ensemble (peer/quorum_peer.py runs its terms); peer/roles.py wires each role's chain."""

import asyncio
import contextlib
import gc
import logging
import os
import sys
import time

from aiohttp import web

from zkcompat.config import Config
from zkcompat.peer import links, roles
from zkcompat.peer.quorum_peer import QuorumPeer
from zkcompat.security import sasl as security_sasl
from zkcompat.security import tls as security_tls
from zkcompat.security import x509 as security_x509
from zkcompat.security.reload import POLL_S as RELOAD_POLL_S
from zkcompat.security.reload import ReloadingStores
from zkcompat.security.sasl import SaslAuthenticator
from zkcompat.security.unified import UnifiedClientPort
from zkcompat.server.admin import Admin
from zkcompat.server.adminhttp import AdminHttp, admin_app
from zkcompat.server.clock import SYSTEM_CLOCK, clock_for
from zkcompat.server.connection import Connection, ConnState
from zkcompat.server.context import ServerContext
from zkcompat.server.expirer import run_expirer
from zkcompat.server.large_requests import LargeRequestConnection
from zkcompat.server.metrics import metrics_app, registry_for
from zkcompat.server.not_serving import NotServingConnection
from zkcompat.server.pipeline import Pipeline
from zkcompat.server.reaper import run_reaper
from zkcompat.server.stats import ServerStats
from zkcompat.store.datadir import DataDir
from zkcompat.store.snapshotter import Snapshotter
from zkcompat.tree.acl import register_scheme
from zkcompat.tree.digest import DIGEST_VERSION
from zkcompat.zab.leader import Leader
from zkcompat.zab.peer import zxid_epoch

log = logging.getLogger(__name__)

# The txn log's writer thread waits up to the switch interval for the GIL at each sync
# while the loop thread is busy (docs/measurements.md, "GIL switch interval").
GIL_SWITCH_INTERVAL_S = 0.0001
# Young collections every 700 allocations scan each batch of in-flight requests, and full
# ones every znode (docs/measurements.md, "Garbage collector thresholds").
GC_THRESHOLDS = (50_000, 20, 100)
# DataTree.DIGEST_LOG_INTERVAL: the hash command lists the digest at every 128th zxid.
DIGEST_LOG_INTERVAL = 128


def build_standalone(config: Config) -> ServerContext:
    ctx = _build(config)
    last = ctx.tree.last_processed_zxid
    leader = Leader.standalone(roles.STANDALONE_SERVER_ID, zxid_epoch(last), last)
    ctx.pipeline = _hooked(ctx, roles.standalone(ctx, ctx.tree, leader), leading=False)
    ctx.pipeline.restore_sessions()
    return ctx


def _build(config: Config) -> ServerContext:
    datadir = DataDir(config.data_dir, config.data_log_dir, sync=config.force_sync)
    tree = datadir.recover()
    datadir.snapshots.reopen()  # unmaps the snapshot LevelDB read (else it stays in RSS)
    tree.set_digest_enabled(config.digest_enabled)  # zookeeper.digest.enabled
    gc.freeze()  # the recovered tree is long-lived: keep it out of every full collection
    snapshotter = Snapshotter(tree, datadir, config.snap_count, config.snap_retain_count,
                              purge=config.purge_interval_hours > 0)
    clock = clock_for(config.server_id)
    if clock is not SYSTEM_CLOCK:
        log.warning("event=test_hook_enabled hook=wall_clock_offset file=%s",
                    clock.offset_file)
    ctx = ServerContext(config, None, datadir, snapshotter, tree, clock=clock)
    ctx.admin = Admin(ctx)
    ctx.stats.log = datadir.txnlog  # fsynctime, group-commit batch size
    return ctx


def _member_pipeline(ctx: ServerContext, tree, role, term) -> Pipeline:
    """The chain of the role an ensemble member's term plays (None: read-only)."""
    return _hooked(ctx, roles.for_role(ctx, tree, role, term), isinstance(role, Leader))


def _hooked(ctx: ServerContext, pipeline: Pipeline, leading: bool) -> Pipeline:
    pipeline.hook(_on_applied(ctx, pipeline, leading), _stop_acknowledging)
    return pipeline


def _on_applied(ctx: ServerContext, pipeline: Pipeline, leading: bool):
    """After each batch of applied txns (not each txn): the snapshot count, commit_count on
    an ensemble's leader, and the digest log the hash command shows."""
    snapshot_count = ctx.snapshotter.txn_applied
    stats, digests = ctx.stats, ctx.digest_log

    def on_applied(n: int) -> None:
        snapshot_count(n)
        if leading:
            stats.commit_count += n
        tree = pipeline.tree
        zxid = tree.last_processed_zxid
        if zxid % DIGEST_LOG_INTERVAL == 0 and tree.digest is not None:
            digests.append((zxid, DIGEST_VERSION, tree.digest))

    return on_applied


def _timed_elections(member: QuorumPeer, stats: ServerStats) -> None:
    """election_time (QuorumPeer: from LOOKING to a vote), around the elector's elect."""
    elect = member.elector.elect

    async def timed(*args, **kwargs):
        t0 = time.monotonic()
        vote = await elect(*args, **kwargs)
        stats.election_time.observe((time.monotonic() - t0) * 1000)
        return vote

    member.elector.elect = timed


def _stop_acknowledging() -> None:
    """The log cannot sync: no write may be acknowledged again. Exit at once; clients see
    their connections drop and go to another server (ZooKeeper exits likewise)."""
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stderr.flush()
    os._exit(3)


class _Listener(Connection):
    """Connection that is first admitted by maxCnxns and maxClientCnxns (per address), as
    NIOServerCnxnFactory.doAccept admits it: one over either is closed at once."""

    def connection_made(self, transport) -> None:
        peer = transport.get_extra_info("peername")
        host = peer[0] if peer else "?"
        refused = self.server.limits.admit(host, len(self.server.connections))
        if refused is not None:
            log.warning("event=too_many_connections remote=%s reason=%r", host, refused)
            transport.close()
            self.transport = None
            self._become(ConnState.CLOSED)
            return
        super().connection_made(transport)

    def connection_lost(self, exc) -> None:
        if self.transport is not None:  # admitted: counted under its address (remote's host)
            self.server.limits.release(self.remote.rsplit(":", 1)[0])
        super().connection_lost(exc)


class _LargeRequestListener(_Listener, LargeRequestConnection):
    """A _Listener that counts large requests (largeRequestThreshold set)."""


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
        links.bind_peer_source(config.servers[config.server_id].host)
        ctx = _build(config)
        ctx.serving = False
        ctx.mode = "looking"
        member = QuorumPeer(config, ctx, ctx.datadir,
                            lambda tree, role, term: _member_pipeline(ctx, tree, role, term))
        ctx.member = member
        _timed_elections(member, ctx.stats)
    else:
        ctx = build_standalone(config)
        member = None
    client_stores = (ReloadingStores(config.tls, security_tls.server_context, "ssl")
                     if config.tls is not None else None)
    listeners = await _listen(ctx, client_stores)
    addr = listeners[0].sockets[0].getsockname()
    log.info("event=listening address=%s port=%d mode=%s data_dir=%s zxid=0x%x",
             addr[0], addr[1], "ensemble" if member else "standalone", config.data_dir,
             ctx.tree.last_processed_zxid)
    if ready is not None:
        ready.set_result(addr)
    ctx.loopmon.start()
    runners = await _start_http(ctx)
    tasks = [asyncio.create_task(run_reaper(
        lambda: ctx.pipeline if ctx.serving and ctx.pipeline.leading else None,
        config.container_check_interval_ms, config.container_max_per_minute,
        config.container_max_never_used_ms, ctx.clock))]
    if member is None:
        ctx.expirer = asyncio.create_task(run_expirer(ctx.pipeline, config.tick_time_ms,
                                                      ctx.clock.mono_ms))
        tasks.append(ctx.expirer)
    else:
        tasks.append(asyncio.create_task(member.run()))
    tasks += [asyncio.create_task(stores.run()) for stores in _reloaded(config, client_stores)]
    try:
        async with contextlib.AsyncExitStack() as stack:
            for listener in listeners:
                await stack.enter_async_context(listener)
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()
    finally:
        for task in tasks:
            task.cancel()
        ctx.loopmon.stop()
        for runner in runners:
            await runner.cleanup()


# The isValid of each provider a configuration can register beyond ip and digest.
_ACL_ID_VALID = {security_x509.SCHEME: security_x509.is_valid_name,
                 security_sasl.SCHEME: security_sasl.is_valid_id}


def _reloaded(config: Config, client_stores: ReloadingStores | None) -> list[ReloadingStores]:
    """The stores read again when their files change: the client port's with
    client.certReload, the quorum's with sslQuorumReloadCertFiles."""
    reloaded = []
    if client_stores is not None and config.client_cert_reload:
        reloaded.append(client_stores)
    if config.quorum_tls is not None and config.quorum_tls.reload_cert_files:
        reloaded.append(config.quorum_tls.stores)
    for stores in reloaded:
        log.info("event=tls_reload_on stores=%s poll_s=%s", stores.what, RELOAD_POLL_S)
    return reloaded


async def _listen(ctx: ServerContext,
                  client_stores: ReloadingStores | None) -> list[asyncio.Server]:
    """The client ports: clientPort, secureClientPort, or both. Both make the same
    connections on the same pipeline; a secure one first has its TLS handshake (and its
    x509 id, when ssl.authProvider's x509 provider is registered). With
    client.portUnification clientPort takes both kinds, told apart by their first bytes.
    The auth providers the configuration names are registered, and SASL is offered if it
    has a JAAS Server section. The first listed is the one `ready` reports."""
    config = ctx.config
    loop = asyncio.get_running_loop()
    for scheme in config.auth_schemes:
        register_scheme(scheme, _ACL_ID_VALID[scheme])
    if config.sasl is not None:
        ctx.sasl = SaslAuthenticator(config.sasl)
        log.info("event=sasl_on mechanism=%s section=%s users=%d", config.sasl.mechanism,
                 config.sasl.section, len(config.sasl.users))
    listeners = []
    # Only a server with largeRequestThreshold set pays for counting large requests.
    listener = _LargeRequestListener if ctx.limits.large_requests_counted else _Listener

    def plain() -> asyncio.Protocol:
        return listener(ctx) if ctx.serving else NotServingConnection(ctx)

    if client_stores is not None:
        x509 = security_x509.SCHEME in config.auth_schemes

        def secure() -> asyncio.Protocol:
            """A TLS connection, with the stores' newest context."""
            if not ctx.serving:
                return _refuse_connection()
            return security_tls.TlsHandshake(lambda: listener(ctx), client_stores.current, x509,
                                             config.tls.super_user, ctx.limits)

    if config.client_port_unification:
        listeners.append(await UnifiedClientPort(plain, secure, ctx.limits).start(
            config.client_port_address, config.client_port))
        log.info("event=client_port_unification port=%d", config.client_port)
    elif config.client_port_enabled:
        listeners.append(await loop.create_server(
            plain, config.client_port_address, config.client_port, reuse_address=True))
    if config.secure_client_port is not None:
        server = await loop.create_server(
            secure, config.secure_client_port_address, config.secure_client_port,
            reuse_address=True)
        addr = server.sockets[0].getsockname()
        log.info("event=listening_secure address=%s port=%d client_auth=%s protocols=%s",
                 addr[0], addr[1], config.tls.client_auth, ",".join(config.tls.enabled_protocols))
        listeners.append(server)
    return listeners


async def _start_http(ctx: ServerContext) -> list[web.AppRunner]:
    """The AdminServer (unless admin.enableServer=false) and the Prometheus /metrics port
    (if metricsProvider.className names it), on this loop. One that cannot bind is logged
    and left off; the server serves on (ZooKeeper's standalone server exits instead)."""
    config = ctx.config
    apps = []
    if config.admin_enable_server:
        initial = config.source.read_text() if config.source is not None else None
        apps.append(("AdminServer", admin_app(AdminHttp(ctx, initial), config.admin_command_url),
                     config.admin_server_address, config.admin_server_port))
    if config.metrics_enabled:
        registry = registry_for(ctx, config.metrics_export_jvm_info)
        apps.append(("metrics", metrics_app(registry), config.metrics_http_host,
                     config.metrics_http_port))
    runners = []
    for name, app, host, port in apps:
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            await web.TCPSite(runner, host, port, reuse_address=True).start()
        except OSError as e:
            log.error("event=http_not_started server=%s address=%s port=%d error=%r", name,
                      host, port, str(e))
            await runner.cleanup()
            continue
        log.info("event=http_listening server=%s address=%s port=%d", name, host, port)
        runners.append(runner)
    return runners
