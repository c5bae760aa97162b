"""quorumSync (not ZooKeeper's; off by default): a leader answers a sync only once a quorum
of voters has answered a PING sent after the sync arrived, as etcd's ReadIndex confirms its
leadership, so a deposed leader that has not noticed yet cannot answer it (ZOOKEEPER-1675).

A round is one PING to every learner past its sync; round r is confirmed once a quorum of
voters (the leader included) has answered round r or a later one. A sync waits for the
first round started after it arrived, and for the commit of what was proposed before it.

While a learner's sync waits, the COMMITs (INFORMs) of txns proposed after it are held and
follow its SYNC. A ZooKeeper follower matches its SYNC and the COMMITs of its own forwarded
writes against one queue, in the order it forwarded them (CommitProcessor's
queuedWriteRequests, "commits are received in order"); a COMMIT that overtakes the SYNC
before it leaves that queue's head unmatched for good, and the follower never answers a
write again. Without quorumSync ZooKeeper's order holds by itself: a SYNC follows the
COMMIT of what was proposed before it, at once."""

from __future__ import annotations

import logging
from collections import deque

from zkcompat.jute import quorum as q
from zkcompat.tree.txn import Txn, encode_proposal
from zkcompat.zab.peer import Effects

log = logging.getLogger(__name__)

P = q.PacketType
_COMMIT, _INFORM = int(P.COMMIT), int(P.INFORM)
# PINGs a learner may leave unanswered. Ours and ZooKeeper's answer each at once and
# syncLimit drops a silent one; one that talks but never answers is dropped here.
PINGS_UNANSWERED_MAX = 256


class QuorumSync:
    """One leader term's syncs under quorumSync; `leader` is the Leader that owns it."""

    __slots__ = ("leader", "round", "confirmed", "waiting", "held")

    def __init__(self, leader):
        self.leader = leader
        self.round = 0  # the newest round started
        self.confirmed = 0  # the newest round a quorum answered
        # Syncs waiting, in arrival order: (learner, zxid to commit first, round to confirm).
        # Both rise with arrival, so the head is always the first answerable. Bounded by the
        # learners' own outstanding requests; a learner's die with its connection. The
        # leader's own pipeline asks as sid = leader.my_sid (answered as Effects.synced).
        self.waiting: deque[tuple[int, int, int]] = deque()
        # Per learner, the COMMIT packets held behind its SYNC: (zxid, packet bytes).
        # Bounded by what commits in one round.
        self.held: dict[int, list[tuple[int, bytes]]] = {}

    def __len__(self) -> int:
        return len(self.waiting)

    def request(self, sid: int) -> Effects:
        """The sync waits for the next round: one started after it arrived. With no round
        unanswered that round starts now; else when the one in flight is confirmed (or at
        the next tick), so the syncs arriving meanwhile share one round."""
        leader = self.leader
        zxid = leader.last_proposed_zxid if leader.outstanding else leader.last_committed_zxid
        self.waiting.append((sid, zxid, self.round + 1))
        fx = Effects()
        if self.confirmed == self.round:
            self.start_round(fx)
        return fx

    def forget(self, sid: int) -> None:
        """The learner's connection closed: a SYNC sent to its next connection would answer
        a request that connection never made."""
        if self.waiting:
            self.waiting = deque(s for s in self.waiting if s[0] != sid)
        self.held.pop(sid, None)

    # -- rounds -----------------------------------------------------------------------

    def start_round(self, fx: Effects) -> None:
        """PING every learner past its sync (what the tick sends, and learners answer
        without side effects, ZooKeeper's included); the round counts its answers."""
        leader = self.leader
        self.round += 1
        ping = q.packet(P.PING, leader.last_proposed_zxid)
        mute = []
        for li in leader.learners.values():
            if li.phase == "uptodate":
                if len(li.pings) >= PINGS_UNANSWERED_MAX:
                    mute.append(li.sid)
                    continue
                fx.send.append((li.sid, ping))
                li.pings.append(self.round)
        for sid in mute:
            log.warning("event=learner_answers_no_ping sid=%d unanswered=%d", sid,
                        PINGS_UNANSWERED_MAX)
            leader.gone(sid)
        if mute:
            fx.disconnect = [*fx.disconnect, *mute]
        if leader.has_quorums((leader.my_sid,)):
            self._confirm(self.round, fx)

    def pinged_back(self, li, fx: Effects) -> None:
        """Learner li answered its oldest PING unanswered (each answers in order)."""
        if li.pings:
            li.confirmed = li.pings.popleft()
            if not li.observer:
                self._try_confirm(fx)

    def _try_confirm(self, fx: Effects) -> None:
        """The newest round a quorum of voters has answered."""
        leader = self.leader
        answered = sorted(((li.confirmed, li.sid) for li in leader.learners.values()
                           if not li.observer and li.phase == "uptodate"), reverse=True)
        sids = [leader.my_sid]
        for confirmed, sid in answered:
            sids.append(sid)
            if leader.has_quorums(sids):
                if confirmed > self.confirmed:
                    self._confirm(confirmed, fx)
                return

    def _confirm(self, r: int, fx: Effects) -> None:
        self.confirmed = r
        self.answer(fx)
        if self.waiting and self.waiting[-1][2] > self.round:
            self.start_round(fx)  # syncs that arrived while this round was in flight

    def answer(self, fx: Effects) -> None:
        """Answer the syncs whose round is confirmed and whose txns have committed; what a
        learner held follows its SYNC, up to its next sync."""
        waiting = self.waiting
        committed = self.leader.last_committed_zxid
        ours = 0
        while waiting and waiting[0][2] <= self.confirmed and waiting[0][1] <= committed:
            sid = waiting.popleft()[0]
            if sid == self.leader.my_sid:
                ours += 1
                continue
            fx.send.append((sid, q.packet(P.SYNC, 0)))
            if sid in self.held:
                gate = next((z for s, z, _ in waiting if s == sid), None)
                self._release(sid, gate, fx.send)
        if ours:
            fx.synced += ours

    # -- COMMITs held behind a SYNC -----------------------------------------------------

    def gates(self) -> dict[int, int]:
        """Per learner, the zxid of its oldest sync still waiting: the COMMITs it may be sent
        before that SYNC are those of txns up to it (proposed before the sync arrived)."""
        gates: dict[int, int] = {}
        for sid, zxid, _ in self.waiting:
            gates.setdefault(sid, zxid)
        return gates

    def hold(self, li, committed: list[Txn], gate: int | None, send: list,
             packet_of=None) -> None:
        """A learner with a sync waiting: send the COMMITs up to its gate, hold the rest
        (all of them once one is held: they leave in zxid order). With none waiting, what it
        still holds leaves first. packet_of(li, txn): a reconfig's ACTIVATE packet."""
        held = self.held.setdefault(li.sid, [])
        now = []
        if gate is None:  # none waiting (its last SYNC was sent): what it held goes first
            now += [pkt for _, pkt in held]
            held.clear()
        for t in committed:
            if packet_of is not None:
                pkt = packet_of(li, t)
            elif li.observer:
                pkt = q.data_packet_bytes(_INFORM, t.zxid, encode_proposal(t))
            else:
                pkt = q.bare_packet_bytes(_COMMIT, t.zxid)
            if held or (gate is not None and t.zxid > gate):
                held.append((t.zxid, pkt))
            else:
                now.append(pkt)
        if now:
            send.append((li.sid, b"".join(now)))
        if not held:
            del self.held[li.sid]

    def _release(self, sid: int, gate: int | None, send: list) -> None:
        """Its SYNC is sent: the held COMMITs up to its next sync's gate follow it."""
        held = self.held.get(sid)
        if not held:
            return
        n = len(held) if gate is None else sum(1 for z, _ in held if z <= gate)
        if n:
            send.append((sid, b"".join(pkt for _, pkt in held[:n])))
            del held[:n]
        if not held:
            del self.held[sid]
