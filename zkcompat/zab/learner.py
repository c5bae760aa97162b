"""The learner roles of Zab 1.0 (follower and observer) as a sans-I/O state machine.

Discovery: FOLLOWERINFO (or OBSERVERINFO) with our acceptedEpoch; LEADERINFO's epoch is
accepted durably before ACKEPOCH. Sync: DIFF, TRUNC or SNAP, then proposals and commits
up to NEWLEADER. Every txn received during sync is made durable, and only then is
currentEpoch written and NEWLEADER ACKed (the 3.9 order: ZOOKEEPER-3911, -4394, -4643,
-4646, -4785); the outstanding proposals are ACKed after it. UPTODATE starts serving.
Broadcast: log each PROPOSAL and ACK it once durable; apply on COMMIT, in zxid order.

Membership (with reconfigEnabled): the config NEWLEADER carries becomes ours at UPTODATE,
and a reconfig's config at its COMMITANDACTIVATE (INFORMANDACTIVATE for an observer),
which names the leader of the new config; the shell decides whether the term goes on.

Time comes in as tick() calls, one per half tickTime; a leader silent for syncLimit
(initLimit while syncing) ends the term, as the learner's socket timeout does.
"""

from __future__ import annotations

import logging
from collections import deque

from zkcompat.jute import quorum as q
from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.jute.errors import JuteError
from zkcompat.tree.digest import DIGEST_VERSION
from zkcompat.tree.txn import TXN_DIGEST, Txn, decode_txn_at
from zkcompat.zab.leader import HALF_TICKS_PER_TICK
from zkcompat.zab.membership import Membership
from zkcompat.zab.peer import Effects, ZabCounters, make_zxid, zxid_epoch

log = logging.getLogger(__name__)

P = q.PacketType
_ACK = int(P.ACK)
_RECONFIG = int(OpCode.RECONFIG)


def _no_touches() -> list[tuple[int, int]]:
    return []


def decode_proposal(data: bytes | None) -> Txn:
    """A PROPOSAL's (or INFORM's) txn, with the TxnDigest that may follow it (the leader's
    tree digest after the txn, when its digest.enabled)."""
    if data is None:
        raise JuteError("PROPOSAL without a txn")
    txn, off = decode_txn_at(data, digest_follows=True)
    if len(data) - off >= TXN_DIGEST.size:
        version, digest = TXN_DIGEST.unpack_from(data, off)
        if version == DIGEST_VERSION:  # another version's digest cannot be compared
            txn.digest = digest
    return txn




class Learner:
    def __init__(self, my_sid: int, leader_sid: int, accepted_epoch: int, current_epoch: int,
                 last_logged_zxid: int, *, observer: bool = False, init_limit_ticks: int = 10,
                 sync_limit_ticks: int = 5, touched=_no_touches,
                 membership: Membership | None = None, reconfig_enabled: bool = False,
                 counters: ZabCounters | None = None):
        self.counters = counters if counters is not None else ZabCounters()
        self.my_sid = my_sid
        self.leader_sid = leader_sid
        self.observer = observer
        self.accepted_epoch = accepted_epoch
        self.current_epoch = current_epoch
        self.last_logged_zxid = last_logged_zxid
        self.init_limit = init_limit_ticks * HALF_TICKS_PER_TICK
        self.sync_limit = sync_limit_ticks * HALF_TICKS_PER_TICK
        self.touched = touched  # () -> [(sessionId, timeout)] active since the last ping
        self.phase = "register"  # register -> sync -> newleader -> uptodate -> broadcast
        self.epoch = -1
        self.newleader_zxid = 0
        self.now = 0
        self.heard = 0
        self.last_received_zxid = last_logged_zxid  # the newest txn we were sent
        self.last_committed_zxid = last_logged_zxid
        self._proposed: deque[Txn] = deque()  # received, not yet committed, zxid order
        self._unacked: deque[int] = deque()  # logged or being logged, ACK once durable
        self._newleader_waiting = False
        self.membership = membership  # our committed config (None: tests that need none)
        self.reconfig_enabled = reconfig_enabled
        self.last_seen = membership  # the newest config proposed to us
        self._newleader_config: Membership | None = None

    # -- discovery --------------------------------------------------------------------

    def start(self) -> Effects:
        kind = P.OBSERVERINFO if self.observer else P.FOLLOWERINFO
        version = self.membership.version if self.membership is not None else 0
        info = q.packet(kind, make_zxid(self.accepted_epoch, 0),
                        q.learner_info(self.my_sid, version))
        return Effects(send=[(self.leader_sid, info)])

    def step(self, pkt: r.QuorumPacket, snap_tree=None) -> Effects:
        """A packet from the leader. A SNAP comes with the tree the shell read after it."""
        self.heard = self.now
        handler = _STEP.get((self.phase, pkt.type)) or _STEP.get(("*", pkt.type))
        if handler is None:
            return self._abandon(f"unexpected packet type {pkt.type} in phase {self.phase}")
        try:
            if pkt.type == P.SNAP:
                return handler(self, pkt, snap_tree)
            return handler(self, pkt)
        except JuteError as e:
            return self._abandon(f"bad packet type {pkt.type}: {e}")

    def _abandon(self, reason: str) -> Effects:
        fx = Effects()
        fx.abandon = reason
        return fx

    def _send(self, pkt) -> tuple[int, r.QuorumPacket]:
        return (self.leader_sid, pkt)

    def _on_leaderinfo(self, pkt) -> Effects:
        new_epoch = zxid_epoch(pkt.zxid)
        fx = Effects()
        if new_epoch > self.accepted_epoch:
            acked = self.current_epoch
            self.accepted_epoch = new_epoch
            fx.accepted_epoch = new_epoch
        elif new_epoch == self.accepted_epoch:
            acked = q.ACKEPOCH_ALREADY_ACCEPTED
        else:
            return self._abandon(f"leader's epoch {new_epoch} is below our accepted epoch "
                                 f"{self.accepted_epoch}")
        self.epoch = new_epoch
        self.newleader_zxid = make_zxid(new_epoch, 0)
        self.phase = "sync"
        fx.send = [self._send(q.packet(P.ACKEPOCH, self.last_logged_zxid, q.int_payload(acked)))]
        return fx

    # -- sync -------------------------------------------------------------------------

    def _on_diff(self, pkt) -> Effects:
        self.phase = "synced"
        return Effects()

    def _on_trunc(self, pkt) -> Effects:
        fx = Effects()
        fx.install = ("trunc", pkt.zxid)
        self.last_logged_zxid = self.last_received_zxid = self.last_committed_zxid = pkt.zxid
        self.phase = "synced"
        return fx

    def _on_snap(self, pkt, tree) -> Effects:
        if tree is None:
            return self._abandon("SNAP without its snapshot")
        fx = Effects()
        fx.install = ("snap", pkt.zxid, tree)
        self.last_logged_zxid = self.last_received_zxid = self.last_committed_zxid = pkt.zxid
        self.phase = "synced"
        return fx

    def _on_proposal(self, pkt) -> Effects:
        txn = decode_proposal(pkt.data)
        if txn.zxid <= self.last_received_zxid:
            return self._abandon(f"proposal 0x{txn.zxid:x} is not after 0x{self.last_received_zxid:x}")
        self.last_received_zxid = txn.zxid
        if self.phase == "broadcast":  # Follower.processPacket's count: not those of a sync
            self.counters.learner_proposal_received_count += 1
        self._proposed.append(txn)
        self._unacked.append(txn.zxid)
        if txn.hdr.type == _RECONFIG and self.reconfig_enabled:
            self.last_seen = Membership.parse(txn.body.data)
        return Effects([txn])

    def _on_commit(self, pkt) -> Effects:
        proposed = self._proposed
        if not proposed or proposed[0].zxid != pkt.zxid:
            head = f"0x{proposed[0].zxid:x}" if proposed else "nothing"
            return self._abandon(f"commit of 0x{pkt.zxid:x} but the next proposal is {head}")
        txn = proposed.popleft()
        self.last_committed_zxid = txn.zxid
        if self.phase == "broadcast":
            self.counters.learner_commit_received_count += 1
        return Effects(deliver=[txn])

    def _on_commit_and_activate(self, pkt) -> Effects:
        """COMMIT of a reconfig's txn, with the designated leader of its config."""
        designated, _ = q.parse_activate(pkt.data, "COMMITANDACTIVATE")
        proposed = self._proposed
        head = proposed[0] if proposed else None
        fx = self._on_commit(pkt)
        if fx.abandon:
            return fx
        if head.hdr.type != _RECONFIG:
            return self._abandon(f"COMMITANDACTIVATE of 0x{pkt.zxid:x}, not a reconfig")
        return self._activated(fx, head, designated)

    def _on_inform_and_activate(self, pkt) -> Effects:
        """An observer's INFORM of a reconfig's txn, with the designated leader."""
        designated, proposal = q.parse_activate(pkt.data, "INFORMANDACTIVATE")
        txn = decode_proposal(proposal)
        if txn.hdr.type != _RECONFIG or txn.zxid != pkt.zxid:
            return self._abandon(f"INFORMANDACTIVATE of 0x{pkt.zxid:x}, not a reconfig")
        fx = self._on_inform(r.QuorumPacket(int(P.INFORM), pkt.zxid, proposal, None))
        return self._activated(fx, txn, designated)

    def _activated(self, fx: Effects, txn: Txn, designated: int) -> Effects:
        if self.reconfig_enabled:  # else QuorumPeer.processReconfig does nothing
            self.membership = self.last_seen = Membership.parse(txn.body.data)
            fx.activate = (self.membership, designated)
        return fx

    def _on_inform(self, pkt) -> Effects:
        """An observer's commit: the txn itself, already decided."""
        txn = decode_proposal(pkt.data)
        if txn.zxid <= self.last_received_zxid:
            return Effects()  # already had it (in our history)
        self.last_received_zxid = self.last_committed_zxid = txn.zxid
        if self.phase == "broadcast":  # Observer.processPacket counts INFORM as the commit
            self.counters.learner_commit_received_count += 1
        return Effects([txn], deliver=[txn])

    def _on_newleader(self, pkt) -> Effects:
        self.phase = "newleader"
        if self.reconfig_enabled and pkt.data is not None and len(pkt.data) > 1:
            self._newleader_config = self.last_seen = Membership.parse(pkt.data)
        self._newleader_waiting = True
        return self._ack_newleader_if_durable()

    def _ack_newleader_if_durable(self) -> Effects:
        if not self._newleader_waiting or self.last_logged_zxid < self.last_received_zxid:
            return Effects()
        self._newleader_waiting = False
        fx = Effects()
        self.current_epoch = self.epoch
        fx.current_epoch = self.epoch
        send = [self._send(q.packet(P.ACK, self.newleader_zxid))]
        if not self.observer:
            send += [self._send(q.packet(P.ACK, z)) for z in self._unacked]
        self._unacked.clear()
        fx.send = send
        self.phase = "uptodate"
        return fx

    def _on_uptodate(self, pkt) -> Effects:
        self.phase = "broadcast"
        fx = Effects(send=[self._send(q.packet(P.ACK, self.newleader_zxid))])
        fx.serve = True
        new = self._newleader_config
        if new is not None and (self.membership is None or new.version > self.membership.version):
            self.membership = new
            fx.activate = (new, None)
        log.info("event=learner_uptodate sid=%d leader=%d epoch=%d zxid=0x%x", self.my_sid,
                 self.leader_sid, self.epoch, self.last_committed_zxid)
        return fx

    # -- broadcast --------------------------------------------------------------------

    def on_persisted(self, zxid: int) -> Effects:
        """Our log has every txn up to `zxid` durably: ACK what the leader waits for."""
        self.last_logged_zxid = zxid
        if self._newleader_waiting:
            return self._ack_newleader_if_durable()
        if self.phase != "broadcast" or self.observer:
            return Effects()
        unacked = self._unacked
        acks = []
        while unacked and unacked[0] <= zxid:
            acks.append(q.bare_packet_bytes(_ACK, unacked.popleft()))
        if not acks:
            return Effects()
        return Effects(send=[(self.leader_sid, b"".join(acks))])

    def _on_ping(self, pkt) -> Effects:
        reply = q.packet(P.PING, pkt.zxid, q.encode_touches(self.touched()), pkt.authinfo)
        return Effects(send=[self._send(reply)])

    def _on_sync(self, pkt) -> Effects:
        fx = Effects()
        fx.synced = 1
        return fx

    def _on_revalidate(self, pkt) -> Effects:
        fx = Effects()
        fx.revalidated = [q.decode_revalidate_reply(pkt.data)]
        return fx

    def forward(self, session_id: int, cxid: int, op: int, body: bytes, authinfo) -> Effects:
        """A client request this server cannot answer alone: to the leader (REQUEST)."""
        data = q.encode_request(session_id, cxid, op, body)
        return Effects(send=[self._send(q.packet(P.REQUEST, -1, data, authinfo))])

    def revalidate(self, session_id: int, timeout_ms: int) -> Effects:
        data = q.encode_revalidate(session_id, timeout_ms)
        return Effects(send=[self._send(q.packet(P.REVALIDATE, -1, data))])

    # -- time -------------------------------------------------------------------------

    def tick(self) -> Effects:
        self.now += 1
        limit = self.sync_limit if self.phase == "broadcast" else self.init_limit
        if self.now - self.heard > limit:
            return self._abandon(f"leader {self.leader_sid} silent for {limit} half ticks")
        return Effects()


_STEP = {
    ("register", P.LEADERINFO): Learner._on_leaderinfo,
    ("sync", P.DIFF): Learner._on_diff,
    ("sync", P.TRUNC): Learner._on_trunc,
    ("sync", P.SNAP): Learner._on_snap,
    ("synced", P.PROPOSAL): Learner._on_proposal,
    ("synced", P.COMMIT): Learner._on_commit,
    ("synced", P.INFORM): Learner._on_inform,
    ("synced", P.COMMITANDACTIVATE): Learner._on_commit_and_activate,
    ("synced", P.INFORMANDACTIVATE): Learner._on_inform_and_activate,
    ("synced", P.NEWLEADER): Learner._on_newleader,
    ("newleader", P.PROPOSAL): Learner._on_proposal,
    ("newleader", P.COMMIT): Learner._on_commit,
    ("newleader", P.COMMITANDACTIVATE): Learner._on_commit_and_activate,
    ("uptodate", P.PROPOSAL): Learner._on_proposal,
    ("uptodate", P.COMMIT): Learner._on_commit,
    ("uptodate", P.INFORM): Learner._on_inform,
    ("uptodate", P.COMMITANDACTIVATE): Learner._on_commit_and_activate,
    ("uptodate", P.INFORMANDACTIVATE): Learner._on_inform_and_activate,
    ("uptodate", P.UPTODATE): Learner._on_uptodate,
    ("broadcast", P.PROPOSAL): Learner._on_proposal,
    ("broadcast", P.COMMIT): Learner._on_commit,
    ("broadcast", P.INFORM): Learner._on_inform,
    ("broadcast", P.COMMITANDACTIVATE): Learner._on_commit_and_activate,
    ("broadcast", P.INFORMANDACTIVATE): Learner._on_inform_and_activate,
    ("broadcast", P.SYNC): Learner._on_sync,
    ("broadcast", P.REVALIDATE): Learner._on_revalidate,
    ("*", P.PING): Learner._on_ping,
}
