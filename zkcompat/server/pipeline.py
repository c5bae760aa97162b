"""The request pipeline of one server: submit → prep → ZAB peer → log → apply → watches → reply.

On the leader, writes go through prep into a Txn, are proposed, made durable by group
commit, committed and applied in zxid order. On a learner, writes, session changes and
sync travel to the leader as REQUESTs; the committed txn comes back, is applied, and
finds its request by (session, cxid). The reply goes out after apply, on every server.
Reads run on the local tree, but never before an earlier request of the same session
has been answered: each session keeps one FIFO of unanswered requests.
"""

import asyncio
import logging
import struct
import time
from collections import deque

from zkcompat.jute import records as r
from zkcompat.jute.constants import PING_XID, Code, OpCode
from zkcompat.jute.errors import JuteError
from zkcompat.jute.multi import MultiRequest, decode_multi_request, encode_multi_response
from zkcompat.jute.reply import encode_create_reply, encode_reply, encode_reply_raw
from zkcompat.server.outbox import Outbox
from zkcompat.server.prep import Prep
from zkcompat.server.reads import READ
from zkcompat.server.request import REQUEST_RECORD, Request
from zkcompat.server.sessions import Session, SessionTracker, session_password
from zkcompat.server.watches import WatchManager
from zkcompat.tree.datatree import ApplyResult, DataTree
from zkcompat.tree.errors import KeeperError
from zkcompat.zab.peer import Effects

log = logging.getLogger(__name__)

# Enum members read on every request, as module globals: `OpCode.X` costs ~100 ns in
# Python 3.11 (a metaclass attribute lookup), a global ~20 ns.
_PING, _AUTH, _SASL, _WHO_AM_I, _MULTI, _MULTI_READ, _CREATE_SESSION, _CLOSE_SESSION = (
    OpCode.PING, OpCode.AUTH, OpCode.SASL, OpCode.WHO_AM_I, OpCode.MULTI, OpCode.MULTI_READ,
    OpCode.CREATE_SESSION, OpCode.CLOSE_SESSION)
_SYNC = OpCode.SYNC
# Ops ZooKeeper's prep does not check the session's owner for: the session's own birth and
# death (expiry closes a session without owning it).
_UNOWNED = frozenset((OpCode.CREATE_SESSION, OpCode.CLOSE_SESSION))
_SESSIONMOVED = Code.SESSIONMOVED
_TIMEOUT = struct.Struct(">i")  # createSession's body on the quorum wire: the timeout


class PipelineStats:
    """What an operator reads of a server's replication (mntr)."""

    __slots__ = ("digest_mismatches", "digests_compared")

    def __init__(self):
        self.digest_mismatches = 0  # ServerMetrics.DIGEST_MISMATCHES_COUNT
        self.digests_compared = 0


class QuorumShell:
    """What a pipeline asks of the server around it when it is part of an ensemble."""

    quorum_stats = None  # the server's stats.QuorumStats: the ensemble pipelines time into it

    def write_epochs(self, accepted: int | None, current: int | None) -> None: ...

    def install(self, what) -> None: ...

    def send(self, messages: list) -> None: ...

    def serve(self) -> None: ...

    def abandon(self, reason: str) -> None: ...

    def disconnect(self, sids: list) -> None: ...


class _MultiBody:
    """Adapts a list of multi results to the record interface encode_reply expects."""

    __slots__ = ("results",)

    def __init__(self, results):
        self.results = results

    def encode(self, out: bytearray) -> None:
        encode_multi_response(out, self.results)


def _nothing() -> None:
    pass


def _count_nothing(n: int) -> None:
    pass


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _mono_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class Pipeline:
    """The leader's pipeline, which a standalone server runs too; server/roles.py has the
    learner's and the read-only server's, which differ in where writes go."""

    leading = True  # prep turns writes into txns here; only the leader expires sessions
    read_only = False

    def __init__(self, tree: DataTree, peer, txn_log, tick_ms: int, server_id: int = 0,
                 extended_types: bool = False, enforce_quota: bool = False,
                 shell: QuorumShell | None = None):
        self.tree = tree
        self.peer = peer
        self.txn_log = txn_log
        self.shell = shell or QuorumShell()
        self.watches = WatchManager()
        self.outbox = Outbox()  # connections with replies queued
        self.tracker = SessionTracker(tick_ms, server_id, _wall_ms())
        self.prep = Prep(tree, peer.next_zxid, _wall_ms, extended_types, enforce_quota) \
            if self.leading else None
        self._unproposed: list = []  # Txns prepared this loop turn, proposed together at its end
        self._syncs: deque[Request] = deque()  # syncs waiting for the leader's answer, in order
        self.stats = PipelineStats()
        txn_log.on_synced = self._on_synced
        txn_log.on_sync_failed = self._on_sync_failed
        self.on_applied = _count_nothing  # after each batch of applied txns, with their count
        self.on_fatal = _nothing  # the log cannot sync or apply failed: stop serving

    # -- entry points -------------------------------------------------------------

    def create_session(self, cnxn, timeout_ms: int) -> Session:
        session = Session(self.tracker.next_session_id(), timeout_ms)
        session.cnxn = cnxn
        self.tracker.add(session, _mono_ms())
        req = Request(session.session_id, 0, OpCode.CREATE_SESSION,
                      r.CreateSessionTxn(timeout_ms), cnxn, [])
        self.submit(session, req)
        return session

    def submit(self, session: Session, req: Request) -> None:
        """Take one request of `session`; its reply will be sent in the session's order."""
        if req.is_write:
            if session is not None and session.owner is not None and req.type not in _UNOWNED:
                txn = req.txn = self.prep.error_txn(req, Code.SESSIONMOVED)
            else:
                txn = req.txn = self.prep.prepare(req)
            if session is not None:  # None: the server's own requests (the reaper's)
                session.queue.append(req)
            self._enqueue(txn)
        elif session is not None and session.queue:
            session.queue.append(req)
        else:
            self._answer(req, self._execute_read(req))

    def _enqueue(self, txn) -> None:
        """A txn prep built: proposed with the rest of this loop turn's."""
        self._unproposed.append(txn)
        if len(self._unproposed) == 1:
            asyncio.get_running_loop().call_soon(self._propose)

    def reopen(self, session: Session, timeout_ms: int, done) -> None:
        """A client reconnects to `session` here: done(valid) once it may. On the leader
        the session is ours from now on."""
        session.owner = None
        done(True)

    def session_for_reconnect(self, session_id: int) -> Session | None:
        """The session a client reconnects to, if it lives."""
        return self.tracker.sessions.get(session_id)

    def expire_sessions(self) -> None:
        """Called every tick: submit a closeSession for each session past its deadline."""
        for session in self.tracker.expired(_mono_ms()):
            log.info("event=session_expired session=0x%x timeout_ms=%d",
                     session.session_id, session.timeout_ms)
            self.submit(session, Request(session.session_id, 0, OpCode.CLOSE_SESSION, None,
                                         None, []))

    def restore_sessions(self) -> None:
        """After recovery every recovered session gets a full timeout from now, as a new
        leader gives them (its clients need time to find this server again)."""
        now = _mono_ms()
        for sid, timeout in self.tree.sessions.items():
            self.tracker.add(Session(sid, timeout), now)

    # -- effects of the peer ------------------------------------------------------

    def _propose(self) -> None:
        """Every write prepared in one loop turn goes to the peer, and the log, as one batch.
        A learner's sync may have proposed them already this turn (_learner_request)."""
        txns, self._unproposed = self._unproposed, []
        if txns:
            self.obey(self.peer.propose(txns))

    def obey(self, effects: Effects) -> None:
        """Carry out a ZAB role's effects, in the order zab/peer.py states. The hot path's
        values hold persist, send and deliver alone (three instance attributes)."""
        rare = len(vars(effects)) > 3
        if rare:
            if effects.accepted_epoch is not None or effects.current_epoch is not None:
                self.shell.write_epochs(effects.accepted_epoch, effects.current_epoch)
            if effects.install:
                self.shell.install(effects.install)
        if effects.persist:
            self.txn_log.append(effects.persist)  # its writer syncs them, then _on_synced
        if effects.send:
            self.shell.send(effects.send)
        deliver = effects.deliver
        if deliver:
            for txn in deliver:
                self._apply(txn)
            # The batch's replies and events leave together, at once; the bookkeeping that
            # no reply depends on waits until they are on their way.
            self.outbox.flush()
            if self.prep is not None:
                self.prep.applied(deliver[-1].zxid)
            self.on_applied(len(deliver))
        if rare:
            self._obey_rest(effects)

    def _obey_rest(self, effects: Effects) -> None:
        for request in effects.requests:
            self._learner_request(*request)
        if effects.touches:
            now = _mono_ms()
            sessions = self.tracker.sessions
            for session_id, _ in effects.touches:
                session = sessions.get(session_id)
                if session is not None:
                    session.last_active_ms = now
        for sid, session_id, _timeout in effects.revalidate:
            session = self.tracker.sessions.get(session_id)
            valid = session is not None and not session.closing
            if valid:
                session.last_active_ms = _mono_ms()
                session.owner = sid  # its client is at that learner now
            self.obey(self.peer.revalidated(sid, session_id, valid))
        for session_id, valid in effects.revalidated:
            self._revalidated(session_id, valid)
        for _ in range(effects.synced):
            self._synced()
        if effects.disconnect:
            self.shell.disconnect(effects.disconnect)
        if effects.serve:
            self.shell.serve()
        if effects.abandon:
            self.shell.abandon(effects.abandon)

    # -- an ensemble's traffic ----------------------------------------------------

    def _learner_request(self, sid: int, session_id: int, cxid: int, op: int, body: bytes,
                         authinfo) -> None:
        """A request a learner forwarded to us, the leader: prep it like our own; its
        reply is the learner's to send, once the txn commits there."""
        auth_ids = [(i.scheme, i.id) for i in authinfo]
        if op == _SYNC:
            # Every write proposed before the sync must reach the learner before the SYNC.
            if self._unproposed:
                self._propose()
            self.obey(self.peer.sync_request(sid))
            return
        record = _decode_forwarded(op, body)
        req = Request(session_id, cxid, op, record, None, auth_ids)
        if not req.is_write:
            log.warning("event=learner_request_not_a_write sid=%d op=%d", sid, op)
            return
        session = self.tracker.sessions.get(session_id)
        if op == _CREATE_SESSION and record is not None and session is None:
            session = Session(session_id, record.timeOut)
            session.owner = sid
            self.tracker.add(session, _mono_ms())
        if session is not None and session.owner != sid and op not in _UNOWNED:
            self._enqueue(self.prep.error_txn(req, Code.SESSIONMOVED))
            return
        self.submit(None, req)

    def _wait_for_sync(self, session: Session, req: Request) -> None:
        """A sync the leader answers later (Effects.synced): until then it holds back the
        session's later reads, as a write does."""
        req.is_write = True
        session.queue.append(req)
        self._syncs.append(req)

    def _synced(self) -> None:
        """The leader answered our oldest sync: everything committed before it is applied."""
        if not self._syncs:
            # A SYNC for a request this server never sent: the leader's bug, not ours.
            return
        req = self._syncs.popleft()
        req.is_write = False
        session = self.tracker.sessions.get(req.session_id)
        if session is not None and session.queue and session.queue[0] is req:
            self._drain(session)

    def _revalidated(self, session_id: int, valid: bool) -> None:
        raise AssertionError("only a learner asks for REVALIDATE")

    def _on_synced(self, zxid: int) -> None:
        """The log's writer made everything up to `zxid` durable (one sync covers every txn
        appended before it began; the next gathers meanwhile)."""
        self.obey(self.peer.on_persisted(zxid))

    def _on_sync_failed(self, exc: BaseException) -> None:
        # A log we cannot sync must never acknowledge a write.
        log.error("event=txn_log_sync_failed error=%r action=stop_server", exc)
        self.on_fatal()

    # -- apply and answer ---------------------------------------------------------

    def _apply(self, txn) -> None:
        try:
            rc = self.tree.apply(txn)
        except Exception:
            # Our bug, in a txn already durable: the tree may be half-changed, so serve
            # nothing more from it. Restart replays the log (and names the txn if it fails).
            log.exception("event=apply_failed zxid=0x%x txn=%r action=stop_server", txn.zxid, txn)
            self.on_fatal()
            raise
        if txn.digest is not None:
            self._compare_digest(txn)
        watches = self.watches
        if rc.events and (watches.data.by_path or watches.child.by_path):  # .active, inlined
            watches.trigger(rc.events, txn.zxid)
        hdr = txn.hdr
        # The request this txn answers: its session's oldest, on whichever server the
        # client is (ZooKeeper's CommitProcessor matches by session and cxid likewise).
        session = self.tracker.sessions.get(hdr.clientId)
        req = None
        if session is not None and session.queue:
            head = session.queue[0]
            if head.is_write and head.xid == hdr.cxid and head.type != _SYNC:
                req = head
        if hdr.type == _CLOSE_SESSION or req is not None and req.type == _CLOSE_SESSION:
            self._finish_close(session, req)
            return
        if req is None:
            return
        cnxn = req.cnxn
        if rc.err == _SESSIONMOVED:
            self._session_moved(session, cnxn)
            return
        if cnxn is not None:  # _answer, inlined: once per write
            reply = self._write_reply(req, cnxn, rc, hdr.type)
            if reply is not None:
                cnxn.reply(req, reply, self.tree.last_processed_zxid)
        session.queue.popleft()
        self._drain(session)

    def _session_moved(self, session: Session, cnxn) -> None:
        """A write of a session whose client has moved to another server: that is a
        connection-level error, so ZooKeeper closes this connection without a reply
        (FinalRequestProcessor, ZOOKEEPER-710); the client, if it lives, is elsewhere."""
        session.queue.clear()
        if cnxn is not None:
            cnxn.close_after_flush("session moved to another server")
        if session.cnxn is cnxn:
            session.cnxn = None

    def _compare_digest(self, txn) -> None:
        """The leader's digest after this txn against ours (DataTree.compareDigest): a
        mismatch means the replicas diverged; it is counted and logged, as ZooKeeper does."""
        ours = self.tree.digest
        stats = self.stats
        if not stats.digests_compared:
            log.info("event=digest_checks_started zxid=0x%x equal=%s", txn.zxid,
                     ours == txn.digest)
        stats.digests_compared += 1
        if ours is None or ours == txn.digest:
            return
        self.stats.digest_mismatches += 1
        if self.stats.digest_mismatches == 1:
            log.error("event=digest_mismatch zxid=0x%x leader_digest=%d our_digest=%d txn=%r",
                      txn.zxid, txn.digest, ours, txn)

    def _drain(self, session: Session) -> None:
        """Answer the reads queued behind a session's completed request, up to its next
        write (or sync) still waiting."""
        queue = session.queue
        while queue and not queue[0].is_write:
            read = queue.popleft()
            self._answer(read, self._execute_read(read))

    def _finish_close(self, session: Session | None, req: Request | None) -> None:
        if session is None:
            return
        # Answer what is still queued behind the close, then forget the session.
        cnxn = session.cnxn
        self.tracker.remove(session.session_id)
        session.queue.clear()
        req_cnxn = req.cnxn if req is not None else None
        if cnxn is not None and cnxn is not req_cnxn:
            cnxn.close_after_flush("session closed")
        if req_cnxn is not None:
            reply = encode_reply(req.xid, self.tree.last_processed_zxid, 0, None)
            req_cnxn.send(reply)
            req_cnxn.close_after_flush("client closed session")
            req.cnxn = None

    def _answer(self, req: Request, reply: bytes | None) -> None:
        cnxn = req.cnxn
        if cnxn is not None and reply is not None:
            cnxn.reply(req, reply, self.tree.last_processed_zxid)

    def _write_reply(self, req: Request, cnxn, rc: ApplyResult, hdr_type: int) -> bytes | None:
        zxid = self.tree.last_processed_zxid
        if req.type == _CREATE_SESSION:
            return cnxn.connect_response(req.session_id, req.record.timeOut)
        err = 0 if hdr_type == _MULTI else rc.err
        build = WRITE_REPLY.get(hdr_type)
        if err or build is None:
            return encode_reply(req.xid, zxid, err, None)
        return build(req.xid, zxid, rc)

    def _execute_read(self, req: Request) -> bytes | None:
        if req.cnxn is None:
            return None
        zxid = self.tree.last_processed_zxid
        if req.type == _PING:
            return encode_reply(PING_XID, zxid, 0, None)  # whatever xid the client used
        if req.type == _AUTH:
            return encode_reply(req.xid, 0, req.record, None)  # result decided at receipt
        if req.type == _SASL:
            return encode_reply(req.xid, 0, 0, req.record)  # processSasl answers zxid 0
        try:
            if req.record is None and req.type != _WHO_AM_I or req.has_npe_path():
                # ZooKeeper answers an undecodable body or a null path with MARSHALLINGERROR.
                raise KeeperError(Code.MARSHALLINGERROR)
            body = READ[req.type](self, req, req.record, req.cnxn)
        except KeeperError as e:
            return encode_reply(req.xid, zxid, e.code, None)
        if req.type == _MULTI_READ:
            body = _MultiBody(body)
        return encode_reply(req.xid, zxid, 0, body)


def request_body(req: Request) -> bytes:
    """The request's body as ZooKeeper forwards it (Learner.request): its jute bytes."""
    rec = req.record
    if req.type == _CREATE_SESSION:
        return _TIMEOUT.pack(rec.timeOut)
    if rec is None:
        return b""
    if req.type in (_MULTI, _MULTI_READ):
        return MultiRequest(rec).to_bytes()
    return rec.to_bytes()


def _decode_forwarded(op: int, body: bytes):
    """A learner's REQUEST body back into the record prep takes (None: unparseable, which
    prep answers with MARSHALLINGERROR, as ZooKeeper's does)."""
    try:
        if op == _CREATE_SESSION:
            return r.CreateSessionTxn(_TIMEOUT.unpack_from(body)[0])
        if op == _CLOSE_SESSION:
            return None
        if op == _MULTI:
            return decode_multi_request(body, 0)[0]
        cls = REQUEST_RECORD.get(op)
        return cls.decode(body, 0)[0] if cls is not None else None
    except (JuteError, struct.error):
        return None


# Each builds the framed reply of a successful write from its ApplyResult, the Stat
# straight from the node (SetDataResponse, SetACLResponse: the Stat alone).
def _create_reply(xid, zxid, rc):
    return encode_create_reply(xid, zxid, rc.path)


def _create2_reply(xid, zxid, rc):
    return encode_create_reply(xid, zxid, rc.path, rc.node.stat_bytes())


def _stat_reply(xid, zxid, rc):
    return encode_reply_raw(xid, zxid, rc.node.stat_bytes())


def _multi_reply(xid, zxid, rc):
    return encode_reply(xid, zxid, 0, _multi_body(rc))


def _multi_create_result(rc):
    return r.CreateResponse(rc.path)


def _multi_create2_result(rc):
    return r.Create2Response(rc.path, rc.stat)


def _multi_set_data_result(rc):
    return r.SetDataResponse(rc.stat)


def _multi_body(rc):
    results = []
    for sub in rc.multi:
        t = sub.type
        if t == OpCode.ERROR:
            results.append((OpCode.ERROR, r.ErrorResponse(sub.err)))
        else:
            build = MULTI_RESULT.get(t)
            results.append((t, build(sub) if build is not None else None))
    return _MultiBody(results)


WRITE_REPLY = {
    OpCode.CREATE: _create_reply,
    OpCode.CREATE2: _create2_reply,
    OpCode.CREATE_CONTAINER: _create2_reply,
    OpCode.CREATE_TTL: _create2_reply,
    OpCode.SET_DATA: _stat_reply,
    OpCode.SET_ACL: _stat_reply,
    OpCode.MULTI: _multi_reply,
}

MULTI_RESULT = {
    OpCode.CREATE: _multi_create_result,
    OpCode.CREATE2: _multi_create2_result,
    OpCode.CREATE_CONTAINER: _multi_create2_result,
    OpCode.CREATE_TTL: _multi_create2_result,
    OpCode.SET_DATA: _multi_set_data_result,
}

__all__ = ["Pipeline", "session_password"]
