"""Reads: served from the local tree, in the session's order, one small function per op.

Each returns the response record (or None) and raises KeeperError for an error reply,
checking existence and ACLs in ZooKeeper's order (FinalRequestProcessor).
"""

import struct

from zkcompat.jute import records as r
from zkcompat.jute.constants import PING_XID, AddWatchMode, Code, EventType, OpCode, WatcherType
from zkcompat.jute.reply import encode_reply
from zkcompat.server.replies import MultiBody
from zkcompat.server.request import THROTTLED_OP
from zkcompat.tree.acl import (
    PERM_ADMIN,
    PERM_READ,
    acl_to_records,
    check_acl,
    java_auth_order,
    scheme_registered,
)
from zkcompat.tree.errors import KeeperError

# module globals: enum attribute lookups are slow on the hot path (docs/measurements.md)
_PING, _AUTH, _SASL, _WHO_AM_I, _MULTI_READ = (
    OpCode.PING, OpCode.AUTH, OpCode.SASL, OpCode.WHO_AM_I, OpCode.MULTI_READ)
_I32 = struct.Struct(">i")
_NULL_BUFFER = _I32.pack(-1)


class _DataAndStat:
    """GetDataResponse's wire form straight from the node (no Stat or response objects)."""

    __slots__ = ("data", "stat")

    def __init__(self, node):
        self.data = node.data
        self.stat = node.stat_bytes()

    def encode(self, out: bytearray) -> None:
        data = self.data
        if data is None:
            out += _NULL_BUFFER
        else:
            out += _I32.pack(len(data))
            out += data
        out += self.stat


class _StatOnly:
    """ExistsResponse's wire form: just the Stat."""

    __slots__ = ("stat",)

    def __init__(self, node):
        self.stat = node.stat_bytes()

    def encode(self, out: bytearray) -> None:
        out += self.stat


def _node(server, path):
    # DataTree aliases "" to the root ("rather than fight it, let root have an alias").
    node = server.tree.nodes.get(path or "/")
    if node is None:
        raise KeeperError(Code.NONODE, path)
    return node


def read_exists(server, req, rec, cnxn):
    path = rec.path
    if path is None or "\0" in path:
        raise KeeperError(Code.BADARGUMENTS, path)
    node = server.tree.nodes.get(path or "/")
    if node is not None:
        check_acl(node.acl, PERM_READ, req.auth_ids)
    if rec.watch and cnxn is not None:
        # An exists watch is registered whether or not the node exists (DataTree.statNode).
        server.watches.add_data_watch(path, cnxn)
    if node is None:
        raise KeeperError(Code.NONODE, path)
    return _StatOnly(node)


def read_get_data(server, req, rec, cnxn):
    node = _node(server, rec.path)
    check_acl(node.acl, PERM_READ, req.auth_ids)
    if rec.watch and cnxn is not None:
        server.watches.add_data_watch(rec.path, cnxn)
    return _DataAndStat(node)


def _children(server, req, rec, cnxn):
    node = _node(server, rec.path)  # NB: a null path is refused before any read runs
    check_acl(node.acl, PERM_READ, req.auth_ids)
    if rec.watch and cnxn is not None:
        server.watches.add_child_watch(rec.path, cnxn)
    return node


# Serialised children lists, as ZooKeeper's response cache keeps them: a long list is slow
# to encode (docs/measurements.md) and read far more often than it changes. The key
# changes whenever the list does: every child create or delete moves the parent's pzxid.
CHILDREN_CACHE_MAX = 10_000
_children_cache: dict[str, tuple[int, int, int, bytes]] = {}


def _children_wire(path: str, node) -> bytes:
    key_node, key_pzxid, key_n = id(node), node.pzxid, node.num_children
    hit = _children_cache.get(path)
    if hit is not None and hit[0] == key_node and hit[1] == key_pzxid and hit[2] == key_n:
        return hit[3]
    wire = r.GetChildrenResponse(list(node.children or ())).to_bytes()
    if len(_children_cache) >= CHILDREN_CACHE_MAX:
        _children_cache.clear()
    _children_cache[path] = (key_node, key_pzxid, key_n, wire)
    return wire


class _Wire:
    """A response already serialised."""

    __slots__ = ("parts",)

    def __init__(self, *parts: bytes):
        self.parts = parts

    def encode(self, out: bytearray) -> None:
        for part in self.parts:
            out += part


def read_get_children(server, req, rec, cnxn):
    node = _children(server, req, rec, cnxn)
    return _Wire(_children_wire(rec.path or "/", node))


def read_get_children2(server, req, rec, cnxn):
    node = _children(server, req, rec, cnxn)
    return _Wire(_children_wire(rec.path or "/", node), node.stat_bytes())


def _multi_get_children(server, req, rec, cnxn):
    node = _children(server, req, rec, cnxn)
    return r.GetChildrenResponse(list(node.children or ()))


def read_get_acl(server, req, rec, cnxn):
    node = _node(server, rec.path)
    check_acl(node.acl, PERM_READ | PERM_ADMIN, req.auth_ids)
    acl = acl_to_records(node.acl)
    try:
        check_acl(node.acl, PERM_ADMIN, req.auth_ids)
    except KeeperError:
        # Without ADMIN the digests are hidden (ZOOKEEPER-1392).
        for a in acl:
            if a.id.scheme == "digest":
                a.id = r.Id("digest", a.id.id.split(":", 1)[0] + ":x")
    return r.GetACLResponse(acl, node.stat())


def read_get_all_children_number(server, req, rec, cnxn):
    node = _node(server, rec.path)
    check_acl(node.acl, PERM_READ, req.auth_ids)
    return r.GetAllChildrenNumberResponse(server.tree.all_children_number(rec.path))


def read_get_ephemerals(server, req, rec, cnxn):
    paths = server.tree.ephemerals_of(req.session_id)
    prefix = rec.prefixPath
    if prefix is not None and prefix.strip() not in ("", "/"):
        paths = [p for p in paths if p.startswith(prefix)]
    return r.GetEphemeralsResponse(list(paths))


def read_sync(server, req, rec, cnxn):
    return r.SyncResponse(rec.path)


def _user_name(scheme: str, ident: str) -> str | None:
    """AuthUtil.getUser: the provider's user name for an id (None without a provider)."""
    if scheme == "digest":
        return ident.split(":", 1)[0]
    if scheme in ("ip", "x509", "sasl") and scheme_registered(scheme):
        return ident  # AuthenticationProvider.getUserName's default: the id
    return None


def read_who_am_i(server, req, rec, cnxn):
    # AuthUtil.getClientInfos: an id without a provider (super) has the user "", not null.
    return r.WhoAmIResponse([r.ClientInfo(s, _user_name(s, i) or "")
                             for s, i in java_auth_order(req.auth_ids)])


def read_add_watch(server, req, rec, cnxn):
    if rec.mode not in (AddWatchMode.PERSISTENT, AddWatchMode.PERSISTENT_RECURSIVE):
        raise KeeperError(Code.MARSHALLINGERROR, rec.path)
    if cnxn is not None:
        server.watches.add_persistent(rec.path, cnxn, rec.mode == AddWatchMode.PERSISTENT_RECURSIVE)
    return r.ErrorResponse(0)


def _watcher_type(value: int) -> int:
    try:
        return WatcherType(value)
    except ValueError:
        raise KeeperError(Code.MARSHALLINGERROR) from None


def read_check_watches(server, req, rec, cnxn):
    if cnxn is None or not server.watches.contains(rec.path, cnxn, _watcher_type(rec.type)):
        raise KeeperError(Code.NOWATCHER, rec.path)
    return None


def read_remove_watches(server, req, rec, cnxn):
    if cnxn is None or not server.watches.remove(rec.path, cnxn, _watcher_type(rec.type)):
        raise KeeperError(Code.NOWATCHER, rec.path)
    return None


def read_set_watches(server, req, rec, cnxn):
    """Re-register a reconnecting client's watches, firing what it missed since relativeZxid."""
    if cnxn is None:
        return None
    nodes = server.tree.nodes
    rel = rec.relativeZxid
    zxid = -1  # catch-up events carry no zxid (a WatchedEvent built without one)
    for path in rec.dataWatches or ():
        node = nodes.get(path)
        if node is None:
            cnxn.notify(EventType.NODE_DELETED, path, zxid)
        elif node.mzxid > rel:
            cnxn.notify(EventType.NODE_DATA_CHANGED, path, zxid)
        else:
            server.watches.add_data_watch(path, cnxn)
    for path in rec.existWatches or ():
        if path in nodes:
            cnxn.notify(EventType.NODE_CREATED, path, zxid)
        else:
            server.watches.add_data_watch(path, cnxn)
    for path in rec.childWatches or ():
        node = nodes.get(path)
        if node is None:
            cnxn.notify(EventType.NODE_DELETED, path, zxid)
        elif node.pzxid > rel:
            cnxn.notify(EventType.NODE_CHILDREN_CHANGED, path, zxid)
        else:
            server.watches.add_child_watch(path, cnxn)
    # SetWatches2 only: persistent watches are re-added with no catch-up events.
    for path in getattr(rec, "persistentWatches", None) or ():
        server.watches.add_persistent(path, cnxn, False)
    for path in getattr(rec, "persistentRecursiveWatches", None) or ():
        server.watches.add_persistent(path, cnxn, True)
    return None


def read_check_alone(server, req, rec, cnxn):
    """check is only meaningful inside a multi; alone, 3.9.3 answers Unimplemented."""
    raise KeeperError(Code.UNIMPLEMENTED, rec.path)


def read_throttled(server, req, rec, cnxn):
    """A request the request throttler held longer than throttled_op_wait_time: THROTTLEDOP
    with no body, and nothing done (FinalRequestProcessor's isThrottled)."""
    raise KeeperError(Code.THROTTLEDOP)


def read_multi_read(server, req, ops, cnxn):
    results = []
    for op_type, rec in ops:
        fn = MULTI_READ.get(op_type)
        try:
            if fn is None:
                raise KeeperError(Code.MARSHALLINGERROR)
            # The watch flag of an op inside multiRead is ignored (FinalRequestProcessor
            # passes no watcher), so no connection is handed down.
            results.append((op_type, fn(server, req, rec, None)))
        except KeeperError as e:
            results.append((OpCode.ERROR, r.ErrorResponse(e.code)))
    return results


READ = {
    OpCode.EXISTS: read_exists,
    OpCode.GET_DATA: read_get_data,
    OpCode.GET_CHILDREN: read_get_children,
    OpCode.GET_CHILDREN2: read_get_children2,
    OpCode.GET_ACL: read_get_acl,
    OpCode.GET_ALL_CHILDREN_NUMBER: read_get_all_children_number,
    OpCode.GET_EPHEMERALS: read_get_ephemerals,
    OpCode.SYNC: read_sync,
    OpCode.WHO_AM_I: read_who_am_i,
    OpCode.SET_WATCHES: read_set_watches,
    OpCode.SET_WATCHES2: read_set_watches,
    OpCode.ADD_WATCH: read_add_watch,
    OpCode.CHECK_WATCHES: read_check_watches,
    OpCode.REMOVE_WATCHES: read_remove_watches,
    OpCode.MULTI_READ: read_multi_read,
    OpCode.CHECK: read_check_alone,
    THROTTLED_OP: read_throttled,
}

def _multi_get_data(server, req, rec, cnxn):
    body = read_get_data(server, req, rec, cnxn)
    return r.GetDataResponse(body.data, r.Stat.from_bytes(body.stat))


MULTI_READ = {OpCode.GET_DATA: _multi_get_data, OpCode.GET_CHILDREN: _multi_get_children}


def execute_read(server, req) -> bytes | None:
    """The framed reply to a read (or ping, auth, SASL) of `req`'s session, from the tree
    and watches of `server` (the apply stage); None when nobody waits for it."""
    if req.cnxn is None:
        return None
    zxid = server.tree.last_processed_zxid
    if req.type == _PING:
        return encode_reply(PING_XID, zxid, 0, None)  # whatever xid the client used
    if req.type == _AUTH:
        return encode_reply(req.xid, 0, req.record, None)  # result decided at receipt
    if req.type == _SASL:
        return encode_reply(req.xid, 0, 0, req.record)  # processSasl answers zxid 0
    try:
        if req.record is None and req.type != _WHO_AM_I or req.has_npe_path():
            # ZooKeeper answers an undecodable body or a null path with MARSHALLINGERROR.
            raise KeeperError(Code.MARSHALLINGERROR)
        body = READ[req.type](server, req, req.record, req.cnxn)
    except KeeperError as e:
        return encode_reply(req.xid, zxid, e.code, None)
    if req.type == _MULTI_READ:
        body = MultiBody(body)
    return encode_reply(req.xid, zxid, 0, body)
