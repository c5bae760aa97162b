"""What a server reports about itself, once: the four-letter words print it in ZooKeeper's
text formats (gated by 4lw.commands.whitelist exactly as ZooKeeper gates them; srvr is
always allowed: `zkServer.sh status` depends on it), the AdminServer (adminhttp.py) returns
the same facts as ZooKeeper's JSON, and the Prometheus collector (metrics.py) reads them."""

import asyncio
import getpass
import os
import resource
import socket
import time
from pathlib import Path

import zkcompat
from zkcompat.config import FOUR_LETTER_WORDS
from zkcompat.jute.election import ServerState
from zkcompat.server.metrics import monitor_summaries
from zkcompat.server.stats import now_ms

VERSION_LINE = f"3.9.0-zkcompat-{zkcompat.__version__}, built on zkcompat"
# ZooTrace's default trace mask (CLIENT_REQUEST | SERVER_PACKET | ... as ZooKeeper sets it).
TRACE_MASK_DEFAULT = 306
# QuorumPeer.ZabState, as the zabstate command names them (DISCOVERY is not told apart).
ZAB_ELECTION, ZAB_SYNCHRONIZATION, ZAB_BROADCAST = "election", "synchronization", "broadcast"
# QuorumPeer.getDetailedPeerState's first word: the ServerState, by srvr's mode.
PEER_STATES = {"leader": "leading", "follower": "following", "observer": "observing",
               "looking": "looking", "read-only": "looking"}
# AbstractFourLetterCommand.ZK_NOT_SERVING: the answer of a command that needs the
# ZooKeeperServer while none runs (a member electing, or syncing with its new leader).
NOT_SERVING = "This ZooKeeper instance is not currently serving requests"
# The words that ask nothing of the ZooKeeperServer (RuokCommand, EnvCommand,
# TraceMaskCommand, SetTraceMaskCommand): answered alike whether one runs or not.
SERVER_NOT_REQUIRED = frozenset(("ruok", "envi", "gtmk", "stmk"))
# The rest, without one: IsroCommand prints "null", DigestCommand print()s ZK_NOT_SERVING,
# every other println()s it.
NOT_SERVING_ANSWERS = {"isro": "null", "hash": NOT_SERVING}
# The bytes a word reads after itself: stmk's new trace mask, a long
# (NIOServerCnxn.checkFourLetterWord).
ARGUMENT_BYTES = {"stmk": 8}


def _hex(v: int) -> str:
    return f"0x{v & 0xFFFFFFFFFFFFFFFF:x}"


def _signed64(v: int) -> int:
    """A session id as Java's long prints it (ids of servers >= 128 are negative)."""
    v &= 0xFFFFFFFFFFFFFFFF
    return v - (1 << 64) if v >> 63 else v


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


def java_text(value) -> str:
    """A value as Java's String.valueOf prints it in mntr (true, 4.0, 12)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


class Admin:
    def __init__(self, server):
        self.server = server
        self.started = time.monotonic()
        self.trace_mask = TRACE_MASK_DEFAULT  # stmk / set_trace_mask; nothing traces by it
        self._data_size: tuple | None = None  # (when, bytes, tree) of the last walk

    def is_four_letter_word(self, first4: bytes) -> bool:
        try:
            return first4.decode("ascii") in FOUR_LETTER_WORDS
        except UnicodeDecodeError:
            return False

    def four_letter_word(self, cmd: str, cnxn, argument: bytes = b"") -> str:
        """NIOServerCnxn.checkFourLetterWord: the whitelist first, then the command, which
        says ZK_NOT_SERVING if it needs a server and this one is not serving."""
        if cmd not in self.server.config.four_letter_words:
            return f"{cmd} is not executed because it is not in the whitelist.\n"
        if not self.server.serving and cmd not in SERVER_NOT_REQUIRED:
            return NOT_SERVING_ANSWERS.get(cmd, NOT_SERVING + "\n")
        if cmd == "stmk":
            return self.stmk(argument)
        fn = COMMANDS.get(cmd)
        if fn is None:
            return f"{cmd} is not supported by this server yet.\n"
        return fn(self, cnxn)

    # -- the facts ---------------------------------------------------------------------

    @property
    def _pipeline(self):
        return self.server.pipeline

    @property
    def member(self):
        """The QuorumPeer of an ensemble member; None standalone."""
        return getattr(self.server, "member", None)

    @property
    def leading(self) -> bool:
        return self.server.mode == "leader"

    def node_count(self) -> int:
        return len(self._pipeline.tree.nodes) + 1  # ZooKeeper's map also holds "" for the root

    def outstanding(self) -> int:
        return sum(len(s.queue) for s in self._pipeline.tracker.sessions.values())

    def connections(self):
        return sorted(self.server.connections, key=lambda c: c.stats.established_ms)

    def ephemerals_count(self) -> int:
        return sum(len(v) for v in self._pipeline.tree.ephemerals.values())

    def approximate_data_size(self, max_age_s: float = 0.0) -> int:
        """Bytes of data and paths (DataTree.approximateDataSize). ZooKeeper keeps it as it
        goes; here it is a walk of every znode (~50 ms per million), so a caller that asks
        often (a scrape) takes a value up to max_age_s old."""
        now = time.monotonic()
        cached = self._data_size
        if cached is not None and now - cached[0] < max_age_s and cached[2] is self._pipeline.tree:
            return cached[1]
        tree = self._pipeline.tree
        size = sum(len(n.data or b"") + len(k) for k, n in tree.nodes.items())
        self._data_size = (now, size, tree)
        return size

    def uptime_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def open_fds(self) -> int:
        try:
            return len(os.listdir("/proc/self/fd"))
        except OSError:
            return -1

    def data_dir(self) -> Path:
        return self.server.datadir.root.resolve()

    def log_dir(self) -> Path:
        return self.server.datadir.txnlog.path.parent.resolve()

    def last_snapshot(self) -> tuple[int, int]:
        """The newest snapshot's zxid (-1: none) and when it was written, in seconds (the
        newest file of the snapshot store, whose every write is one snapshot's)."""
        dd = self.server.datadir
        zxids = dd.snapshots.zxids()
        if not zxids:
            return -1, -1
        try:
            mtime = max(f.stat().st_mtime for f in (dd.root / "snapshots").iterdir()
                        if f.is_file())
        except (OSError, ValueError):
            mtime = -1
        return max(zxids), int(mtime)

    def session_expiry(self) -> dict[int, list[int]]:
        """ZooKeeperServer.getSessionExpiryMap: expiry time (ms, the server's own clock)
        -> the session ids that expire then."""
        buckets: dict[int, list[int]] = {}
        for s in self._pipeline.tracker.sessions.values():
            buckets.setdefault(s.expire_tick, []).append(s.session_id)
        return {tick: sorted(sids) for tick, sids in sorted(buckets.items())}

    def ephemerals(self) -> dict[int, list[str]]:
        return {sid: sorted(paths) for sid, paths in sorted(self._pipeline.tree.ephemerals.items())
                if paths}

    def data_watches_by_session(self) -> dict[int, list[str]]:
        """DataTree.getWatches: the data watches only, as wchc reports them."""
        by_session: dict[int, list[str]] = {}
        for path, modes in self._pipeline.watches.data.by_path.items():
            for w in modes:
                sid = w.session.session_id if w.session is not None else 0
                by_session.setdefault(sid, []).append(path)
        return {sid: sorted(paths) for sid, paths in sorted(by_session.items())}

    def data_watches_by_path(self) -> dict[str, list[int]]:
        return {path: [w.session.session_id if w.session is not None else 0 for w in modes]
                for path, modes in sorted(self._pipeline.watches.data.by_path.items())}

    def watch_summary(self) -> tuple[int, int, int]:
        """DataTree.getWatchesSummary (data watches): connections, paths, watches."""
        table = self._pipeline.watches.data.by_path
        watchers = {w for modes in table.values() for w in modes}
        return len(watchers), len(table), sum(len(modes) for modes in table.values())

    def learners(self) -> list:
        """The leader's LearnerInfo of every learner connected to it."""
        return list(self._pipeline.peer.learners.values()) if self.leading else []

    def role_values(self) -> list[tuple[str, object]]:
        """What an ensemble member's role adds: QuorumZooKeeperServer.dumpMonitorValues
        (peer_state) and ObserverZooKeeperServer's (observer_master_id); the role's gauges
        come in role_gauges."""
        member = self.member
        if member is None:
            return []
        peer_state = PEER_STATES[self.server.mode]  # QuorumPeer.getDetailedPeerState
        if self.zab_state() != ZAB_ELECTION:
            peer_state += f" - {self.zab_state()}"
        rows: list[tuple[str, object]] = [("peer_state", peer_state)]
        if self.server.mode == "observer":
            rows.append(("observer_master_id", member.vote.leader))  # no ObserverMasters here
        return rows

    def role_gauges(self) -> list[tuple[str, object]]:
        """The gauges the role registers: QuorumZooKeeperServer's quorum_size (the voters,
        QuorumPeer.getQuorumSize), and LeaderZooKeeperServer's or FollowerZooKeeperServer's
        (synced_observers: those a follower serves as ObserverMaster, which none does here:
        null, as ZooKeeper's; mntr leaves a null gauge out, Prometheus reads it as 0)."""
        member = self.member
        if member is None:
            return []
        rows: list[tuple[str, object]] = []
        if self.leading:
            leader = self._pipeline.peer
            learners = self.learners()
            synced = [li for li in learners if li.phase == "uptodate"]
            now = asyncio.get_running_loop().time()
            rows += [
                ("learners", len(learners)),
                ("synced_followers", sum(1 for li in synced if not li.observer)),
                ("synced_non_voting_followers", 0),  # every follower here votes
                ("synced_observers", sum(1 for li in synced if li.observer)),
                ("pending_syncs", leader.pending_sync_count),
                ("leader_uptime", self.server.stats.quorum.leader_uptime_ms(now)),
                ("last_proposal_size", leader.proposal_sizes.last),
                ("max_proposal_size", leader.proposal_sizes.max),
                ("min_proposal_size", leader.proposal_sizes.min),
            ]
        elif self.server.mode == "follower":
            rows.append(("synced_observers", None))
        rows.append(("quorum_size", len(member.config.voters)))
        return rows

    def monitor_values(self, data_size_max_age_s: float = 0.0) -> list[tuple[str, object]]:
        """mntr and the monitor command: ZooKeeperServer.dumpMonitorValues (version, state),
        then the gauges and counters ZooKeeper registers that this server keeps. The
        summaries follow in metrics.monitor_summaries."""
        p = self._pipeline
        st = self.server.stats
        return [
            ("version", VERSION_LINE),
            ("server_state", self.server.mode),
            *self.role_values(),
            ("ephemerals_count", self.ephemerals_count()),
            ("num_alive_connections", len(self.server.connections)),
            ("avg_latency", round(st.latency.avg, 4)),
            ("outstanding_requests", self.outstanding()),
            ("znode_count", self.node_count()),
            ("global_sessions", len(p.tracker.sessions)),
            ("local_sessions", 0),  # localSessionsEnabled is not supported: none
            ("packets_sent", st.packets_sent),
            ("packets_received", st.packets_received),
            ("watch_count", p.watches.count()),
            ("min_latency", st.latency.min),
            ("max_latency", st.latency.max),
            ("max_file_descriptor_count", resource.getrlimit(resource.RLIMIT_NOFILE)[0]),
            ("open_file_descriptor_count", self.open_fds()),
            ("approximate_data_size", self.approximate_data_size(data_size_max_age_s)),
            ("uptime", self.uptime_ms()),
            ("digest_mismatches_count", p.stats.digest_mismatches),
            *self.limit_gauges(),
            *self.role_gauges(),
        ]

    def limit_gauges(self) -> list[tuple[str, object]]:
        """ZooKeeperServer.registerMetrics' gauges of the client-port limits. ZooKeeper's
        outstanding_tls_handshake reads the plaintext port's factory only (0 beside a
        secureClientPort); here it is the secure port's handshakes underway."""
        limits = self.server.limits
        return [("connection_drop_probability", limits.connection_drop_probability),
                ("outstanding_tls_handshake", limits.outstanding_handshakes)]

    def zab_state(self) -> str:
        """QuorumPeer.getZabState, from the role's own phase."""
        member = self.member
        if member is None or member.state == ServerState.LOOKING:
            return ZAB_ELECTION
        # Elected, not serving yet: discovery and synchronization are told apart inside the
        # term's role, which the server does not see until it serves; both read as syncing.
        return ZAB_BROADCAST if self.server.serving else ZAB_SYNCHRONIZATION

    # -- the four-letter words -----------------------------------------------------------

    def _server_summary(self) -> str:
        st = self.server.stats
        lat = st.latency
        return (
            f"Latency min/avg/max: {lat.min}/{lat.avg:.1f}/{lat.max}\n"
            f"Received: {st.packets_received}\n"
            f"Sent: {st.packets_sent}\n"
            f"Connections: {len(self.server.connections)}\n"
            f"Outstanding: {self.outstanding()}\n"
            f"Zxid: 0x{self._pipeline.tree.last_processed_zxid:x}\n"
            f"Mode: {self.server.mode}\n"
            f"Node count: {self.node_count()}\n"
        ) + (f"Proposal sizes last/min/max: {self._pipeline.peer.proposal_sizes}\n"
             if self.leading else "")

    def ruok(self, cnxn) -> str:
        return "imok"

    def isro(self, cnxn) -> str:
        return "ro" if self._pipeline.read_only else "rw"

    def srvr(self, cnxn) -> str:
        return f"Zookeeper version: {VERSION_LINE}\n" + self._server_summary()

    def stat(self, cnxn) -> str:
        clients = "".join(f"{_connection_line(c, brief=True)}\n" for c in self.connections())
        return (f"Zookeeper version: {VERSION_LINE}\nClients:\n{clients}\n"
                + self._server_summary())

    def cons(self, cnxn) -> str:
        return "".join(f"{_connection_line(c, brief=False)}\n" for c in self.connections()) + "\n"

    def crst(self, cnxn) -> str:
        self.reset_connection_stats()
        return "Connection stats reset.\n"

    def reset_connection_stats(self) -> None:
        for c in self.server.connections:
            c.stats.reset()

    def srst(self, cnxn) -> str:
        self.server.stats.reset()
        self.server.loopmon.reset()  # the longest stall since this reset, as latency max
        if self.leading:  # StatResetCommand: the leader's proposal sizes too
            self._pipeline.peer.proposal_sizes.reset()
        return "Server stats reset.\n"

    def conf(self, cnxn) -> str:
        cfg = self.server.config
        data, logdir = self.data_dir(), self.log_dir()
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

    def dir_sizes(self) -> tuple[int, int]:
        """ZooKeeperServer.getDataDirSize / getLogDirSize, as dirs reports them."""
        dd = self.server.datadir
        return _dir_size(dd.root), _dir_size(dd.txnlog.path)

    def dirs(self, cnxn) -> str:
        data, log = self.dir_sizes()
        return f"datadir_size: {data}\nlogdir_size: {log}\n"

    def environment(self) -> list[tuple[str, str]]:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "?"
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        return [
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

    def envi(self, cnxn) -> str:
        return "Environment:\n" + "".join(f"{k}={v}\n" for k, v in self.environment())

    def monitor_rows(self) -> list[tuple[str, object]]:
        """monitor_values as mntr and the monitor command list them: DefaultMetricsProvider
        .dump leaves out a gauge without a value."""
        return [(k, v) for k, v in self.monitor_values() if v is not None]

    def mntr(self, cnxn) -> str:
        rows = self.monitor_rows()
        # 3.4's name for the learner count, which tools still read.
        rows += [("followers", v) for k, v in rows if k == "learners"]
        rows += monitor_summaries(self.server)
        return "".join(f"zk_{k}\t{java_text(v)}\n" for k, v in rows)

    def wchs(self, cnxn) -> str:
        connections, paths, total = self.watch_summary()
        return f"{connections} connections watching {paths} paths\nTotal watches:{total}\n"

    def wchc(self, cnxn) -> str:
        return "".join(f"{_hex(sid)}\n" + "".join(f"\t{p}\n" for p in paths)
                       for sid, paths in self.data_watches_by_session().items())

    def wchp(self, cnxn) -> str:
        return "".join(f"{path}\n" + "".join(f"\t{_hex(sid)}\n" for sid in sids)
                       for path, sids in self.data_watches_by_path().items())

    def dump(self, cnxn) -> str:
        expiry = self.session_expiry()
        wall_offset = int(time.time() * 1000) - now_ms()
        lines = ["SessionTracker dump:",
                 f"Session Sets ({len(expiry)})/({len(self._pipeline.tracker.sessions)}):"]
        for tick, sids in expiry.items():
            lines.append(f"{len(sids)} expire at {_java_date(tick + wall_offset)}:")
            lines += [f"\t{_hex(sid)}" for sid in sids]
        eph = self.ephemerals()
        lines += ["ephemeral nodes dump:", f"Sessions with Ephemerals ({len(eph)}):"]
        for sid, paths in eph.items():
            lines.append(f"{_hex(sid)}:")
            lines += [f"\t{path}" for path in paths]
        conns = self.connections()
        lines += ["Connections dump:", f"Connections Sets ({len(conns)})/({len(conns)}):"]
        for c in conns:
            sid = c.session.session_id if c.session is not None else 0
            lines.append(f"1 expire at {_java_date(int(time.time() * 1000))}:")
            lines.append(f"\tip: /{c.remote} sessionId: {_hex(sid)}")
        return "\n".join(lines) + "\n"

    def gtmk(self, cnxn) -> str:
        return str(self.trace_mask)

    def stmk(self, argument: bytes) -> str:
        """SetTraceMaskCommand: the long after the word becomes the trace mask, printed."""
        self.trace_mask = int.from_bytes(argument[:8], "big", signed=True)
        return str(self.trace_mask)

    def hash(self, cnxn) -> str:
        """DigestCommand: the digest log, one `zxid in hex: digest` line each."""
        return "".join(f"{zxid:x}: {digest}\n" for zxid, _, digest in self.server.digest_log)

    def reqs(self, cnxn) -> str:
        return ""  # outstanding requests are answered within one loop turn here


def connection_info(c, brief: bool) -> dict:
    """ServerCnxn.getConnectionInfo: what cons and stat list per connection."""
    st = c.stats
    session = c.session
    info = {
        "remote_socket_address": c.remote,
        "interest_ops": 0 if c._paused else 1,  # the selector interest ops: 1 = reading
        "outstanding_requests": len(session.queue) if session is not None else 0,
        "packets_received": st.received,
        "packets_sent": st.sent,
    }
    if not brief:
        lat = st.latency
        info.update({
            "session_id": _signed64(session.session_id) if session is not None else 0,
            "last_operation": st.last_op,
            "established": st.established_ms,
            "session_timeout": session.timeout_ms if session is not None else 0,
            "last_cxid": st.last_cxid,
            "last_zxid": st.last_zxid,
            "last_response_time": st.last_response_ms,
            "last_latency": st.last_latency,
            "min_latency": lat.min,
            "avg_latency": int(lat.avg),
            "max_latency": lat.max,
        })
    return info


def _connection_line(c, brief: bool) -> str:
    """ServerCnxn.dumpConnectionInfo."""
    info = connection_info(c, brief)
    text = (f" /{c.remote}[{info['interest_ops']}](queued={info['outstanding_requests']},"
            f"recved={info['packets_received']},sent={info['packets_sent']}")
    sid = c.session.session_id if c.session is not None else 0
    if not brief and sid:
        text += (f",sid={_hex(sid)},lop={info['last_operation']},est={info['established']},"
                 f"to={info['session_timeout']}")
        if info["last_cxid"] >= 0:
            text += f",lcxid=0x{info['last_cxid'] & 0xFFFFFFFF:x}"
        text += (f",lzxid=0x{info['last_zxid'] & 0xFFFFFFFFFFFFFFFF:x},"
                 f"lresp={info['last_response_time']},llat={info['last_latency']},"
                 f"minlat={info['min_latency']},avglat={info['avg_latency']},"
                 f"maxlat={info['max_latency']}")
    return text + ")"


COMMANDS = {
    "ruok": Admin.ruok, "isro": Admin.isro, "srvr": Admin.srvr, "stat": Admin.stat,
    "cons": Admin.cons, "crst": Admin.crst, "srst": Admin.srst, "conf": Admin.conf,
    "dirs": Admin.dirs, "envi": Admin.envi, "mntr": Admin.mntr, "wchs": Admin.wchs,
    "wchc": Admin.wchc, "wchp": Admin.wchp, "dump": Admin.dump, "gtmk": Admin.gtmk,
    "reqs": Admin.reqs, "hash": Admin.hash,
}
