"""A txn log that keeps nothing across restarts: the log of the foundation, until the
LevelDB log (the durability issue) takes its place behind the same two calls.

The interface is the group-commit one: `append` gathers txns, `sync` makes everything
appended so far durable and returns the highest zxid it covers.
"""

from zkcompat.tree.txn import Txn


class VolatileTxnLog:
    durable = False

    def __init__(self):
        self.last_zxid = 0
        self._unsynced = 0

    def append(self, txns: list[Txn]) -> None:
        for txn in txns:
            assert txn.zxid > self.last_zxid, "txn log must grow in zxid order"
            self.last_zxid = txn.zxid
        self._unsynced += len(txns)

    async def sync(self) -> int:
        self._unsynced = 0
        return self.last_zxid

    @property
    def has_unsynced(self) -> bool:
        return self._unsynced > 0
