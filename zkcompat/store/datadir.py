"""A server's data directory: txn log + snapshots, and recovery from them.

Recovery = the newest snapshot that loads and whose log continuation is complete, then
replay of every txn after its start zxid (replay is idempotent, which is what makes a
fuzzy snapshot exact). A torn log tail is cut off; anything else broken stops start-up
with a message that names it and says what to do.
"""

import logging
import random
from pathlib import Path

from zkcompat.store.progress import LogProgress
from zkcompat.store.snapshot import SnapshotCorruption, SnapshotStore
from zkcompat.store.txnlog import LogCorruption, TxnLog
from zkcompat.tree.datatree import DataTree

log = logging.getLogger(__name__)

COUNTER_MASK = 0xFFFFFFFF
REPLAY_PROGRESS_EVERY_TXNS = 10_000  # how often replay asks LogProgress whether to log


class RecoveryError(Exception):
    pass


def _follows(prev: int, nxt: int) -> bool:
    """zxids are contiguous within an epoch, and a new epoch starts at counter 1."""
    return nxt == prev + 1 or (nxt >> 32 > prev >> 32 and nxt & COUNTER_MASK == 1)


class DataDir:
    def __init__(self, data_dir: Path, log_dir: Path | None = None, sync: bool = True):
        self.root = Path(data_dir) / "zkcompat"
        log_root = Path(log_dir) / "zkcompat" if log_dir is not None else self.root
        self.txnlog = TxnLog(log_root / "txnlog", sync=sync)
        self.snapshots = SnapshotStore(self.root / "snapshots")

    def close(self) -> None:
        self.txnlog.close()
        self.snapshots.close()

    def recover(self, progress=None) -> DataTree:
        self.snapshots.delete_orphans()
        problems = []
        for zxid in self.snapshots.zxids():
            try:
                tree = self.snapshots.load(zxid, progress or LogProgress(
                    log, "snapshot_load_progress", f"zxid=0x{zxid:x}"))
            except SnapshotCorruption as e:
                log.error("event=snapshot_invalid zxid=0x%x reason=%r action=try_older", zxid, str(e))
                problems.append(str(e))
                continue
            log.info("event=snapshot_loaded zxid=0x%x nodes=%d", zxid, len(tree.nodes))
            return self._replay(tree, problems)
        if problems:
            # Every snapshot is bad: the log alone is enough only if it goes back to zxid 1.
            first = next(self.txnlog.entries(0), None)
            if first is not None and first[0] & COUNTER_MASK != 1:
                raise RecoveryError(
                    f"no valid snapshot ({'; '.join(problems)}) and the txn log starts at "
                    f"0x{first[0]:x}, so it cannot rebuild the tree. Restore the dataDir from a "
                    "backup, or remove it and let this server resync from the ensemble.")
        return self._replay(DataTree(), problems)

    def _replay(self, tree: DataTree, problems: list[str]) -> DataTree:
        start = prev = tree.last_processed_zxid
        n = 0
        # The log's length is not known before reading it: progress shows txns and zxid.
        replay_progress = LogProgress(log, "log_replay_progress", f"from=0x{start:x}")
        try:
            for txn in self.txnlog.read_from(start):
                if prev and not _follows(prev, txn.zxid):
                    raise RecoveryError(
                        f"txn log has a gap: 0x{prev:x} is followed by 0x{txn.zxid:x}. "
                        + ("Snapshot problems: " + "; ".join(problems) + ". " if problems else "")
                        + "Restore the dataDir from a backup, or remove it and let this server "
                        "resync from the ensemble.")
                try:
                    tree.apply(txn)
                except Exception as e:
                    raise RecoveryError(
                        f"applying txn 0x{txn.zxid:x} ({txn!r}) failed: {e!r}. This is a "
                        "zkcompat bug; keep this dataDir for the report and restore from a "
                        "backup or another server's copy.") from e
                prev = txn.zxid
                n += 1
                if n % REPLAY_PROGRESS_EVERY_TXNS == 0:
                    replay_progress(n, 0)
        except LogCorruption as e:
            raise RecoveryError(f"txn log is corrupt: {e}") from None
        log.info("event=log_replayed from=0x%x to=0x%x txns=%d", start, tree.last_processed_zxid, n)
        return tree

    def purge(self, retain: int) -> None:
        """Keep the newest `retain` snapshots and the log from the oldest of them on."""
        zxids = self.snapshots.zxids()
        for zxid in zxids[retain:]:
            self.snapshots.delete(zxid)
        if len(zxids) >= retain:
            oldest_kept = zxids[:retain][-1]
            n = self.txnlog.purge_before(oldest_kept + 1)
            log.info("event=purged snapshots=%d log_entries=%d kept_from=0x%x",
                     max(0, len(zxids) - retain), n, oldest_kept)


def snap_threshold(snap_count: int, rng: random.Random) -> int:
    """ZooKeeper randomises each server's snapshot point so an ensemble does not
    snapshot all at once: snapCount/2 + rand(snapCount/2)."""
    half = max(1, snap_count // 2)
    return half + rng.randrange(half)
