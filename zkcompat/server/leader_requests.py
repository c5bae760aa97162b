"""The first stage on a leader, and on a standalone server (an ensemble of one): writes
become Txns in prep and are proposed in batches, one per loop turn; reads go to apply in
their session's order; learners' forwarded requests join here as the leader's own do.

ZooKeeper's LeaderRequestProcessor and PrepRequestProcessor. Only a leader expires
sessions. With quorumSync its own clients' syncs wait, like its learners', for a quorum
round started after they arrived (ZOOKEEPER-1675).
"""

import asyncio
import logging
import struct

from zkcompat.jute import records as r
from zkcompat.jute.constants import Code, OpCode
from zkcompat.jute.errors import JuteError
from zkcompat.jute.multi import decode_multi_request
from zkcompat.server.clock import Clock
from zkcompat.server.prep import Prep
from zkcompat.server.request import CREATE_SESSION_BODY, REQUEST_RECORD, Request
from zkcompat.server.sessions import Session

log = logging.getLogger(__name__)

# module globals: enum attribute lookups are slow on the hot path (docs/measurements.md)
_MULTI, _CREATE_SESSION, _CLOSE_SESSION, _SYNC = (
    OpCode.MULTI, OpCode.CREATE_SESSION, OpCode.CLOSE_SESSION, OpCode.SYNC)
# Ops ZooKeeper's prep does not check the session's owner for: the session's own birth and
# death (expiry closes a session without owning it).
_UNOWNED = frozenset((OpCode.CREATE_SESSION, OpCode.CLOSE_SESSION))


def _nothing_to_obey(effects) -> None:
    pass


class LeaderRequests:
    """What a leader does with each request; `obey` carries out the ZAB role's effects."""

    leading = True
    read_only = False

    def __init__(self, prep: Prep, apply, peer, clock: Clock, syncs=None,
                 quorum_sync: bool = False):
        self.prep = prep
        self.apply = apply  # the stage reads and replies go to
        self.tracker = apply.tracker
        self.peer = peer  # the Leader state machine
        self.clock = clock
        self.syncs = syncs  # with quorum_sync: our clients' syncs wait there
        self.quorum_sync = quorum_sync
        self.obey = _nothing_to_obey  # set by the role's wiring: the shell's
        self._unproposed: list = []  # Txns prepared this loop turn, proposed together at its end

    # -- a client's requests --------------------------------------------------------

    def create_session(self, cnxn, timeout_ms: int) -> Session:
        session = Session(self.tracker.next_session_id(), timeout_ms)
        session.cnxn = cnxn
        now = self.clock.mono_ms()
        self.tracker.add(session, now)
        req = Request(session.session_id, 0, _CREATE_SESSION, r.CreateSessionTxn(timeout_ms),
                      cnxn, [], now)
        self.submit(session, req)
        return session

    def submit(self, session: Session | None, req: Request) -> None:
        """Take one request of `session`; its reply will be sent in the session's order.
        `session` is None for the server's own requests (the reaper's) and a learner's."""
        if req.is_write:
            if session is not None and session.owner is not None and req.type not in _UNOWNED:
                txn = req.txn = self.prep.error_txn(req, Code.SESSIONMOVED)
            else:
                txn = req.txn = self.prep.prepare(req)
            if session is not None:
                session.queue.append(req)
            self._enqueue(txn)
        elif req.type == _SYNC and self.quorum_sync and session is not None:
            self.syncs.wait(session, req)
            if self._unproposed:  # the sync waits for the writes prepared before it
                self._propose()
            self.obey(self.peer.sync_request(self.peer.my_sid))
        else:
            self.apply.read(session, req)

    def _enqueue(self, txn) -> None:
        """A txn prep built: proposed with the rest of this loop turn's."""
        self._unproposed.append(txn)
        if len(self._unproposed) == 1:
            asyncio.get_running_loop().call_soon(self._propose)

    def _propose(self) -> None:
        """Every write prepared in one loop turn goes to the peer, and the log, as one batch.
        A sync may have proposed them already this turn."""
        txns, self._unproposed = self._unproposed, []
        if txns:
            self.obey(self.peer.propose(txns))

    # -- sessions -------------------------------------------------------------------

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
        now = self.clock.mono_ms()
        for session in self.tracker.expired(now):
            log.info("event=session_expired session=0x%x timeout_ms=%d",
                     session.session_id, session.timeout_ms)
            self.submit(session, Request(session.session_id, 0, _CLOSE_SESSION, None,
                                         None, [], now))

    def restore_sessions(self) -> None:
        """After recovery every recovered session gets a full timeout from now, as a new
        leader gives them (its clients need time to find this server again)."""
        now = self.clock.mono_ms()
        for sid, timeout in self.apply.tree.sessions.items():
            self.tracker.add(Session(sid, timeout), now)

    def applied(self, zxid: int) -> None:
        """Everything up to `zxid` is in the tree: prep forgets its outstanding changes."""
        self.prep.applied(zxid)

    # -- what learners send ---------------------------------------------------------

    def learner_request(self, sid: int, session_id: int, cxid: int, op: int, body: bytes,
                        authinfo) -> None:
        """A request a learner forwarded, as the bytes its client sent: prep it like our
        own; its reply is the learner's to send, once the txn commits there."""
        if op == _SYNC:
            # Every write proposed before the sync must reach the learner before the SYNC.
            if self._unproposed:
                self._propose()
            self.obey(self.peer.sync_request(sid))
            return
        auth_ids = [(i.scheme, i.id) for i in authinfo]
        record = _decode_forwarded(op, body)
        req = Request(session_id, cxid, op, record, None, auth_ids, 0)  # answered elsewhere
        if not req.is_write:
            log.warning("event=learner_request_not_a_write sid=%d op=%d", sid, op)
            return
        session = self.tracker.sessions.get(session_id)
        if op == _CREATE_SESSION and record is not None and session is None:
            session = Session(session_id, record.timeOut)
            session.owner = sid
            self.tracker.add(session, self.clock.mono_ms())
        if session is not None and session.owner != sid and op not in _UNOWNED:
            self._enqueue(self.prep.error_txn(req, Code.SESSIONMOVED))
            return
        self.submit(None, req)

    def touched(self, touches) -> None:
        """Sessions a learner's clients kept alive (its PING replies)."""
        now = self.clock.mono_ms()
        sessions = self.tracker.sessions
        for session_id, _ in touches:
            session = sessions.get(session_id)
            if session is not None:
                session.last_active_ms = now

    def revalidate(self, sid: int, session_id: int) -> None:
        """A learner asks whether a client may resume `session_id` there: if it lives, the
        learner owns it from now on."""
        session = self.tracker.sessions.get(session_id)
        valid = session is not None and not session.closing
        if valid:
            session.last_active_ms = self.clock.mono_ms()
            session.owner = sid  # its client is at that learner now
        self.obey(self.peer.revalidated(sid, session_id, valid))


def _decode_forwarded(op: int, body: bytes):
    """A learner's REQUEST body into the record prep takes (None: unparseable, which prep
    answers with MARSHALLINGERROR, as ZooKeeper's does)."""
    try:
        if op == _CREATE_SESSION:
            return r.CreateSessionTxn(CREATE_SESSION_BODY.unpack_from(body)[0])
        if op == _CLOSE_SESSION:
            return None
        if op == _MULTI:
            return decode_multi_request(body, 0)[0]
        cls = REQUEST_RECORD.get(op)
        return cls.decode(body, 0)[0] if cls is not None else None
    except (JuteError, struct.error):
        return None
