"""Four-letter words (ruok, srvr, stat, conf, envi, mntr, cons, wchs, isro), gated by
4lw.commands.whitelist exactly as ZooKeeper gates them, in ZooKeeper's text formats."""

import os
import platform
import socket
import sys
import time

import zkcompat
from zkcompat.config import FOUR_LETTER_WORDS

VERSION_LINE = f"3.9.0-zkcompat-{zkcompat.__version__}"


class Admin:
    def __init__(self, server):
        self.server = server
        self.started = time.monotonic()

    def is_four_letter_word(self, first4: bytes) -> bool:
        try:
            cmd = first4.decode("ascii")
        except UnicodeDecodeError:
            return False
        return cmd in FOUR_LETTER_WORDS

    def four_letter_word(self, cmd: str, cnxn) -> str:
        if cmd not in self.server.config.four_letter_words:
            return f"{cmd} is not executed because it is not in the whitelist.\n"
        fn = COMMANDS.get(cmd)
        if fn is None:
            return f"{cmd} is not supported by this server yet.\n"
        return fn(self, cnxn)

    # -- numbers shared by several commands -----------------------------------------

    def _counts(self):
        p = self.server.pipeline
        return {
            "connections": len(self.server.connections),
            "outstanding": sum(len(s.queue) for s in p.tracker.sessions.values()),
            "zxid": p.tree.last_processed_zxid,
            "nodes": len(p.tree.nodes),
            "received": sum(c.stats["received"] for c in self.server.connections),
            "sent": sum(c.stats["sent"] for c in self.server.connections),
        }

    def ruok(self, cnxn) -> str:
        return "imok"

    def isro(self, cnxn) -> str:
        return "rw"

    def srvr(self, cnxn) -> str:
        c = self._counts()
        return (
            f"Zookeeper version: {VERSION_LINE}, built on zkcompat\n"
            "Latency min/avg/max: 0/0.0/0\n"
            f"Received: {c['received']}\n"
            f"Sent: {c['sent']}\n"
            f"Connections: {c['connections']}\n"
            f"Outstanding: {c['outstanding']}\n"
            f"Zxid: 0x{c['zxid']:x}\n"
            "Mode: standalone\n"
            f"Node count: {c['nodes']}\n"
        )

    def stat(self, cnxn) -> str:
        lines = [f"Zookeeper version: {VERSION_LINE}, built on zkcompat", "Clients:"]
        lines += [f" {_cons_line(c)}" for c in sorted(self.server.connections, key=id)]
        srvr = self.srvr(cnxn).split("\n", 1)[1]
        return "\n".join(lines) + "\n\n" + srvr

    def cons(self, cnxn) -> str:
        return "".join(f" {_cons_line(c)}\n" for c in sorted(self.server.connections, key=id)) + "\n"

    def conf(self, cnxn) -> str:
        cfg = self.server.config
        return (
            f"clientPort={cfg.client_port}\n"
            f"secureClientPort=-1\n"
            f"dataDir={cfg.data_dir.resolve()}\n"
            f"dataDirSize=0\n"
            f"dataLogDir={cfg.data_dir.resolve()}\n"
            f"dataLogSize=0\n"
            f"tickTime={cfg.tick_time_ms}\n"
            f"maxClientCnxns={cfg.max_client_cnxns}\n"
            f"minSessionTimeout={cfg.min_session_timeout_ms}\n"
            f"maxSessionTimeout={cfg.max_session_timeout_ms}\n"
            f"clientPortListenBacklog=-1\n"
            f"serverId={cfg.server_id}\n"
        )

    def envi(self, cnxn) -> str:
        env = [
            ("zookeeper.version", VERSION_LINE),
            ("host.name", socket.gethostname()),
            ("python.version", sys.version.split()[0]),
            ("python.implementation", platform.python_implementation()),
            ("os.name", platform.system()),
            ("os.arch", platform.machine()),
            ("os.version", platform.release()),
            ("user.dir", os.getcwd()),
            ("process.id", str(os.getpid())),
        ]
        return "Environment:\n" + "".join(f"{k}={v}\n" for k, v in env)

    def mntr(self, cnxn) -> str:
        c = self._counts()
        p = self.server.pipeline
        rows = [
            ("zk_version", VERSION_LINE),
            ("zk_server_state", "standalone"),
            ("zk_avg_latency", "0.0"),
            ("zk_max_latency", "0"),
            ("zk_min_latency", "0"),
            ("zk_packets_received", c["received"]),
            ("zk_packets_sent", c["sent"]),
            ("zk_num_alive_connections", c["connections"]),
            ("zk_outstanding_requests", c["outstanding"]),
            ("zk_znode_count", c["nodes"]),
            ("zk_watch_count", p.watches.count()),
            ("zk_ephemerals_count", sum(len(v) for v in p.tree.ephemerals.values())),
            ("zk_approximate_data_size", sum(len(n.data or b"") + len(k)
                                             for k, n in p.tree.nodes.items())),
            ("zk_global_sessions", len(p.tracker.sessions)),
            ("zk_uptime", int((time.monotonic() - self.started) * 1000)),
        ]
        return "".join(f"{k}\t{v}\n" for k, v in rows)

    def wchs(self, cnxn) -> str:
        p = self.server.pipeline
        watchers = p.watches.watchers()
        paths = p.watches.paths()
        return (f"{len(watchers)} connections watching {len(paths)} paths\n"
                f"Total watches:{p.watches.count()}\n")


def _cons_line(c) -> str:
    sid = c.session.session_id if c.session is not None else 0
    queued = len(c.session.queue) if c.session is not None else 0
    return (f"/{c.remote}[1](queued={queued},recved={c.stats['received']},"
            f"sent={c.stats['sent']},sid=0x{sid & 0xFFFFFFFFFFFFFFFF:x})")


COMMANDS = {
    "ruok": Admin.ruok,
    "isro": Admin.isro,
    "srvr": Admin.srvr,
    "stat": Admin.stat,
    "cons": Admin.cons,
    "conf": Admin.conf,
    "envi": Admin.envi,
    "mntr": Admin.mntr,
    "wchs": Admin.wchs,
}
