"""Offline tools on a stopped server's data: `log dump`, `snapshot dump`, `import-zookeeper`.

`register(main)` adds them to the `zkcompat` click group (idempotent; an existing `log` or
`snapshot` group of the same name gets the subcommands); cli/main.py does so.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from pathlib import Path

import click

from zkcompat import config as zkconfig
from zkcompat.cli import logfmt
from zkcompat.store.progress import LogProgress

_DIR = click.Path(file_okay=False, path_type=Path)
_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)

log = logging.getLogger(__name__)


class _Zxid(click.ParamType):
    name = "zxid"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        try:
            return int(value, 0)
        except ValueError:
            self.fail(f"{value!r} is not a zxid (0x1f00000002 or a decimal number)", param, ctx)


ZXID = _Zxid()


def _dirs(config_path: Path | None, data_dir: Path | None, data_log_dir: Path | None):
    """dataDir and dataLogDir from the options, else from zoo.cfg, else ./data."""
    cfg = None
    if config_path is not None:
        try:
            cfg = zkconfig.load(config_path)
        except zkconfig.ConfigError as e:
            raise click.ClickException(f"bad configuration: {e}") from None
    if data_dir is None:
        data_dir = cfg.data_dir if cfg is not None else Path("data")
    if data_log_dir is None and cfg is not None:
        data_log_dir = cfg.data_log_dir
    return data_dir, data_log_dir


def _open_store(kind: str, path: Path, opener):
    if not path.is_dir():
        raise click.ClickException(f"no zkcompat {kind} at {path} (is --data-dir right?)")
    import plyvel  # noqa: PLC0415 - only the store tools need it

    try:
        return opener(path)
    except plyvel.IOError as e:
        raise click.ClickException(
            f"cannot open the {kind} at {path}: {e}. Is a zkcompat server running on this "
            "dataDir? These tools read a stopped server's data.") from None


def _config_options(f):
    f = click.option("--data-log-dir", type=_DIR, help="dataLogDir, if not dataDir.")(f)
    f = click.option("--data-dir", type=_DIR, help="dataDir (default: from --config, else ./data).")(f)
    f = click.option("--config", "config_path", type=_FILE, help="Read dataDir/dataLogDir from this zoo.cfg.")(f)
    return f


# -- log dump -----------------------------------------------------------------------------


@click.group("log")
def log_group() -> None:
    """The txn log."""


@log_group.command("dump")
@_config_options
@click.option("--from-zxid", type=ZXID, default=0, help="Start after this zxid.")
@click.option("--limit", type=click.IntRange(min=1), help="Print at most this many txns.")
@click.option("--zookeeper-file", type=_FILE,
              help="Dump this Apache ZooKeeper log.<zxid> file instead.")
def log_dump(config_path, data_dir, data_log_dir, from_zxid, limit, zookeeper_file) -> None:
    """One line per txn: time, session, cxid, zxid, type, details (like ZooKeeper's
    TxnLogToolkit). Exits 1 if any entry is corrupt (it is listed, and the dump goes on)."""
    from zkcompat.store import dump  # noqa: PLC0415

    if zookeeper_file is not None:
        _dump_zookeeper_log(zookeeper_file, from_zxid, limit)
        return
    from zkcompat.store.txnlog import LogCorruption, TxnLog, decode_entry  # noqa: PLC0415

    data_dir, data_log_dir = _dirs(config_path, data_dir, data_log_dir)
    root = (data_log_dir or data_dir) / "zkcompat" / "txnlog"
    txnlog = _open_store("txn log", root, TxnLog)
    n = bad = 0
    try:
        for zxid, value in txnlog.entries(from_zxid):
            if limit is not None and n >= limit:
                break
            n += 1
            try:
                click.echo(dump.format_txn(decode_entry(zxid, value)))
            except LogCorruption as e:
                bad += 1
                click.echo(f"CORRUPT zxid 0x{zxid:x}: {e}")
    finally:
        txnlog.close()
    click.echo(f"{n} txns, {bad} corrupt", err=True)
    if bad:
        sys.exit(1)


def _dump_zookeeper_log(path: Path, from_zxid: int, limit: int | None) -> None:
    from zkcompat.store import dump, zkformat  # noqa: PLC0415

    try:
        lf = zkformat.read_log_file(path)
        n = 0
        for rec in lf.records:
            txn = zkformat.decode_zk_txn(rec.txn_bytes)
            if txn.zxid <= from_zxid:
                continue
            if limit is not None and n >= limit:
                break
            n += 1
            click.echo(dump.format_txn(txn))
    except zkformat.ZkFormatError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"{n} txns; dbid 0x{lf.dbid:x}; reading stopped at offset {lf.end_offset} "
               f"({lf.end_reason})", err=True)


# -- snapshot dump ------------------------------------------------------------------------


@click.group("snapshot")
def snapshot_group() -> None:
    """Snapshots of the tree."""


@snapshot_group.command("dump")
@_config_options
@click.option("--zxid", type=ZXID, help="The snapshot that starts at this zxid (default: newest).")
@click.option("--list", "list_only", is_flag=True, help="List the snapshots' zxids only.")
@click.option("--data", "with_data", is_flag=True, help="Print each znode's data (base64).")
@click.option("--zookeeper-file", type=_FILE,
              help="Dump this Apache ZooKeeper snapshot.<zxid>[.gz|.snappy] file instead.")
def snapshot_dump(config_path, data_dir, data_log_dir, zxid, list_only, with_data,
                  zookeeper_file) -> None:
    """Every znode with its Stat and data length, then the sessions (like ZooKeeper's
    SnapshotFormatter)."""
    from zkcompat.store import dump  # noqa: PLC0415

    if zookeeper_file is not None:
        from zkcompat.store import importer, zkformat  # noqa: PLC0415

        try:
            tree = importer.tree_from_snapshot(zkformat.read_snapshot(zookeeper_file))
        except zkformat.ZkFormatError as e:
            raise click.ClickException(str(e)) from None
        for line in dump.format_snapshot(tree, f"ZooKeeper snapshot {zookeeper_file}",
                                         with_data):
            click.echo(line)
        return
    from zkcompat.store.snapshot import SnapshotCorruption, SnapshotStore  # noqa: PLC0415

    data_dir, _ = _dirs(config_path, data_dir, data_log_dir)
    root = data_dir / "zkcompat" / "snapshots"
    store = _open_store("snapshot store", root, SnapshotStore)
    try:
        zxids = store.zxids()
        if list_only:
            for z in zxids:
                click.echo(f"0x{z:x}")
            return
        if not zxids:
            raise click.ClickException(f"no complete snapshot in {root}")
        if zxid is None:
            zxid = zxids[0]
        elif zxid not in zxids:
            raise click.ClickException(f"no snapshot at zxid 0x{zxid:x}; there are: "
                                       + ", ".join(f"0x{z:x}" for z in zxids))
        try:
            tree = store.load(zxid)
        except SnapshotCorruption as e:
            raise click.ClickException(str(e)) from None
    finally:
        store.close()
    for line in dump.format_snapshot(tree, f"zkcompat snapshot 0x{zxid:x} in {root}", with_data):
        click.echo(line)


# -- import-zookeeper ---------------------------------------------------------------------


class _Progress:
    """Progress in the log (event=import_progress, at most every few seconds), and click
    progress bars, one per phase, when stdout is a terminal."""

    def __init__(self) -> None:
        self.enabled = sys.stdout.isatty()
        self._bar = None
        self._phase = None
        self._stack = contextlib.ExitStack()
        self._logged: dict[str, LogProgress] = {}

    def __call__(self, phase: str, done: int, total: int) -> None:
        unit = "bytes" if phase == "snapshot" else "files"
        if phase not in self._logged:
            self._logged[phase] = LogProgress(log, "import_progress",
                                              f"phase={phase} unit={unit}")
        self._logged[phase](done, total)
        if not self.enabled:
            return
        if phase != self._phase:
            self.close()
            self._phase = phase
            label = "reading snapshot" if phase == "snapshot" else "replaying log files"
            self._bar = self._stack.enter_context(click.progressbar(length=max(total, 1),
                                                                    label=label))
        bar = self._bar
        bar.update(done - bar.pos)

    def close(self) -> None:
        self._stack.close()
        self._stack = contextlib.ExitStack()
        self._bar = None


@click.command("import-zookeeper")
@click.argument("zk_data_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--data-dir", "out_dir", type=_DIR, required=True,
              help="The new zkcompat dataDir to write (must not hold zkcompat data yet).")
@click.option("--zk-log-dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="ZooKeeper's dataLogDir, if it is not its dataDir.")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(logfmt.LEVELS, case_sensitive=False))
def import_zookeeper(zk_data_dir, out_dir, zk_log_dir, log_level) -> None:
    """Import a stopped Apache ZooKeeper's dataDir (version-2/snapshot.* and log.*): the
    newest valid snapshot plus every logged txn after it becomes a zkcompat snapshot."""
    from zkcompat.store import importer  # noqa: PLC0415

    logfmt.setup(log_level, "text", sys.stderr)
    progress = _Progress()
    try:
        result = importer.import_zookeeper(zk_data_dir, out_dir, zk_log_dir, progress)
    except importer.ImportFailed as e:
        raise click.ClickException(str(e)) from None
    finally:
        progress.close()
    for problem in result.skipped_snapshots:
        click.echo(f"skipped an invalid snapshot: {problem}", err=True)
    snap = result.snapshot_file.name if result.snapshot_file else "no snapshot"
    logs = (f"{len(result.log_files)} log files ({result.log_files[0].name} .. "
            f"{result.log_files[-1].name})" if result.log_files else "no log files")
    click.echo(f"imported {result.nodes} znodes and {result.sessions} sessions at zxid "
               f"0x{result.last_zxid:x}: {snap} (0x{result.snapshot_zxid:x}) + "
               f"{result.txns_applied} txns from {logs}")
    click.echo(f"wrote zkcompat snapshot 0x{result.written_zxid:x} to "
               f"{Path(out_dir) / 'zkcompat' / 'snapshots'}")


def register(main: click.Group) -> None:
    """Add the tools to the `zkcompat` group; safe to call more than once."""
    for group in (log_group, snapshot_group):
        existing = main.commands.get(group.name)
        if existing is None:
            main.add_command(group)
        elif existing is not group and isinstance(existing, click.Group):
            for name, cmd in group.commands.items():
                existing.commands.setdefault(name, cmd)
    main.commands.setdefault(import_zookeeper.name, import_zookeeper)
