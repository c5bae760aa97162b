"""Known bugs the simulator can switch on, to show its checks fail when they should.

ack_before_fsync lives in the simulated disk (its log reports a batch durable at once);
the other two bend the real zab state machines for the length of one run and are put
back afterwards, whatever happens.
"""

from __future__ import annotations

from contextlib import contextmanager

from zkcompat.zab.leader import Leader
from zkcompat.zab.learner import Learner
from zkcompat.zab.peer import Effects

BUGS = ("ack_before_fsync", "newleader_ack_before_durable", "serve_before_quorum_synced")


def _ack_newleader_at_once(self: Learner) -> Effects:
    """The learner ACKs NEWLEADER (and writes currentEpoch) before the txns it got during
    sync are durable: the order ZOOKEEPER-4646 and -4785 fixed."""
    if not self._newleader_waiting:
        return Effects()
    durable = self.last_logged_zxid
    self.last_logged_zxid = max(durable, self.last_received_zxid)
    try:
        return _ORIGINAL["learner"](self)
    finally:
        self.last_logged_zxid = durable


def _serve_alone(self: Leader, fx: Effects) -> Effects:
    """The new leader serves (and commits on its own durable write) before a quorum has
    ACKed NEWLEADER."""
    if not self.established:
        self.newleader_acked = set(self.voters)
    return _ORIGINAL["leader"](self, fx)


def _commit_alone(self: Leader) -> int:
    return max(_ORIGINAL["acked"](self), self.last_logged_zxid)


_ORIGINAL = {"learner": Learner._ack_newleader_if_durable, "leader": Leader._try_establish,
             "acked": Leader._quorum_acked}


@contextmanager
def switched_on(bug: str | None):
    """Within the block the named zab bug is in force (ack_before_fsync is the disk's)."""
    if bug not in (None, *BUGS):
        raise ValueError(f"unknown bug {bug!r}")
    patches = []
    if bug == "newleader_ack_before_durable":
        patches = [(Learner, "_ack_newleader_if_durable", _ack_newleader_at_once)]
    elif bug == "serve_before_quorum_synced":
        patches = [(Leader, "_try_establish", _serve_alone),
                   (Leader, "_quorum_acked", _commit_alone)]
    saved = [(cls, name, getattr(cls, name)) for cls, name, _ in patches]
    for cls, name, fn in patches:
        setattr(cls, name, fn)
    try:
        yield
    finally:
        for cls, name, fn in saved:
            setattr(cls, name, fn)
