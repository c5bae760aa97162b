"""The request pipeline of one server: submit → prep → ZAB peer → log → apply → watches → reply.

Writes go through prep (leader) into a Txn, are proposed, made durable by group commit,
committed and applied in zxid order; the reply goes out after apply. Reads run on the
local tree, but never before an earlier request of the same session has been answered:
each session keeps one FIFO of unanswered requests, so replies leave in request order.
"""

import asyncio
import logging
import time
from collections import deque

from zkcompat.jute import records as r
from zkcompat.jute.constants import PING_XID, Code, OpCode
from zkcompat.jute.multi import encode_multi_response
from zkcompat.jute.reply import encode_create_reply, encode_reply, encode_reply_raw
from zkcompat.server.outbox import Outbox
from zkcompat.server.prep import Prep
from zkcompat.server.reads import READ
from zkcompat.server.request import Request
from zkcompat.server.sessions import Session, SessionTracker, session_password
from zkcompat.server.watches import WatchManager
from zkcompat.tree.datatree import ApplyResult, DataTree
from zkcompat.tree.errors import KeeperError
from zkcompat.zab.peer import Effects, Peer

log = logging.getLogger(__name__)

# Enum members read on every request, as module globals: `OpCode.X` costs ~100 ns in
# Python 3.11 (a metaclass attribute lookup), a global ~20 ns.
_PING, _AUTH, _SASL, _WHO_AM_I, _MULTI, _MULTI_READ, _CREATE_SESSION, _CLOSE_SESSION = (
    OpCode.PING, OpCode.AUTH, OpCode.SASL, OpCode.WHO_AM_I, OpCode.MULTI, OpCode.MULTI_READ,
    OpCode.CREATE_SESSION, OpCode.CLOSE_SESSION)


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
    def __init__(self, tree: DataTree, peer: Peer, txn_log, tick_ms: int, server_id: int = 0,
                 extended_types: bool = False, enforce_quota: bool = False):
        self.tree = tree
        self.peer = peer
        self.txn_log = txn_log
        self.watches = WatchManager()
        self.outbox = Outbox()  # connections with replies queued
        self.tracker = SessionTracker(tick_ms, server_id, _wall_ms())
        self.prep = Prep(tree, peer.next_zxid, _wall_ms, extended_types, enforce_quota)
        self._proposed: deque[Request] = deque()  # writes prepared, not yet applied, zxid order
        self._unproposed: list = []  # Txns prepared this loop turn, proposed together at its end
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
            txn = req.txn = self.prep.prepare(req)
            if session is not None:  # None: the server's own requests (the reaper's)
                session.queue.append(req)
            self._proposed.append(req)
            self._unproposed.append(txn)
            if len(self._unproposed) == 1:
                asyncio.get_running_loop().call_soon(self._propose)
        elif session is not None and session.queue:
            session.queue.append(req)
        else:
            self._answer(req, self._execute_read(req))

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
        """Every write prepared in one loop turn goes to the peer, and the log, as one batch."""
        txns, self._unproposed = self._unproposed, []
        self._obey(self.peer.propose(txns))

    def _obey(self, effects: Effects) -> None:
        if effects.persist:
            self.txn_log.append(effects.persist)  # its writer syncs them, then _on_synced
        # effects.send: no other peers yet (an ensemble of one).
        deliver = effects.deliver
        if deliver:
            for txn in deliver:
                self._apply(txn)
            # The batch's replies and events leave together, at once; the bookkeeping that
            # no reply depends on waits until they are on their way.
            self.outbox.flush()
            self.prep.applied(deliver[-1].zxid)
            self.on_applied(len(deliver))

    def _on_synced(self, zxid: int) -> None:
        """The log's writer made everything up to `zxid` durable (one sync covers every txn
        appended before it began; the next gathers meanwhile)."""
        self._obey(self.peer.on_persisted(zxid))

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
        watches = self.watches
        if rc.events and (watches.data.by_path or watches.child.by_path):  # .active, inlined
            watches.trigger(rc.events, txn.zxid)
        req = self._proposed.popleft()
        assert req.txn is txn, "commits must arrive in proposal order"
        if txn.hdr.type == _CLOSE_SESSION or req.type == _CLOSE_SESSION:
            self._finish_close(req)
        cnxn = req.cnxn
        if cnxn is not None:  # _answer, inlined: once per write
            reply = self._write_reply(req, cnxn, rc)
            if reply is not None:
                cnxn.reply(req, reply, self.tree.last_processed_zxid)
        session = self.tracker.sessions.get(req.session_id)
        if session is None:
            return
        head = session.queue.popleft()
        assert head is req, "a session's writes complete in its request order"
        queue = session.queue
        while queue and not queue[0].is_write:
            read = queue.popleft()
            self._answer(read, self._execute_read(read))

    def _finish_close(self, req: Request) -> None:
        session = self.tracker.sessions.get(req.session_id)
        if session is None:
            return
        # Answer what is still queued behind the close, then forget the session.
        cnxn = session.cnxn
        self.tracker.remove(req.session_id)
        session.queue.clear()
        if cnxn is not None and cnxn is not req.cnxn:
            cnxn.close_after_flush("session closed")
        if req.cnxn is not None:
            reply = encode_reply(req.xid, self.tree.last_processed_zxid, 0, None)
            req.cnxn.send(reply)
            req.cnxn.close_after_flush("client closed session")
        req.cnxn = None

    def _answer(self, req: Request, reply: bytes | None) -> None:
        cnxn = req.cnxn
        if cnxn is not None and reply is not None:
            cnxn.reply(req, reply, self.tree.last_processed_zxid)

    def _write_reply(self, req: Request, cnxn, rc: ApplyResult) -> bytes | None:
        zxid = self.tree.last_processed_zxid
        if req.type == _CREATE_SESSION:
            return cnxn.connect_response(req.session_id, req.record.timeOut)
        hdr_type = req.txn.hdr.type
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
