"""The leader role of Zab 1.0 as a sans-I/O state machine: discovery, sync, broadcast.

A term starts when the election says we lead. Discovery: learners send FOLLOWERINFO;
once a quorum of voters (us included) is connected the new epoch is the largest accepted
epoch + 1 (Leader.getEpochToPropose), sent in LEADERINFO; a quorum of ACKEPOCHs fixes
currentEpoch. Sync: each learner gets DIFF, TRUNC or SNAP (LearnerHandler.syncFollower),
then the outstanding proposals and NEWLEADER. The leader serves only once a quorum has
ACKed NEWLEADER, then sends UPTODATE. Broadcast: a txn commits once a quorum of voters
has it durably, in zxid order. A standalone server is a leader whose quorum is itself.

Time comes in as tick() calls, one per half tickTime (the leader pings that often); the
limits (initLimit, syncLimit) are counted in those half ticks. Nothing here does I/O: the
history of committed txns is read through the `history` object the shell passes in.

Membership (reconfig, as ZooKeeper 3.9): a quorum is one of the committed configuration
and, while a reconfig is proposed and not committed, also one of that next configuration
(`last_seen`), for every txn from the reconfig on, for NEWLEADER and for staying leader.
The reconfig's txn commits as COMMITANDACTIVATE (INFORMANDACTIVATE to observers), naming
the designated leader of the new configuration: this one if it still votes in it, else
the lowest new voter that acknowledged it; a leader that is not designated commits nothing
more (allowedToCommit) and leaves the term to that one. With reconfigEnabled, the first
established term of a static configuration (version 0) gives it the version of its
NEWLEADER (ZOOKEEPER-1783), as every later config has the zxid of its txn.

What a learner is synced from, and whether by DIFF, TRUNC or SNAP, is committed_log.py's;
quorumSync's rounds and the COMMITs held behind a learner's SYNC are quorum_sync.py's.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from operator import attrgetter

from zkcompat.jute import quorum as q
from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.jute.errors import JuteError
from zkcompat.tree.txn import Txn, encode_proposal
from zkcompat.zab.committed_log import SNAP, CommittedLog
from zkcompat.zab.learner_info import LearnerInfo
from zkcompat.zab.membership import STATIC_CONFIG_VERSION, Membership
from zkcompat.zab.peer import COUNTER_MASK, BufferStats, Effects, ZabCounters, make_zxid, zxid_epoch
from zkcompat.zab.quorum_sync import QuorumSync

log = logging.getLogger(__name__)

P = q.PacketType
_PROPOSAL, _COMMIT, _INFORM = int(P.PROPOSAL), int(P.COMMIT), int(P.INFORM)
_RECONFIG = int(OpCode.RECONFIG)
_ZXID_OF = attrgetter("zxid")
HALF_TICKS_PER_TICK = 2


class Leader:
    def __init__(self, my_sid: int, membership: Membership | frozenset[int], accepted_epoch: int,
                 current_epoch: int, last_zxid: int, history=None, *,
                 init_limit_ticks: int = 10, sync_limit_ticks: int = 5,
                 last_seen: Membership | None = None, reconfig_enabled: bool = False,
                 quorum_sync: bool = False, counters: ZabCounters | None = None):
        if not isinstance(membership, Membership):  # voters' sids alone (tests, standalone)
            membership = Membership.of_voters(membership)
        assert my_sid in membership.voters, "only a voter leads"
        self.counters = counters if counters is not None else ZabCounters()
        self.proposal_sizes = BufferStats()  # Leader.proposalStats: this term's proposals
        self.my_sid = my_sid
        self.membership = membership  # the committed configuration
        # The newest configuration proposed (a reconfig not yet committed, or one this
        # server logged before the election): NEWLEADER carries it and, once a quorum of
        # both has synced, the term activates it.
        self.last_seen = last_seen if last_seen is not None else membership
        self.reconfig_enabled = reconfig_enabled
        self._reconfig_zxid = 0  # the reconfig proposed this term, until it commits
        self.allowed_to_commit = True  # False once a reconfig designated another leader
        self.committed_log = CommittedLog(history)  # what learners are synced from
        self.accepted_epoch = accepted_epoch
        self.current_epoch = current_epoch
        self.init_limit = init_limit_ticks * HALF_TICKS_PER_TICK
        self.sync_limit = sync_limit_ticks * HALF_TICKS_PER_TICK
        self.now = 0
        self.learners: dict[int, LearnerInfo] = {}
        self.epoch = -1  # the new epoch, once a quorum of learners has connected
        self.epoch_acked: set[int] = set()
        self.newleader_acked: set[int] = set()
        self.established = False
        self.last_logged_zxid = last_zxid  # ours, durable
        self.last_proposed_zxid = last_zxid
        self.last_committed_zxid = last_zxid
        # Leader.leaderStateSummary: a learner more recent than this cannot follow us.
        self._summary = (current_epoch, last_zxid)
        self.outstanding: list[Txn] = []  # proposed, not yet committed, in zxid order
        # An ensemble of one has nobody to sync, unless a reconfig may grow it.
        self._keep_committed = len(membership.servers) > 1 or reconfig_enabled
        self._pending_syncs: dict[int, list[int]] = {}  # zxid -> learners waiting for it
        # quorumSync: syncs answered once a quorum confirmed a PING round after them.
        self.quorum_sync = quorum_sync
        self.quorum_syncs = QuorumSync(self) if quorum_sync else None

    @classmethod
    def standalone(cls, my_sid: int, epoch: int, last_zxid: int) -> Leader:
        """An ensemble of one: established at once, continuing the epoch of its log."""
        leader = cls(my_sid, Membership.of_voters((my_sid,)), epoch, epoch, last_zxid)
        leader.epoch = epoch
        leader.established = True
        if zxid_epoch(last_zxid) != epoch:
            leader.last_proposed_zxid = leader.last_committed_zxid = make_zxid(epoch, 0)
        return leader

    # -- membership -------------------------------------------------------------------

    @property
    def voters(self) -> frozenset[int]:
        return self.membership.voters

    @property
    def config_bytes(self) -> bytes:
        """What NEWLEADER carries (Leader.getQuorumVerifierBytes): the last seen config."""
        return self.last_seen.to_bytes()

    @property
    def reconfig_pending(self) -> bool:
        return self.last_seen.version != self.membership.version

    def has_quorums(self, sids) -> bool:
        """A quorum of the committed config, and of the next one while it is pending
        (SyncedLearnerTracker.hasAllQuorums)."""
        if not self.membership.contains_quorum(sids):
            return False
        return not self.reconfig_pending or self.last_seen.contains_quorum(sids)

    def synced_quorum(self, membership: Membership) -> bool:
        """Leader.isQuorumSynced: a quorum of `membership` is us (if we vote in it) and
        followers connected and past their sync; a reconfig needs one (NewConfigNoQuorum)."""
        sids = [self.my_sid] + [li.sid for li in self.learners.values()
                                if li.forwarding and not li.observer and li.phase != "newleader"]
        return membership.contains_quorum(sids)

    # -- the term's start -----------------------------------------------------------

    def start(self) -> Effects:
        """Count ourselves as connected; an ensemble of one settles its epoch at once."""
        return self._try_epoch(Effects())

    def _try_epoch(self, fx: Effects) -> Effects:
        if self.epoch >= 0:
            return fx
        followers = [li for li in self.learners.values() if not li.observer]
        if not self.membership.contains_quorum([self.my_sid] + [li.sid for li in followers]):
            return fx
        self.epoch = max([self.accepted_epoch] + [li.accepted_epoch for li in followers]) + 1
        self.accepted_epoch = self.epoch
        fx.accepted_epoch = self.epoch
        # The new epoch's first txn is (epoch, 1); what we logged before is its history.
        self.last_proposed_zxid = make_zxid(self.epoch, 0)
        if (self.reconfig_enabled and self.membership.version == STATIC_CONFIG_VERSION
                and not self.reconfig_pending):
            # ZOOKEEPER-1783: the static config gets a version once a quorum established
            # it (NEWLEADER's zxid), so it outranks the partial config of a joining server.
            self.last_seen = self.membership.with_version(self.last_proposed_zxid)
        log.info("event=new_epoch epoch=%d sid=%d learners=%s", self.epoch, self.my_sid,
                 sorted(self.learners))
        for li in self.learners.values():
            if li.phase == "info":
                self._send_leaderinfo(li, fx)
        self.epoch_acked.add(self.my_sid)
        return self._try_epoch_quorum(fx)

    def _send_leaderinfo(self, li: LearnerInfo, fx: Effects) -> None:
        li.phase = "epoch"
        fx.send.append((li.sid, q.packet(P.LEADERINFO, make_zxid(self.epoch, 0),
                                          q.int_payload(q.PROTOCOL_VERSION))))

    def _try_epoch_quorum(self, fx: Effects) -> Effects:
        if self.current_epoch == self.epoch or not self.membership.contains_quorum(
                self.epoch_acked):
            return fx
        self.current_epoch = self.epoch
        fx.current_epoch = self.epoch
        for li in self.learners.values():
            if li.phase == "epoch" and li.last_zxid >= 0:
                self._sync(li, fx)
        self.newleader_acked.add(self.my_sid)
        return self._try_establish(fx)

    def _try_establish(self, fx: Effects) -> Effects:
        if self.established or not self.has_quorums(self.newleader_acked):
            return fx
        self.established = True
        fx.serve = True
        if self.last_seen != self.membership:
            # Leader.startZkServer (ZOOKEEPER-1324): the config NEWLEADER carried, which a
            # quorum of it has now synced, becomes the committed one.
            self._activate(self.last_seen, sorted(self.newleader_acked), fx)
        log.info("event=leader_established epoch=%d sid=%d synced=%s", self.epoch, self.my_sid,
                 sorted(self.newleader_acked))
        for sid in sorted(self.newleader_acked):
            li = self.learners.get(sid)
            if li is not None:
                self._send_uptodate(li, fx)
        return fx

    def _send_uptodate(self, li: LearnerInfo, fx: Effects) -> None:
        li.phase = "uptodate"
        fx.send.append((li.sid, q.packet(P.UPTODATE, -1)))

    # -- messages from learners -------------------------------------------------------

    def connected(self, sid: int, pkt: r.QuorumPacket) -> Effects:
        """A learner's first packet, FOLLOWERINFO or OBSERVERINFO."""
        fx = Effects()
        observer = pkt.type == P.OBSERVERINFO
        if pkt.type not in (P.FOLLOWERINFO, P.OBSERVERINFO):
            fx.disconnect = [sid]
            return fx
        if sid not in self.membership.servers and sid not in self.last_seen.servers:
            # LearnerHandler lets it sync: a server about to join by reconfig must be
            # connected and synced first. Its ACKs count in no quorum until it is a voter.
            log.info("event=learner_not_in_config sid=%d version=0x%x", sid,
                     self.membership.version)
        if q.learner_config_version(pkt.data) > self.membership.version:
            log.warning("event=learner_ahead sid=%d reason=%r", sid,
                        "Follower is ahead of the leader (has a later activated configuration)")
            fx.disconnect = [sid]
            return fx
        li = LearnerInfo(sid, observer, zxid_epoch(pkt.zxid), self.now)
        self.learners[sid] = li
        if self.epoch >= 0:
            self._send_leaderinfo(li, fx)
            return fx
        return self._try_epoch(fx)

    def gone(self, sid: int) -> Effects:
        """The learner's connection closed. Its syncs still waiting die with it: a SYNC
        sent to its next connection would answer a request that connection never made."""
        self.learners.pop(sid, None)
        self.epoch_acked.discard(sid)
        self.newleader_acked.discard(sid)
        for waiting in self._pending_syncs.values():
            while sid in waiting:
                waiting.remove(sid)
        if self.quorum_syncs is not None:
            self.quorum_syncs.forget(sid)
        return Effects()

    def step(self, sid: int, pkt: r.QuorumPacket) -> Effects:
        li = self.learners.get(sid)
        if li is None:
            return Effects()
        li.heard = self.now
        handler = _STEP.get(pkt.type)
        if handler is None:
            log.warning("event=unexpected_packet sid=%d type=%d", sid, pkt.type)
            return self._drop(li)
        try:
            return handler(self, li, pkt)
        except JuteError as e:
            log.warning("event=bad_packet sid=%d type=%d error=%r", sid, pkt.type, str(e))
            return self._drop(li)

    def _drop(self, li: LearnerInfo) -> Effects:
        fx = self.gone(li.sid)
        fx.disconnect = [li.sid]
        return fx

    def _on_ackepoch(self, li: LearnerInfo, pkt) -> Effects:
        if li.phase != "epoch":
            return self._drop(li)
        their_epoch = q.parse_int_payload(pkt.data, "ACKEPOCH")
        li.last_zxid = pkt.zxid
        fx = Effects()
        if their_epoch != q.ACKEPOCH_ALREADY_ACCEPTED and not li.observer:
            if (their_epoch, pkt.zxid) > self._summary and not self.established:
                log.error("event=learner_ahead sid=%d epoch=%d zxid=0x%x", li.sid, their_epoch,
                          pkt.zxid)
                return self._drop(li)
            self.epoch_acked.add(li.sid)
        if self.current_epoch == self.epoch:
            self._sync(li, fx)
            return fx
        return self._try_epoch_quorum(fx)

    def _on_ack(self, li: LearnerInfo, pkt) -> Effects:
        zxid = pkt.zxid
        if li.phase == "newleader":
            # The first ACK after NEWLEADER acknowledges NEWLEADER itself.
            fx = Effects()
            li.phase = "synced"
            log.info("event=learner_synced sid=%d observer=%s", li.sid, li.observer)
            if li.observer:
                self._send_uptodate(li, fx)
                return fx
            if self.established:
                self._send_uptodate(li, fx)
                return fx
            self.newleader_acked.add(li.sid)
            return self._try_establish(fx)
        if li.observer or zxid & COUNTER_MASK == 0 or zxid_epoch(zxid) != self.epoch:
            return Effects()  # the ACK of UPTODATE, or of an older epoch
        if zxid > li.acked:
            li.acked = zxid
        return self._commit_upto(self._quorum_acked())

    def _on_ping(self, li: LearnerInfo, pkt) -> Effects:
        fx = Effects()
        touches = q.decode_touches(pkt.data)
        if touches:
            fx.touches = touches
        if self.quorum_syncs is not None:
            self.quorum_syncs.pinged_back(li, fx)
        return fx

    def _on_request(self, li: LearnerInfo, pkt) -> Effects:
        session_id, cxid, op, body = q.decode_request(pkt.data)
        fx = Effects()
        fx.requests = [(li.sid, session_id, cxid, op, body, pkt.authinfo or [])]
        return fx

    def _on_revalidate(self, li: LearnerInfo, pkt) -> Effects:
        session_id, timeout = q.decode_revalidate(pkt.data)
        fx = Effects()
        fx.revalidate = [(li.sid, session_id, timeout)]
        return fx

    def revalidated(self, sid: int, session_id: int, valid: bool) -> Effects:
        return Effects(send=[(sid, q.packet(P.REVALIDATE, -1,
                                            q.encode_revalidate_reply(session_id, valid)))])

    # -- sync of one learner ----------------------------------------------------------

    def _sync(self, li: LearnerInfo, fx: Effects) -> None:
        """DIFF, TRUNC or SNAP, as LearnerHandler.syncFollower decides, then the proposals
        still outstanding, then NEWLEADER; from here on the learner gets every broadcast."""
        peer = li.last_zxid
        committed = self.last_committed_zxid
        send = fx.send
        sid = li.sid
        source = self.committed_log
        mode = source.sync_mode(peer, committed)
        self.counters.synced(mode)
        if mode == "diff":
            send.append((sid, q.packet(P.DIFF, committed)))
            self._send_history(sid, peer, committed, send)
        elif mode == "trunc":
            point = min(source.floor(peer) if peer < committed else committed, committed)
            send.append((sid, q.packet(P.TRUNC, point)))
            self._send_history(sid, point, committed, send)
        else:
            send.append((sid, SNAP))
        log.info("event=sync_learner sid=%d mode=%s peer_zxid=0x%x leader_zxid=0x%x", sid, mode,
                 peer, committed)
        if not li.observer:  # an observer hears of a txn once it commits (INFORM)
            for txn in self.outstanding:
                send.append((sid, q.packet(P.PROPOSAL, txn.zxid, encode_proposal(txn))))
        send.append((sid, q.packet(P.NEWLEADER, make_zxid(self.epoch, 0), self.config_bytes)))
        li.phase = "newleader"
        li.forwarding = True
        li.acked = max(li.acked, 0)

    def _send_history(self, sid: int, after: int, upto: int, send: list) -> None:
        if after >= upto:
            return
        for txn in self.committed_log.between(after, upto):
            data = encode_proposal(txn)
            send.append((sid, q.packet(P.PROPOSAL, txn.zxid, data)))
            send.append((sid, q.packet(P.COMMIT, txn.zxid)))

    # -- broadcast --------------------------------------------------------------------

    def next_zxid(self) -> int:
        """Reserve the next zxid for a txn the leader's prep is building."""
        zxid = self.last_proposed_zxid + 1
        assert zxid & COUNTER_MASK, "zxid counter overflow: a new epoch is needed"
        self.last_proposed_zxid = zxid
        return zxid

    def propose(self, txns: list[Txn]) -> Effects:
        """Txns the leader's prep built, in zxid order (one loop turn's worth): persist
        them here and send them to every follower that is past its sync."""
        assert self.established, "a leader proposes only once a quorum has synced"
        outstanding = self.outstanding
        assert txns[0].zxid > (outstanding[-1].zxid if outstanding else self.last_committed_zxid)
        outstanding.extend(txns)
        if self.reconfig_enabled:
            for txn in txns:
                if txn.hdr.type == _RECONFIG:
                    # Leader.propose: from this txn on, a quorum of the next config too.
                    self.last_seen = Membership.parse(txn.body.data)
                    self._reconfig_zxid = txn.zxid
        if not self.learners:
            # Standalone (ZooKeeper's has no Leader to count proposals), or a leader whose
            # learners are gone and that gives up at its next tick: nothing sent or counted.
            return Effects(txns)
        self.counters.proposal_count += len(txns)
        followers = [li.sid for li in self.learners.values() if li.forwarding and not li.observer]
        if not followers:
            return Effects(txns)
        # Each txn is encoded once, and the same bytes go to every follower.
        packets = [q.data_packet_bytes(_PROPOSAL, t.zxid, encode_proposal(t)) for t in txns]
        self.proposal_sizes.add([len(p) - q.DATA_PACKET_OVERHEAD_BYTES for p in packets])
        wire = b"".join(packets)
        return Effects(txns, [(sid, wire) for sid in followers])

    def on_persisted(self, zxid: int) -> Effects:
        """Our own log has every txn up to `zxid` on disk: that is our ACK."""
        self.last_logged_zxid = zxid
        if not self.learners and self.membership.voters == {self.my_sid}:
            return self._commit_upto(zxid)
        return self._commit_upto(self._quorum_acked())

    def _quorum_acked(self) -> int:
        """The highest zxid a quorum has durably (each logs in zxid order): of the
        committed config; from a pending reconfig's txn on, of both configs."""
        acks = [(self.last_logged_zxid, self.my_sid)]
        acks += [(li.acked, li.sid) for li in self.learners.values()
                 if li.forwarding and not li.observer and li.phase != "newleader"]
        acks.sort(reverse=True)
        upto = self._highest_acked(acks, self.membership)
        if self.reconfig_pending and upto >= self._reconfig_zxid > 0:
            upto = max(self._reconfig_zxid - 1, self._highest_acked(acks, self.last_seen))
        return upto

    @staticmethod
    def _highest_acked(acks: list[tuple[int, int]], membership: Membership) -> int:
        voters, need, n = membership.voters, membership.quorum_size, 0
        for zxid, sid in acks:
            if sid in voters:
                n += 1
                if n == need:
                    return zxid
        return 0

    def _commit_upto(self, zxid: int) -> Effects:
        outstanding = self.outstanding
        if not outstanding or zxid < outstanding[0].zxid or not self.allowed_to_commit:
            return Effects()
        reconfig = self._reconfig_zxid
        if reconfig and outstanding[0].zxid <= reconfig <= zxid:
            return self._commit_reconfig(reconfig)
        i = bisect_right(outstanding, zxid, key=_ZXID_OF)  # zxid order: a binary search
        committed = outstanding[:i]
        del outstanding[:i]
        self.last_committed_zxid = committed[-1].zxid
        if self._keep_committed:
            self.committed_log.add(committed, self.last_logged_zxid)
        if not self.learners:
            return Effects(deliver=committed)
        send = []
        commits = informs = None
        qs = self.quorum_syncs
        gates = qs.gates() if qs is not None else None  # None: nothing held
        for li in self.learners.values():
            if not li.forwarding:
                continue
            if gates is not None and (li.sid in gates or li.sid in qs.held):
                qs.hold(li, committed, gates.get(li.sid), send)
            elif li.observer:
                if informs is None:
                    informs = b"".join([q.data_packet_bytes(_INFORM, t.zxid, encode_proposal(t))
                                        for t in committed])
                send.append((li.sid, informs))
            else:
                if commits is None:
                    commits = b"".join([q.bare_packet_bytes(_COMMIT, t.zxid) for t in committed])
                send.append((li.sid, commits))
        self._answer_pending_syncs(send)
        fx = Effects(send=send, deliver=committed)
        if qs is not None and qs.waiting:
            qs.answer(fx)
        return fx

    def _commit_reconfig(self, reconfig_zxid: int) -> Effects:
        """Commit up to the reconfig's txn, which goes out as COMMITANDACTIVATE (and
        INFORMANDACTIVATE) with the designated leader; then what else a quorum of the new
        config has, if we still lead it (Leader.tryToCommit, processAck's loop)."""
        before = self._commit_upto(reconfig_zxid - 1) if (
            self.outstanding[0].zxid < reconfig_zxid) else Effects()
        txn = self.outstanding.pop(0)
        assert txn.zxid == reconfig_zxid
        new = self.last_seen
        acked = [self.my_sid] + [li.sid for li in self.learners.values()
                                 if li.forwarding and not li.observer and li.acked >= txn.zxid]
        self.last_committed_zxid = txn.zxid
        if self._keep_committed:
            self.committed_log.add([txn], self.last_logged_zxid)
        self._reconfig_zxid = 0
        designated = self._activate(new, acked, before)
        data = q.long_payload(designated)
        activate = q.data_packet_bytes(int(P.COMMITANDACTIVATE), txn.zxid, data)
        inform = q.data_packet_bytes(int(P.INFORMANDACTIVATE), txn.zxid,
                                     data + encode_proposal(txn))

        def packet_of(li: LearnerInfo, _t: Txn) -> bytes:
            return inform if li.observer else activate

        qs = self.quorum_syncs
        gates = qs.gates() if qs is not None else None
        for li in self.learners.values():
            if not li.forwarding:
                continue
            if gates is not None and (li.sid in gates or li.sid in qs.held):
                qs.hold(li, [txn], gates.get(li.sid), before.send, packet_of)  # as any COMMIT
            else:
                before.send.append((li.sid, packet_of(li, txn)))
        before.deliver = [*before.deliver, txn]
        self._answer_pending_syncs(before.send)
        if qs is not None and qs.waiting:
            qs.answer(before)
        if self.allowed_to_commit and self.outstanding:
            more = self._commit_upto(self._quorum_acked())
            before.send += more.send
            before.deliver += more.deliver
        return before

    def _activate(self, new: Membership, acked: list[int], fx: Effects) -> int:
        """The new config is the committed one from here on; returns the server that leads
        it (Membership.designated_leader), which may be another."""
        designated = new.designated_leader(self.membership, self.my_sid, acked)
        self.membership = self.last_seen = new
        if designated != self.my_sid:
            log.info("event=leader_not_designated sid=%d designated=%d version=0x%x detail=%r",
                     self.my_sid, designated, new.version,
                     "this leader commits nothing more (allowedToCommit=false)")
            self.allowed_to_commit = False
        fx.activate = (new, designated)
        log.info("event=config_activated version=0x%x voters=%s observers=%s designated=%d",
                 new.version, sorted(new.voters), sorted(new.observers), designated)
        return designated

    def _answer_pending_syncs(self, send: list) -> None:
        if self._pending_syncs:
            for z in sorted(z for z in self._pending_syncs if z <= self.last_committed_zxid):
                send.extend((sid, q.packet(P.SYNC, 0)) for sid in self._pending_syncs.pop(z))

    def sync_request(self, sid: int) -> Effects:
        """A learner's client asked for sync: answer once everything proposed so far has
        committed (Leader.processSync), so the learner has applied it before the SYNC;
        with quorumSync, also once a quorum confirmed a round started after it arrived.
        With quorumSync our own pipeline may ask too (sid = my_sid): answered as
        Effects.synced, in the order asked, instead of a SYNC packet."""
        if self.quorum_syncs is not None:
            return self.quorum_syncs.request(sid)
        if not self.outstanding:
            return Effects(send=[(sid, q.packet(P.SYNC, 0))])
        self._pending_syncs.setdefault(self.last_proposed_zxid, []).append(sid)
        return Effects()

    @property
    def pending_sync_count(self) -> int:
        """Syncs not yet answered (mntr's zk_pending_syncs), with quorumSync's too."""
        waiting = len(self.quorum_syncs) if self.quorum_syncs is not None else 0
        return sum(len(v) for v in self._pending_syncs.values()) + waiting

    # -- time -------------------------------------------------------------------------

    def tick(self) -> Effects:
        """Half a tickTime passed: ping the learners, drop the silent ones, and give up the
        term if a quorum has not synced in time (initLimit) or stops answering (syncLimit)."""
        self.now += 1
        fx = Effects()
        if not self.established:
            if self.now > self.init_limit:
                fx.abandon = (f"no quorum synced within initLimit; synced with "
                              f"{sorted(self.newleader_acked)}")
            return fx
        # A learner still syncing may be silent while it reads a SNAP: initLimit bounds it
        # then, as the learner's socket timeout does; syncLimit once it is up to date.
        silent = [li.sid for li in self.learners.values()
                  if self.now - li.heard > (self.sync_limit if li.phase == "uptodate"
                                            else self.init_limit)]
        for sid in silent:
            log.warning("event=learner_silent sid=%d half_ticks=%d", sid, self.sync_limit)
            self.gone(sid)
        if silent:
            fx.disconnect = silent
        if self.quorum_syncs is not None:
            self.quorum_syncs.start_round(fx)
        else:
            ping = q.packet(P.PING, self.last_proposed_zxid)
            fx.send = [(li.sid, ping) for li in self.learners.values() if li.phase == "uptodate"]
        synced = [self.my_sid] + [li.sid for li in self.learners.values()
                                  if not li.observer and li.phase == "uptodate"]
        if not self.has_quorums(synced):
            fx.abandon = f"not sufficient followers synced, only {sorted(synced)}"
        elif not self.allowed_to_commit and not any(
                li.phase == "uptodate" for li in self.learners.values()):
            fx.abandon = "a reconfig designated another leader, and every learner left"
        return fx


_STEP = {
    P.ACKEPOCH: Leader._on_ackepoch,
    P.ACK: Leader._on_ack,
    P.PING: Leader._on_ping,
    P.REQUEST: Leader._on_request,
    P.REVALIDATE: Leader._on_revalidate,
}

SYNC_OP = OpCode.SYNC
