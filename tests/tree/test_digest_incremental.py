"""DataTree.digest: ZooKeeper's tree digest kept incrementally by apply (tree/digest.py's
rules), against two oracles.

- Recomputation: after every txn of random sequences of real txns (creates of every kind,
  sequential, under /zookeeper and its quota subtree, replayed over a fuzzy snapshot;
  deletes, setData, setACL, reconfig, check, error, multi that commits or fails, sessions
  opening and closing with their ephemerals), `tree.digest` is tree_digest(tree) computed
  from scratch, and every node's cached digest is node_digest.
- Real ZooKeeper 3.8: its txn log replayed through DataTree.apply gives, at every txn, the
  TxnDigest ZooKeeper logged with it (the workload of tests/store/test_zk_snapshot_writer,
  then closeSession of sessions with ephemerals, a failing multi, error txns and a quota).
- The switch: with the digest off, apply does no digest work at all; and every way a tree
  is assembled from a snapshot knows its digest.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from store.test_zk_snapshot_writer import (
    HAVE_ZOOKEEPER,
    TICK_TIME_MS,
    ZK_CFG,
    log_errors,
    needs_zookeeper,
    newest_snapshot,
    zookeeper_workload,
)

from conformance_tests.servers import start_zookeeper
from zkcompat.jute import records as r
from zkcompat.jute.constants import Code, OpCode
from zkcompat.store import zkformat
from zkcompat.store.importer import tree_from_snapshot
from zkcompat.store.snapshot import SnapshotStore
from zkcompat.tree import datatree
from zkcompat.tree.datatree import MAX_TTL_MS, DataTree, is_session_owner
from zkcompat.tree.digest import (
    DIGEST_VERSION,
    JAVA_LONG_MAX,
    JAVA_LONG_MIN,
    ZOOKEEPER_NODE_SUBTREE,
    as_java_long,
    node_digest,
    tree_digest,
)
from zkcompat.tree.quota import LIMIT_NODE, STATS_NODE
from zkcompat.tree.snapstream import SnapReader, snap_stream_chunks
from zkcompat.tree.txn import Txn, decode_txn_at

WORLD = [r.ACL(31, r.Id("world", "anyone"))]
READ = [r.ACL(1, r.Id("world", "anyone"))]
SESSIONS = (0x0100000012340001, 0x0100000012340002, 0x0100000012340003)
# The last holds an unpaired surrogate, as a path read from a snapshot can (surrogatepass).
NAMES = ("a", "b", "c", "\u00e9t\u00e9", "\u4e2d", "x\ud800")
BUILT_IN = ("/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config")
TIME_MS = 1_764_000_000_000
EPOCH = 1 << 32


def join(parent: str, name: str) -> str:
    return ("" if parent == "/" else parent) + "/" + name


def assert_digest_current(tree: DataTree) -> None:
    """The tree's digest and every node's cached one (None: under /zookeeper/, counts 0)."""
    assert tree.digest == tree_digest(tree)
    for path, node in tree.nodes.items():
        if path.startswith(ZOOKEEPER_NODE_SUBTREE):
            assert node.digest is None, path
        else:
            assert node.digest == node_digest(path, node), path


class Driver:
    """Real txns for the tree as it stands, applied one by one, the digest checked after each."""

    def __init__(self, data, tree: DataTree) -> None:
        self.draw = data.draw
        self.tree = tree
        self.zxid = EPOCH
        self.applied = 0

    def apply(self, type_: int, body, *, replayed: bool = False, session: int | None = None):
        self.zxid += 1
        zxid = self.zxid
        if replayed and self.draw(st.integers(0, 3)) == 0:
            zxid = self.draw(st.integers(EPOCH, self.zxid))  # over a fuzzy snapshot: older
        if session is None:
            session = self.draw(st.sampled_from(SESSIONS))
        rc = self.tree.apply(Txn(r.TxnHeader(session, 1, zxid, TIME_MS + zxid, type_), body))
        self.applied += 1
        assert_digest_current(self.tree)
        return rc

    # -- one (type, record) for the current tree, as prep would make it ----------------

    def any_path(self, missing: bool = True) -> str:
        paths = sorted(self.tree.nodes)
        if missing:
            paths.append(join(self.draw(st.sampled_from(paths)), "missing"))
        return self.draw(st.sampled_from(paths))

    def create(self, parent: str | None = None):
        nodes = self.tree.nodes
        if parent is None:
            parents = sorted(p for p, n in nodes.items() if not is_session_owner(n.ephemeralOwner))
            parent = self.draw(st.sampled_from([*parents, "/missing"]))
        name = self.draw(st.sampled_from(NAMES))
        pnode = nodes.get(parent)
        cversion = 0 if pnode is None else pnode.cversion
        if self.draw(st.booleans()):  # sequential: the parent's cversion names it
            name += f"{cversion:010d}"
        path = join(parent, name)
        data = self.draw(st.none() | st.binary(max_size=24))
        # -1 (an old log's CreateTxnV0), the next one, or one a fuzzy replay finds stale.
        pcv = self.draw(st.sampled_from([-1, cversion + 1, cversion + 1, cversion, cversion + 3]))
        kind = self.draw(st.sampled_from(["create", "create2", "ephemeral", "container", "ttl"]))
        if kind == "container":
            return OpCode.CREATE_CONTAINER, r.CreateContainerTxn(path, data, WORLD, pcv)
        if kind == "ttl":
            ttl = self.draw(st.integers(1, MAX_TTL_MS))
            return OpCode.CREATE_TTL, r.CreateTTLTxn(path, data, WORLD, pcv, ttl)
        type_ = OpCode.CREATE2 if kind == "create2" else OpCode.CREATE
        return type_, r.CreateTxn(path, data, WORLD, kind == "ephemeral", pcv)

    def delete(self):
        nodes = self.tree.nodes
        leaves = sorted(p for p, n in nodes.items() if p not in BUILT_IN and not n.children)
        # A missing child of a present parent: a replayed delete the snapshot already has.
        path = self.draw(st.sampled_from(leaves + [join(self.any_path(False), "gone")]))
        type_ = self.draw(st.sampled_from([OpCode.DELETE, OpCode.DELETE_CONTAINER]))
        return type_, r.DeleteTxn(path)

    def set_data(self):
        if self.draw(st.integers(0, 5)) == 0:  # reconfig writes /zookeeper/config
            return OpCode.RECONFIG, r.SetDataTxn("/zookeeper/config", b"server.1=h:2888:3888",
                                                 self.draw(st.integers(0, 9)))
        path = self.any_path()
        node = self.tree.nodes.get(path)
        version = (0 if node is None else node.version) + 1
        data = self.draw(st.none() | st.binary(max_size=24))
        return OpCode.SET_DATA, r.SetDataTxn(path, data, version)

    def set_acl(self):
        return OpCode.SET_ACL, r.SetACLTxn(self.any_path(), self.draw(st.sampled_from([WORLD, READ])),
                                           self.draw(st.integers(-1, 5)))

    def check(self):
        return OpCode.CHECK, r.CheckVersionTxn(self.any_path(), self.draw(st.integers(-1, 3)))

    def error(self):
        code = self.draw(st.sampled_from([Code.NONODE, Code.NODEEXISTS, Code.BADVERSION]))
        return OpCode.ERROR, r.ErrorTxn(code)

    def multi(self):
        """Independent ops, or a create then changes of the node it made; one ErrorTxn in
        it makes the whole multi fail (every op becomes an error)."""
        if self.draw(st.booleans()):
            subs = [self.draw(st.sampled_from(
                [self.create, self.delete, self.set_data, self.set_acl, self.check]))()
                for _ in range(self.draw(st.integers(1, 4)))]
        else:
            type_, body = self.create()
            subs = [(type_, body), (OpCode.SET_DATA, r.SetDataTxn(body.path, b"m", 1)),
                    (OpCode.SET_ACL, r.SetACLTxn(body.path, READ, 1)),
                    (OpCode.CHECK, r.CheckVersionTxn(body.path, 1))]
            if self.draw(st.booleans()):
                subs.append((OpCode.DELETE, r.DeleteTxn(body.path)))
        if self.draw(st.booleans()):
            subs.insert(self.draw(st.integers(0, len(subs))), self.error())
        return OpCode.MULTI, subs

    # -- steps ---------------------------------------------------------------------------

    def step_txn(self, make) -> None:
        type_, body = make()
        self.apply(type_, body, replayed=type_ in (OpCode.CREATE, OpCode.DELETE))

    def step_sessions(self) -> None:
        session = self.draw(st.sampled_from(SESSIONS))
        if self.draw(st.booleans()):
            self.apply(OpCode.CREATE_SESSION, r.CreateSessionTxn(30000), session=session)
            return
        owned = sorted(self.tree.ephemerals.get(session, ()))
        form = self.draw(st.sampled_from(["listed", "with_missing", "old"]))
        body = {"listed": r.CloseSessionTxn(owned),
                "with_missing": r.CloseSessionTxn([*owned, "/missing/e", "/gone"]),
                "old": None}[form]  # an old closeSession without a record
        self.apply(OpCode.CLOSE_SESSION, body, session=session)

    def step_quota(self) -> None:
        """A quota on a user node (setquota's nodes), so later writes move its stats node."""
        users = sorted(p for p in self.tree.nodes if p != "/" and not p.startswith("/zookeeper"))
        if not users:
            self.apply(OpCode.CREATE, r.CreateTxn("/q", b"", WORLD, False, -1))
            users = ["/q"]
        target = self.draw(st.sampled_from(users))
        path = "/zookeeper/quota"
        for part in target.split("/")[1:]:
            path += "/" + part
            if path not in self.tree.nodes:
                self.apply(OpCode.CREATE, r.CreateTxn(path, None, WORLD, False, -1))
        for name, data in ((LIMIT_NODE, b"count=100,bytes=-1"), (STATS_NODE, b"count=0,bytes=0")):
            self.apply(OpCode.CREATE, r.CreateTxn(f"{path}/{name}", data, WORLD, False, -1))

    def step_under_zookeeper(self) -> None:
        """/zookeeper/x counts 0 but /zookeeper, its parent, counts."""
        parent = self.draw(st.sampled_from(["/zookeeper", "/zookeeper/quota"]))
        type_, body = self.create(parent)
        self.apply(type_, body)


STEPS = (
    lambda d: d.step_txn(d.create), lambda d: d.step_txn(d.create),
    lambda d: d.step_txn(d.delete), lambda d: d.step_txn(d.set_data),
    lambda d: d.step_txn(d.set_acl), lambda d: d.step_txn(d.check),
    lambda d: d.step_txn(d.error), lambda d: d.step_txn(d.multi),
    Driver.step_sessions, Driver.step_quota, Driver.step_under_zookeeper,
)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_incremental_digest_is_the_recomputed_digest_after_every_txn(data):
    tree = DataTree()
    driver = Driver(data, tree)
    for _ in range(data.draw(st.integers(1, 40))):
        data.draw(st.sampled_from(STEPS))(driver)
    assert driver.applied > 0


# -- each rule of the docstring, with the direction the digest must take ------------------


class Script:
    def __init__(self, tree: DataTree | None = None) -> None:
        self.tree = tree if tree is not None else DataTree()
        self.zxid = EPOCH

    def __call__(self, type_, body, session=SESSIONS[0], zxid=None) -> bool:
        """Apply; True if the digest changed. The digest is checked either way."""
        self.zxid += 1
        zxid = self.zxid if zxid is None else zxid
        before = self.tree.digest
        self.tree.apply(Txn(r.TxnHeader(session, 1, zxid, TIME_MS + zxid, type_), body))
        assert_digest_current(self.tree)
        return self.tree.digest != before

    def create(self, path, pcv=-1, data=b"d", ephemeral=False, session=SESSIONS[0], zxid=None):
        return self(OpCode.CREATE, r.CreateTxn(path, data, WORLD, ephemeral, pcv), session, zxid)


def test_each_rule_moves_the_digest_or_not_as_documented():
    s = Script()
    tree = s.tree
    assert s.create("/a")  # parent "/" and the new node
    assert s(OpCode.SET_DATA, r.SetDataTxn("/a", b"new", 1))
    assert s(OpCode.SET_ACL, r.SetACLTxn("/a", READ, 1))
    assert not s(OpCode.CREATE_SESSION, r.CreateSessionTxn(30000))
    assert not s(OpCode.CHECK, r.CheckVersionTxn("/a", 1))
    assert not s(OpCode.ERROR, r.ErrorTxn(Code.NONODE))
    assert not s(OpCode.SET_DATA, r.SetDataTxn("/missing", b"x", 1))
    # NODEEXISTS on replay: the parent moves only if the cversion grows (-1: by one).
    cversion = tree.nodes["/"].cversion
    assert not s.create("/a", pcv=cversion)
    assert s.create("/a", pcv=cversion + 2) and tree.nodes["/"].cversion == cversion + 2
    assert s.create("/a", pcv=-1) and tree.nodes["/"].cversion == cversion + 3
    # A replayed create with a stale parentCVersion leaves the parent, adds the node.
    assert s.create("/b", pcv=1)
    assert tree.nodes["/"].cversion == cversion + 3
    # A delete of a missing child still moves the parent's pzxid; an old zxid does not.
    assert s(OpCode.DELETE, r.DeleteTxn("/a/never"))
    assert not s(OpCode.DELETE, r.DeleteTxn("/a/never"), zxid=EPOCH + 1)
    # /zookeeper/ counts 0, /zookeeper itself counts.
    assert not s.create("/zookeeper/quota/q")
    assert s.create("/zookeeper/x")
    assert not s(OpCode.SET_DATA, r.SetDataTxn("/zookeeper/x", b"y", 1))
    assert not s(OpCode.RECONFIG, r.SetDataTxn("/zookeeper/config", b"server.1=h:1:2", 1))
    assert s(OpCode.DELETE, r.DeleteTxn("/zookeeper/x"))
    # A failing multi changes nothing; one that commits does.
    failing = [(OpCode.CREATE, r.CreateTxn("/m", b"", WORLD, False, -1)),
               (OpCode.ERROR, r.ErrorTxn(Code.BADVERSION))]
    assert not s(OpCode.MULTI, failing) and "/m" not in tree.nodes
    assert s(OpCode.MULTI, failing[:1]) and "/m" in tree.nodes
    # closeSession deletes each ephemeral: back to the digest before them.
    before = tree.digest
    assert s.create("/e1", ephemeral=True, session=SESSIONS[1])
    assert s.create("/e2", ephemeral=True, session=SESSIONS[1])
    digest_with = tree.digest
    assert s(OpCode.CLOSE_SESSION, r.CloseSessionTxn(["/e1", "/e2"]), session=SESSIONS[1])
    assert tree.digest not in (before, digest_with)  # "/"'s pzxid moved on
    assert "/e1" not in tree.nodes


def test_quota_stats_writes_leave_the_digest():
    s = Script()
    s.create("/q", data=b"")
    s.create("/zookeeper/quota/q", data=None)
    s.create(f"/zookeeper/quota/q/{LIMIT_NODE}", data=b"count=10,bytes=-1")
    s.create(f"/zookeeper/quota/q/{STATS_NODE}", data=b"count=0,bytes=0")
    stats = s.tree.nodes[f"/zookeeper/quota/q/{STATS_NODE}"]
    s.create("/q/child", data=b"12345")
    assert stats.data == b"count=2,bytes=5"  # the stats node moved, counting 0
    assert s(OpCode.SET_DATA, r.SetDataTxn("/q/child", b"1", 1))
    assert stats.data == b"count=2,bytes=1"


def test_digest_wraps_as_a_java_long():
    """A tree's digest can be anywhere in the long's range; each change adds or takes away
    up to 2**32 and wraps past either end as AdHash's long arithmetic does."""
    for start in (JAVA_LONG_MAX - 3, JAVA_LONG_MIN + 3):
        s = Script()
        s.create("/a")
        offset = start - tree_digest(s.tree)
        s.tree.digest = start  # as if the rest of a big tree summed to offset
        for type_, body in [(OpCode.CREATE, r.CreateTxn("/a/b", b"b", WORLD, False, -1)),
                            (OpCode.SET_DATA, r.SetDataTxn("/a/b", b"c" * 99, 1)),
                            (OpCode.SET_ACL, r.SetACLTxn("/a", READ, 7)),
                            (OpCode.DELETE, r.DeleteTxn("/a/b")),
                            (OpCode.DELETE, r.DeleteTxn("/a"))]:
            s.zxid += 1
            s.tree.apply(Txn(r.TxnHeader(SESSIONS[0], 1, s.zxid, TIME_MS, type_), body))
            assert s.tree.digest == as_java_long(tree_digest(s.tree) + offset)
            assert JAVA_LONG_MIN <= s.tree.digest <= JAVA_LONG_MAX


# -- the switch -------------------------------------------------------------------------


def scripted_txns(s: Script) -> None:
    """One of every kind of txn, without checking (the digest may be off)."""
    for type_, body, session in [
        (OpCode.CREATE_SESSION, r.CreateSessionTxn(30000), SESSIONS[1]),
        (OpCode.CREATE, r.CreateTxn("/a", b"a", WORLD, False, -1), SESSIONS[0]),
        (OpCode.CREATE2, r.CreateTxn("/a/e", b"e", WORLD, True, -1), SESSIONS[1]),
        (OpCode.CREATE, r.CreateTxn("/a", b"a", WORLD, False, 9), SESSIONS[0]),
        (OpCode.CREATE_CONTAINER, r.CreateContainerTxn("/c", b"", WORLD, -1), SESSIONS[0]),
        (OpCode.CREATE_TTL, r.CreateTTLTxn("/t", b"", WORLD, -1, 60000), SESSIONS[0]),
        (OpCode.SET_DATA, r.SetDataTxn("/a", b"b", 1), SESSIONS[0]),
        (OpCode.SET_ACL, r.SetACLTxn("/a", READ, 1), SESSIONS[0]),
        (OpCode.DELETE, r.DeleteTxn("/t"), SESSIONS[0]),
        (OpCode.DELETE_CONTAINER, r.DeleteTxn("/c/missing"), SESSIONS[0]),
        (OpCode.MULTI, [(OpCode.CREATE, r.CreateTxn("/m", None, WORLD, False, -1)),
                        (OpCode.SET_DATA, r.SetDataTxn("/m", b"x", 1))], SESSIONS[0]),
        (OpCode.CLOSE_SESSION, r.CloseSessionTxn(["/a/e"]), SESSIONS[1]),
    ]:
        s.zxid += 1
        s.tree.apply(Txn(r.TxnHeader(session, 1, s.zxid, TIME_MS, type_), body))


DIGEST_WORK = ("node_crc", "child_change_digest", "aversion_change_digest", "as_java_long")


def forbid_digest_work(monkeypatch) -> None:
    def forbidden(*args):
        raise AssertionError("digest work")
    for name in DIGEST_WORK:
        monkeypatch.setattr(datatree, name, forbidden)


def test_with_the_digest_off_apply_does_no_digest_work(monkeypatch):
    forbid_digest_work(monkeypatch)
    s = Script(DataTree(digest_enabled=False))
    scripted_txns(s)
    assert s.tree.digest is None and "/m" in s.tree.nodes
    monkeypatch.undo()
    s.tree.set_digest_enabled(True)
    assert_digest_current(s.tree)
    scripted_txns(s)  # and incremental from there on
    assert_digest_current(s.tree)
    s.tree.set_digest_enabled(False)
    assert s.tree.digest is None


def test_the_forbidding_patch_is_live(monkeypatch):
    """The control for the test above: the same patch trips a tree whose digest is on."""
    tree = DataTree()
    forbid_digest_work(monkeypatch)
    with pytest.raises(AssertionError, match="digest work"):
        scripted_txns(Script(tree))


# -- trees assembled from a snapshot ------------------------------------------------------


def test_every_loaded_tree_knows_its_digest(tmp_path):
    s = Script()
    scripted_txns(s)
    tree = s.tree
    store = SnapshotStore(tmp_path)
    try:
        loaded = store.load(store.write_sync(tree))
    finally:
        store.close()
    reader = SnapReader(tree.last_processed_zxid)
    for chunk in snap_stream_chunks(tree):
        reader.feed(chunk)
    streamed = reader.result().tree
    for other in (loaded, streamed):
        assert other.digest == tree.digest == tree_digest(other)
        assert_digest_current(other)
        Script(other).create("/after-load")  # and incremental from there on


# -- real ZooKeeper ---------------------------------------------------------------------


def closing_workload(zk, clients: list[KazooClient]) -> None:
    """After zookeeper_workload: a quota, writes under it, error txns, a failing multi,
    and sessions closed with their ephemerals (closeSession's paths2Delete)."""
    a = clients[0]
    a.create("/quota/app/x", b"1", makepath=True)
    a.create(f"/zookeeper/quota/quota/app/{LIMIT_NODE}", b"count=100,bytes=-1", makepath=True)
    a.create(f"/zookeeper/quota/quota/app/{STATS_NODE}", b"count=2,bytes=1")
    a.create("/quota/app/y", b"22")
    a.set("/quota/app/x", b"333")
    a.delete("/quota/app/y")
    b = clients[1]
    b.create("/app/jobs/eph-", b"e", ephemeral=True, sequence=True)
    b.create("/box/eph", b"e", ephemeral=True)
    tx = a.transaction()  # fails at the check: logged as a multi of error txns
    tx.create("/app/never", b"")
    tx.check("/app", 12345)
    assert any(isinstance(x, Exception) for x in tx.commit())
    # Each one is an error txn in the log.
    with pytest.raises(NodeExistsError):
        a.create("/app", b"")
    with pytest.raises(NoNodeError):
        a.delete("/absent")
    with pytest.raises(BadVersionError):
        a.set("/app", b"", version=999)
    for c in clients[1:3]:
        c.stop()  # closeSession, deleting the session's ephemerals


@pytest.fixture(scope="module")
def zookeeper_digest_log(tmp_path_factory) -> Path:
    """A dataDir a real ZooKeeper 3.8 wrote with tests/store/test_zk_snapshot_writer's
    workload and closing_workload after it."""
    if not HAVE_ZOOKEEPER:
        pytest.skip("scripts/install-zookeeper")
    workdir = tmp_path_factory.mktemp("zk-digest")
    zk = start_zookeeper(workdir, TICK_TIME_MS, ZK_CFG)
    clients = []
    try:
        clients = zookeeper_workload(zk)
        closing_workload(zk, clients)
    finally:
        zk.stop()
        for c in clients:
            c.stop()
            c.close()
    zk = start_zookeeper(workdir, TICK_TIME_MS, ZK_CFG)  # its snapshot of the whole tree
    zk.stop()
    assert log_errors(zk) == []
    return workdir / "data"


@needs_zookeeper
def test_incremental_digest_is_every_txn_digest_zookeeper_logged(zookeeper_digest_log):
    snapshots = zkformat.snapshot_files(zookeeper_digest_log)
    zxid, first = snapshots[-1]
    assert zxid == 0
    tree = tree_from_snapshot(zkformat.read_snapshot(first))
    checked, types, undigested = 0, set(), set()
    for _, log in zkformat.log_files(zookeeper_digest_log):
        for rec in zkformat.read_log_file(log).records:
            txn, end = decode_txn_at(rec.txn_bytes, digest_follows=True)
            tree.apply(txn)
            if end == len(rec.txn_bytes):
                undigested.add(txn.hdr.type)  # error txns: ZooKeeper logs no digest with them
                continue
            logged, _ = r.TxnDigest.decode(rec.txn_bytes, end)
            assert logged.version == DIGEST_VERSION
            assert tree.digest == logged.treeDigest, f"zxid 0x{txn.zxid:x} type {txn.hdr.type}"
            checked += 1
            types.add(txn.hdr.type)
    assert {OpCode.CLOSE_SESSION, OpCode.MULTI, OpCode.CREATE_CONTAINER, OpCode.CREATE_TTL,
            OpCode.DELETE, OpCode.SET_DATA, OpCode.SET_ACL} <= types
    assert OpCode.ERROR in undigested  # checked by the digest of the txn after each
    assert checked >= 60
    snap = newest_snapshot(zookeeper_digest_log)  # taken at restart, after the whole log
    assert snap.digest == (tree.last_processed_zxid, DIGEST_VERSION, tree.digest)
