"""When to snapshot: after a randomised snapCount of applied txns, one at a time, in the
background (fuzzy, sliced), then purge per autopurge.snapRetainCount when enabled."""

import asyncio
import logging
import random
import time
from concurrent.futures import ThreadPoolExecutor

from zkcompat.store.datadir import DataDir, snap_threshold
from zkcompat.tree.datatree import DataTree

log = logging.getLogger(__name__)


class Snapshotter:
    def __init__(self, tree: DataTree, datadir: DataDir, snap_count: int, retain: int,
                 purge: bool, rng: random.Random | None = None):
        self.tree = tree
        self.datadir = datadir
        self.snap_count = snap_count
        self.retain = retain
        self.purge_enabled = purge
        self.rng = rng or random.Random()
        self._since = 0
        self._threshold = snap_threshold(snap_count, self.rng)
        self._task: asyncio.Task | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshot")
        self.last = None  # (start zxid, nodes, seconds) of the last snapshot

    def txn_applied(self, n: int = 1) -> None:
        self._since += n
        if self._since >= self._threshold and self._task is None:
            self._since = 0
            self._threshold = snap_threshold(self.snap_count, self.rng)
            self._task = asyncio.get_running_loop().create_task(self.take())

    async def take(self) -> None:
        t0 = time.monotonic()
        try:
            zxid, nodes = await self.datadir.snapshots.write(self.tree, self._executor)
            self.last = (zxid, nodes, time.monotonic() - t0)
            log.info("event=snapshot_written zxid=0x%x nodes=%d seconds=%.3f", zxid, nodes,
                     self.last[2])
            if self.purge_enabled:
                await asyncio.get_running_loop().run_in_executor(
                    self._executor, self.datadir.purge, self.retain)
        except Exception:
            # A failed snapshot loses nothing (the log still has every txn); say so loudly.
            log.exception("event=snapshot_failed")
        finally:
            self._task = None

    def close(self) -> None:
        self._executor.shutdown(wait=True)
