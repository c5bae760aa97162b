"""Known bugs the simulator can switch on, to show its checks fail when they should.

ack_before_fsync lives in the simulated disk (its log reports a batch durable at once);
the others are subclasses of the real zab roles, which the simulated servers' peers
are given instead of the real ones (roles_with).
"""

from __future__ import annotations

from zkcompat.jute.constants import OpCode
from zkcompat.jute.quorum import PacketType as P
from zkcompat.zab.leader import Leader
from zkcompat.zab.learner import Learner
from zkcompat.zab.peer import Effects

BUGS = ("ack_before_fsync", "newleader_ack_before_durable", "serve_before_quorum_synced",
        "reconfig_old_quorum_only", "config_activated_before_commit")


class NewLeaderAckBeforeDurable(Learner):
    """The learner ACKs NEWLEADER (and writes currentEpoch) before the txns it got during
    sync are durable: the order ZOOKEEPER-4646 and -4785 fixed."""

    def _ack_newleader_if_durable(self) -> Effects:
        if not self._newleader_waiting:
            return Effects()
        durable = self.last_logged_zxid
        self.last_logged_zxid = max(durable, self.last_received_zxid)
        try:
            return super()._ack_newleader_if_durable()
        finally:
            self.last_logged_zxid = durable


class ServeBeforeQuorumSynced(Leader):
    """The new leader serves (and commits on its own durable write) before a quorum has
    ACKed NEWLEADER."""

    def _try_establish(self, fx: Effects) -> Effects:
        if not self.established:
            self.newleader_acked = set(self.voters)
        return super()._try_establish(fx)

    def _quorum_acked(self) -> int:
        return max(super()._quorum_acked(), self.last_logged_zxid)


class ReconfigOldQuorumOnly(Leader):
    """A reconfig, and every txn after it, commits once a quorum of the old config has it:
    the new config's quorum is never asked (Leader.tryToCommit without hasAllQuorums)."""

    def has_quorums(self, sids) -> bool:
        return self.membership.contains_quorum(sids)

    def _quorum_acked(self) -> int:
        acks = [(self.last_logged_zxid, self.my_sid)]
        acks += [(li.acked, li.sid) for li in self.learners.values()
                 if li.forwarding and not li.observer and li.phase != "newleader"]
        acks.sort(reverse=True)
        return self._highest_acked(acks, self.membership)


class ConfigActivatedBeforeCommit(Learner):
    """The learner switches to a reconfig's config as its PROPOSAL arrives, not at its
    COMMITANDACTIVATE: a reconfig that never commits still moves it."""

    def step(self, pkt, snap_tree=None) -> Effects:
        fx = super().step(pkt, snap_tree)
        if (pkt.type == P.PROPOSAL and fx.persist and self.reconfig_enabled
                and fx.persist[-1].hdr.type == OpCode.RECONFIG):
            self.membership = self.last_seen
            fx.activate = (self.membership, None)
        return fx


def roles_with(bug: str | None) -> tuple[type[Leader], type[Learner]]:
    """The leader and learner classes a simulated server runs with `bug` in force."""
    if bug not in (None, *BUGS):
        raise ValueError(f"unknown bug {bug!r}")
    if bug == "newleader_ack_before_durable":
        return Leader, NewLeaderAckBeforeDurable
    if bug == "serve_before_quorum_synced":
        return ServeBeforeQuorumSynced, Learner
    if bug == "reconfig_old_quorum_only":
        return ReconfigOldQuorumOnly, Learner
    if bug == "config_activated_before_commit":
        return Leader, ConfigActivatedBeforeCommit
    return Leader, Learner
