"""Turn a real ZooKeeper dataDir into a zkcompat one: the newest valid snapshot, then every
logged txn after it through DataTree.apply, written out as one zkcompat snapshot.

Recovery the way FileTxnSnapLog.restore does it: an invalid newest snapshot falls back to
an older one; a log that does not continue the snapshot (a gap in zxids) stops the import,
since the tree it would give is not the one ZooKeeper had.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from zkcompat.store import zkformat
from zkcompat.store.snapshot import SnapshotStore
from zkcompat.store.zkformat import ZkFormatError
from zkcompat.tree.datatree import DataTree

log = logging.getLogger(__name__)

COUNTER_MASK = 0xFFFFFFFF

# progress(phase, done, total): phase is "snapshot" (bytes) or "log" (log files).
Progress = Callable[[str, int, int], None]


class ImportFailed(Exception):
    """The ZooKeeper dataDir cannot be imported; the message says why and what to do."""


@dataclass
class ImportResult:
    snapshot_file: Path | None
    snapshot_zxid: int
    last_zxid: int
    nodes: int
    sessions: int
    txns_applied: int
    log_files: list[Path] = field(default_factory=list)
    skipped_snapshots: list[str] = field(default_factory=list)
    written_zxid: int = 0


def _follows(prev: int, nxt: int) -> bool:
    """zxids are contiguous within an epoch, and a new epoch starts at counter 1."""
    return nxt == prev + 1 or (nxt >> 32 > prev >> 32 and nxt & COUNTER_MASK == 1)


def tree_from_snapshot(snap: zkformat.ZkSnapshot) -> DataTree:
    """A DataTree holding exactly the snapshot's nodes and sessions; cversion stays as
    ZooKeeper stores it (the number of creates), which is what ZNode keeps too. The tree
    takes the snapshot's ZNodes themselves: read the file again for a second tree."""
    tree = DataTree()
    tree.nodes = nodes = dict(snap.nodes)
    if "/" not in nodes:
        raise ZkFormatError(f"{snap.path.name}: no root node")
    for path in nodes:
        if path != "/":
            parent = path.rsplit("/", 1)[0] or "/"
            if parent not in nodes:  # DataTree.deserialize: "Invalid Datatree"
                raise ZkFormatError(f"{snap.path.name}: node {path} has no parent {parent}")
    tree.sessions = dict(snap.sessions)
    tree.last_processed_zxid = snap.zxid
    tree.rebuild_indexes()
    return tree


def load_newest_snapshot(data_dir: Path, progress: Progress | None = None,
                         skipped: list[str] | None = None) -> tuple[DataTree, Path | None]:
    """The tree of the newest snapshot that parses and whose seals check, as ZooKeeper's
    FileSnap.deserialize picks it; an empty tree if there is no snapshot at all."""
    files = zkformat.snapshot_files(data_dir)
    problems = []
    for zxid, path in files:
        try:
            snap = zkformat.read_snapshot(
                path, None if progress is None else lambda d, t: progress("snapshot", d, t))
            tree = tree_from_snapshot(snap)
        except ZkFormatError as e:
            log.warning("event=zookeeper_snapshot_invalid file=%s reason=%r action=try_older",
                        path.name, str(e))
            problems.append(str(e))
            if skipped is not None:
                skipped.append(str(e))
            continue
        log.info("event=zookeeper_snapshot_loaded file=%s zxid=0x%x nodes=%d sessions=%d",
                 path.name, zxid, len(tree.nodes), len(tree.sessions))
        return tree, path
    if problems:
        raise ImportFailed("no valid ZooKeeper snapshot: " + "; ".join(problems))
    return DataTree(), None


def build_tree(data_dir: Path, log_dir: Path | None = None,
               progress: Progress | None = None) -> tuple[DataTree, ImportResult]:
    """Replay a ZooKeeper dataDir (and dataLogDir) into a DataTree."""
    data_dir = Path(data_dir)
    log_dir = Path(log_dir) if log_dir is not None else data_dir
    if not zkformat.version_dir(data_dir).is_dir():
        raise ImportFailed(f"{data_dir} has no {zkformat.VERSION_DIR} directory: not a "
                           "ZooKeeper dataDir (pass the directory zoo.cfg's dataDir names)")
    skipped: list[str] = []
    try:
        tree, snap_path = load_newest_snapshot(data_dir, progress, skipped)
    except ZkFormatError as e:
        raise ImportFailed(str(e)) from None
    start = prev = tree.last_processed_zxid
    files = zkformat.logs_from(log_dir, start + 1)
    if snap_path is None and not files:
        raise ImportFailed(f"{zkformat.version_dir(data_dir)} holds neither snapshot.* nor "
                           "log.* files: nothing to import")
    n = 0
    used = []
    try:
        for i, (_, path) in enumerate(files):
            if progress is not None:
                progress("log", i, len(files))
            used.append(path)
            lf = zkformat.read_log_file(path)
            if lf.end_reason == "partial record":
                log.warning("event=zookeeper_log_partial_record file=%s offset=%d "
                            "action=stop_reading_file", path.name, lf.end_offset)
            for rec in lf.records:
                try:
                    txn = zkformat.decode_zk_txn(rec.txn_bytes)
                except ZkFormatError as e:
                    raise ZkFormatError(f"{path.name}: record at offset {rec.offset}: {e}") \
                        from None
                zxid = txn.zxid
                if zxid <= prev:
                    continue  # before the snapshot (it is fuzzy: its log overlaps)
                if not _follows(prev, zxid):
                    raise ImportFailed(
                        f"the ZooKeeper log jumps from zxid 0x{prev:x} to 0x{zxid:x} "
                        f"({path.name}, offset {rec.offset}): txns are missing, so the tree "
                        "would not be the one ZooKeeper had. Import a dataDir with every "
                        f"log file from the snapshot (0x{start:x}) on.")
                tree.apply(txn)
                prev = zxid
                n += 1
        if progress is not None:
            progress("log", len(files), len(files))
    except ZkFormatError as e:
        raise ImportFailed(f"ZooKeeper txn log: {e}") from None
    result = ImportResult(snap_path, start, tree.last_processed_zxid, len(tree.nodes),
                          len(tree.sessions), n, used, skipped)
    log.info("event=zookeeper_log_replayed from=0x%x to=0x%x txns=%d files=%d", start,
             tree.last_processed_zxid, n, len(used))
    return tree, result


def zkcompat_data_present(out_dir: Path) -> bool:
    root = Path(out_dir) / "zkcompat"
    return root.exists() and any(root.iterdir())


def import_zookeeper(zk_data_dir: Path, out_data_dir: Path, zk_log_dir: Path | None = None,
                     progress: Progress | None = None) -> ImportResult:
    """Import into out_data_dir/zkcompat, which must not hold zkcompat data yet (its txn log
    would continue a different history)."""
    out = Path(out_data_dir)
    if zkcompat_data_present(out):
        raise ImportFailed(f"{out}/zkcompat already holds zkcompat data; import into a new, "
                           "empty dataDir")
    tree, result = build_tree(zk_data_dir, zk_log_dir, progress)
    store = SnapshotStore(out / "zkcompat" / "snapshots")
    try:
        result.written_zxid = store.write_sync(tree)
    finally:
        store.close()
    return result
