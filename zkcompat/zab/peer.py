"""The ZAB peer as a sans-I/O state machine: proposals in, effects out.

Only the leader role of an ensemble of one exists so far (a standalone server is an
ensemble of one: it commits on its own durable write). Followers, elections and the
quorum ACK count arrive with replication; the effect contract below stays.

The shell must obey the order of an Effects value:
  1. persist: write these txns durably (fsync) before anything else of this value;
  2. send:    then send these messages to other peers;
  3. deliver: committed txns, in zxid order, to apply to the tree.
"""

from bisect import bisect_right
from operator import attrgetter

from zkcompat.tree.txn import Txn

EPOCH_SHIFT = 32
COUNTER_MASK = 0xFFFFFFFF
_ZXID_OF = attrgetter("zxid")


def make_zxid(epoch: int, counter: int) -> int:
    """zxid = epoch << 32 | counter, as ZooKeeper's ZxidUtils.makeZxid."""
    return (epoch << EPOCH_SHIFT) | (counter & COUNTER_MASK)


def zxid_epoch(zxid: int) -> int:
    return zxid >> EPOCH_SHIFT


class Effects:
    __slots__ = ("persist", "send", "deliver")

    def __init__(self, persist=None, send=None, deliver=None):
        self.persist: list[Txn] = persist or []
        self.send: list = send or []
        self.deliver: list[Txn] = deliver or []

    def __bool__(self) -> bool:
        return bool(self.persist or self.send or self.deliver)


class Peer:
    """Leader of an ensemble of one: quorum = itself, so a txn commits once it is durable."""

    def __init__(self, epoch: int, last_zxid: int = 0, quorum_size: int = 1):
        assert quorum_size == 1, "replication is not built yet"
        self.epoch = epoch
        start = last_zxid if zxid_epoch(last_zxid) == epoch else make_zxid(epoch, 0)
        self.last_proposed_zxid = start
        self.last_committed_zxid = start
        self._outstanding: list[Txn] = []  # proposed, not yet committed, in zxid order

    def next_zxid(self) -> int:
        """Reserve the next zxid for a txn the leader's prep is building."""
        zxid = self.last_proposed_zxid + 1
        assert zxid & COUNTER_MASK, "zxid counter overflow: a new epoch is needed"
        self.last_proposed_zxid = zxid
        return zxid

    def propose(self, txns: list[Txn]) -> Effects:
        """Txns the leader's prep built, in zxid order (one loop turn's worth): persist them."""
        outstanding = self._outstanding
        assert txns[0].zxid > (outstanding[-1].zxid if outstanding else self.last_committed_zxid)
        outstanding.extend(txns)
        return Effects(txns)

    def on_persisted(self, zxid: int) -> Effects:
        """Our own log has every txn up to `zxid` on disk: that is our ACK, and a quorum."""
        outstanding = self._outstanding
        i = bisect_right(outstanding, zxid, key=_ZXID_OF)  # zxid order: a binary search
        committed = outstanding[:i]
        del outstanding[:i]
        if committed:
            self.last_committed_zxid = committed[-1].zxid
        return Effects(deliver=committed)
