"""Prep: the leader turns a write request into a Txn, validated against the future state.

Validation sees the tree as it will be once every outstanding (proposed, not yet
applied) txn is applied: each prepared txn leaves ChangeRecords for the paths it
touches, which stop counting once that txn is applied (ZooKeeper's outstandingChanges).
A record retires by its zxid alone: lookups ignore a record at or below the applied
zxid, so applying a batch costs a binary search, not a walk over its records; the map
is pruned in bulk (see `applied`).
A failed write still becomes a Txn (an ErrorTxn with its own zxid), as in ZooKeeper.

Prep also predicts ZooKeeper's tree digest after each txn (PrecalculatedDigest), which
the leader sends as the proposal's TxnDigest and every server, itself included, compares
with its tree once the txn is applied. A record carries the whole persisted stat, so its
node digest can be computed before the tree has it: `base` is the node's digest before
this txn, `digest` after it (None until `_settle` has computed it, once the op that made
the record is done). The running prediction starts from the tree's digest whenever no
record is outstanding, so a wrong prediction cannot outlive the txns it was made for.
"""

import logging
from bisect import bisect_right
from operator import attrgetter

from zkcompat.jute import records as r
from zkcompat.jute.constants import Code, CreateMode, OpCode
from zkcompat.tree import quota
from zkcompat.tree.acl import (
    PERM_ADMIN,
    PERM_CREATE,
    PERM_DELETE,
    PERM_READ,
    PERM_WRITE,
    check_acl,
    fixup_acl,
    shared_acl_records,
)
from zkcompat.tree.datatree import (
    CONTAINER_EPHEMERAL_OWNER,
    MAX_TTL_MS,
    DataTree,
    is_session_owner,
    ttl_ephemeral_owner,
)
from zkcompat.tree.digest import as_java_long, stat_digest
from zkcompat.tree.errors import KeeperError
from zkcompat.tree.paths import CONFIG, SPECIAL_PATHS, parent_of, split_parent, validate_path
from zkcompat.tree.txn import TXN_RECORD, Txn

log = logging.getLogger(__name__)

# module globals: enum attribute lookups are slow on the hot path (docs/measurements.md)
_MULTI, _CLOSE_SESSION, _CREATE_CONTAINER, _CREATE_TTL = (
    OpCode.MULTI, OpCode.CLOSE_SESSION, OpCode.CREATE_CONTAINER, OpCode.CREATE_TTL)
# CreateMode values as plain ints: IntEnum lookups are slow per create (docs/measurements.md)
_MODES = frozenset(int(m) for m in CreateMode)
_SEQUENTIAL = frozenset(int(m) for m in (CreateMode.PERSISTENT_SEQUENTIAL,
                                         CreateMode.EPHEMERAL_SEQUENTIAL,
                                         CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL))
_EPHEMERAL = frozenset(int(m) for m in (CreateMode.EPHEMERAL, CreateMode.EPHEMERAL_SEQUENTIAL))
_TTL = frozenset(int(m) for m in (CreateMode.PERSISTENT_WITH_TTL,
                                  CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL))
_ZXID_OF = attrgetter("zxid")
# Retired records the map may hold beyond the outstanding ones before it is rebuilt.
_RETIRED_SLACK = 4096


class ChangeRecord:
    """The predicted state of one path after the outstanding txns (None fields: deleted)."""

    __slots__ = ("zxid", "path", "exists", "version", "cversion", "aversion", "ephemeral_owner",
                 "child_count", "acl", "data", "czxid", "mzxid", "pzxid", "ctime", "mtime",
                 "base", "digest")

    def __init__(self, zxid, path, exists, version=0, cversion=0, aversion=0, ephemeral_owner=0,
                 child_count=0, acl=(), data=None, czxid=0, mzxid=0, pzxid=0, ctime=0, mtime=0,
                 base=0):
        self.zxid = zxid
        self.path = path
        self.exists = exists
        self.version = version
        self.cversion = cversion
        self.aversion = aversion
        self.ephemeral_owner = ephemeral_owner
        self.child_count = child_count
        self.acl = acl
        self.data = data
        self.czxid = czxid
        self.mzxid = mzxid
        self.pzxid = pzxid
        self.ctime = ctime
        self.mtime = mtime
        self.base = base  # the node's digest before this record's txn (0: absent)
        self.digest = None  # after it, once settled

    def duplicate(self, zxid: int) -> "ChangeRecord":
        d = self.digest
        return ChangeRecord(zxid, self.path, self.exists, self.version, self.cversion,
                            self.aversion, self.ephemeral_owner, self.child_count, self.acl,
                            self.data, self.czxid, self.mzxid, self.pzxid, self.ctime,
                            self.mtime, self.base if d is None else d)

    def gone(self, zxid: int) -> "ChangeRecord":
        """The record of this node's deletion by txn `zxid`."""
        d = self.digest
        return ChangeRecord(zxid, self.path, False, base=self.base if d is None else d)


def _next_version(current: int, expected: int, path: str) -> int:
    """checkAndIncVersion; skips -1 on wrap-around (ZOOKEEPER-4743)."""
    if expected != -1 and expected != current:
        raise KeeperError(Code.BADVERSION, path)
    nxt = current + 1
    if nxt > 0x7FFFFFFF:
        nxt -= 1 << 32
    return 0 if nxt == -1 else nxt


def _parent_for_delete(path: str) -> str:
    """getParentPathAndValidate: BADARGUMENTS for no slash, NUL, or a special path."""
    if path is None or "/" not in path or "\0" in path or path in SPECIAL_PATHS:
        raise KeeperError(Code.BADARGUMENTS, path)
    return parent_of(path)


class Prep:
    """PrepRequestProcessor. `next_zxid` and `now_ms` come from the leader's shell."""

    def __init__(self, tree: DataTree, next_zxid, now_ms, extended_types: bool = False,
                 enforce_quota: bool = False, reconfigurer=None):
        self.tree = tree
        self.reconfigurer = reconfigurer  # server/reconfig.Reconfigurer; None: disabled
        self._next_zxid = next_zxid
        self._now_ms = now_ms
        self.extended_types = extended_types
        self.enforce_quota = enforce_quota
        # The latest record per path; one at or below _applied_zxid is retired (the tree
        # has caught up with it) and counts as absent.
        self._changes: dict[str, ChangeRecord] = {}
        self._applied_zxid = 0
        self._order: list[ChangeRecord] = []  # every outstanding record, in zxid order
        self._closing: dict[int, int] = {}  # session id -> zxid of its prepared closeSession
        # The digest prediction: the tree's after the last prepared txn with records, and
        # what the txn being prepared changes (rolled back with a failed multi's records).
        self._digest = tree.digest
        self._txn_delta = 0
        self._time = 0  # the txn being prepared's header time: a new node's ctime

    # -- outstanding changes ------------------------------------------------------

    def _node_record(self, path: str, zxid: int) -> ChangeRecord:
        node = self.tree.nodes.get(path)
        if node is None:
            raise KeeperError(Code.NONODE, path)
        d = node.digest
        return ChangeRecord(zxid, path, True, node.version, node.cversion, node.aversion,
                            node.ephemeralOwner, node.num_children, node.acl, node.data,
                            node.czxid, node.mzxid, node.pzxid, node.ctime, node.mtime,
                            0 if d is None else d)

    def _record(self, path: str) -> ChangeRecord:
        """getRecordForPath: outstanding change, else the tree; NONODE if it does not exist."""
        cr = self._changes.get(path)
        if cr is None or cr.zxid <= self._applied_zxid:
            return self._node_record(path, -1)
        if not cr.exists:
            raise KeeperError(Code.NONODE, path)
        return cr

    def _to_change(self, path: str, zxid: int) -> ChangeRecord:
        """A new ChangeRecord of `path` for txn `zxid`, from its predicted state (NONODE if
        it does not exist); it takes effect only once appended to the txn's pending list."""
        cr = self._changes.get(path)
        if cr is None or cr.zxid <= self._applied_zxid:
            return self._node_record(path, zxid)
        if not cr.exists:
            raise KeeperError(Code.NONODE, path)
        return cr.duplicate(zxid)

    def _valid_path(self, path: str | None) -> str:
        """validate_path, skipped for a path the tree or a change record holds (retired
        or not): it was validated when it was created."""
        if path in self._changes or path in self.tree.nodes:
            return path
        return validate_path(path)

    def _exists(self, path: str) -> bool:
        cr = self._changes.get(path)
        if cr is None or cr.zxid <= self._applied_zxid:
            return path in self.tree.nodes
        return cr.exists

    def _settle(self, records) -> None:
        """Each record's node digest after its txn, and the tree's change, counted into
        the txn being prepared (DigestCalculator.calculateDigest on the predicted stat)."""
        delta = 0
        for cr in records:
            if cr.digest is not None:
                continue
            if cr.exists:
                cr.digest = d = stat_digest(
                    cr.path, cr.data, cr.czxid, cr.mzxid, cr.pzxid, cr.ctime, cr.mtime,
                    cr.version, cr.cversion, cr.aversion, cr.ephemeral_owner)
            else:
                cr.digest = d = 0
            delta += d - cr.base
        self._txn_delta += delta

    def applied(self, zxid: int) -> None:
        """Txns up to `zxid` are in the tree: their records retire (lookups skip them)."""
        self._applied_zxid = zxid
        order = self._order
        if order and order[-1].zxid <= zxid:
            # All applied: a record in the map is in the order or retired already.
            order.clear()
            self._changes.clear()
        elif order and order[0].zxid <= zxid:
            del order[:bisect_right(order, zxid, key=_ZXID_OF)]
            if len(self._changes) > len(order) + _RETIRED_SLACK:
                # Under load the order never empties, so retired records would pile up:
                # keep the latest outstanding record per path (the order is zxid order).
                self._changes = {cr.path: cr for cr in order}
        if self._closing:
            for sid in [s for s, z in self._closing.items() if z <= zxid]:
                del self._closing[sid]

    # -- the entry point ----------------------------------------------------------

    def prepare(self, req) -> Txn:
        """Build the Txn for a write request; errors become an ErrorTxn with its own zxid."""
        zxid = self._next_zxid()
        hdr = r.TxnHeader(req.session_id, req.xid, zxid, self._now_ms(), req.type)
        self._time = hdr.time
        self._txn_delta = 0
        pending: list[ChangeRecord] = []
        op_type, rec = req.type, req.record
        try:
            # An unparseable body or a null path throws inside ZooKeeper's prep.
            if rec is None:
                if op_type != _CLOSE_SESSION:
                    raise KeeperError(Code.MARSHALLINGERROR)
            elif (op_type == _MULTI or getattr(rec, "path", "") is None) \
                    and req.has_npe_path():
                raise KeeperError(Code.MARSHALLINGERROR)
            if op_type == _MULTI:
                body = self._prep_multi(req, zxid, pending)
            else:
                body = PREP[op_type](self, req, rec, op_type, zxid, pending)
        except KeeperError as e:
            hdr.type = OpCode.ERROR
            return self._digested(Txn(hdr, r.ErrorTxn(e.code)))
        if type(body) is not TXN_RECORD.get(op_type) and not _record_fits(op_type, body):
            # Our own bug; refusing here keeps a txn apply cannot read out of the log.
            log.error("event=prep_bug op=%d body=%r action=reply_systemerror", req.type, body)
            hdr.type = OpCode.ERROR
            return self._digested(Txn(hdr, r.ErrorTxn(Code.SYSTEMERROR)))
        txn = Txn(hdr, body)
        if pending:
            changes = self._changes  # the predictions take effect
            for cr in pending:
                changes[cr.path] = cr
            if self.tree.digest_enabled:
                self._settle(pending)
                base = self._digest if self._order else self.tree.digest
                self._digest = txn.digest = as_java_long(base + self._txn_delta)
            self._order += pending
            return txn
        return self._digested(txn)

    def _digested(self, txn: Txn) -> Txn:
        """A txn that changes no node: the tree digest it leaves is the prediction so far
        (setTxnDigest with getCurrentTreeDigest)."""
        if self.tree.digest_enabled:
            txn.digest = self._digest if self._order else self.tree.digest
        return txn

    def error_txn(self, req, code: int) -> Txn:
        """A write refused before prep looks at it (SESSIONMOVED): an ErrorTxn with its
        own zxid, as PrepRequestProcessor makes of a KeeperException."""
        hdr = r.TxnHeader(req.session_id, req.xid, self._next_zxid(), self._now_ms(),
                          OpCode.ERROR)
        return self._digested(Txn(hdr, r.ErrorTxn(code)))

    def _prep_multi(self, req, zxid, pending) -> list:
        """Every op of a multi shares one zxid; later ops see the earlier ops' effects.
        If one fails, the rest become RUNTIMEINCONSISTENCY and none of its predictions
        may outlive it (rollbackPendingChanges)."""
        body = []
        failed = False
        for op_type, op in req.record:
            if failed:
                body.append((OpCode.ERROR, r.ErrorTxn(Code.RUNTIMEINCONSISTENCY)))
                continue
            fn = PREP.get(op_type)
            sub_pending: list[ChangeRecord] = []
            try:
                if fn is None or op_type in (OpCode.CREATE_SESSION, OpCode.CLOSE_SESSION):
                    raise KeeperError(Code.UNIMPLEMENTED)
                sub = fn(self, req, op, op_type, zxid, sub_pending)
            except KeeperError as e:
                failed = True
                body.append((OpCode.ERROR, r.ErrorTxn(e.code)))
                continue
            pending.extend(sub_pending)
            for cr in sub_pending:
                self._changes[cr.path] = cr
            if self.tree.digest_enabled:
                self._settle(sub_pending)  # before a later op duplicates these records
            body.append((op_type, sub))
        if failed:
            self._roll_back({cr.path for cr in pending})
            pending.clear()
            self._txn_delta = 0
        return body

    def _roll_back(self, paths: set[str]) -> None:
        for path in paths:
            self._changes.pop(path, None)
        for cr in self._order:  # zxid order: the newest outstanding record wins
            if cr.path in paths:
                self._changes[cr.path] = cr

    # -- one function per op ------------------------------------------------------

    def _check_session(self, req) -> None:
        if req.session_id not in self.tree.sessions or req.session_id in self._closing:
            raise KeeperError(Code.SESSIONEXPIRED)

    def prep_create(self, req, rec, op_type, zxid, pending):
        ttl = rec.ttl if op_type == _CREATE_TTL else -1  # only that op has a CreateTTLRequest
        path = rec.path
        mode = rec.flags
        if mode not in _MODES:
            raise KeeperError(Code.BADARGUMENTS, path)
        # validateCreateRequest
        if mode in _TTL and not self.extended_types:
            raise KeeperError(Code.UNIMPLEMENTED, path)
        if mode in _TTL:
            if not 0 < ttl <= MAX_TTL_MS:
                raise KeeperError(Code.BADARGUMENTS, path)
        elif ttl >= 0:
            raise KeeperError(Code.BADARGUMENTS, path)
        self._check_session(req)
        # validatePathForCreate
        if path is None or "/" not in path or "\0" in path:
            raise KeeperError(Code.BADARGUMENTS, path)
        parent_path = parent_of(path)
        acl = fixup_acl(path, rec.acl, req.auth_ids)
        parent = self._to_change(parent_path, zxid)
        check_acl(parent.acl, PERM_CREATE, req.auth_ids)
        if mode in _SEQUENTIAL:
            path = f"{path}{parent.cversion:010d}"
        validate_path(path)
        if self._exists(path):
            raise KeeperError(Code.NODEEXISTS, path)
        parent_owner = parent.ephemeral_owner
        if parent_owner and is_session_owner(parent_owner):  # 0, the usual, decided at once
            raise KeeperError(Code.NOCHILDRENFOREPHEMERALS, path)
        new_cversion = parent.cversion + 1
        if self.enforce_quota:
            self._check_quota(path, None, rec.data, 1)
        # The op, not the mode, picks the txn (pRequest2TxnCreate); the owner is what
        # applying that txn will give the node.
        if op_type == _CREATE_CONTAINER:
            owner = CONTAINER_EPHEMERAL_OWNER
            body = r.CreateContainerTxn(path, rec.data, shared_acl_records(acl), new_cversion)
        elif op_type == _CREATE_TTL:
            if mode not in _TTL:
                raise KeeperError(Code.BADARGUMENTS, path)  # a TTL txn needs a TTL mode
            owner = ttl_ephemeral_owner(ttl)
            body = r.CreateTTLTxn(path, rec.data, shared_acl_records(acl), new_cversion, ttl)
        else:
            owner = req.session_id if mode in _EPHEMERAL else 0
            body = r.CreateTxn(path, rec.data, shared_acl_records(acl), mode in _EPHEMERAL, new_cversion)
        parent.child_count += 1
        parent.cversion = new_cversion
        parent.pzxid = zxid
        pending.append(parent)
        t = self._time
        pending.append(ChangeRecord(zxid, path, True, 0, 0, 0, owner, 0, acl, rec.data,
                                    zxid, zxid, zxid, t, t))
        return body

    def prep_delete(self, req, rec, op_type, zxid, pending):
        self._check_session(req)
        path = rec.path
        parent_path = _parent_for_delete(path)
        parent = self._to_change(parent_path, zxid)
        check_acl(parent.acl, PERM_DELETE, req.auth_ids)
        node = self._record(path)
        _next_version(node.version, rec.version, path)
        if node.child_count > 0:
            raise KeeperError(Code.NOTEMPTY, path)
        parent.child_count -= 1
        if zxid > parent.pzxid:
            parent.pzxid = zxid
        pending.append(parent)
        pending.append(node.gone(zxid))
        return r.DeleteTxn(path)

    def prep_delete_container(self, req, rec, op_type, zxid, pending):
        """The reaper's delete (or any client's): no ACL check; never a session's ephemeral."""
        path = rec.path
        parent_path = _parent_for_delete(path)
        node = self._record(path)
        if node.child_count > 0:
            raise KeeperError(Code.NOTEMPTY, path)
        if is_session_owner(node.ephemeral_owner):
            raise KeeperError(Code.BADVERSION, path)
        parent = self._record(parent_path).duplicate(zxid)
        parent.child_count -= 1
        if zxid > parent.pzxid:
            parent.pzxid = zxid
        pending.append(parent)
        pending.append(node.gone(zxid))
        return r.DeleteTxn(path)

    def _check_quota(self, path: str, old_data, new_data, count_diff: int) -> None:
        """ZooKeeperServer.checkQuota (only with enforceQuota): hard limits refuse, soft
        limits log. It reads the applied tree, as ZooKeeper does."""
        if not self.enforce_quota:
            return
        tree = self.tree
        prefix = quota.max_prefix_with_quota(tree.quota_paths, path)
        if prefix is None:
            return
        limits_node = tree.nodes.get(quota.limit_path(prefix))
        stats_node = tree.nodes.get(quota.stats_path(prefix))
        if limits_node is None or stats_node is None:
            return
        try:
            limits = quota.parse_stats(limits_node.data)
            current = quota.parse_stats(stats_node.data)
        except ValueError:
            return
        bytes_diff = len(new_data or b"") - len(old_data or b"")
        for diff, soft_key, hard_key, cur_key in (
            (count_diff, "count", "countHardLimit", "count"),
            (bytes_diff, "bytes", "byteHardLimit", "bytes"),
        ):
            soft, hard = limits.get(soft_key, -1), limits.get(hard_key, -1)
            if diff == 0 or (soft <= -1 and hard <= -1):
                continue
            new = current.get(cur_key, -1) + diff
            limit = hard if hard > -1 else soft
            if new > limit:
                log.warning("event=quota_exceeded path=%s %s=%d limit=%d kind=%s", prefix,
                            cur_key, new, limit, "hard" if hard > -1 else "soft")
                if hard > -1:
                    raise KeeperError(Code.QUOTAEXCEEDED, prefix)

    def prep_set_data(self, req, rec, op_type, zxid, pending):
        self._check_session(req)
        path = self._valid_path(rec.path)
        node = self._to_change(path, zxid)
        check_acl(node.acl, PERM_WRITE, req.auth_ids)
        if self.enforce_quota:
            self._check_quota(path, node.data, rec.data, 0)
        version = _next_version(node.version, rec.version, path)
        node.version = version
        node.data = rec.data
        node.mzxid = zxid
        node.mtime = self._time
        pending.append(node)
        return r.SetDataTxn(path, rec.data, version)

    def prep_set_acl(self, req, rec, op_type, zxid, pending):
        self._check_session(req)
        path = self._valid_path(rec.path)
        acl = fixup_acl(path, rec.acl, req.auth_ids)
        node = self._to_change(path, zxid)
        check_acl(node.acl, PERM_ADMIN, req.auth_ids)
        version = _next_version(node.aversion, rec.version, path)
        node.aversion = version
        node.acl = acl
        pending.append(node)
        return r.SetACLTxn(path, shared_acl_records(acl), version)

    def prep_check(self, req, rec, op_type, zxid, pending):
        self._check_session(req)
        path = self._valid_path(rec.path)
        node = self._record(path)
        check_acl(node.acl, PERM_READ, req.auth_ids)
        return r.CheckVersionTxn(path, _next_version(node.version, rec.version, path))

    def prep_reconfig(self, req, rec, op_type, zxid, pending):
        """server/reconfig.py checks it and makes the next config; the config node's ACL
        is checked last, as ZooKeeper does (only super may write it)."""
        reconfigurer = self.reconfigurer
        if reconfigurer is None:
            raise KeeperError(Code.RECONFIGDISABLED)
        reconfigurer.check_enabled()
        self._check_session(req)
        new = reconfigurer.next_config(rec, zxid)
        check_acl(self._record(CONFIG).acl, PERM_WRITE, req.auth_ids)
        log.info("event=reconfig_proposed zxid=0x%x voters=%s observers=%s", zxid,
                 sorted(new.voters), sorted(new.observers))
        return r.SetDataTxn(CONFIG, new.to_bytes(), -1)

    def prep_create_session(self, req, rec, op_type, zxid, pending):
        return rec  # a CreateSessionTxn built by the connection at the handshake

    def prep_close_session(self, req, rec, op_type, zxid, pending):
        session = req.session_id
        paths = self.tree.ephemerals_of(session)
        for cr in self._order:
            if not cr.exists:
                paths.discard(cr.path)
            elif cr.ephemeral_owner == session:
                paths.add(cr.path)
        applied = self._applied_zxid
        for cr in self._changes.values():
            if not cr.exists and cr.zxid > applied:
                paths.discard(cr.path)
        ordered = sorted(paths)
        digest_on = self.tree.digest_enabled
        for path in ordered:
            parent_path = split_parent(path)[0]
            try:
                parent = self._record(parent_path).duplicate(zxid)
            except KeeperError:
                parent = None
            if parent is not None:
                parent.child_count -= 1
                if zxid > parent.pzxid:
                    parent.pzxid = zxid
                pending.append(parent)
                self._changes[parent_path] = parent
            try:
                gone = self._record(path).gone(zxid)
            except KeeperError:
                gone = ChangeRecord(zxid, path, False)
            pending.append(gone)
            if digest_on:  # the next ephemeral under this parent duplicates its record
                self._settle(pending[-2:] if parent is not None else pending[-1:])
        self._closing[session] = zxid
        return r.CloseSessionTxn(ordered)


def _record_fits(op_type: int, body) -> bool:
    if op_type == OpCode.MULTI:
        return all(type(sub) is TXN_RECORD.get(t) for t, sub in body)
    return type(body) is TXN_RECORD.get(op_type)




PREP = {
    OpCode.CREATE: Prep.prep_create,
    OpCode.CREATE2: Prep.prep_create,
    OpCode.CREATE_CONTAINER: Prep.prep_create,
    OpCode.CREATE_TTL: Prep.prep_create,
    OpCode.DELETE: Prep.prep_delete,
    OpCode.DELETE_CONTAINER: Prep.prep_delete_container,
    OpCode.SET_DATA: Prep.prep_set_data,
    OpCode.SET_ACL: Prep.prep_set_acl,
    OpCode.CHECK: Prep.prep_check,
    OpCode.RECONFIG: Prep.prep_reconfig,
    OpCode.CREATE_SESSION: Prep.prep_create_session,
    OpCode.CLOSE_SESSION: Prep.prep_close_session,
}
