"""The AdminServer: ZooKeeper's HTTP commands (org.apache.zookeeper.server.admin.Commands,
3.9) as JSON, on aiohttp in the server's own loop. Every command reads admin.Admin's facts,
the same the four-letter words print. A response is the command's fields, then `command`
(its primary name) and `error` (null, or why it failed), as CommandResponse.toMap orders
them; the HTTP status is 200 even for an unknown command, as ZooKeeper's is. The one
exception is ZooKeeper's too: `monitor` on a member that is not serving is an HTTP 500."""

import html
import json
import logging
import os
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from zkcompat.jute.election import ServerState
from zkcompat.server.admin import NOT_SERVING, VERSION_LINE, Admin, _signed64, connection_info
from zkcompat.server.metrics import monitor_summaries

log = logging.getLogger(__name__)

# zoo.cfg keys QuorumPeerConfig.parseProperties reads itself; any other key becomes the
# system property "zookeeper.KEY" (system_properties shows them).
_ZOOKEEPER_CFG_KEYS = frozenset((
    "dataDir", "dataLogDir", "clientPort", "localSessionsEnabled", "localSessionsUpgradingEnabled",
    "clientPortAddress", "secureClientPort", "secureClientPortAddress", "observerMasterPort",
    "clientPortListenBacklog", "tickTime", "maxClientCnxns", "minSessionTimeout",
    "maxSessionTimeout", "initLimit", "connectToLearnerMasterLimit", "syncLimit",
    "electionAlg", "quorumListenOnAllIPs", "peerType", "syncEnabled", "dynamicConfigFile",
    "autopurge.snapRetainCount", "autopurge.purgeInterval", "standaloneEnabled",
    "reconfigEnabled", "sslQuorum", "portUnification", "sslQuorumReloadCertFiles",
    "quorum.auth.enableSasl", "quorum.auth.serverRequireSasl", "quorum.auth.learnerRequireSasl",
    "quorum.auth.learner.saslLoginContext", "quorum.auth.server.saslLoginContext",
    "quorum.auth.kerberos.servicePrincipal", "quorum.cnxn.threads.size", "jvm.pause.info-threshold.ms",
    "jvm.pause.warn-threshold.ms", "jvm.pause.sleep.time.ms", "jvm.pause.monitor",
    "multiAddress.enabled", "multiAddress.reachabilityCheckTimeoutMs",
    "multiAddress.reachabilityCheckEnabled", "oraclePath", "version",
))
_ZOOKEEPER_CFG_PREFIXES = ("server.", "group.", "weight.", "metricsProvider.")


class ServerError(Exception):
    """A command that fails as ZooKeeper's throws: Jetty answers HTTP 500 with its error
    page, the message in it."""


@dataclass(frozen=True)
class Command:
    names: tuple[str, ...]  # the primary name first
    run: Callable[["AdminHttp", dict], dict]
    server_required: bool = True

    @property
    def primary(self) -> str:
        return self.names[0]


class AdminHttp:
    """Runs ZooKeeper's admin commands against one server (a node.ServerContext)."""

    def __init__(self, server, initial_config: str | None):
        self.server = server
        self.initial_config = initial_config

    @property
    def admin(self) -> Admin:
        return self.server.admin

    def run(self, name: str, kwargs: dict) -> dict:
        """Commands.runGetCommand: the response map, `command` and `error` included."""
        command = BY_NAME.get(name)
        if command is None:
            return _response(name, {}, f"Unknown command: {name}")
        if command.server_required and not self._serving():
            return _response(name, {}, NOT_SERVING)
        return _response(command.primary, command.run(self, kwargs))

    def _serving(self) -> bool:
        return self.server.serving and self.server.pipeline is not None

    # -- the commands ------------------------------------------------------------------

    def ruok(self, kwargs) -> dict:
        return {}

    def connection_stat_reset(self, kwargs) -> dict:
        self.admin.reset_connection_stats()
        return {}

    def configuration(self, kwargs) -> dict:
        """ZooKeeperServerConf.toMap."""
        cfg = self.server.config
        return {
            "client_port": cfg.client_port,
            "data_dir": str(self.admin.data_dir()),
            "data_log_dir": str(self.admin.log_dir()),
            "tick_time": cfg.tick_time_ms,
            "max_client_cnxns": cfg.max_client_cnxns,
            "min_session_timeout": cfg.min_session_timeout_ms,
            "max_session_timeout": cfg.max_session_timeout_ms,
            "server_id": cfg.server_id,
            "client_port_listen_backlog": -1,
        }

    def connections(self, kwargs) -> dict:
        return {"connections": [connection_info(c, brief=False) for c in self.admin.connections()],
                "secure_connections": []}

    def dirs(self, kwargs) -> dict:
        data, logs = self.admin.dir_sizes()
        return {"datadir_size": data, "logdir_size": logs}

    def dump(self, kwargs) -> dict:
        return {
            "expiry_time_to_session_ids": {
                str(tick): [_signed64(s) for s in sids]
                for tick, sids in self.admin.session_expiry().items()},
            "session_id_to_ephemeral_paths": {
                str(_signed64(sid)): paths for sid, paths in self.admin.ephemerals().items()},
        }

    def environment(self, kwargs) -> dict:
        return dict(self.admin.environment())

    def get_trace_mask(self, kwargs) -> dict:
        return {"tracemask": self.admin.trace_mask}

    def set_trace_mask(self, kwargs) -> dict:
        if "traceMask" not in kwargs:
            return {"error": "setTraceMask requires long traceMask argument"}
        try:
            mask = int(kwargs["traceMask"])
            if not -(1 << 63) <= mask < 1 << 63:
                raise ValueError
        except ValueError:
            return {"error": "setTraceMask requires long traceMask argument, got "
                             f"{kwargs['traceMask']}"}
        self.admin.trace_mask = mask
        return {"tracemask": mask}

    def hash(self, kwargs) -> dict:
        """DataTree.getDigestLog: the tree digest at every 128th zxid this server applied."""
        return {"digests": [{"zxid": z, "digest_version": v, "digest": d}
                            for z, v, d in self.server.digest_log]}

    def initial_configuration(self, kwargs) -> dict:
        """The zoo.cfg text; null on an ensemble member, as ZooKeeper's: QuorumPeerMain
        never calls QuorumPeer.setInitialConfig, so its servers are built with null."""
        if self.admin.member is not None:
            return {"initial_configuration": None}
        return {"initial_configuration": self.initial_config}

    def is_read_only(self, kwargs) -> dict:
        return {"read_only": bool(self.server.pipeline.read_only)}

    def last_snapshot(self, kwargs) -> dict:
        """FileTxnSnapLog.getLastSnapshotInfo: its zxid in hex (Long.toHexString), and when
        it was written, in seconds."""
        zxid, timestamp = self.admin.last_snapshot()
        return {"zxid": f"{zxid & 0xFFFFFFFFFFFFFFFF:x}", "timestamp": timestamp}

    def leader(self, kwargs) -> dict:
        member = self.admin.member
        if member is None:
            return {"error": "server is not initialized"}
        vote = getattr(member, "vote", None)
        leader_id = vote.leader if vote is not None and member.state != ServerState.LOOKING else -1
        leader = member.config.servers.get(leader_id)
        return {"is_leader": self.admin.leading, "leader_id": leader_id,
                "leader_ip": leader.host if leader is not None else ""}

    def monitor(self, kwargs) -> dict:
        """MonitorCommand needs no server to be run, then calls the server's
        dumpMonitorValues: without one ZooKeeper (3.8 and 3.9) throws a
        NullPointerException, which Jetty answers with HTTP 500 and its error page."""
        if not self._serving():
            raise ServerError(NOT_SERVING)
        return dict(self.admin.monitor_rows() + monitor_summaries(self.server))

    def observer_connection_stat_reset(self, kwargs) -> dict:
        return {}  # no per-observer counters are kept (observers lists none)

    def observers(self, kwargs) -> dict:
        observers = [li for li in self.admin.learners() if li.observer]
        # The leader's term holds its learners' quorum connections.
        conns = self.server.pipeline.shell.term.conns if observers else {}
        return {"synced_observers": len(observers),
                "observers": [_learner_info(li, conns.get(li.sid)) for li in observers]}

    def server_stats(self, kwargs) -> dict:
        """SrvrCommand: ServerStats as Jackson writes its getters."""
        st = self.server.stats
        data, logs = self.admin.dir_sizes()
        lat = st.latency
        out = {
            "version": VERSION_LINE,
            "read_only": bool(self.server.pipeline.read_only),
            "server_stats": {
                "packets_sent": st.packets_sent,
                "packets_received": st.packets_received,
                "fsync_threshold_exceed_count": st.fsync_threshold_exceeded,
                "data_dir_size": data,
                "log_dir_size": logs,
                "provider_null": False,
                "server_state": self.server.mode,
                "last_processed_zxid": self.server.pipeline.tree.last_processed_zxid,
                "outstanding_requests": self.admin.outstanding(),
                "avg_latency": round(lat.avg, 4),
                "max_latency": lat.max,
                "min_latency": lat.min,
                "num_alive_client_connections": len(self.server.connections),
                "uptime": self.admin.uptime_ms(),
                "non_mtlsremote_conn_count": 0,  # no client certificates are required here
                "non_mtlslocal_conn_count": 0,
            },
        }
        if self.admin.leading:  # the leader's BufferStats of its proposals
            sizes = self.server.pipeline.peer.proposal_sizes
            out["proposal_stats"] = {"last_buffer_size": sizes.last,
                                     "min_buffer_size": sizes.min,
                                     "max_buffer_size": sizes.max}
        out["node_count"] = self.admin.node_count()
        return out

    def stats(self, kwargs) -> dict:
        out = self.server_stats(kwargs)
        out["connections"] = [connection_info(c, brief=True) for c in self.admin.connections()]
        out["secure_connections"] = []
        return out

    def stat_reset(self, kwargs) -> dict:
        self.admin.srst(None)  # what srst resets, the leader's proposal sizes too
        return {}

    def system_properties(self, kwargs) -> dict:
        """A Python process has no Java system properties; these are its counterparts, and
        the zookeeper.KEY properties ZooKeeper makes of zoo.cfg keys it does not parse."""
        uname = os.uname()
        props = {
            "file.encoding": sys.getfilesystemencoding().upper().replace("UTF8", "UTF-8"),
            "file.separator": os.sep,
            "line.separator": "\n",
            "os.arch": uname.machine,
            "os.name": uname.sysname,
            "os.version": uname.release,
            "path.separator": os.pathsep,
            "python.implementation": platform.python_implementation(),
            "python.version": platform.python_version(),
            "user.dir": os.getcwd(),
            "user.home": os.path.expanduser("~"),
        }
        for key, value in self.server.config.raw.items():
            if key not in _ZOOKEEPER_CFG_KEYS and not key.startswith(_ZOOKEEPER_CFG_PREFIXES):
                props[f"zookeeper.{key}"] = value  # "zookeeper.zookeeper.x" too, as there
        return dict(sorted(props.items()))

    def voting_view(self, kwargs) -> dict:
        member = self.admin.member
        if member is None:
            return {"current_config": {}}
        return {"current_config": {
            str(s.sid): {
                "server_addresses": [f"{s.host}:{s.quorum_port}"],
                "election_addresses": [f"{s.host}:{s.election_port}"],
                "client_address": (f"{s.client_host}:{s.client_port}"
                                   if s.client_port is not None else ""),
                "learner_type": str(s.role),
            } for s in member.config.servers.values() if s.sid in member.config.voters}}

    def watches(self, kwargs) -> dict:
        return {"session_id_to_watched_paths": {
            str(_signed64(sid)): paths
            for sid, paths in self.admin.data_watches_by_session().items()}}

    def watches_by_path(self, kwargs) -> dict:
        return {"path_to_session_ids": {
            path: [_signed64(s) for s in sids]
            for path, sids in self.admin.data_watches_by_path().items()}}

    def watch_summary(self, kwargs) -> dict:
        connections, paths, total = self.admin.watch_summary()
        return {"num_connections": connections, "num_paths": paths, "num_total_watches": total}

    def zabstate(self, kwargs) -> dict:
        member = self.admin.member
        if member is None or not self._serving():
            # ZooKeeper answers so when its server is not a QuorumZooKeeperServer, which a
            # member between roles is not either.
            return {"voting": False, "zabstate": ""}
        cfg = member.config
        me = cfg.servers[cfg.server_id]
        zxid = self.server.pipeline.tree.last_processed_zxid
        return {
            "myid": cfg.server_id,
            "is_leader": self.admin.leading,
            "quorum_address": _multiple_addresses(me.host, me.quorum_port),
            "election_address": _multiple_addresses(me.host, me.election_port),
            "client_address": f"{cfg.client_port_address}:{cfg.client_port}",
            "voting": cfg.server_id in cfg.voters,
            "last_zxid": f"0x{zxid:x}",
            "zab_epoch": zxid >> 32,
            "zab_counter": zxid & 0xFFFFFFFF,
            "zabstate": self.admin.zab_state(),
        }


def _multiple_addresses(host: str, port: int) -> dict:
    """ZabStateCommand's quorum_address and election_address: a MultipleAddresses (3.8 and
    3.9 put the object itself) as Jackson writes it, every getter in the order 3.8's answer
    has them, an address as InetSocketAddressSerializer writes it (host:port). One's own
    address is reachable."""
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return {"empty": False, "all_addresses": [address], "all_reachable_addresses": [address],
            "one": address, "reachable_address": address,
            "wildcard_addresses": [f"0.0.0.0:{port}"], "all_ports": [port],
            "all_host_strings": [host], "all_reachable_addresses_or_all": [address],
            "reachable_or_one": address}


def _learner_info(li, conn) -> dict:
    """LearnerHandler.getLearnerHandlerInfo, of what the leader keeps per learner."""
    return {
        "remote_socket_address": f"/{conn.remote}" if conn is not None else "<null>",
        "sid": li.sid,
        # the newest zxid the leader knows it has: its ACKEPOCH's, or its last ACK
        "last_zxid": max(li.acked, li.last_zxid),
    }


def _response(command: str, data: dict, error: str | None = None) -> dict:
    """CommandResponse.toMap: the data, then command, then error (a command that put an
    "error" of its own keeps it where it put it)."""
    out = dict(data)
    out["command"] = command
    out.setdefault("error", error)
    return out


_H = AdminHttp
COMMANDS = (
    Command(("connection_stat_reset", "crst"), _H.connection_stat_reset),
    Command(("configuration", "conf", "config"), _H.configuration),
    Command(("connections", "cons"), _H.connections),
    Command(("hash",), _H.hash),
    Command(("dirs",), _H.dirs),
    Command(("dump",), _H.dump),
    Command(("environment", "env", "envi"), _H.environment, server_required=False),
    Command(("get_trace_mask", "gtmk"), _H.get_trace_mask, server_required=False),
    Command(("initial_configuration", "icfg"), _H.initial_configuration),
    Command(("is_read_only", "isro"), _H.is_read_only),
    Command(("last_snapshot", "lsnp"), _H.last_snapshot),
    Command(("leader", "lead"), _H.leader),
    Command(("monitor", "mntr"), _H.monitor, server_required=False),
    Command(("observer_connection_stat_reset", "orst"), _H.observer_connection_stat_reset),
    Command(("ruok",), _H.ruok),
    Command(("set_trace_mask", "stmk"), _H.set_trace_mask, server_required=False),
    Command(("server_stats", "srvr"), _H.server_stats),
    Command(("stats", "stat"), _H.stats),
    Command(("stat_reset", "srst"), _H.stat_reset),
    Command(("observers", "obsr"), _H.observers),
    Command(("system_properties", "sysp"), _H.system_properties, server_required=False),
    Command(("voting_view",), _H.voting_view),
    Command(("watches", "wchc"), _H.watches),
    Command(("watches_by_path", "wchp"), _H.watches_by_path),
    Command(("watch_summary", "wchs"), _H.watch_summary),
    Command(("zabstate",), _H.zabstate, server_required=False),
)
BY_NAME = {name: c for c in COMMANDS for name in c.names}


def _json(response: dict) -> str:
    # Jackson's INDENT_OUTPUT puts " : " between a key and its value.
    return json.dumps(response, indent=2, separators=(",", " : ")) + "\n"


def _error_page(uri: str, message: str) -> web.Response:
    """Jetty's ErrorHandler page for an exception thrown by the servlet (its servlet name,
    cause and stack trace, which are Java's own, left out)."""
    message = html.escape(message)
    text = ("<html>\n<head>\n"
            '<meta http-equiv="Content-Type" content="text/html;charset=ISO-8859-1"/>\n'
            f"<title>Error 500 {message}</title>\n</head>\n"
            f"<body><h2>HTTP ERROR 500 {message}</h2>\n<table>\n"
            f"<tr><th>URI:</th><td>{html.escape(uri)}</td></tr>\n"
            "<tr><th>STATUS:</th><td>500</td></tr>\n"
            f"<tr><th>MESSAGE:</th><td>{message}</td></tr>\n"
            "</table>\n\n</body>\n</html>\n")
    return web.Response(status=500, reason="Server Error", text=text, content_type="text/html",
                        charset="iso-8859-1",
                        headers={"Cache-Control": "must-revalidate,no-cache,no-store"})


def admin_app(admin_http: AdminHttp, command_url: str) -> web.Application:
    """JettyAdminServer's CommandServlet at command_url/*: no command lists the commands'
    links, sorted; a command's response is JSON."""
    base = command_url.rstrip("/")

    async def links(request: web.Request) -> web.Response:
        names = sorted(c.primary for c in COMMANDS)
        text = "".join(f'<a href="{base}/{n}">{n}</a>\n<br/>\n' for n in names)
        return web.Response(text=text, content_type="text/html")

    async def command(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        kwargs = {k: request.query.getone(k) for k in request.query}
        try:
            body = _json(admin_http.run(name, kwargs))
        except ServerError as e:
            return _error_page(request.path, str(e))
        except Exception:  # a command's own bug: logged; the server serves on
            log.exception("event=admin_command_failed command=%s", name)
            body = '{"error": "Exception writing command response to JSON"}'
        return web.Response(text=body, content_type="application/json")

    app = web.Application()
    app.router.add_get(base or "/", links)
    if base:
        app.router.add_get(f"{base}/", links)
    app.router.add_get(f"{base}/{{name:.+}}", command)
    return app
