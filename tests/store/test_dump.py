"""`zkcompat log dump`, `snapshot dump` and the import command's errors, run in-process
through click on dataDirs written by the store itself."""

from __future__ import annotations

import asyncio

import click
import plyvel
import pytest
from click.testing import CliRunner

from zkcompat.cli import tools as cli_tools
from zkcompat.jute import records as r
from zkcompat.jute.constants import Code, OpCode
from zkcompat.store import dump
from zkcompat.store.datadir import DataDir
from zkcompat.store.txnlog import txn_key
from zkcompat.tree.datatree import DataTree, ZNode
from zkcompat.tree.txn import Txn

from .test_snapshot import Writer

WORLD = [r.ACL(31, r.Id("world", "anyone"))]


def tool_group() -> click.Group:
    group = click.Group("zkcompat")
    cli_tools.register(group)
    return group


def run(*args: str):
    return CliRunner().invoke(tool_group(), list(args), catch_exceptions=False)


def make_datadir(path, steps_before_snap=(60, 60), steps_after=40, seed=11):
    """A dataDir as a server leaves it: snapshots after each count, the whole log."""
    dd = DataDir(path)
    tree = DataTree()
    w = Writer(tree, seed)

    async def log_all(txns):
        dd.txnlog.append(txns)
        await dd.txnlog.sync()

    done = 0
    snaps = []
    for n in steps_before_snap:
        for _ in range(n):
            w.step()
        asyncio.run(log_all(w.txns[done:]))
        done = len(w.txns)
        snaps.append(dd.snapshots.write_sync(tree))
    for _ in range(steps_after):
        w.step()
    asyncio.run(log_all(w.txns[done:]))
    dd.close()
    return tree, w.txns, snaps


def test_log_dump_prints_one_line_per_txn(tmp_path):
    _, txns, _ = make_datadir(tmp_path)
    res = run("log", "dump", "--data-dir", str(tmp_path))
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert len(lines) == len(txns)
    for line, t in zip(lines, txns, strict=True):
        assert f" zxid 0x{t.zxid:x} " in line
        assert f" {dump.op_name(t.hdr.type)} " in line
        assert line.startswith("1970-01-01T")  # Writer's txn times are small
    assert f"{len(txns)} txns, 0 corrupt" in res.stderr


def test_log_dump_from_zxid_and_limit(tmp_path):
    _, txns, _ = make_datadir(tmp_path)
    res = run("log", "dump", "--data-dir", str(tmp_path), "--from-zxid", "0x10", "--limit", "5")
    assert res.exit_code == 0, res.output
    assert [ln.split(" zxid ")[1].split()[0] for ln in res.stdout.splitlines()] == \
        [f"0x{z:x}" for z in range(0x11, 0x16)]


def test_log_dump_lists_a_corrupt_entry_and_fails(tmp_path):
    _, txns, _ = make_datadir(tmp_path)
    db = plyvel.DB(str(tmp_path / "zkcompat" / "txnlog"))
    v = bytearray(db.get(txn_key(30)))
    v[len(v) // 2] ^= 0x20
    db.put(txn_key(30), bytes(v))
    db.close()
    res = run("log", "dump", "--data-dir", str(tmp_path))
    assert res.exit_code == 1
    assert "CORRUPT zxid 0x1e: txn 0x1e: checksum mismatch" in res.stdout
    assert len(res.stdout.splitlines()) == len(txns)  # the dump goes on past it


def test_log_dump_reads_data_log_dir_from_zoo_cfg(tmp_path):
    data, logs = tmp_path / "data", tmp_path / "logs"
    dd = DataDir(data, logs)
    txn = Txn(r.TxnHeader(5, 1, 1, 1000, OpCode.CREATE), r.CreateTxn("/x", b"v", WORLD, False, 1))

    async def go():
        dd.txnlog.append([txn])
        await dd.txnlog.sync()

    asyncio.run(go())
    dd.close()
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(f"dataDir={data}\ndataLogDir={logs}\n")
    res = run("log", "dump", "--config", str(cfg))
    assert res.exit_code == 0, res.output
    assert res.stdout == ("1970-01-01T00:00:01.000Z session 0x5 cxid 0x1 zxid 0x1 create "
                          "/x,'v',[31,world:anyone],persistent,parentCVersion=1\n")


def test_snapshot_dump_newest_older_and_list(tmp_path):
    tree, _, snaps = make_datadir(tmp_path)
    res = run("snapshot", "dump", "--data-dir", str(tmp_path), "--list")
    assert res.stdout.split() == [f"0x{z:x}" for z in reversed(snaps)]
    newest = run("snapshot", "dump", "--data-dir", str(tmp_path))
    assert newest.exit_code == 0, newest.output
    out = newest.stdout.splitlines()
    assert out[0].startswith(f"zkcompat snapshot 0x{snaps[-1]:x}")
    assert f"Snapshot zxid: 0x{snaps[-1]:x} (log replay continues after it)" == out[-1]
    older = run("snapshot", "dump", "--data-dir", str(tmp_path), "--zxid", str(snaps[0]))
    assert older.stdout.splitlines()[0].startswith(f"zkcompat snapshot 0x{snaps[0]:x}")
    assert older.stdout != newest.stdout
    missing = run("snapshot", "dump", "--data-dir", str(tmp_path), "--zxid", "0x999")
    assert missing.exit_code == 1 and "no snapshot at zxid 0x999" in missing.output


def test_snapshot_dump_shows_every_znode_with_its_stat(tmp_path):
    tree = DataTree()
    tree.apply(Txn(r.TxnHeader(7, 0, 1, 1000, OpCode.CREATE_SESSION), r.CreateSessionTxn(4000)))
    tree.apply(Txn(r.TxnHeader(7, 1, 2, 2000, OpCode.CREATE),
                   r.CreateTxn("/a", b"hello", WORLD, False, 1)))
    tree.apply(Txn(r.TxnHeader(7, 2, 3, 3000, OpCode.CREATE),
                   r.CreateTxn("/a/e", None, WORLD, True, 1)))
    tree.apply(Txn(r.TxnHeader(7, 3, 4, 4000, OpCode.SET_DATA), r.SetDataTxn("/a", b"bye!!", 1)))
    dd = DataDir(tmp_path)
    dd.snapshots.write_sync(tree)
    dd.close()
    res = run("snapshot", "dump", "--data-dir", str(tmp_path), "--data")
    assert res.exit_code == 0, res.output
    text = res.stdout
    block = text.split("----\n/a\n")[1].split("----")[0]
    assert block == ("  cZxid = 0x2\n  ctime = 1970-01-01T00:00:02.000Z\n  mZxid = 0x4\n"
                     "  mtime = 1970-01-01T00:00:04.000Z\n  pZxid = 0x3\n  cversion = 1\n"
                     "  dataVersion = 1\n  aclVersion = 0\n  ephemeralOwner = 0x0\n"
                     "  dataLength = 5\n  numChildren = 1\n  acl = [31,world:anyone]\n"
                     "  data = YnllISE=\n")
    assert "----\n/a/e\n" in text and "  ephemeralOwner = 0x7\n" in text
    assert "  data = null\n" in text  # null data is not empty data
    assert "Session Details (sid, timeout, ephemeralCount):\n0x0000000000000007, 4000, 1\n" in text
    assert "nodes: 6, sessions: 1" in text


def test_tools_refuse_a_running_servers_datadir(tmp_path):
    make_datadir(tmp_path)
    held = plyvel.DB(str(tmp_path / "zkcompat" / "txnlog"))  # as a running server holds it
    try:
        res = run("log", "dump", "--data-dir", str(tmp_path))
    finally:
        held.close()
    assert res.exit_code == 1
    assert "Is a zkcompat server running on this dataDir?" in res.output


def test_tools_refuse_a_missing_store(tmp_path):
    res = run("snapshot", "dump", "--data-dir", str(tmp_path))
    assert res.exit_code == 1 and "no zkcompat snapshot store" in res.output
    assert not (tmp_path / "zkcompat").exists()  # looking created nothing


def test_import_command_errors_are_one_line_and_exit_1(tmp_path):
    res = run("import-zookeeper", str(tmp_path), "--data-dir", str(tmp_path / "out"))
    assert res.exit_code == 1
    assert "has no version-2 directory" in res.output
    assert "Traceback" not in res.output


def test_register_is_idempotent_and_joins_existing_groups():
    group = click.Group("zkcompat")

    @group.group("snapshot")
    def snapshot() -> None:
        pass

    @snapshot.command("restore")
    def restore() -> None:
        pass

    cli_tools.register(group)
    cli_tools.register(group)
    assert sorted(group.commands) == ["import-zookeeper", "log", "snapshot"]
    assert sorted(group.commands["snapshot"].commands) == ["dump", "restore"]


@pytest.mark.parametrize("txn,expected", [
    (Txn(r.TxnHeader(1, 2, 3, 0, OpCode.DELETE), r.DeleteTxn("/d")), "delete /d"),
    (Txn(r.TxnHeader(1, 2, 3, 0, OpCode.ERROR), r.ErrorTxn(Code.NONODE)), "error NONODE"),
    (Txn(r.TxnHeader(1, 2, 3, 0, OpCode.CLOSE_SESSION), r.CloseSessionTxn(["/e1", "/e2"])),
     "closeSession ephemerals=[/e1 /e2]"),
    (Txn(r.TxnHeader(1, 2, 3, 0, OpCode.SET_ACL), r.SetACLTxn("/s", WORLD, 4)),
     "setACL /s,[31,world:anyone],version=4"),
    (Txn(r.TxnHeader(1, 2, 3, 0, OpCode.CREATE_TTL), r.CreateTTLTxn("/t", b"\xff", WORLD, 2, 60)),
     "createTTL /t,0xff,[31,world:anyone],parentCVersion=2,ttl=60"),
    (Txn(r.TxnHeader(1, 2, 3, 0, OpCode.MULTI), [
        (OpCode.CHECK, r.CheckVersionTxn("/c", 1)),
        (OpCode.SET_DATA, r.SetDataTxn("/c", b"x" * 70, 2))]),
     "multi check:/c,version=1;setData:/c,'" + "x" * 64 + "'...(+6 bytes),version=2"),
    # a lone surrogate (a store could hold one, though no client can send it): escaped
    (Txn(r.TxnHeader(1, 2, 3, 0, OpCode.DELETE), r.DeleteTxn("/\u00e9\udc80")),
     "delete /\u00e9\\udc80"),
])
def test_txn_details(txn, expected):
    assert dump.format_txn(txn).split(" zxid 0x3 ", 1)[1] == expected


def test_znode_with_a_lone_surrogate_in_its_path_and_acl_prints():
    node = ZNode(b"x", ((31, "digest", "u\udc80:p"),), 2, 2000, 0)
    lines = dump.format_znode("/a\udc80", node)
    assert lines[1] == "/a\\udc80"
    assert "  acl = [31,digest:u\\udc80:p]" in lines
    "\n".join(lines).encode("utf-8")  # what click.echo does with them
