"""The pipelines of the roles other than the plain leader: what differs is where writes
and syncs go.

An ensemble's leader also times each txn's ACKs and commit (ServerMetrics'
quorum_ack_latency and the like, into the server's QuorumStats); a standalone server's
does not, as ZooKeeper's has no Leader. A leader with quorumSync answers a sync only once
a quorum has confirmed its leadership (Leader.sync_request with its own sid;
Effects.synced). A learner sends writes, session changes and sync to the leader and
answers them when the committed txn (or the SYNC) comes back; it revalidates resumed
sessions with the leader, reports its sessions' touches, and times the txns it is sent.
A read-only server (readonlymode, no quorum) answers writes and sync with NOTREADONLY and
keeps sessions of its own. Everything else (apply, reads, watches, replies in session
order) is the leader's Pipeline, unchanged.
"""

from __future__ import annotations

from collections import deque

from zkcompat.jute import records as r
from zkcompat.jute.constants import Code, OpCode
from zkcompat.jute.reply import encode_reply
from zkcompat.server import pipeline as pipeline_module
from zkcompat.server.pipeline import Pipeline, _mono_ms, request_body
from zkcompat.server.request import Request
from zkcompat.server.sessions import Session
from zkcompat.server.stats import QuorumStats, add_observed, observe_since
from zkcompat.zab.leader import Leader

_SYNC, _CLOSE_SESSION = OpCode.SYNC, OpCode.CLOSE_SESSION


def _wall_ms() -> int:
    return pipeline_module._wall_ms()  # through the module: the simulator sets its clock there


class _AckTimes:
    """proposal_ack_creation_latency: the txns this server logged, from their time to the
    ACK their fsync lets it make (Ack- and SendAckRequestProcessor). The batches wait here
    as they wait in the txn log: every one is synced, or the term and this pipeline end."""

    def __init__(self):
        self._batches: deque[list] = deque()  # persisted, not yet durable, in zxid order

    def persisting(self, txns: list) -> None:
        self._batches.append(txns)

    def durable(self, zxid: int, summary) -> None:
        batches = self._batches
        if batches and batches[0][-1].zxid <= zxid:
            now = _wall_ms()
            while batches and batches[0][-1].zxid <= zxid:
                observe_since(summary, batches.popleft(), now)


class LeaderPipeline(Pipeline):
    """An ensemble leader's: the standalone server's pipeline, timing its txns' ACKs and
    commits as ZooKeeper's Leader does."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.quorum_stats = self.shell.quorum_stats or QuorumStats()
        self._ack_times = _AckTimes()

    def obey(self, effects) -> None:
        if effects.persist:
            self._ack_times.persisting(effects.persist)
        if effects.deliver:  # a quorum has ACKed them (Leader.tryToCommit); applied next
            qs = self.quorum_stats
            add_observed(qs.propagation_latency,
                         observe_since(qs.quorum_ack_latency, effects.deliver, _wall_ms()))
        super().obey(effects)

    def _on_synced(self, zxid: int) -> None:
        self._ack_times.durable(zxid, self.quorum_stats.proposal_ack_creation_latency)
        super()._on_synced(zxid)


class LearnerPipeline(Pipeline):
    leading = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._revalidating: dict[int, list] = {}  # reconnects waiting for the leader's word
        self._touch_reported_ms = 0
        self.quorum_stats = self.shell.quorum_stats or QuorumStats()
        self._ack_times = _AckTimes()

    def obey(self, effects) -> None:
        """Times what the leader sent once broadcast has begun (what a sync sends is
        history, timed by follower_sync_time): a follower's proposals as they arrive and
        as they are ACKed, every learner's commits."""
        peer = self.peer
        if peer.phase == "broadcast" and (effects.persist or effects.deliver):
            qs = self.quorum_stats
            now = _wall_ms()
            if effects.persist and not peer.observer:  # an observer's INFORMs are commits
                observe_since(qs.proposal_latency, effects.persist, now)
                self._ack_times.persisting(effects.persist)
            if effects.deliver:
                add_observed(qs.propagation_latency,
                             observe_since(qs.commit_propagation_latency, effects.deliver, now))
        super().obey(effects)

    def _on_synced(self, zxid: int) -> None:
        self._ack_times.durable(zxid, self.quorum_stats.proposal_ack_creation_latency)
        super()._on_synced(zxid)

    def submit(self, session: Session, req: Request) -> None:
        if req.is_write or req.type == _SYNC:
            self._forward(session, req)
        else:
            super().submit(session, req)

    def _forward(self, session: Session, req: Request) -> None:
        """A write or sync waits in its session's queue for the leader's answer: the
        committed txn (matched by session and cxid), or a SYNC."""
        if req.type == _SYNC:
            self._wait_for_sync(session, req)
        else:
            req.is_write = True  # a forwarded session change holds back later reads too
            session.queue.append(req)
        auth = [r.Id(scheme, ident) for scheme, ident in req.auth_ids]
        self.obey(self.peer.forward(req.session_id, req.xid, req.type, request_body(req), auth))

    def expire_sessions(self) -> None:
        """Only the leader decides expiry; a learner reports touches with its PINGs."""

    def session_for_reconnect(self, session_id: int) -> Session | None:
        """Every live session is in the replicated table; one is tracked here once a
        client of it is."""
        session = self.tracker.sessions.get(session_id)
        if session is None:
            timeout = self.tree.sessions.get(session_id)
            if timeout is not None:
                session = Session(session_id, timeout)
                self.tracker.add(session, _mono_ms())
        return session

    def reopen(self, session: Session, timeout_ms: int, done) -> None:
        """Ask the leader first (REVALIDATE), which makes this server the owner."""
        self._revalidating.setdefault(session.session_id, []).append(done)
        self.obey(self.peer.revalidate(session.session_id, timeout_ms))

    def _revalidated(self, session_id: int, valid: bool) -> None:
        for done in self._revalidating.pop(session_id, ()):
            done(valid)

    def touched(self) -> list[tuple[int, int]]:
        """Sessions active since the last report: the PING reply carries them."""
        since = self._touch_reported_ms
        self._touch_reported_ms = _mono_ms()
        return [(s.session_id, s.timeout_ms) for s in self.tracker.sessions.values()
                if s.last_active_ms >= since and not s.closing]


class QuorumSyncPipeline(LeaderPipeline):
    """The leader's pipeline with quorumSync=true: its own clients' syncs wait, like its
    learners', for a quorum round started after they arrived (ZOOKEEPER-1675), so a
    deposed leader that has not noticed yet cannot answer sync-then-read stale."""

    def submit(self, session: Session, req: Request) -> None:
        if req.type == _SYNC and session is not None:
            self._wait_for_sync(session, req)
            if self._unproposed:  # the sync waits for the writes prepared before it
                self._propose()
            self.obey(self.peer.sync_request(self.peer.my_sid))
        else:
            super().submit(session, req)


class ReadOnlyPipeline(Pipeline):
    leading = False
    read_only = True

    def create_session(self, cnxn, timeout_ms: int) -> Session:
        """A local session: no txn, answered at once."""
        session = Session(self.tracker.next_session_id(), timeout_ms)
        session.cnxn = cnxn
        self.tracker.add(session, _mono_ms())
        cnxn.send(cnxn.connect_response(session.session_id, timeout_ms))
        return session

    def submit(self, session: Session, req: Request) -> None:
        if req.is_write or req.type == _SYNC:
            self._refuse_write(session, req)
        else:
            super().submit(session, req)

    def _refuse_write(self, session: Session, req: Request) -> None:
        """Writes and sync get NOTREADONLY (ReadOnlyRequestProcessor); closing a session
        ends it here, where it lives."""
        zxid = self.tree.last_processed_zxid
        if req.type == _CLOSE_SESSION:
            self.tracker.remove(req.session_id)
            session.queue.clear()
            if req.cnxn is not None:
                req.cnxn.send(encode_reply(req.xid, zxid, 0, None))
                req.cnxn.close_after_flush("client closed session")
            return
        # Nothing waits in a read-only server's queues (no write is ever pending), so the
        # answer is in the session's order as it stands.
        self._answer(req, encode_reply(req.xid, zxid, Code.NOTREADONLY, None))


def pipeline_class(peer) -> type[Pipeline]:
    """The pipeline of the role `peer` plays: a Leader's (a standalone server is an
    ensemble of one), a Learner's, or none (read-only)."""
    if peer is None:
        return ReadOnlyPipeline
    if isinstance(peer, Leader):
        if peer.quorum_sync:
            return QuorumSyncPipeline
        return Pipeline if len(peer.voters) == 1 else LeaderPipeline
    return LearnerPipeline
