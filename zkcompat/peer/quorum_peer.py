"""One member of an ensemble: elect, then serve a term as leader or learner, and again.

As ZooKeeper's QuorumPeer.run: every term starts from the local history (tree + log) and
ends when the role gives up (no quorum, leader gone); client connections close with the
term, so clients move on to a server that serves. Each term's chain of stages is wired by
peer/roles.py for the role the election gave this server.

The membership is the committed config (QuorumPeer's quorumVerifier): zoo.cfg's server.N
lines, or its dynamic file's. `last_seen` is the newest config proposed: a reconfig txn in
the local history that no COMMITANDACTIVATE has committed yet (its /zookeeper/config setData
applied to the tree, by recovery or by the fast-forward at a term's end). A leader proposes
it again in NEWLEADER, and once a quorum of both configs has synced it is committed.
A term that activates a new config (reconfigEnabled) writes it to zoo.cfg.dynamic.<version>
and goes on, unless this learner's role or its leader changes with it: then the term ends
and the next election is held among the new config's voters (processReconfig). A leader
that is not the designated one commits nothing more and leads until its learners leave.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict

from zkcompat.config import Config
from zkcompat.config.dynamic import DynamicConfigFiles
from zkcompat.jute import quorum as q
from zkcompat.jute.election import ServerState
from zkcompat.jute.errors import JuteError
from zkcompat.peer.elector import Elector
from zkcompat.peer.links import Link, Listener
from zkcompat.peer.transport import QuorumConnection, connect_to_leader
from zkcompat.security.quorum_auth_packet import QuorumAuthError
from zkcompat.security.quorum_sasl import QuorumAuthServerExchange
from zkcompat.server.expirer import run_expirer
from zkcompat.store.epochs import EpochFiles
from zkcompat.store.txnlog import LogHistory
from zkcompat.tree.paths import CONFIG
from zkcompat.tree.snapstream import SLICE_NODES
from zkcompat.zab.committed_log import Snap
from zkcompat.zab.election import Vote
from zkcompat.zab.leader import Leader
from zkcompat.zab.learner import Learner
from zkcompat.zab.membership import Membership
from zkcompat.zab.peer import zxid_epoch

log = logging.getLogger(__name__)

READ_ONLY_GRACE_MS = 2000  # QuorumPeer.run: "lower-bound grace period to 2 secs"
MODE_NAMES = {ServerState.LEADING: "leader", ServerState.FOLLOWING: "follower",
              ServerState.OBSERVING: "observer", ServerState.LOOKING: "looking"}


class Term:
    """One role's time in office: what its shell asks of the server around it (epochs,
    install, sends to the other servers, serve, abandon), and the way it ends."""

    def __init__(self, peer: QuorumPeer):
        self.qp = peer
        self.ctx = peer.ctx
        self.ended = asyncio.Event()
        self.reason = ""
        self.pipeline = None  # server.pipeline.Pipeline: the role's chain of stages
        self.conns: dict[int, QuorumConnection] = {}
        self.quorum_stats = peer.ctx.stats.quorum  # the role's shell times into it

    def write_epochs(self, accepted, current) -> None:
        self.qp.epochs.write(accepted, current)

    def install(self, what) -> None:
        self.qp.install(what, self.pipeline)

    def send(self, messages: list) -> None:
        by_sid: dict[int, list] = defaultdict(list)
        for sid, pkt in messages:
            if isinstance(pkt, Snap):
                pkt = (pkt, self.pipeline.tree)
            by_sid[sid].append(pkt)
        for sid, pkts in by_sid.items():
            conn = self.conns.get(sid)
            if conn is not None:
                conn.send(pkts)

    def serve(self) -> None:
        self.qp.start_serving(self.pipeline)

    def abandon(self, reason: str) -> None:
        self.end(reason)

    def activate(self, membership: Membership, designated: int | None) -> None:
        if self.qp.activate(membership, designated):
            self.end("changes proposed in reconfig")

    def disconnect(self, sids: list) -> None:
        for sid in sids:
            conn = self.conns.pop(sid, None)
            if conn is not None:
                conn.close("dropped by the leader")

    def end(self, reason: str) -> None:
        if not self.ended.is_set():
            self.reason = reason
            self.ended.set()


class QuorumPeer:
    # The ZAB state machines of each role, and how often a SNAP to a learner lets the
    # loop run: the simulator chooses its own (an injected bug is a subclass of a role).
    leader_class = Leader
    learner_class = Learner
    snap_slice_nodes = SLICE_NODES

    def __init__(self, config: Config, ctx, datadir, build_pipeline, *, epochs=None,
                 rng=None, dynamic_config=None):
        """`epochs` (EpochFiles by default), the election's `rng` and where committed
        configs are kept (`dynamic_config`, DynamicConfigFiles by default) are what a
        simulation gives its own."""
        self.config = config
        self.ctx = ctx
        self.datadir = datadir
        self.build_pipeline = build_pipeline  # (tree, role, term) -> Pipeline (None: read-only)
        self.sid = config.server_id
        self.tree = ctx.tree
        self.epochs = epochs or EpochFiles(config.data_dir,
                                           zxid_epoch(self.tree.last_processed_zxid))
        # The membership file's keys in file order make the config bytes exact.
        keys = config.membership_keys or list(config.raw) or None  # None: a Config in memory
        self.membership = Membership(config.servers.values(), config.config_version, keys)
        self.dynamic_config = dynamic_config or DynamicConfigFiles(config.source, self.sid)
        stored = self.dynamic_config.read()
        if stored is not None and stored[1] > self.membership.version:
            self.membership = Membership.parse(stored[0]).with_version(stored[1])
        self.last_seen = self.membership
        self._note_proposed_config()
        self._show_membership()
        self.elector = Elector(self.sid, self.membership, rng=rng,
                               security=config.quorum_tls, sasl=config.quorum_sasl,
                               on_newer_config=self._gossiped if config.reconfig_enabled
                               else None)
        self.state = ServerState.LOOKING
        self.sync_started: float | None = None  # a learner's term: its LEADERINFO arrived

    @property
    def me(self):
        return self.membership.servers.get(self.sid)

    @property
    def observer(self) -> bool:
        return self.sid in self.membership.observers

    def _note_proposed_config(self) -> None:
        """last_seen becomes the tree's /zookeeper/config if a reconfig txn applied there
        (recovered, or fast-forwarded at a term's end) is newer than what we know."""
        node = self.tree.get(CONFIG)
        if not self.config.reconfig_enabled or node is None or not node.data:
            return
        try:
            proposed = Membership.parse(node.data)
        except ValueError as e:
            log.warning("event=config_node_unreadable reason=%r", str(e))
            return
        if proposed.version > max(self.membership.version, self.last_seen.version):
            log.info("event=config_proposed_in_history version=0x%x committed=0x%x",
                     proposed.version, self.membership.version)
            self.last_seen = proposed

    def _show_membership(self) -> None:
        """/zookeeper/config and `conf` show the committed config (initConfigInZKDatabase:
        setData with version -1 and the config's version as its mzxid)."""
        m = self.membership
        self.ctx.quorum_config = m.to_bytes()
        self.tree.set_config_node(m.to_bytes(), m.version, self.ctx.clock.wall_ms())

    def _gossiped(self, new: Membership) -> None:
        """A peer's notification carried a later config while we look (a server that was
        down during a reconfig learns it so)."""
        self.activate(new, None)

    def activate(self, new: Membership, designated: int | None) -> bool:
        """processReconfig: commit `new` here. True if the term must end: our role in it
        changed, or our leader is not the one it designates (or no longer votes)."""
        old = self.membership
        if new.version <= old.version:
            return False
        self.membership = self.last_seen = new
        self._write_dynamic(new)
        self._show_membership()
        self.elector.reconfigure(new)
        log.info("event=config_committed version=0x%x voters=%s observers=%s", new.version,
                 sorted(new.voters), sorted(new.observers))
        if self.state == ServerState.LEADING:
            return False  # Leader.allowedToCommit: its learners leave it, or it goes on
        role_changed = _role(old, self.sid) != _role(new, self.sid)
        leader = self.vote.leader if getattr(self, "vote", None) is not None else None
        if designated is not None:
            leader_changed = designated != leader
        else:
            was, now = old.servers.get(leader), new.servers.get(leader)
            leader_changed = (leader not in new.voters or was is None or now is None
                              or (was.host, was.quorum_port) != (now.host, now.quorum_port))
        return role_changed or leader_changed

    def _write_dynamic(self, m: Membership) -> None:
        me = m.servers.get(self.sid)
        erase = me is not None and me.client_port is not None
        try:
            self.dynamic_config.write(m.dynamic_file_text(), m.version, erase)
        except OSError as e:
            log.error("event=dynamic_config_write_failed version=0x%x error=%r", m.version,
                      str(e))

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                if self.me is None:
                    # A reconfig left us out, or we are about to join: a non-voting
                    # participant, which follows whoever leads (ZooKeeper's does too).
                    log.warning("event=not_in_config sid=%d version=0x%x", self.sid,
                                self.membership.version)
                self.state = ServerState.LOOKING
                self.ctx.stats.quorum.looking(loop.time())
                read_only = self._read_only_later()
                try:
                    vote = await self.elector.elect(self.tree.last_processed_zxid,
                                                    self.epochs.current)
                finally:
                    self._stop_read_only(read_only)
                self.state = vote.state
                # From now on LOOKING peers hear our vote: the leader we serve with.
                self.elector.serve(vote.state, vote)
                self.vote = vote
                log.info("event=elected leader=%d my_sid=%d state=%s zxid=0x%x", vote.leader,
                         self.sid, MODE_NAMES.get(vote.state, vote.state),
                         self.tree.last_processed_zxid)
                term = Term(self)
                try:
                    if vote.state == ServerState.LEADING:
                        await self._lead(term)
                    else:
                        await self._learn(term, vote.leader)
                except (ConnectionError, OSError) as e:
                    term.end(f"{type(e).__name__}: {e}")
                finally:
                    await self._end_term(term)
        finally:
            await self.elector.close()

    # -- read-only while no quorum is found (readonlymode.enabled) ------------------

    def _read_only_later(self) -> asyncio.TimerHandle | None:
        """QuorumPeer.run: a LOOKING server with readonlymode.enabled serves read-only
        sessions once it has looked for max(2 s, tickTime) without finding a quorum."""
        if not self.config.readonly_mode_enabled:
            return None
        delay_s = max(READ_ONLY_GRACE_MS, self.config.tick_time_ms) / 1000
        return asyncio.get_running_loop().call_later(delay_s, self._start_read_only)

    def _start_read_only(self) -> None:
        if self.state != ServerState.LOOKING:
            return
        ctx = self.ctx
        ctx.pipeline = self.build_pipeline(self.tree, None, None)
        ctx.mode = "read-only"
        ctx.serving = True
        ctx.expirer = asyncio.create_task(run_expirer(ctx.pipeline, self.config.tick_time_ms,
                                                      ctx.clock.mono_ms))
        log.warning("event=serving_read_only zxid=0x%x reason=%r", self.tree.last_processed_zxid,
                    "no quorum found; readonlymode.enabled")

    def _stop_read_only(self, timer: asyncio.TimerHandle | None) -> None:
        if timer is None:
            return
        timer.cancel()
        ctx = self.ctx
        if ctx.mode == "read-only":
            ctx.serving = False
            ctx.mode = "looking"
            ctx.expirer.cancel()
            ctx.expirer = None
            for cnxn in list(ctx.connections):
                cnxn.close("read-only mode ended: the ensemble has a quorum again")

    # -- leading ----------------------------------------------------------------------

    async def _lead(self, term: Term) -> None:
        cfg = self.config
        leader = self.leader_class(self.sid, self.membership, self.epochs.accepted,
                        self.epochs.current, self.tree.last_processed_zxid,
                        LogHistory(self.datadir.txnlog),
                        init_limit_ticks=cfg.init_limit, sync_limit_ticks=cfg.sync_limit,
                        last_seen=self.last_seen, reconfig_enabled=cfg.reconfig_enabled,
                        quorum_sync=cfg.quorum_sync, counters=self.ctx.stats.quorum.counters)
        pipeline = term.pipeline = self.build_pipeline(self.tree, leader, term)
        shell = pipeline.shell
        # Accepted, not yet identified by FOLLOWERINFO: closed with the term all the same
        # (ZooKeeper's LearnerHandler joins the leader's learners before it reads one), or
        # one arriving as the term ends is synced and served by a leader that is no more.
        unidentified: dict[QuorumConnection, None] = {}  # a set, in the order accepted

        def accept() -> QuorumConnection:
            conn = QuorumConnection(on_packets, on_lost,
                                    data_max_bytes=q.data_max_bytes(cfg.jute_maxbuffer),
                                    snap_slice_nodes=self.snap_slice_nodes)
            unidentified[conn] = None
            return conn

        def on_packets(conn, pkts, _tree):
            if term.ended.is_set():
                conn.close("leader term ended")  # before _lead's finally gets to it
                return
            if conn.sid is None:
                unidentified.pop(conn, None)
                sid = _learner_sid(pkts[0])
                if sid is None:
                    conn.close("first packet is not FOLLOWERINFO or OBSERVERINFO")
                    return
                old = term.conns.get(sid)
                if old is not None and old is not conn:
                    old.close("the learner connected again")
                conn.sid = sid
                term.conns[sid] = conn
                shell.obey(leader.connected(sid, pkts[0]))
                pkts = pkts[1:]
            sid = conn.sid
            shell.obey_all(leader.step(sid, pkt) for pkt in pkts)

        def on_lost(conn):
            unidentified.pop(conn, None)
            if conn.sid is not None and term.conns.get(conn.sid) is conn:
                del term.conns[conn.sid]
                shell.obey(leader.gone(conn.sid))

        authenticating: set[asyncio.Task] = set()

        async def authenticate(link: Link) -> None:
            """LearnerHandler's constructor: quorum SASL before the first packet."""
            exchange = QuorumAuthServerExchange(cfg.quorum_sasl)
            try:
                await asyncio.wait_for(link.authenticate(exchange),
                                       cfg.init_limit * cfg.tick_time_ms / 1000)
            except (QuorumAuthError, OSError, TimeoutError) as e:
                log.warning("event=quorum_sasl_failed port=quorum remote=%s reason=%r "
                            "action=close", link.remote, str(e) or type(e).__name__)
                link.close()
                return
            if exchange.username is not None:
                log.info("event=quorum_sasl_authenticated port=quorum remote=%s user=%s",
                         link.remote, exchange.username)
            elif exchange.failure is not None:
                log.warning("event=quorum_sasl_failed port=quorum remote=%s reason=%r "
                            "action=let_through", link.remote, exchange.failure)
            if term.ended.is_set():
                link.close()
            else:
                link.attach(accept())

        def on_link(link: Link) -> None:
            if cfg.quorum_sasl is None:
                link.attach(accept())
                return
            task = asyncio.create_task(authenticate(link))
            authenticating.add(task)
            task.add_done_callback(authenticating.discard)

        host = "0.0.0.0" if cfg.quorum_listen_on_all_ips else self.me.host
        server = Listener(cfg.quorum_tls, on_link, "quorum")
        await server.start(host, self.me.quorum_port)
        try:
            shell.obey(leader.start())
            await self._tick_until_ended(term, leader, shell)
        finally:
            await server.close()  # stops accepting; the connections accepted stay open
            for task in list(authenticating):
                task.cancel()
            for conn in [*term.conns.values(), *unidentified]:
                conn.close("leader term ended")

    # -- learning ---------------------------------------------------------------------

    async def _learn(self, term: Term, leader_sid: int) -> None:
        cfg = self.config
        target = self.membership.servers[leader_sid]
        learner = self.learner_class(self.sid, leader_sid, self.epochs.accepted, self.epochs.current,
                          self.tree.last_processed_zxid, observer=self.observer,
                          init_limit_ticks=cfg.init_limit, sync_limit_ticks=cfg.sync_limit,
                          membership=self.membership, reconfig_enabled=cfg.reconfig_enabled,
                          counters=self.ctx.stats.quorum.counters)
        pipeline = term.pipeline = self.build_pipeline(self.tree, learner, term)
        shell = pipeline.shell
        self.sync_started = None
        loop = asyncio.get_running_loop()

        def on_packets(conn, pkts, snap_tree):
            if self.sync_started is None:  # LEADERINFO: discovery is over, sync begins
                self.sync_started = loop.time()
            if snap_tree is not None:
                shell.obey(learner.step(pkts[0], snap_tree))
                return
            shell.obey_all(learner.step(pkt) for pkt in pkts)

        def on_lost(conn):
            term.end("connection to the leader lost")

        conn = await connect_to_leader(target.host, target.quorum_port, on_packets, on_lost,
                                       cfg.init_limit * cfg.tick_time_ms / 1000,
                                       q.data_max_bytes(cfg.jute_maxbuffer), cfg.quorum_tls,
                                       cfg.quorum_sasl)
        conn.sid = leader_sid
        term.conns[leader_sid] = conn
        try:
            shell.obey(learner.start())
            await self._tick_until_ended(term, learner, shell)
        finally:
            conn.close("learner term ended")

    async def _tick_until_ended(self, term: Term, role, shell) -> None:
        half_tick_s = self.config.tick_time_ms / 2000
        while not term.ended.is_set():
            try:
                await asyncio.wait_for(term.ended.wait(), half_tick_s)
            except TimeoutError:
                shell.obey(role.tick())

    # -- the term's effects on this server -------------------------------------------

    def install(self, what, pipeline) -> None:
        """TRUNC or SNAP from the leader: replace our history before anything else."""
        dd = self.datadir
        if what[0] == "trunc":
            zxid = what[1]
            log.warning("event=truncating_log to=0x%x from=0x%x", zxid,
                        self.tree.last_processed_zxid)
            for snap in dd.snapshots.zxids():
                if snap > zxid:
                    dd.snapshots.delete(snap)
            dd.txnlog.truncate_after(zxid)
            tree = dd.recover()
        else:
            _, zxid, tree = what
            tree.last_processed_zxid = zxid
            dd.txnlog.truncate_after(-1)  # none of the old history stays (it may diverge)
            dd.snapshots.write_sync(tree)
            log.info("event=snap_installed zxid=0x%x nodes=%d", zxid, len(tree.nodes))
        tree.set_digest_enabled(self.config.digest_enabled)
        self.tree = tree
        self.last_seen = self.membership  # the history that proposed it is gone
        self._show_membership()  # Learner.syncWithLeader: the SNAP's config node is the leader's
        self.ctx.tree = tree
        pipeline.set_tree(tree)
        self.ctx.snapshotter.tree = tree

    def start_serving(self, pipeline) -> None:
        ctx = self.ctx
        if pipeline.leading:
            pipeline.restore_sessions()  # every session gets a full timeout from now
        ctx.pipeline = pipeline
        ctx.mode = MODE_NAMES[self.state]
        ctx.serving = True
        # The vote LOOKING peers hear now names the new epoch (QuorumPeer.updateElectionVote,
        # ZOOKEEPER-1732), so a server that joins later agrees with everyone on it.
        v = self.vote
        self.elector.serve(self.state, Vote(v.leader, v.zxid, v.election_epoch,
                                            self.epochs.current, v.state))
        if pipeline.leading:
            ctx.expirer = asyncio.create_task(run_expirer(pipeline, self.config.tick_time_ms,
                                                          ctx.clock.mono_ms))
        unavailable_ms, sync_ms = ctx.stats.quorum.serving(
            asyncio.get_running_loop().time(), pipeline.leading, self.observer, self.sync_started)
        log.info("event=serving mode=%s zxid=0x%x unavailable_ms=%d%s", ctx.mode,
                 self.tree.last_processed_zxid, unavailable_ms,
                 "" if sync_ms is None else f" sync_ms={sync_ms}")

    async def _end_term(self, term: Term) -> None:
        ctx = self.ctx
        log.warning("event=term_ended mode=%s reason=%r", MODE_NAMES.get(self.state),
                    term.reason)
        ctx.serving = False
        ctx.mode = "looking"
        if ctx.expirer is not None:
            ctx.expirer.cancel()
            ctx.expirer = None
        for cnxn in list(ctx.connections):
            cnxn.close("server is not serving: its role in the ensemble ended")
        await self._fast_forward()
        self._note_proposed_config()  # a reconfig logged, its commit not seen

    async def _fast_forward(self) -> None:
        """Apply what the log holds beyond the tree (proposals logged, their COMMIT not
        seen), as ZKDatabase.fastForwardDataBase does when a role ends: the next election
        must vote with the last *logged* zxid, or a txn a quorum acknowledged could be
        outvoted by a server that never had it."""
        txnlog = self.datadir.txnlog
        txnlog.on_synced = _ignore_synced  # the ended term's pipeline acts no more
        await txnlog.sync()  # what the ended term appended is on disk, or we stop here
        tree = self.tree
        n = 0
        for txn in txnlog.read_from(tree.last_processed_zxid):
            tree.apply(txn)
            n += 1
        if n:
            log.info("event=log_fast_forwarded txns=%d zxid=0x%x", n, tree.last_processed_zxid)


def _role(m: Membership, sid: int) -> str:
    """QuorumPeer.updateLearnerType: a server the config leaves out stays a participant
    (a non-voting one, which keeps following its leader until the term ends)."""
    return "observer" if sid in m.observers else "participant"


def _ignore_synced(zxid: int) -> None:
    pass


def _learner_sid(pkt) -> int | None:
    if pkt.type not in (q.PacketType.FOLLOWERINFO, q.PacketType.OBSERVERINFO):
        return None
    try:
        return q.parse_learner_info(pkt.data)[0]
    except JuteError:
        return None
