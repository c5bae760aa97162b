"""DataTree: the znode tree and the session table, changed only by apply(txn).

apply is deterministic: everything it needs (time, session, resolved sequential path,
new versions) is in the Txn, so every replica that applies the same Txns in zxid order
holds the same tree. It returns the change events; delivering them is the server's job.
It keeps ZooKeeper's tree digest current (`digest`, DataTree.getTreeDigest) the way
NodeHashMapImpl does, by the rules in tree/digest.py's docstring.
"""

import logging
import struct

from zkcompat.jute import records as r
from zkcompat.jute.constants import Code, EventType, OpCode
from zkcompat.tree import quota
from zkcompat.tree.acl import OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, AclTuple, acl_from_records
from zkcompat.tree.digest import (
    JAVA_LONG_MAX,
    JAVA_LONG_MIN,
    ZOOKEEPER_NODE_SUBTREE,
    as_java_long,
    aversion_change_digest,
    child_change_digest,
    node_crc,
)
from zkcompat.tree.paths import CONFIG, QUOTA, ROOT, ZOOKEEPER, split_parent
from zkcompat.tree.txn import Txn

log = logging.getLogger(__name__)

# Stat{long czxid, mzxid, ctime, mtime; int version, cversion, aversion; long ephemeralOwner;
# int dataLength, numChildren; long pzxid}
_STAT = struct.Struct(">qqqqiiiqiiq")

# module globals: enum attribute lookups are slow on the hot path (docs/measurements.md)
_CREATE = OpCode.CREATE
_NODE_CREATED, _NODE_DELETED, _NODE_DATA_CHANGED, _NODE_CHILDREN_CHANGED = (
    EventType.NODE_CREATED, EventType.NODE_DELETED, EventType.NODE_DATA_CHANGED,
    EventType.NODE_CHILDREN_CHANGED)

# The digest (computed by tree/digest.py). Each node caches its own (DataNode.digest, as
# ZooKeeper does), so taking a node's old value out costs nothing, and None marks the
# nodes under /zookeeper/ (they count 0), so telling them apart costs no startswith.

# EphemeralType: ephemeralOwner values that are not session ids.
CONTAINER_EPHEMERAL_OWNER = -0x8000000000000000  # Long.MIN_VALUE
_TTL_MASK = -0x0100000000000000  # 0xFF00000000000000 as a signed long
# EXTENDED_FEATURE_VALUE_MASK: ~(0xFF00000000000000 | 0x00FFFF0000000000), about 34 years.
MAX_TTL_MS = 0x000000FFFFFFFFFF


def ttl_ephemeral_owner(ttl_ms: int) -> int:
    """EphemeralType.TTL.toEphemeralOwner: the extended-type mask with the ttl in the low bits."""
    return _TTL_MASK | ttl_ms


def ttl_of(owner: int) -> int:
    return owner & MAX_TTL_MS


def is_ttl_owner(owner: int) -> bool:
    return owner != CONTAINER_EPHEMERAL_OWNER and owner & _TTL_MASK == _TTL_MASK


def is_session_owner(owner: int) -> bool:
    """True if ephemeralOwner names a session (EphemeralType.NORMAL), not a container or TTL."""
    return owner != 0 and owner != CONTAINER_EPHEMERAL_OWNER and owner & _TTL_MASK != _TTL_MASK


class ZNode:
    """One znode: data, ACL and the persisted part of Stat; children created at the first child.
    `digest` caches its DigestCalculator digest while the tree's is on: None under /zookeeper/."""

    __slots__ = (
        "data", "acl", "czxid", "mzxid", "ctime", "mtime", "version",
        "cversion", "aversion", "ephemeralOwner", "pzxid", "children", "digest",
    )

    def __init__(self, data, acl: AclTuple, zxid: int, time: int, ephemeral_owner: int):
        self.data = data
        self.acl = acl
        self.czxid = self.mzxid = self.pzxid = zxid
        self.ctime = self.mtime = time
        self.version = self.cversion = self.aversion = 0
        self.ephemeralOwner = ephemeral_owner
        self.children: set[str] | None = None
        self.digest: int | None = None

    def stat(self) -> r.Stat:
        """The client's view of Stat (DataNode.copyStat): stored cversion counts creates, the
        reported one counts changes (every create but those still present has a delete);
        containers and TTL nodes report ephemeralOwner 0."""
        data = self.data
        children = self.children
        n = 0 if children is None else len(children)
        owner = self.ephemeralOwner
        return r.Stat(
            self.czxid, self.mzxid, self.ctime, self.mtime, self.version, self.cversion * 2 - n,
            self.aversion, owner if is_session_owner(owner) else 0,
            0 if data is None else len(data), n, self.pzxid,
        )

    def stat_bytes(self) -> bytes:
        """stat() already serialised (the Stat record's wire form), for the read path."""
        data = self.data
        children = self.children
        n = 0 if children is None else len(children)
        owner = self.ephemeralOwner
        return _STAT.pack(
            self.czxid, self.mzxid, self.ctime, self.mtime, self.version, self.cversion * 2 - n,
            self.aversion, owner if owner > 0 or owner and is_session_owner(owner) else 0,
            0 if data is None else len(data), n, self.pzxid,
        )

    @property
    def num_children(self) -> int:
        return 0 if self.children is None else len(self.children)


class ApplyResult:
    """DataTree.ProcessTxnResult: what applying one txn did, for the reply and the watches.

    `node` is the znode whose Stat the reply carries. Its Stat is read from the node on
    demand, so it is the Stat after this txn only until the next apply; a multi captures
    each op's Stat as it applies (`stat`).
    """

    __slots__ = ("type", "err", "path", "node", "_stat", "multi", "events")

    def __init__(self, type_: int, err: int = 0, path: str | None = None):
        self.type = type_
        self.err = err
        self.path = path
        self.node: ZNode | None = None
        self._stat: r.Stat | None = None
        self.multi: list[ApplyResult] | None = None
        self.events: list[tuple[int, str, tuple]] = []  # (EventType, path, ACL that filters it)

    @property
    def stat(self) -> r.Stat | None:
        if self._stat is None and self.node is not None:
            return self.node.stat()
        return self._stat

    def capture_stat(self) -> None:
        if self.node is not None:
            self._stat = self.node.stat()


class _ConfigBody:
    """What a view needs to know of a setData of /zookeeper/config: its path."""

    path = CONFIG


class DataTree:
    """`digest` is ZooKeeper's getTreeDigest after the last apply, a signed 64-bit long; None
    while the digest is off (zookeeper.digest.enabled=false), when apply does no digest work
    (set_digest_enabled switches it). Whoever fills `nodes` itself calls rebuild_indexes."""

    def __init__(self, digest_enabled: bool = True):
        root = ZNode(b"", OPEN_ACL_UNSAFE, 0, 0, 0)
        zk = ZNode(b"", OPEN_ACL_UNSAFE, 0, 0, 0)
        quota = ZNode(b"", OPEN_ACL_UNSAFE, 0, 0, 0)
        config = ZNode(b"", READ_ACL_UNSAFE, 0, 0, 0)
        # DataTree.addConfigNode sets the ACL with setACL(..., -1): aversion becomes -1.
        config.aversion = -1
        root.children = {"zookeeper"}
        zk.children = {"quota", "config"}
        self.nodes: dict[str, ZNode] = {ROOT: root, ZOOKEEPER: zk, QUOTA: quota, CONFIG: config}
        self.ephemerals: dict[int, set[str]] = {}
        self.sessions: dict[int, int] = {}  # session id -> negotiated timeout ms
        self.containers: set[str] = set()  # container nodes, for the reaper
        self.ttls: set[str] = set()  # TTL nodes, for the reaper
        self.quota_paths: set[str] = set()  # paths with a zookeeper_limits node
        self.last_processed_zxid = 0
        self.views: list = []  # open TreeViews (tree/view.py): told before each apply
        self.digest_enabled = digest_enabled
        self.digest: int | None = None
        self.recompute_digest()

    def set_config_node(self, data: bytes, zxid: int, mtime: int) -> None:
        """ZKDatabase.initConfigInZKDatabase: /zookeeper/config shows the committed
        membership, set outside any txn as a setData with version -1 whose zxid is the
        config's version. Not in the digest (under /zookeeper/); open views keep the old."""
        for view in self.views:
            view.before(OpCode.SET_DATA, _ConfigBody, 0)
        node = self.nodes[CONFIG]
        node.data, node.mzxid, node.mtime, node.version = data, zxid, mtime, -1

    # -- reads ------------------------------------------------------------------

    def get(self, path: str) -> ZNode | None:
        return self.nodes.get(path)

    def ephemerals_of(self, session_id: int) -> set[str]:
        return set(self.ephemerals.get(session_id, ()))

    def all_children_number(self, path: str) -> int:
        prefix = "/" if path == ROOT else path + "/"
        return sum(1 for p in self.nodes if p.startswith(prefix))

    def rebuild_indexes(self) -> None:
        """After nodes were loaded from a snapshot: children sets and the owner and quota
        indexes, all derived from the nodes themselves."""
        nodes = self.nodes
        for node in nodes.values():
            node.children = None
        self.ephemerals, self.containers, self.ttls, self.quota_paths = {}, set(), set(), set()
        for path, node in nodes.items():
            if path == ROOT:
                continue
            parent_path, child = split_parent(path)
            parent = nodes[parent_path]  # snapshots hold parents of every node
            if parent.children is None:
                parent.children = {child}
            else:
                parent.children.add(child)
            if node.ephemeralOwner:
                self._index_owner(path, node.ephemeralOwner)
            if child == quota.LIMIT_NODE and parent_path.startswith(QUOTA):
                self.quota_paths.add(parent_path[len(QUOTA):])
        # DataTree.deserialize ends in setupQuota: every quota's stats are counted afresh.
        # A fuzzy snapshot's stats node can be older or newer than the nodes it counts,
        # and the log replayed after it would then count some changes twice.
        for path in self.quota_paths:
            self._recount_quota(path)
        self.recompute_digest()

    # -- digest -----------------------------------------------------------------

    def set_digest_enabled(self, enabled: bool) -> None:
        """Switch the digest on (computed afresh, as after a load) or off (None). A tree
        whose digest is on keeps it current (apply, rebuild_indexes): switching it on again
        does nothing, where recomputing took 1.2 s per million znodes at every start."""
        if enabled == self.digest_enabled:
            return
        self.digest_enabled = enabled
        self.recompute_digest()

    def recompute_digest(self) -> None:
        """Every node's digest and the tree's from scratch, as loading a snapshot does
        (NodeHashMapImpl.put of each node); None while the digest is off."""
        if not self.digest_enabled:
            self.digest = None
            return
        total = 0
        for path, n in self.nodes.items():
            if path.startswith(ZOOKEEPER_NODE_SUBTREE):
                n.digest = None
                continue
            n.digest = d = node_crc(path, n)
            total += d
        self.digest = as_java_long(total)

    # -- apply ------------------------------------------------------------------

    def apply(self, txn: Txn) -> ApplyResult:
        hdr = txn.hdr
        if self.views:
            for view in self.views:
                view.before(hdr.type, txn.body, hdr.clientId)
        rc = APPLY[hdr.type](self, hdr, txn.body, None)
        self.last_processed_zxid = hdr.zxid
        return rc

    def _create(self, hdr, body, events, ephemeral_owner: int) -> ApplyResult:
        rc = ApplyResult(hdr.type, 0, body.path)
        path = body.path
        parent_path, child = split_parent(path)
        parent = self.nodes.get(parent_path)
        if parent is None:
            rc.err = Code.NONODE
            return rc
        if path in self.nodes:
            rc.err = Code.NODEEXISTS
            # Replaying over a fuzzy snapshot: the node may be there already, created
            # again after a delete the snapshot missed; the parent still moves on
            # (DataTree.processTxn's setCversionPzxid for NODEEXISTS).
            if hdr.type == _CREATE:
                self._set_cversion_pzxid(parent, body.parentCVersion, hdr.zxid)
            return rc
        digest_on = self.digest_enabled
        delta = 0
        cversion = body.parentCVersion
        if cversion == -1:
            cversion = parent.cversion + 1
        # Replaying over a fuzzy snapshot must not move cversion/pzxid backwards.
        if cversion > parent.cversion:
            zxid = hdr.zxid
            if digest_on:
                before = parent.digest
                if before is not None:
                    parent.digest = after = child_change_digest(
                        before, parent.pzxid, zxid, parent.cversion, cversion)
                    delta = after - before
            parent.cversion = cversion
            parent.pzxid = zxid
        node = ZNode(body.data, acl_from_records(body.acl), hdr.zxid, hdr.time, ephemeral_owner)
        if parent.children is None:
            parent.children = {child}
        else:
            parent.children.add(child)
        self.nodes[path] = node
        if ephemeral_owner:
            self._index_owner(path, ephemeral_owner)
        if parent_path.startswith(QUOTA):
            trimmed = parent_path[len(QUOTA):]
            if child == quota.LIMIT_NODE:
                self.quota_paths.add(trimmed)
            elif child == quota.STATS_NODE:
                self._recount_quota(trimmed)
        if self.quota_paths:
            self._quota_changed(path, len(body.data or b""), 1)
        # Under /zookeeper/ if the parent is, or is /zookeeper: the digest stays None.
        if digest_on and parent.digest is not None and parent_path != ZOOKEEPER:
            node.digest = crc = node_crc(path, node)
            d = self.digest + delta + crc
            self.digest = d if JAVA_LONG_MIN <= d <= JAVA_LONG_MAX else as_java_long(d)
        elif delta:
            self.digest = as_java_long(self.digest + delta)
        if hdr.type != _CREATE:
            rc.node = node
        ev = rc.events if events is None else events
        ev.append((_NODE_CREATED, path, node.acl))
        ev.append((_NODE_CHILDREN_CHANGED, parent_path, parent.acl))
        return rc

    def _delete_node(self, path: str, zxid: int, events: list) -> int:
        parent_path, child = split_parent(path)
        parent = self.nodes.get(parent_path)
        if parent is None:
            return Code.NONODE
        if parent.children is not None:
            parent.children.discard(child)
        digest_on = self.digest_enabled
        delta = 0
        if zxid > parent.pzxid:
            if digest_on:
                before = parent.digest
                if before is not None:
                    parent.digest = after = child_change_digest(
                        before, parent.pzxid, zxid, 0, 0)
                    delta = after - before
            parent.pzxid = zxid
        node = self.nodes.pop(path, None)
        if digest_on:
            # The parent moves on even when the child is missing (DataTree.deleteNode).
            if node is not None and node.digest is not None:
                delta -= node.digest
            if delta:
                d = self.digest + delta
                self.digest = d if JAVA_LONG_MIN <= d <= JAVA_LONG_MAX else as_java_long(d)
        if node is None:
            return Code.NONODE
        owner = node.ephemeralOwner
        if owner:
            if owner > 0 or is_session_owner(owner):  # > 0: a session's, decided at once
                paths = self.ephemerals.get(owner)
                if paths is not None:
                    paths.discard(path)
                    if not paths:
                        del self.ephemerals[owner]
            elif owner == CONTAINER_EPHEMERAL_OWNER:
                self.containers.discard(path)
            else:
                self.ttls.discard(path)
        if parent_path.startswith(ZOOKEEPER) and child == quota.LIMIT_NODE:
            self.quota_paths.discard(parent_path[len(QUOTA):])
        if self.quota_paths:
            self._quota_changed(path, -len(node.data or b""), -1)
        events.append((_NODE_DELETED, path, node.acl))
        events.append((_NODE_CHILDREN_CHANGED, parent_path, parent.acl))
        return Code.OK

    def _set_cversion_pzxid(self, node: ZNode, cversion: int, zxid: int) -> None:
        """DataTree.setCversionPzxid: -1 means one more than now; never moves backwards."""
        if cversion == -1:
            cversion = node.cversion + 1
        if cversion <= node.cversion:
            return
        if self.digest_enabled and node.digest is not None:
            before = node.digest
            node.digest = after = child_change_digest(
                before, node.pzxid, zxid, node.cversion, cversion)
            self.digest = as_java_long(self.digest + after - before)
        node.cversion = cversion
        node.pzxid = zxid

    def _index_owner(self, path: str, owner: int) -> None:
        if owner > 0:  # a session's (container and TTL owners are negative)
            self.ephemerals.setdefault(owner, set()).add(path)
        elif owner == CONTAINER_EPHEMERAL_OWNER:
            self.containers.add(path)
        elif is_ttl_owner(owner):
            self.ttls.add(path)
        else:
            self.ephemerals.setdefault(owner, set()).add(path)

    def _quota_changed(self, path: str, bytes_diff: int, count_diff: int) -> None:
        """DataTree.updateQuotaStat: keep the stats node of the nearest quota'd ancestor current."""
        prefix = quota.max_prefix_with_quota(self.quota_paths, path)
        if prefix is None:
            return
        stats_node = self.nodes.get(quota.stats_path(prefix))
        if stats_node is None:
            return
        try:
            stats = quota.parse_stats(stats_node.data)
        except ValueError:
            return  # a hand-written stats node ZooKeeper could not parse either
        stats["count"] = stats.get("count", -1) + count_diff
        stats["bytes"] = stats.get("bytes", -1) + bytes_diff
        stats_node.data = quota.format_stats(stats)

    def _recount_quota(self, path: str) -> None:
        """DataTree.updateQuotaForPath: count the subtree when its stats node appears."""
        if path not in self.nodes:
            count, size = 0, 0
        else:
            prefix = path + "/" if path != ROOT else "/"
            count = size = 0
            for p, n in self.nodes.items():
                if p == path or p.startswith(prefix):
                    count += 1
                    size += len(n.data or b"")
        stats_node = self.nodes.get(quota.stats_path(path))
        if stats_node is not None:
            stats_node.data = quota.format_stats({"count": count, "bytes": size})



def _apply_create(tree: DataTree, hdr, body, events):
    owner = hdr.clientId if body.ephemeral else 0
    return tree._create(hdr, body, events, owner)


def _apply_create_container(tree: DataTree, hdr, body, events):
    return tree._create(hdr, body, events, CONTAINER_EPHEMERAL_OWNER)


def _apply_create_ttl(tree: DataTree, hdr, body, events):
    return tree._create(hdr, body, events, ttl_ephemeral_owner(body.ttl))


def _apply_delete(tree: DataTree, hdr, body, events):
    rc = ApplyResult(hdr.type, 0, body.path)
    rc.err = tree._delete_node(body.path, hdr.zxid, rc.events if events is None else events)
    return rc


def _apply_set_data(tree: DataTree, hdr, body, events):
    rc = ApplyResult(hdr.type, 0, body.path)
    node = tree.nodes.get(body.path)
    if node is None:
        rc.err = Code.NONODE
        return rc
    if tree.quota_paths:
        tree._quota_changed(body.path, len(body.data or b"") - len(node.data or b""), 0)
    node.data = body.data
    node.mtime = hdr.time
    node.mzxid = hdr.zxid
    node.version = body.version
    if tree.digest_enabled and node.digest is not None:
        crc = node_crc(body.path, node)
        d = tree.digest - node.digest + crc
        node.digest = crc
        tree.digest = d if JAVA_LONG_MIN <= d <= JAVA_LONG_MAX else as_java_long(d)
    rc.node = node
    (rc.events if events is None else events).append(
        (_NODE_DATA_CHANGED, body.path, node.acl)
    )
    return rc


def _apply_set_acl(tree: DataTree, hdr, body, events):
    rc = ApplyResult(hdr.type, 0, body.path)
    node = tree.nodes.get(body.path)
    if node is None:
        rc.err = Code.NONODE
        return rc
    if tree.digest_enabled and node.digest is not None:
        before = node.digest
        node.digest = after = aversion_change_digest(before, node.aversion, body.version)
        tree.digest = as_java_long(tree.digest + after - before)
    node.acl = acl_from_records(body.acl)
    node.aversion = body.version
    rc.node = node
    return rc


def _apply_check(tree: DataTree, hdr, body, events):
    return ApplyResult(hdr.type, 0, body.path)


def _apply_error(tree: DataTree, hdr, body, events):
    return ApplyResult(hdr.type, err=body.err)


def _apply_create_session(tree: DataTree, hdr, body, events):
    tree.sessions[hdr.clientId] = body.timeOut
    return ApplyResult(hdr.type)


def _apply_close_session(tree: DataTree, hdr, body, events):
    rc = ApplyResult(hdr.type)
    ev = rc.events if events is None else events
    session = hdr.clientId
    # The leader's prep listed the ephemerals (CloseSessionTxn.paths2Delete); an old
    # closeSession without a record means "whatever the session still owns".
    paths = body.paths2Delete if body is not None and body.paths2Delete is not None else None
    if paths is None:
        paths = sorted(tree.ephemerals.get(session, ()))
    for path in paths:
        tree._delete_node(path, hdr.zxid, ev)
    # DataTree.killSession (3.6+): ephemerals the txn did not list die too, with a warning;
    # replicas that agree never have any, so the leader's digest then tells of it.
    extra = sorted(tree.ephemerals.get(session, ()))
    if extra:
        log.warning("event=close_session_extra_ephemerals session=0x%x zxid=0x%x paths=%s",
                    session, hdr.zxid, ",".join(extra))
        for path in extra:
            tree._delete_node(path, hdr.zxid, ev)
    tree.ephemerals.pop(session, None)
    tree.sessions.pop(session, None)
    return rc


def _apply_multi(tree: DataTree, hdr, body, events):
    rc = ApplyResult(hdr.type)
    rc.multi = []
    failed = any(t == OpCode.ERROR for t, _ in body)
    post_failed = False
    for sub_type, sub in body:
        if sub_type == OpCode.ERROR:
            post_failed = True
        elif failed:
            # Ops before the failing one report OK, ops after it RUNTIMEINCONSISTENCY
            # (DataTree.processTxn for multi).
            sub_type, sub = OpCode.ERROR, r.ErrorTxn(
                Code.RUNTIMEINCONSISTENCY if post_failed else Code.OK
            )
        sub_hdr = r.TxnHeader(hdr.clientId, hdr.cxid, hdr.zxid, hdr.time, sub_type)
        sub_rc = APPLY[sub_type](tree, sub_hdr, sub, rc.events)
        sub_rc.capture_stat()  # later ops of this multi may change the node again
        rc.multi.append(sub_rc)
        if sub_rc.err and not rc.err:
            rc.err = sub_rc.err
    return rc


APPLY = {
    OpCode.CREATE: _apply_create,
    OpCode.CREATE2: _apply_create,
    OpCode.CREATE_CONTAINER: _apply_create_container,
    OpCode.CREATE_TTL: _apply_create_ttl,
    OpCode.DELETE: _apply_delete,
    OpCode.DELETE_CONTAINER: _apply_delete,
    OpCode.SET_DATA: _apply_set_data,
    OpCode.RECONFIG: _apply_set_data,  # a SetDataTxn on /zookeeper/config
    OpCode.SET_ACL: _apply_set_acl,
    OpCode.CHECK: _apply_check,
    OpCode.ERROR: _apply_error,
    OpCode.CREATE_SESSION: _apply_create_session,
    OpCode.CLOSE_SESSION: _apply_close_session,
    OpCode.MULTI: _apply_multi,
}
