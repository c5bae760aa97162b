"""Four-letter words, in ZooKeeper's text formats, gated by 4lw.commands.whitelist exactly as
ZooKeeper gates them (srvr is always allowed: `zkServer.sh status` depends on it)."""

import getpass
import os
import resource
import socket
import time
from pathlib import Path

import zkcompat
from zkcompat.config import FOUR_LETTER_WORDS
from zkcompat.server.stats import now_ms

VERSION_LINE = f"3.9.0-zkcompat-{zkcompat.__version__}, built on zkcompat"
# ZooTrace's default trace mask (CLIENT_REQUEST | SERVER_PACKET | ... as ZooKeeper sets it).
TRACE_MASK_DEFAULT = 306


def _hex(v: int) -> str:
    return f"0x{v & 0xFFFFFFFFFFFFFFFF:x}"


def _dir_size(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def _java_date(ms: int) -> str:
    return time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(ms / 1000))


class Admin:
    def __init__(self, server):
        self.server = server
        self.started = time.monotonic()

    def is_four_letter_word(self, first4: bytes) -> bool:
        try:
            return first4.decode("ascii") in FOUR_LETTER_WORDS
        except UnicodeDecodeError:
            return False

    def four_letter_word(self, cmd: str, cnxn) -> str:
        if cmd not in self.server.config.four_letter_words:
            return f"{cmd} is not executed because it is not in the whitelist.\n"
        fn = COMMANDS.get(cmd)
        if fn is None:
            return f"{cmd} is not supported by this server yet.\n"
        return fn(self, cnxn)

    # -- what several commands share ---------------------------------------------------

    @property
    def _pipeline(self):
        return self.server.pipeline

    def _node_count(self) -> int:
        return len(self._pipeline.tree.nodes) + 1  # ZooKeeper's map also holds "" for the root

    def _outstanding(self) -> int:
        return sum(len(s.queue) for s in self._pipeline.tracker.sessions.values())

    def _connections(self):
        return sorted(self.server.connections, key=lambda c: c.stats.established_ms)

    def _server_summary(self) -> str:
        st = self.server.stats
        lat = st.latency
        return (
            f"Latency min/avg/max: {lat.min}/{lat.avg:.1f}/{lat.max}\n"
            f"Received: {st.packets_received}\n"
            f"Sent: {st.packets_sent}\n"
            f"Connections: {len(self.server.connections)}\n"
            f"Outstanding: {self._outstanding()}\n"
            f"Zxid: 0x{self._pipeline.tree.last_processed_zxid:x}\n"
            f"Mode: {self.server.mode}\n"
            f"Node count: {self._node_count()}\n"
        )

    # -- the commands ------------------------------------------------------------------

    def ruok(self, cnxn) -> str:
        return "imok"

    def isro(self, cnxn) -> str:
        return "ro" if self._pipeline.read_only else "rw"

    def srvr(self, cnxn) -> str:
        return f"Zookeeper version: {VERSION_LINE}\n" + self._server_summary()

    def stat(self, cnxn) -> str:
        clients = "".join(f"{_connection_line(c, brief=True)}\n" for c in self._connections())
        return (f"Zookeeper version: {VERSION_LINE}\nClients:\n{clients}\n"
                + self._server_summary())

    def cons(self, cnxn) -> str:
        return "".join(f"{_connection_line(c, brief=False)}\n" for c in self._connections()) + "\n"

    def crst(self, cnxn) -> str:
        for c in self.server.connections:
            c.stats.reset()
        return "Connection stats reset.\n"

    def srst(self, cnxn) -> str:
        self.server.stats.reset()
        return "Server stats reset.\n"

    def conf(self, cnxn) -> str:
        cfg = self.server.config
        dd = self.server.datadir
        data = dd.root.resolve()
        logdir = dd.txnlog.path.parent.resolve()
        return (
            f"clientPort={cfg.client_port}\n"
            "secureClientPort=-1\n"
            f"dataDir={data}\n"
            f"dataDirSize={_dir_size(data)}\n"
            f"dataLogDir={logdir}\n"
            f"dataLogSize={_dir_size(logdir)}\n"
            f"tickTime={cfg.tick_time_ms}\n"
            f"maxClientCnxns={cfg.max_client_cnxns}\n"
            f"minSessionTimeout={cfg.min_session_timeout_ms}\n"
            f"maxSessionTimeout={cfg.max_session_timeout_ms}\n"
            "clientPortListenBacklog=-1\n"
            f"serverId={cfg.server_id}\n"
        ) + self._quorum_conf(cfg)

    def _quorum_conf(self, cfg) -> str:
        """QuorumZooKeeperServer.dumpConf's part: limits, ports, and the membership as the
        QuorumVerifier prints it (what the election notifications carry)."""
        membership = getattr(self.server, "quorum_config", None)
        if not cfg.is_ensemble or membership is None:
            return ""
        me = cfg.servers[cfg.server_id]
        peer_type = 1 if me.role == "observer" else 0  # LearnerType.ordinal()
        return (f"initLimit={cfg.init_limit}\nsyncLimit={cfg.sync_limit}\n"
                f"electionAlg={cfg.election_alg}\nelectionPort={me.election_port}\n"
                f"quorumPort={me.quorum_port}\npeerType={peer_type}\nmembership: \n"
                + membership.decode())

    def dirs(self, cnxn) -> str:
        dd = self.server.datadir
        return (f"datadir_size: {_dir_size(dd.root)}\n"
                f"logdir_size: {_dir_size(dd.txnlog.path)}\n")

    def envi(self, cnxn) -> str:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "?"
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        env = [
            ("zookeeper.version", VERSION_LINE),
            ("host.name", socket.gethostname()),
            ("os.name", os.uname().sysname),
            ("os.arch", os.uname().machine),
            ("os.version", os.uname().release),
            ("user.name", user),
            ("user.home", os.path.expanduser("~")),
            ("user.dir", os.getcwd()),
            # A Python process has no JVM heap; report what it has: its peak resident size.
            ("os.memory.free", "0MB"),
            ("os.memory.max", f"{rss_mb}MB"),
            ("os.memory.total", f"{rss_mb}MB"),
        ]
        return "Environment:\n" + "".join(f"{k}={v}\n" for k, v in env)

    def mntr(self, cnxn) -> str:
        p = self._pipeline
        st = self.server.stats
        try:
            open_fds = len(os.listdir("/proc/self/fd"))
        except OSError:
            open_fds = -1
        rows = [
            ("zk_version", VERSION_LINE),
            ("zk_server_state", self.server.mode),
            ("zk_ephemerals_count", sum(len(v) for v in p.tree.ephemerals.values())),
            ("zk_num_alive_connections", len(self.server.connections)),
            ("zk_avg_latency", f"{st.latency.avg:.1f}"),
            ("zk_outstanding_requests", self._outstanding()),
            ("zk_znode_count", self._node_count()),
            ("zk_global_sessions", len(p.tracker.sessions)),
            ("zk_packets_sent", st.packets_sent),
            ("zk_packets_received", st.packets_received),
            ("zk_watch_count", p.watches.count()),
            ("zk_min_latency", st.latency.min),
            ("zk_max_latency", st.latency.max),
            ("zk_max_file_descriptor_count", resource.getrlimit(resource.RLIMIT_NOFILE)[0]),
            ("zk_open_file_descriptor_count", open_fds),
            ("zk_approximate_data_size",
             sum(len(n.data or b"") + len(k) for k, n in p.tree.nodes.items())),
            ("zk_uptime", int((time.monotonic() - self.started) * 1000)),
            ("zk_snap_count", 0 if self.server.snapshotter.last is None else 1),
            ("zk_digest_mismatches_count", p.stats.digest_mismatches),
        ]
        rows += self._leader_rows(p)
        return "".join(f"{k}\t{v}\n" for k, v in rows)

    def _leader_rows(self, p) -> list[tuple[str, object]]:
        """The leader's gauges (LeaderZooKeeperServer.registerMetrics); zk_followers is the
        name 3.4's mntr used for the learner count, which tools still read."""
        if self.server.mode != "leader":
            return []
        learners = list(p.peer.learners.values())
        synced = [li for li in learners if li.phase == "uptodate"]
        return [
            ("zk_learners", len(learners)),
            ("zk_followers", len(learners)),
            ("zk_synced_followers", sum(1 for li in synced if not li.observer)),
            ("zk_synced_non_voting_followers", 0),  # every follower here votes
            ("zk_synced_observers", sum(1 for li in synced if li.observer)),
            ("zk_pending_syncs", sum(len(v) for v in p.peer._pending_syncs.values())),
        ]

    def wchs(self, cnxn) -> str:
        # DataTree.dumpWatchesSummary reports the data watches only.
        table = self._pipeline.watches.data.by_path
        watchers = {w for modes in table.values() for w in modes}
        total = sum(len(modes) for modes in table.values())
        return f"{len(watchers)} connections watching {len(table)} paths\nTotal watches:{total}\n"

    def wchc(self, cnxn) -> str:
        by_session: dict[int, list[str]] = {}
        for path, modes in self._pipeline.watches.data.by_path.items():
            for w in modes:
                sid = w.session.session_id if w.session is not None else 0
                by_session.setdefault(sid, []).append(path)
        return "".join(f"{_hex(sid)}\n" + "".join(f"\t{p}\n" for p in sorted(paths))
                       for sid, paths in sorted(by_session.items()))

    def wchp(self, cnxn) -> str:
        out = []
        for path, modes in sorted(self._pipeline.watches.data.by_path.items()):
            out.append(f"{path}\n")
            for w in modes:
                out.append(f"\t{_hex(w.session.session_id if w.session is not None else 0)}\n")
        return "".join(out)

    def dump(self, cnxn) -> str:
        p = self._pipeline
        buckets: dict[int, list[int]] = {}
        for s in p.tracker.sessions.values():
            buckets.setdefault(s.expire_tick, []).append(s.session_id)
        wall_offset = int(time.time() * 1000) - now_ms()
        lines = ["SessionTracker dump:",
                 f"Session Sets ({len(buckets)})/({len(p.tracker.sessions)}):"]
        for tick, sids in sorted(buckets.items()):
            lines.append(f"{len(sids)} expire at {_java_date(tick + wall_offset)}:")
            lines += [f"\t{_hex(sid)}" for sid in sorted(sids)]
        eph = {sid: paths for sid, paths in p.tree.ephemerals.items() if paths}
        lines += ["ephemeral nodes dump:", f"Sessions with Ephemerals ({len(eph)}):"]
        for sid, paths in sorted(eph.items()):
            lines.append(f"{_hex(sid)}:")
            lines += [f"\t{path}" for path in sorted(paths)]
        conns = self._connections()
        lines += ["Connections dump:", f"Connections Sets ({len(conns)})/({len(conns)}):"]
        for c in conns:
            sid = c.session.session_id if c.session is not None else 0
            lines.append(f"1 expire at {_java_date(int(time.time() * 1000))}:")
            lines.append(f"\tip: /{c.remote} sessionId: {_hex(sid)}")
        return "\n".join(lines) + "\n"

    def gtmk(self, cnxn) -> str:
        return str(TRACE_MASK_DEFAULT)

    def reqs(self, cnxn) -> str:
        return ""  # outstanding requests are answered within one loop turn here


def _connection_line(c, brief: bool) -> str:
    """ServerCnxn.dumpConnectionInfo."""
    st = c.stats
    queued = len(c.session.queue) if c.session is not None else 0
    ops = 0 if c._paused else 1  # the selector interest ops: 1 = reading
    text = f" /{c.remote}[{ops}](queued={queued},recved={st.received},sent={st.sent}"
    sid = c.session.session_id if c.session is not None else 0
    if not brief and sid:
        lat = st.latency
        text += (f",sid={_hex(sid)},lop={st.last_op},est={st.established_ms},"
                 f"to={c.session.timeout_ms}")
        if st.last_cxid >= 0:
            text += f",lcxid=0x{st.last_cxid & 0xFFFFFFFF:x}"
        text += (f",lzxid=0x{st.last_zxid & 0xFFFFFFFFFFFFFFFF:x},lresp={st.last_response_ms},"
                 f"llat={st.last_latency},minlat={lat.min},avglat={int(lat.avg)},"
                 f"maxlat={lat.max}")
    return text + ")"


COMMANDS = {
    "ruok": Admin.ruok, "isro": Admin.isro, "srvr": Admin.srvr, "stat": Admin.stat,
    "cons": Admin.cons, "crst": Admin.crst, "srst": Admin.srst, "conf": Admin.conf,
    "dirs": Admin.dirs, "envi": Admin.envi, "mntr": Admin.mntr, "wchs": Admin.wchs,
    "wchc": Admin.wchc, "wchp": Admin.wchp, "dump": Admin.dump, "gtmk": Admin.gtmk,
    "reqs": Admin.reqs,
}
