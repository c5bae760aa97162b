"""The last stage of every role: committed txns change the tree, fire watches and answer
their requests; reads are answered here too, each in its session's order.

ZooKeeper's FinalRequestProcessor, with CommitProcessor's matching: a committed txn finds
its request by (session, cxid) at the head of the session's queue, on whichever server the
client is. A reply never overtakes an earlier request of its session: each session keeps
one FIFO of unanswered requests, and the reads behind a write wait for it.
"""

import logging

from zkcompat.jute.constants import Code, OpCode
from zkcompat.jute.reply import encode_reply
from zkcompat.server.outbox import Outbox
from zkcompat.server.reads import execute_read
from zkcompat.server.replies import WRITE_REPLY
from zkcompat.server.request import Request
from zkcompat.server.sessions import Session, SessionTracker
from zkcompat.server.watches import WatchManager
from zkcompat.tree.datatree import ApplyResult, DataTree

log = logging.getLogger(__name__)

# module globals: enum attribute lookups are slow on the hot path (docs/measurements.md)
_MULTI, _CREATE_SESSION, _CLOSE_SESSION, _SYNC = (
    OpCode.MULTI, OpCode.CREATE_SESSION, OpCode.CLOSE_SESSION, OpCode.SYNC)
_SESSIONMOVED = Code.SESSIONMOVED


class ApplyStats:
    """What an operator reads of a server's replication (mntr)."""

    __slots__ = ("digest_mismatches", "digests_compared")

    def __init__(self):
        self.digest_mismatches = 0  # ServerMetrics.DIGEST_MISMATCHES_COUNT
        self.digests_compared = 0


def _nothing() -> None:
    pass


class Apply:
    """Applies committed txns and answers every request, in each session's order."""

    def __init__(self, tree: DataTree, tracker: SessionTracker):
        self.tree = tree
        self.tracker = tracker
        self.watches = WatchManager()
        self.outbox = Outbox()  # connections with replies queued
        self.stats = ApplyStats()
        self.on_fatal = _nothing  # apply failed: stop serving

    # -- committed txns -----------------------------------------------------------

    def committed(self, txns: list) -> None:
        """A batch of committed txns, in zxid order. The batch's replies and events leave
        together, at once."""
        for txn in txns:
            self._apply(txn)
        self.outbox.flush()

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
        # The request this txn answers: its session's oldest (a sync waits there too, but
        # is answered by the sync stage, never by a txn).
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
        if cnxn is not None:  # answer(), inlined: once per write
            reply = self._write_reply(req, cnxn, rc, hdr.type)
            if reply is not None:
                cnxn.reply(req, reply, self.tree.last_processed_zxid)
        session.queue.popleft()
        self.drain(session)

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
        stats.digest_mismatches += 1
        if stats.digest_mismatches == 1:
            log.error("event=digest_mismatch zxid=0x%x leader_digest=%d our_digest=%d txn=%r",
                      txn.zxid, txn.digest, ours, txn)

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

    def _write_reply(self, req: Request, cnxn, rc: ApplyResult, hdr_type: int) -> bytes | None:
        zxid = self.tree.last_processed_zxid
        if req.type == _CREATE_SESSION:
            return cnxn.connect_response(req.session_id, req.record.timeOut)
        err = 0 if hdr_type == _MULTI else rc.err
        build = WRITE_REPLY.get(hdr_type)
        if err or build is None:
            return encode_reply(req.xid, zxid, err, None)
        return build(req.xid, zxid, rc)

    # -- reads and the session's order --------------------------------------------

    def read(self, session: Session | None, req: Request) -> None:
        """A read: answered now, unless an earlier request of its session is unanswered."""
        if session is not None and session.queue:
            session.queue.append(req)
        else:
            self.answer(req, execute_read(self, req))

    def drain(self, session: Session) -> None:
        """Answer the reads queued behind a session's completed request, up to its next
        write (or sync) still waiting."""
        queue = session.queue
        while queue and not queue[0].is_write:
            read = queue.popleft()
            self.answer(read, execute_read(self, read))

    def answer(self, req: Request, reply: bytes | None) -> None:
        cnxn = req.cnxn
        if cnxn is not None and reply is not None:
            cnxn.reply(req, reply, self.tree.last_processed_zxid)
