"""FastLeaderElection of ZooKeeper 3.8.0 as a sans-I/O state machine: notifications and
ticks in, ElectionEffects out. The shell owns sockets and the clock (peer/elector.py).

    fle = FastLeaderElection(my_sid, voters, observers, membership.to_bytes())
    fx = fle.look(last_zxid, peer_epoch, now_ms)   # a new round: logicalclock+1, vote for self
    fx = fle.step(sid, notification, now_ms)       # a notification received from sid
    fx = fle.tick(now_ms, have_delivered)          # at or after fle.next_deadline_ms
    fle.serve(state, vote)                         # FOLLOWING/LEADING/OBSERVING with this vote

Every call returns ElectionEffects; the shell sends `send` in order (each to its sid), and
when `decided` is set the round is over: the machine already answers LOOKING peers with
that vote (WorkerReceiver's rule), until serve() updates the vote or look() starts again.
`connect_all` asks the shell to (re)connect to every peer it has queued messages for.

zab/membership.py gives the config bytes 3.8 puts in each notification.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from zkcompat.jute.election import NOTIFICATION_VERSION, Notification, ServerState

# FastLeaderElection.finalizeWait, and minNotificationInterval's default.
FINALIZE_WAIT_MS = 200
# FastLeaderElection.maxNotificationInterval's default.
MAX_NOTIFICATION_INTERVAL_MS = 60_000
# Long.MIN_VALUE: getInitId/getInitLastLoggedZxid/getPeerEpoch of an observer.
LONG_MIN = -(1 << 63)
# lookForLeader ignores LOOKING notifications while either zxid is -1.
NO_ZXID = -1
# Vote(id, zxid, peerEpoch): the electionEpoch of QuorumPeer's first currentVote.
NO_ELECTION_EPOCH = -1
# Our own notifications in flight to ourselves: one per look or proposal change.
LOOPBACK_MAX = 64


@dataclass(frozen=True, slots=True)
class Vote:
    """A vote; for a decision, `state` is the role to take."""

    leader: int
    zxid: int
    election_epoch: int
    peer_epoch: int
    state: ServerState = ServerState.LOOKING


@dataclass(slots=True)
class ElectionEffects:
    """What the shell must do, in this order: send, then act on decided."""

    send: list[tuple[int, Notification]] = field(default_factory=list)
    decided: Vote | None = None
    connect_all: bool = False


class _Tally(NamedTuple):
    """A vote as recvset/outofelection keep it, with the message version Vote.equals
    looks at."""

    leader: int
    zxid: int
    election_epoch: int
    peer_epoch: int
    state: ServerState
    version: int


def _same_vote(a: _Tally, b: _Tally) -> bool:
    """Vote.equals: all four numbers while either is LOOKING; otherwise the leader, and
    the peerEpoch unless exactly one side predates ZOOKEEPER-1732 (version 0)."""
    if a.state == ServerState.LOOKING or b.state == ServerState.LOOKING:
        return a[:4] == b[:4]
    if (a.version > 0) != (b.version > 0):
        return a.leader == b.leader
    return a.leader == b.leader and a.peer_epoch == b.peer_epoch


def total_order_predicate(new: tuple[int, int, int], cur: tuple[int, int, int]) -> bool:
    """FastLeaderElection.totalOrderPredicate on (sid, zxid, peerEpoch) triples: is the
    new vote better, by peerEpoch, then zxid, then sid. (QuorumMaj weighs every id 1.)"""
    new_sid, new_zxid, new_epoch = new
    cur_sid, cur_zxid, cur_epoch = cur
    return (new_epoch, new_zxid, new_sid) > (cur_epoch, cur_zxid, cur_sid)


class FastLeaderElection:
    """One server's leader election; the module docstring has the contract.

    What lookForLeader and WorkerReceiver do, reproduced (Java names in brackets):
    - votes are ordered by (peerEpoch, zxid, sid) [totalOrderPredicate]; a quorum is a
      strict majority of the voters [QuorumMaj.containsQuorum];
    - our own notifications to ourselves loop back through the same path, after the input
      that caused them [QuorumCnxManager.toSend to mySid];
    - after a quorum agrees with our proposal we wait finalize_wait_ms; a better vote in that
      window resumes the election, any other notification is dropped and restarts the wait,
      except that a FOLLOWING/LEADING one still counts in outofelection and may decide (a
      departure: ZooKeeper drops it, and a stale LOOKING vote its manager resends on a new
      connection can then send a rejoining server after a peer that leads nothing);
    - a higher electionEpoch resets recvset and our proposal; a lower LOOKING one is answered
      with our proposal; LOOKING notifications are ignored while our or its zxid is -1;
    - FOLLOWING/LEADING notifications count in recvset (same electionEpoch) and always in
      outofelection; either decides once a quorum agrees and the leader is known LEADING
      [checkLeader] (ZOOKEEPER-1732, ZOOKEEPER-1805 for the vote equality);
    - non-voters are answered at once with our current vote and ignored; notifications for
      a non-voting leader are ignored; observers propose nobody (Long.MIN_VALUE) and decide
      OBSERVING;
    - the notification timeout starts at finalize_wait_ms and doubles up to
      max_notification_interval_ms; on it we resend our vote if have_delivered, else ask
      for connect_all [manager.haveDelivered].
    Not reproduced: reconfig (received config bytes are carried, never applied), weights
    and hierarchical quorums, the QuorumOracleMaj of 2-server ensembles, and a notification
    received before the first look() (dropped: the shell starts its network after look()).
    3.9.3 behaves identically.
    """

    def __init__(self, my_sid: int, voters: frozenset[int], observers: frozenset[int],
                 config_bytes: bytes, *, finalize_wait_ms: int = FINALIZE_WAIT_MS,
                 min_notification_interval_ms: int | None = None,
                 max_notification_interval_ms: int = MAX_NOTIFICATION_INTERVAL_MS) -> None:
        if voters & observers:
            raise ValueError(f"servers both voter and observer: {sorted(voters & observers)}")
        # A server outside the config (left out by a reconfig it restarted with, or about
        # to join) looks as a non-voting participant: it proposes nobody and follows.
        self.my_sid = my_sid
        self.voters = frozenset(voters)
        self.observers = frozenset(observers)
        self.config_bytes = config_bytes
        self.finalize_wait_ms = finalize_wait_ms
        self.min_notification_interval_ms = (finalize_wait_ms if min_notification_interval_ms
                                             is None else min_notification_interval_ms)
        self.max_notification_interval_ms = max_notification_interval_ms
        self._quorum_half = len(self.voters) // 2
        self.participant = my_sid in self.voters
        self.state = ServerState.LOOKING
        self.logicalclock = 0
        self.started = False
        self.current_vote: Vote | None = None
        self._init = (LONG_MIN, LONG_MIN, LONG_MIN)
        self._proposal = (LONG_MIN, LONG_MIN, LONG_MIN)  # (leader, zxid, peerEpoch)
        self._recvset: dict[int, _Tally] = {}
        self._outofelection: dict[int, _Tally] = {}
        self._not_timeout_ms = self.min_notification_interval_ms
        self._poll_deadline_ms: int | None = None
        self._finalize_deadline_ms: int | None = None
        self._loopback: list[Notification] = []
        self._fx = ElectionEffects()

    # -- the API ---------------------------------------------------------------------

    def reconfigure(self, voters: frozenset[int], observers: frozenset[int],
                    config_bytes: bytes) -> None:
        """A new config is committed (QuorumPeer.processReconfig): votes count in it, and
        notifications carry it, from the next one on."""
        self.voters, self.observers = frozenset(voters), frozenset(observers)
        self.config_bytes = config_bytes
        self._quorum_half = len(self.voters) // 2
        self.participant = self.my_sid in self.voters

    @property
    def proposal(self) -> Vote:
        """Our proposed vote in the current round."""
        leader, zxid, peer_epoch = self._proposal
        return Vote(leader, zxid, self.logicalclock, peer_epoch)

    @property
    def next_deadline_ms(self) -> int | None:
        """When tick() next has work (the finalize wait or the notification timeout)."""
        if self.state != ServerState.LOOKING:
            return None
        if self._finalize_deadline_ms is not None:
            return self._finalize_deadline_ms
        return self._poll_deadline_ms

    def look(self, last_zxid: int, peer_epoch: int, now_ms: int) -> ElectionEffects:
        """Start a new round: logicalclock+1, vote for ourselves, notify every voter."""
        self._fx = ElectionEffects()
        self.started = True
        self.state = ServerState.LOOKING
        if self.current_vote is None:
            self.current_vote = Vote(self.my_sid, last_zxid, NO_ELECTION_EPOCH, peer_epoch)
        self.logicalclock += 1
        if self.participant:
            self._init = (self.my_sid, last_zxid, peer_epoch)
        else:
            self._init = (LONG_MIN, LONG_MIN, LONG_MIN)
        self._proposal = self._init
        self._leave_round()
        self._not_timeout_ms = self.min_notification_interval_ms
        self._poll_deadline_ms = now_ms + self._not_timeout_ms
        self._send_notifications()
        return self._finish(now_ms)

    def step(self, sid: int, n: Notification, now_ms: int) -> ElectionEffects:
        """A notification from sid."""
        self._fx = ElectionEffects()
        if self.started:
            self._receive(sid, n, now_ms)
        return self._finish(now_ms)

    def tick(self, now_ms: int, have_delivered: bool = True) -> ElectionEffects:
        """Time passed: end the finalize wait, or time out waiting for notifications.
        have_delivered is QuorumCnxManager.haveDelivered (some send queue is empty)."""
        self._fx = ElectionEffects()
        if self.started and self.state == ServerState.LOOKING:
            if self._finalize_deadline_ms is not None:
                if now_ms >= self._finalize_deadline_ms:
                    leader, zxid, peer_epoch = self._proposal
                    self._decide(leader, zxid, self.logicalclock, peer_epoch)
            elif self._poll_deadline_ms is not None and now_ms >= self._poll_deadline_ms:
                self._notification_timeout(now_ms, have_delivered)
        return self._finish(now_ms)

    def serve(self, state: ServerState, vote: Vote) -> None:
        """We are FOLLOWING/LEADING/OBSERVING with this vote: answer LOOKING peers with it
        (QuorumPeer.setCurrentVote, e.g. after updateElectionVote sets the new epoch)."""
        if state == ServerState.LOOKING:
            raise ValueError("serve() takes the state we left the election in; look() to elect")
        self.started = True
        self.state = state
        self.current_vote = vote
        self._leave_round()

    # -- WorkerReceiver --------------------------------------------------------------

    def _receive(self, sid: int, n: Notification, now_ms: int) -> None:
        if sid not in self.voters:
            self._answer_non_voter(sid)
        elif self.state == ServerState.LOOKING:
            if n.state == ServerState.LOOKING and n.election_epoch < self.logicalclock:
                leader, zxid, peer_epoch = self._proposal
                self._send(sid, leader, zxid, self.logicalclock, peer_epoch)
            self._poll(sid, n, now_ms)
        elif n.state == ServerState.LOOKING:
            v = self.current_vote
            assert v is not None
            self._send(sid, v.leader, v.zxid, v.election_epoch, v.peer_epoch)

    def _answer_non_voter(self, sid: int) -> None:
        v = self.current_vote
        assert v is not None
        self._send(sid, v.leader, v.zxid, self.logicalclock, v.peer_epoch)

    # -- lookForLeader ---------------------------------------------------------------

    def _poll(self, sid: int, n: Notification, now_ms: int) -> None:
        """lookForLeader taking n off its queue, in the finalize wait or the main loop."""
        if self._finalize_deadline_ms is not None:
            if not self._better(n.leader, n.zxid, n.peer_epoch, self._proposal):
                self._finalize_deadline_ms = now_ms + self.finalize_wait_ms
                if n.state in _OUT_OF_ELECTION and n.leader in self.voters:
                    # Where ZooKeeper drops it: a running leader may be joined at once.
                    self._on_out_of_election(sid, n, now_ms)
                return
            self._finalize_deadline_ms = None
        self._poll_deadline_ms = now_ms + self._not_timeout_ms
        if n.leader not in self.voters:
            return
        handler = _ON_STATE.get(n.state)
        if handler is not None:
            handler(self, sid, n, now_ms)

    def _on_looking(self, sid: int, n: Notification, now_ms: int) -> None:
        if self._init[1] == NO_ZXID or n.zxid == NO_ZXID:
            return
        if n.election_epoch > self.logicalclock:
            self.logicalclock = n.election_epoch
            self._recvset.clear()
            better = self._better(n.leader, n.zxid, n.peer_epoch, self._init)
            self._proposal = (n.leader, n.zxid, n.peer_epoch) if better else self._init
            self._send_notifications()
        elif n.election_epoch < self.logicalclock:
            return
        elif self._better(n.leader, n.zxid, n.peer_epoch, self._proposal):
            self._proposal = (n.leader, n.zxid, n.peer_epoch)
            self._send_notifications()
        self._recvset[sid] = _Tally(n.leader, n.zxid, n.election_epoch, n.peer_epoch,
                                    ServerState.LOOKING, 0)
        leader, zxid, peer_epoch = self._proposal
        mine = _Tally(leader, zxid, self.logicalclock, peer_epoch, ServerState.LOOKING, 0)
        if self._has_quorum(self._recvset, mine):
            self._finalize_deadline_ms = now_ms + self.finalize_wait_ms

    def _on_observing(self, sid: int, n: Notification, now_ms: int) -> None:
        return

    def _on_out_of_election(self, sid: int, n: Notification, now_ms: int) -> None:
        """receivedFollowingNotification (and receivedLeadingNotification without the
        oracle): join the leader a quorum follows, this round's or an earlier one's."""
        theirs = _Tally(n.leader, n.zxid, n.election_epoch, n.peer_epoch, n.state, n.version)
        if n.election_epoch == self.logicalclock:
            self._recvset[sid] = theirs._replace(version=0)
            if self._has_quorum(self._recvset, theirs) and self._check_leader(
                    self._recvset, n.leader, n.election_epoch):
                self._decide(n.leader, n.zxid, n.election_epoch, n.peer_epoch)
                return
        self._outofelection[sid] = theirs
        if self._has_quorum(self._outofelection, theirs) and self._check_leader(
                self._outofelection, n.leader, n.election_epoch):
            self.logicalclock = n.election_epoch
            self._decide(n.leader, n.zxid, n.election_epoch, n.peer_epoch)

    def _notification_timeout(self, now_ms: int, have_delivered: bool) -> None:
        if have_delivered:
            self._send_notifications()
        else:
            self._fx.connect_all = True
        self._not_timeout_ms = min(self._not_timeout_ms * 2, self.max_notification_interval_ms)
        self._poll_deadline_ms = now_ms + self._not_timeout_ms

    # -- helpers ---------------------------------------------------------------------

    @staticmethod
    def _better(leader: int, zxid: int, peer_epoch: int, cur: tuple[int, int, int]) -> bool:
        return total_order_predicate((leader, zxid, peer_epoch), cur)

    def _has_quorum(self, votes: dict[int, _Tally], vote: _Tally) -> bool:
        acks = sum(1 for sid, v in votes.items() if sid in self.voters and _same_vote(vote, v))
        return acks > self._quorum_half

    def _check_leader(self, votes: dict[int, _Tally], leader: int, election_epoch: int) -> bool:
        """checkLeader: another leader must have told us it is LEADING; for ourselves the
        round must be the current one."""
        if leader != self.my_sid:
            v = votes.get(leader)
            return v is not None and v.state == ServerState.LEADING
        return self.logicalclock == election_epoch

    def _decide(self, leader: int, zxid: int, election_epoch: int, peer_epoch: int) -> None:
        if leader == self.my_sid:
            state = ServerState.LEADING
        else:
            # learningState(): an observer observes; a participant follows, voter or not
            # (one a reconfig left out, or one about to join, is a non-voting participant).
            state = (ServerState.OBSERVING if self.my_sid in self.observers
                     else ServerState.FOLLOWING)
        vote = Vote(leader, zxid, election_epoch, peer_epoch, state)
        self.state = state
        self.current_vote = vote
        self._fx.decided = vote
        self._leave_round()

    def _leave_round(self) -> None:
        self._recvset = {}
        self._outofelection = {}
        self._finalize_deadline_ms = None
        self._loopback.clear()
        if self.state != ServerState.LOOKING:
            self._poll_deadline_ms = None

    def _send_notifications(self) -> None:
        leader, zxid, peer_epoch = self._proposal
        for sid in sorted(self.voters):
            n = self._notification(ServerState.LOOKING, leader, zxid, self.logicalclock, peer_epoch)
            if sid == self.my_sid:
                assert len(self._loopback) < LOOPBACK_MAX, "our own notifications pile up"
                self._loopback.append(n)
            else:
                self._fx.send.append((sid, n))

    def _send(self, sid: int, leader: int, zxid: int, election_epoch: int, peer_epoch: int) -> None:
        """A reply stamped with our state, as WorkerReceiver sends them."""
        n = self._notification(self.state, leader, zxid, election_epoch, peer_epoch)
        if sid == self.my_sid:
            self._loopback.append(n)
        else:
            self._fx.send.append((sid, n))

    def _notification(self, state: ServerState, leader: int, zxid: int, election_epoch: int,
                      peer_epoch: int) -> Notification:
        return Notification(state, leader, zxid, election_epoch, peer_epoch,
                            NOTIFICATION_VERSION, self.config_bytes)

    def _finish(self, now_ms: int) -> ElectionEffects:
        """Deliver our own notifications to ourselves, then hand the effects out."""
        while self._loopback:
            self._receive(self.my_sid, self._loopback.pop(0), now_ms)
        fx, self._fx = self._fx, ElectionEffects()
        return fx


_ON_STATE = {
    ServerState.LOOKING: FastLeaderElection._on_looking,
    ServerState.OBSERVING: FastLeaderElection._on_observing,
    ServerState.FOLLOWING: FastLeaderElection._on_out_of_election,
    ServerState.LEADING: FastLeaderElection._on_out_of_election,
}
_OUT_OF_ELECTION = frozenset((ServerState.FOLLOWING, ServerState.LEADING))
