"""The committed txns a leader syncs its learners from, and how it picks DIFF, TRUNC or SNAP
for one (LearnerHandler.syncFollower).

Two sources: the durable log on disk, read through the `history` object the shell passes
in, and in memory the newest committed txns (ZooKeeper's committedLog, commitLogCount of
them). Ours also keeps every committed txn its own log has not made durable yet, however
many: a quorum of followers can commit a txn before the leader's fsync returns, and a DIFF
read from the durable log alone would skip it."""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from operator import attrgetter

from zkcompat.tree.txn import Txn
from zkcompat.zab.peer import COUNTER_MASK

# zookeeper.commitLogCount: committed txns kept in memory to sync learners from.
COMMIT_LOG_COUNT = 500
_ZXID_OF = attrgetter("zxid")


class CommittedLog:
    __slots__ = ("history", "recent")

    def __init__(self, history=None):
        self.history = history  # None: no log to read, every learner not level gets a SNAP
        self.recent: deque[Txn] = deque()  # in zxid order

    def add(self, committed: list[Txn], durable: int) -> None:
        """Txns just committed, in zxid order; `durable` is the zxid our log has on disk."""
        recent = self.recent
        recent.extend(committed)
        while len(recent) > COMMIT_LOG_COUNT and recent[0].zxid <= durable:
            recent.popleft()

    def sync_mode(self, peer: int, committed: int) -> str:
        """"diff", "trunc" or "snap" for a learner whose last zxid is `peer`, when ours
        committed is `committed`."""
        if peer == committed:
            return "diff"
        h = self.history
        if h is None:
            return "snap"
        if peer > committed:
            # A zxid that only opens an epoch (counter 0) is in no log: a server that led
            # that epoch and wrote nothing says it. ZooKeeper sends it a SNAP, not a TRUNC
            # (LearnerHandler.syncFollower's isPeerNewEpochZxid), which a ZooKeeper with no
            # txn log cannot obey: it exits ("No log files found to truncate").
            return "snap" if peer & COUNTER_MASK == 0 else "trunc"
        first = h.first_zxid()
        if first is None and self.recent:
            first = self.recent[0].zxid
        if first is None or peer < first:
            return "snap"
        return "diff" if self._contains(peer) else "trunc"

    def _contains(self, zxid: int) -> bool:
        recent = self.recent
        if recent and recent[0].zxid <= zxid:
            i = bisect_right(recent, zxid, key=_ZXID_OF)
            return i > 0 and recent[i - 1].zxid == zxid
        return self.history.contains(zxid)

    def floor(self, zxid: int) -> int:
        """The highest committed zxid at or below `zxid`: where a TRUNC cuts a learner."""
        recent = self.recent
        if recent and recent[0].zxid <= zxid:
            return recent[bisect_right(recent, zxid, key=_ZXID_OF) - 1].zxid
        return self.history.floor(zxid)

    def between(self, after: int, upto: int) -> list[Txn]:
        """Committed txns in (after, upto]: the durable log up to where the in-memory ones
        start, which hold every committed txn not yet durable here."""
        recent = self.recent
        start = recent[0].zxid if recent else upto + 1
        txns = list(self.history.txns_between(after, min(upto, start - 1))) if after < start else []
        txns += [t for t in recent if after < t.zxid <= upto]
        return txns


class Snap:
    """A send of the whole tree as a SNAP: the shell streams it in ZooKeeper's format."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Snap()"


SNAP = Snap()
