"""Differential scenarios: the ZooKeeper 3.5-3.9 additions to the client API.

Containers (createContainer 19), createTTL (21) refused without extended types,
addWatch (106) PERSISTENT / PERSISTENT_RECURSIVE, checkWatches (17) and
removeWatches (18), SetWatches2 (105), multiRead (22), getEphemerals (103),
getAllChildrenNumber (104), whoAmI (107) and quotas as zkCli keeps them.
kazoo 2.11 sends none of these requests, so every scenario speaks them through
`Api`, a raw session that logs each frame it reads in arrival order (watch
notifications included) with the reply decoded as ZooKeeper's jute defines it.

The scenarios that need a configured server (extendedTypesEnabled, a fast
container reaper, enforceQuota) live in test_scenarios_api39_extended.py; the
places where ZooKeeper 3.8 (our reference binary) and 3.9 disagree are pinned
down, per server, in test_scenarios_api39_v39.py.
"""

from __future__ import annotations

import base64
import hashlib
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kazoo.protocol.states import ZnodeStat
from kazoo.security import ACL, OPEN_ACL_UNSAFE, Id

from .harness import CALL_TIMEOUT_S, Zxid, error_name, scenario
from .rawclient import (
    REPLY_HEADER,
    STAT,
    ConnectionClosed,
    acl_vector,
    boolean,
    buffer,
    int32,
    int64,
    ustring,
)

# ZooDefs.OpCode
OP_CREATE = 1
OP_DELETE = 2
OP_EXISTS = 3
OP_GET_DATA = 4
OP_SET_DATA = 5
OP_GET_CHILDREN = 8
OP_GET_CHILDREN2 = 12
OP_CHECK = 13
OP_MULTI = 14
OP_CREATE2 = 15
OP_RECONFIG = 16
OP_CHECK_WATCHES = 17
OP_REMOVE_WATCHES = 18
OP_CREATE_CONTAINER = 19
OP_DELETE_CONTAINER = 20
OP_CREATE_TTL = 21
OP_MULTI_READ = 22
OP_AUTH = 100
OP_SET_WATCHES = 101
OP_SASL = 102
OP_GET_EPHEMERALS = 103
OP_GET_ALL_CHILDREN_NUMBER = 104
OP_SET_WATCHES2 = 105
OP_ADD_WATCH = 106
OP_WHO_AM_I = 107
# ClientCnxn's reserved xids.
NOTIFICATION_XID = -1
AUTH_XID = -4
SET_WATCHES_XID = -8
# CreateMode flags (CreateMode.toFlag).
PERSISTENT = 0
EPHEMERAL = 1
PERSISTENT_SEQUENTIAL = 2
EPHEMERAL_SEQUENTIAL = 3
CONTAINER = 4
PERSISTENT_WITH_TTL = 5
PERSISTENT_SEQUENTIAL_WITH_TTL = 6
# AddWatchMode.
ADD_WATCH_PERSISTENT = 0
ADD_WATCH_PERSISTENT_RECURSIVE = 1
# Watcher.WatcherType as sent by checkWatches/removeWatches.
WATCHER_CHILDREN = 1
WATCHER_DATA = 2
WATCHER_ANY = 3
WATCHER_PERSISTENT = 4
WATCHER_PERSISTENT_RECURSIVE = 5
# KeeperException.Code values named in assertions.
NO_WATCHER = -121
QUOTA_EXCEEDED = -125
# Watcher.Event.EventType / KeeperState as numbers on the wire.
EVENT_TYPES = {
    -1: "None",
    1: "NodeCreated",
    2: "NodeDeleted",
    3: "NodeDataChanged",
    4: "NodeChildrenChanged",
    5: "DataWatchRemoved",
    6: "ChildWatchRemoved",
    7: "PersistentWatchRemoved",
}
KEEPER_STATES = {3: "SyncConnected", 5: "ConnectedReadOnly", -112: "Expired"}
# ZooDefs.Perms
READ = 1
PERMS_ALL = 31
OPEN = ((PERMS_ALL, "world", "anyone"),)

QUIET_S = 0.4  # "nothing more arrives" is watched for this long
POLL_S = 0.05


# ------------------------------------------------------------- jute helpers


def string_vector(items: list[str] | None) -> bytes:
    if items is None:
        return int32(-1)
    return int32(len(items)) + b"".join(ustring(s) for s in items)


def create_payload(
    path: str, data: bytes | None = b"", flags: int = PERSISTENT, acl=OPEN, ttl: int | None = None
) -> bytes:
    """CreateRequest, or CreateTTLRequest when ttl is given."""
    body = ustring(path) + buffer(data) + acl_vector(acl) + int32(flags)
    return body if ttl is None else body + int64(ttl)


def path_payload(path: str | None) -> bytes:
    return ustring(path)


def path_watch(path: str, watch: bool = False) -> bytes:
    return ustring(path) + boolean(watch)


def path_type(path: str, kind: int) -> bytes:
    """CheckWatchesRequest / RemoveWatchesRequest / AddWatchRequest: path, int."""
    return ustring(path) + int32(kind)


def set_data_payload(path: str, data: bytes | None, version: int = -1) -> bytes:
    return ustring(path) + buffer(data) + int32(version)


def delete_payload(path: str, version: int = -1) -> bytes:
    return ustring(path) + int32(version)


def set_watches2(
    relative_zxid: int,
    data: list[str] = (),
    exist: list[str] = (),
    child: list[str] = (),
    persistent: list[str] = (),
    recursive: list[str] = (),
) -> bytes:
    return int64(relative_zxid) + b"".join(
        string_vector(list(v)) for v in (data, exist, child, persistent, recursive)
    )


def multi_payload(ops: list[tuple[int, bytes]]) -> bytes:
    """MultiOperationRecord: (MultiHeader type, done=false, err=-1, request)* then done."""
    out = b"".join(int32(op) + boolean(False) + int32(-1) + body for op, body in ops)
    return out + int32(-1) + boolean(True) + int32(-1)


def auth_payload(scheme: str, auth: bytes) -> bytes:
    return int32(0) + ustring(scheme) + buffer(auth)


def digest_id(user_password: str) -> str:
    """DigestAuthenticationProvider.generateDigest: user:base64(sha1(user:password))."""
    user = user_password.split(":", 1)[0]
    sha1 = hashlib.sha1(user_password.encode()).digest()
    return f"{user}:{base64.b64encode(sha1).decode()}"


class Reader:
    """Decodes a reply body field by field (jute big-endian)."""

    def __init__(self, body: bytes, offset: int = 0) -> None:
        self.body = body
        self.at = offset

    def int(self) -> int:
        (v,) = struct.unpack_from(">i", self.body, self.at)
        self.at += 4
        return v

    def long(self) -> int:
        (v,) = struct.unpack_from(">q", self.body, self.at)
        self.at += 8
        return v

    def bool(self) -> bool:
        v = self.body[self.at]
        self.at += 1
        return bool(v)

    def buffer(self) -> bytes | None:
        n = self.int()
        if n < 0:
            return None
        v = self.body[self.at : self.at + n]
        self.at += n
        return v

    def ustring(self) -> str | None:
        raw = self.buffer()
        return None if raw is None else raw.decode("utf-8", errors="replace")

    def stat(self) -> ZnodeStat:
        values = STAT.unpack_from(self.body, self.at)
        self.at += STAT.size
        return ZnodeStat(*values)

    def strings(self) -> list[str] | None:
        n = self.int()
        if n < 0:
            return None
        return [self.ustring() for _ in range(n)]

    def rest(self) -> bytes:
        return self.body[self.at :]


# Reply decoders: body bytes -> a loggable value (only called when err == 0).


def dec_none(body: bytes) -> Any:
    return ("body bytes", len(body)) if body else None


def dec_path(body: bytes) -> Any:
    return Reader(body).ustring()


def dec_path_stat(body: bytes) -> Any:
    r = Reader(body)
    return (r.ustring(), r.stat())


def dec_stat(body: bytes) -> Any:
    return Reader(body).stat()


def dec_data_stat(body: bytes) -> Any:
    r = Reader(body)
    return (r.buffer(), r.stat())


def dec_children(body: bytes) -> Any:
    return sorted(Reader(body).strings() or [])


def dec_children_stat(body: bytes) -> Any:
    r = Reader(body)
    return (sorted(r.strings() or []), r.stat())


def dec_int(body: bytes) -> Any:
    return Reader(body).int()


def dec_error_response(body: bytes) -> Any:
    """addWatch answers an ErrorResponse(0)."""
    return ("ErrorResponse", Reader(body).int()) if body else ("empty body",)


def dec_strings_sorted(body: bytes) -> Any:
    v = Reader(body).strings()
    return None if v is None else sorted(v)


def dec_who_am_i(body: bytes) -> Any:
    r = Reader(body)
    n = r.int()
    return sorted((r.ustring(), r.ustring()) for _ in range(n))


_MULTI_RESULT = {
    OP_CREATE: lambda r: r.ustring(),
    OP_CREATE2: lambda r: (r.ustring(), r.stat()),
    OP_CREATE_CONTAINER: lambda r: (r.ustring(), r.stat()),
    OP_CREATE_TTL: lambda r: (r.ustring(), r.stat()),
    OP_DELETE: lambda r: None,
    OP_SET_DATA: lambda r: r.stat(),
    OP_CHECK: lambda r: None,
    OP_GET_DATA: lambda r: (r.buffer(), r.stat()),
    OP_GET_CHILDREN: lambda r: sorted(r.strings() or []),
}


def dec_multi(body: bytes) -> Any:
    """MultiResponse: per op (type, err, result); ErrorResult has type -1."""
    r = Reader(body)
    results = []
    while True:
        op, done, err = r.int(), r.bool(), r.int()
        if done:
            break
        if op == -1:
            results.append(("error", error_name(r.int())))
            continue
        decode = _MULTI_RESULT.get(op)
        if decode is None:
            results.append(("unknown result type", op))
            break
        results.append((op, error_name(err), decode(r)))
    if r.rest():
        results.append(("trailing bytes", len(r.rest())))
    return results


@dataclass
class Result:
    err: int
    value: Any
    zxid: int


# ------------------------------------------------------------ the raw session


class Api:
    """One raw session. Every frame read is logged in arrival order: watch
    notifications as (name + " event", type, state, path), replies as
    (label, error name, decoded body). Replies to one connection come in
    request order and a notification precedes the reply to any request sent
    after the change that caused it, so the log is deterministic."""

    def __init__(self, env, name: str, timeout_ms: int = 10_000, connect: bool = True) -> None:
        self.env = env
        self.name = name
        self.rc = env.raw(timeout_ms=timeout_ms, connect=connect)
        self.xid = 0
        self.notification_zxids: list[int] = []

    @property
    def session_id(self) -> int:
        return self.rc.connect_result.session_id

    @property
    def passwd(self) -> bytes:
        return self.rc.connect_result.passwd

    def send(self, op: int, payload: bytes = b"", xid: int | None = None) -> int:
        if xid is None:
            self.xid += 1
            xid = self.xid
        self.rc.send_frame(int32(xid) + int32(op) + payload)
        return xid

    def call(
        self,
        label: str,
        op: int,
        payload: bytes = b"",
        decode: Callable[[bytes], Any] = dec_none,
        xid: int | None = None,
    ) -> Result | None:
        """Send one request and log every frame up to and including its reply."""
        try:
            sent = self.send(op, payload, xid)
        except OSError:
            self.env.record(label, "connection closed")
            return None
        return self.read_until(label, sent, decode)

    def read_until(
        self, label: str | None, xid: int, decode: Callable[[bytes], Any] = dec_none
    ) -> Result | None:
        self.rc._sock.settimeout(CALL_TIMEOUT_S)
        while True:
            try:
                body = self.rc.recv_frame()
            except TimeoutError:
                self.env.record(label or "sync", "no reply (timeout)")
                return None
            except (ConnectionClosed, OSError):
                self.env.record(label or "sync", "connection closed")
                return None
            rxid, zxid, err = REPLY_HEADER.unpack_from(body, 0)
            rest = body[REPLY_HEADER.size :]
            if rxid == NOTIFICATION_XID:
                self._log_notification(zxid, rest)
                continue
            if rxid != xid:
                self.env.record(self.name, ("unexpected reply", rxid, error_name(err)))
                continue
            value = None
            if err == 0:
                try:
                    value = decode(rest)
                except (struct.error, IndexError, UnicodeDecodeError) as e:
                    value = ("undecodable", type(e).__name__, len(rest))
            if label is not None:
                self.env.record(label, (error_name(err), value) if err == 0 else error_name(err))
            return Result(err, value, zxid)

    def _log_notification(self, zxid: int, rest: bytes) -> None:
        r = Reader(rest)
        etype, state, path = r.int(), r.int(), r.ustring()
        self.notification_zxids.append(zxid)
        self.env.record(
            f"{self.name} event",
            (EVENT_TYPES.get(etype, etype), KEEPER_STATES.get(state, state), path),
        )

    def sync(self) -> None:
        """A read round trip that logs only the notifications before its reply."""
        try:
            xid = self.send(OP_EXISTS, path_watch("/"))
        except OSError:
            self.env.record(f"{self.name} sync", "connection closed")
            return
        self.read_until(None, xid)

    def drain(self, quiet_s: float = QUIET_S) -> None:
        """Log whatever notifications arrive within quiet_s."""
        self.rc._sock.settimeout(quiet_s)
        try:
            while True:
                body = self.rc.recv_frame()
                rxid, zxid, err = REPLY_HEADER.unpack_from(body, 0)
                if rxid == NOTIFICATION_XID:
                    self._log_notification(zxid, body[REPLY_HEADER.size :])
                else:
                    self.env.record(self.name, ("unexpected reply", rxid, error_name(err)))
        except TimeoutError:
            pass
        except (ConnectionClosed, OSError):
            self.env.record(f"{self.name} drain", "connection closed")

    # typed requests --------------------------------------------------------

    def create(self, label, path, data=b"", flags=PERSISTENT, acl=OPEN) -> Result | None:
        return self.call(label, OP_CREATE, create_payload(path, data, flags, acl), dec_path)

    def create2(self, label, path, data=b"", flags=PERSISTENT, acl=OPEN) -> Result | None:
        return self.call(label, OP_CREATE2, create_payload(path, data, flags, acl), dec_path_stat)

    def create_container(self, label, path, data=b"", flags=CONTAINER, acl=OPEN):
        return self.call(
            label, OP_CREATE_CONTAINER, create_payload(path, data, flags, acl), dec_path_stat
        )

    def create_ttl(self, label, path, ttl, data=b"", flags=PERSISTENT_WITH_TTL, acl=OPEN):
        return self.call(
            label, OP_CREATE_TTL, create_payload(path, data, flags, acl, ttl), dec_path_stat
        )

    def delete(self, label, path, version=-1):
        return self.call(label, OP_DELETE, delete_payload(path, version))

    def exists(self, label, path, watch=False):
        return self.call(label, OP_EXISTS, path_watch(path, watch), dec_stat)

    def get_data(self, label, path, watch=False):
        return self.call(label, OP_GET_DATA, path_watch(path, watch), dec_data_stat)

    def set_data(self, label, path, data, version=-1):
        return self.call(label, OP_SET_DATA, set_data_payload(path, data, version), dec_stat)

    def get_children(self, label, path, watch=False):
        return self.call(label, OP_GET_CHILDREN, path_watch(path, watch), dec_children)

    def get_children2(self, label, path, watch=False):
        return self.call(label, OP_GET_CHILDREN2, path_watch(path, watch), dec_children_stat)

    def add_watch(self, label, path, mode):
        return self.call(label, OP_ADD_WATCH, path_type(path, mode), dec_error_response)

    def check_watches(self, label, path, kind):
        return self.call(label, OP_CHECK_WATCHES, path_type(path, kind))

    def remove_watches(self, label, path, kind):
        return self.call(label, OP_REMOVE_WATCHES, path_type(path, kind))

    def multi(self, label, ops):
        return self.call(label, OP_MULTI, multi_payload(ops), dec_multi)

    def multi_read(self, label, ops):
        return self.call(label, OP_MULTI_READ, multi_payload(ops), dec_multi)

    def get_ephemerals(self, label, prefix):
        return self.call(label, OP_GET_EPHEMERALS, path_payload(prefix), dec_strings_sorted)

    def get_all_children_number(self, label, path):
        return self.call(label, OP_GET_ALL_CHILDREN_NUMBER, path_payload(path), dec_int)

    def who_am_i(self, label):
        return self.call(label, OP_WHO_AM_I, b"", dec_who_am_i)

    def add_auth(self, label, scheme, auth: bytes):
        return self.call(label, OP_AUTH, auth_payload(scheme, auth), xid=AUTH_XID)

    def set_watches2(self, label, payload: bytes):
        return self.call(label, OP_SET_WATCHES2, payload, xid=SET_WATCHES_XID)

    def last_zxid(self) -> int:
        """The zxid the server puts in a reply header: this session's view."""
        xid = self.send(OP_EXISTS, path_watch("/"))
        result = self.read_until(None, xid)
        return result.zxid if result else 0

    def drop_connection(self) -> None:
        """The TCP connection goes; the session stays until it times out."""
        try:
            self.rc._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.rc.close()

    def resume(self, relative_zxid: int) -> None:
        """Reconnect to the same session on a new socket (no SetWatches sent)."""
        sid, passwd = self.session_id, self.passwd
        self.rc = self.env.raw(connect=False)
        result = self.rc.connect(
            timeout_ms=10_000, session_id=sid, passwd=passwd, last_zxid_seen=relative_zxid
        )
        self.env.record(f"{self.name} resumed same session", result.session_id == sid)
        self.xid = 0


# ----------------------------------------------------------- scenario helpers


def expect(env, ok: bool, what: str) -> None:
    """A fact the scenario relies on; a reference that breaks it fails the test
    (ScenarioError), a candidate that breaks it shows up in the diff."""
    env.record(f"expect: {what}", bool(ok))
    if not ok and env.side == "reference":
        env.problems.append(what)


def no_read_acl() -> list[ACL]:
    return [ACL(PERMS_ALL & ~READ, Id("world", "anyone"))]


# ================================================================ containers


@scenario
def container_create_and_stat(env):
    """createContainer answers a Create2Response; its Stat shows ephemeralOwner 0
    (getClientEphemeralOwner hides the container marker) in every read."""
    api = Api(env, "c")
    zk = env.client()
    b = env.base
    api.create_container("createContainer", f"{b}/c", b"payload")
    api.exists("exists", f"{b}/c")
    api.get_data("getData", f"{b}/c")
    api.get_children2("getChildren2", f"{b}/c")
    env.call("kazoo get", zk.get, f"{b}/c")
    api.create("create child", f"{b}/c/child")
    api.create("create ephemeral child", f"{b}/c/eph", flags=EPHEMERAL)
    api.get_children2("children of container", f"{b}/c")
    api.get_ephemerals("ephemerals: only the real one", f"{b}/")


@scenario
def container_create_errors(env):
    """NodeExists, NoNode for a missing parent, NoChildrenForEphemerals under an
    ephemeral, BadArguments for a bad path, InvalidACL for an empty ACL."""
    api = Api(env, "c")
    b = env.base
    api.create_container("first", f"{b}/c")
    api.create_container("again", f"{b}/c")
    api.create_container("missing parent", f"{b}/nope/c")
    api.create("ephemeral parent", f"{b}/e", flags=EPHEMERAL)
    api.create_container("under ephemeral", f"{b}/e/c")
    api.create_container("trailing slash", f"{b}/c2/")
    api.create_container("empty acl", f"{b}/c3", acl=())
    api.create_container("root", "/")
    api.exists("c3 not made", f"{b}/c3")


@scenario
def container_flags_quirks(env):
    """createContainer takes CONTAINER's flag; other flags still make a container
    (the txn type decides), a TTL flag is refused (no extended types here)."""
    api = Api(env, "c")
    owner = Api(env, "owner")
    b = env.base
    owner.create_container("flags=EPHEMERAL", f"{b}/eph", flags=EPHEMERAL)
    owner.create_container("flags=PERSISTENT", f"{b}/pers", flags=PERSISTENT)
    api.create_container("flags=PERSISTENT_SEQUENTIAL", f"{b}/seq-", flags=PERSISTENT_SEQUENTIAL)
    api.create_container("flags=TTL", f"{b}/ttl", flags=PERSISTENT_WITH_TTL)
    api.create_container("flags=99", f"{b}/bad", flags=99)
    owner.get_ephemerals("owner's ephemerals", "/")
    owner.rc.close_session()
    api.get_children("survive the creator's session", b)


@scenario
def container_delete_by_client(env):
    """A client deletes a container like any node: NotEmpty with children,
    BadVersion on a wrong version, fine when empty."""
    api = Api(env, "c")
    b = env.base
    api.create_container("container", f"{b}/c")
    api.create("child", f"{b}/c/x")
    api.delete("delete non-empty", f"{b}/c")
    api.delete("delete child", f"{b}/c/x")
    api.delete("delete bad version", f"{b}/c", version=5)
    api.delete("delete", f"{b}/c")
    api.exists("gone", f"{b}/c")
    api.get_children2("parent", b)


@scenario
def container_in_multi(env):
    """A createContainer op inside multi returns a Create2-style result; a failing
    multi creates no container. (A create2 op in multi answers differently in 3.8
    and 3.9: test_scenarios_api39_v39.py.)"""
    api = Api(env, "c")
    b = env.base
    api.multi(
        "multi ok",
        [
            (OP_CREATE_CONTAINER, create_payload(f"{b}/c", b"d", CONTAINER)),
            (OP_CREATE, create_payload(f"{b}/c/a")),
            (OP_CREATE, create_payload(f"{b}/c/b", b"", PERSISTENT_SEQUENTIAL)),
        ],
    )
    api.multi(
        "multi fails on last op",
        [
            (OP_CREATE_CONTAINER, create_payload(f"{b}/c2", b"", CONTAINER)),
            (OP_CHECK, ustring(f"{b}/c") + int32(7)),
        ],
    )
    api.exists("c2 not created", f"{b}/c2")
    api.get_children2("c", f"{b}/c")


@scenario
def container_watches_on_create(env):
    """Creating a container fires the same watches as any create."""
    watcher = Api(env, "watcher")
    api = Api(env, "c")
    b = env.base
    watcher.exists("exists+watch", f"{b}/c", watch=True)
    watcher.get_children("children+watch", b, watch=True)
    api.create_container("create container", f"{b}/c")
    watcher.sync()
    watcher.drain()


@scenario
def container_sequential_child_names(env):
    """Sequential children of a container count from the container's cversion."""
    api = Api(env, "c")
    b = env.base
    api.create_container("container", f"{b}/c")
    for i in range(3):
        api.create(f"seq {i}", f"{b}/c/n-", flags=PERSISTENT_SEQUENTIAL)
    api.delete("delete first", f"{b}/c/n-0000000000")
    api.create("seq after delete", f"{b}/c/n-", flags=PERSISTENT_SEQUENTIAL)
    api.get_children2("children", f"{b}/c")


# ======================================================== TTL, not enabled


@scenario
def ttl_refused_without_extended_types(env):
    """Without extendedTypesEnabled every TTL create is Unimplemented, checked
    before the TTL value and before the path."""
    api = Api(env, "t")
    b = env.base
    api.create_ttl("createTTL persistent", f"{b}/t", 1000)
    api.create_ttl("createTTL sequential", f"{b}/s-", 1000, flags=PERSISTENT_SEQUENTIAL_WITH_TTL)
    api.create_ttl("createTTL ttl=0", f"{b}/t0", 0)
    api.create_ttl("createTTL missing parent", f"{b}/x/t", 1000)
    api.create2("create2 with TTL flag", f"{b}/t2", flags=PERSISTENT_WITH_TTL)
    api.create("create with TTL sequential flag", f"{b}/t3", flags=PERSISTENT_SEQUENTIAL_WITH_TTL)
    api.multi(
        "multi with createTTL",
        [
            (OP_CREATE, create_payload(f"{b}/m")),
            (OP_CREATE_TTL, create_payload(f"{b}/mt", b"", PERSISTENT_WITH_TTL, ttl=1000)),
        ],
    )
    api.get_children2("nothing created", b)


@scenario
def ttl_createttl_with_plain_flags(env):
    """createTTL with a non-TTL mode: a ttl >= 0 is BadArguments; -1 makes a plain node
    of the requested kind unless extended types are off."""
    api = Api(env, "t")
    b = env.base
    api.create_ttl("persistent ttl=1000", f"{b}/a", 1000, flags=PERSISTENT)
    api.create_ttl("ephemeral ttl=1000", f"{b}/b", 1000, flags=EPHEMERAL)
    api.create_ttl("container flag ttl=1000", f"{b}/c", 1000, flags=CONTAINER)
    api.get_children2("children", b)


# ======================================================= persistent watches


@scenario
def addwatch_persistent_keeps_firing(env):
    """PERSISTENT: the node's data changes, its creation and deletion and its
    child list changes, every time, and the watch survives the node's deletion."""
    watcher = Api(env, "w")
    writer = env.client()
    b = env.base
    writer.create(f"{b}/n", b"0")
    watcher.add_watch("addWatch persistent", f"{b}/n", ADD_WATCH_PERSISTENT)
    for i in range(3):
        env.call(f"set {i}", writer.set, f"{b}/n", str(i).encode())
    env.call("create child", writer.create, f"{b}/n/c", b"")
    env.call("set child", writer.set, f"{b}/n/c", b"x")
    env.call("create grandchild", writer.create, f"{b}/n/c/g", b"")
    env.call("delete grandchild", writer.delete, f"{b}/n/c/g")
    env.call("delete child", writer.delete, f"{b}/n/c")
    env.call("delete node", writer.delete, f"{b}/n")
    env.call("recreate node", writer.create, f"{b}/n", b"again")
    env.call("set after recreate", writer.set, f"{b}/n", b"x")
    watcher.sync()
    watcher.drain()


@scenario
def addwatch_recursive_whole_subtree(env):
    """PERSISTENT_RECURSIVE: created, changed, deleted for every node below,
    never NodeChildrenChanged; siblings with the same prefix are not below."""
    watcher = Api(env, "w")
    writer = env.client()
    b = env.base
    writer.create(f"{b}/r", b"")
    writer.create(f"{b}/rr", b"")
    watcher.add_watch("addWatch recursive", f"{b}/r", ADD_WATCH_PERSISTENT_RECURSIVE)
    env.call("create r/a", writer.create, f"{b}/r/a", b"")
    env.call("create r/a/b/c", writer.create, f"{b}/r/a/b/c", b"", makepath=True)
    env.call("set r/a/b/c", writer.set, f"{b}/r/a/b/c", b"1")
    env.call("set r", writer.set, f"{b}/r", b"1")
    env.call("set rr (not below)", writer.set, f"{b}/rr", b"1")
    env.call("create rr/x (not below)", writer.create, f"{b}/rr/x", b"")
    env.call("delete r/a/b/c", writer.delete, f"{b}/r/a/b/c")
    env.call("delete r/a/b", writer.delete, f"{b}/r/a/b")
    env.call("set r/a twice", writer.set, f"{b}/r/a", b"1")
    env.call("set r/a twice", writer.set, f"{b}/r/a", b"2")
    watcher.sync()
    watcher.drain()


@scenario
def addwatch_on_missing_path(env):
    """addWatch needs no node: PERSISTENT on a missing path sees its creation,
    RECURSIVE on a missing path sees the subtree appear."""
    watcher = Api(env, "w")
    writer = env.client()
    b = env.base
    watcher.add_watch("persistent on missing", f"{b}/later", ADD_WATCH_PERSISTENT)
    watcher.add_watch("recursive on missing", f"{b}/tree", ADD_WATCH_PERSISTENT_RECURSIVE)
    env.call("create later", writer.create, f"{b}/later", b"")
    env.call("create tree/x/y", writer.create, f"{b}/tree/x/y", b"", makepath=True)
    env.call("delete later", writer.delete, f"{b}/later")
    watcher.sync()
    watcher.drain()


@scenario
def addwatch_bad_modes_and_paths(env):
    """addWatch with an unknown mode; a relative path and a path that can never
    exist are stored without validation and simply never fire."""
    watcher = Api(env, "w")
    writer = env.client()
    b = env.base
    watcher.add_watch("mode 2", f"{b}/a", 2)
    watcher.add_watch("mode -1", f"{b}/a", -1)
    watcher.add_watch("relative path", "relative/path", ADD_WATCH_PERSISTENT)
    watcher.add_watch("trailing slash", f"{b}/a/", ADD_WATCH_PERSISTENT)
    watcher.add_watch("after bad ones, good", f"{b}/a", ADD_WATCH_PERSISTENT)
    env.call("create a", writer.create, f"{b}/a", b"")
    watcher.sync()
    watcher.drain()


@scenario
def addwatch_same_connection_dedup(env):
    """One connection gets one notification per event however many of its
    watches match (a recursive ancestor, a persistent node watch, a one-shot)."""
    watcher = Api(env, "w")
    writer = env.client()
    b = env.base
    writer.create(f"{b}/a/b", b"", makepath=True)
    watcher.add_watch("recursive a", f"{b}/a", ADD_WATCH_PERSISTENT_RECURSIVE)
    watcher.add_watch("recursive a again", f"{b}/a", ADD_WATCH_PERSISTENT_RECURSIVE)
    watcher.add_watch("recursive base", b, ADD_WATCH_PERSISTENT_RECURSIVE)
    env.call("set a/b", writer.set, f"{b}/a/b", b"1")
    env.call("create a/b/c", writer.create, f"{b}/a/b/c", b"")
    watcher.sync()
    watcher.drain()


@scenario
def addwatch_two_sessions(env):
    """Two sessions with persistent watches on one node both hear every change;
    closing one session ends only its watches."""
    w1 = Api(env, "w1")
    w2 = Api(env, "w2")
    writer = env.client()
    b = env.base
    writer.create(f"{b}/n", b"")
    w1.add_watch("w1 persistent", f"{b}/n", ADD_WATCH_PERSISTENT)
    w2.add_watch("w2 recursive", b, ADD_WATCH_PERSISTENT_RECURSIVE)
    env.call("set 1", writer.set, f"{b}/n", b"1")
    w1.sync()
    w2.sync()
    w1.rc.close_session()
    env.call("set 2", writer.set, f"{b}/n", b"2")
    w2.sync()
    w2.drain()


@scenario
def addwatch_recursive_sees_ephemeral_expiry(env):
    """Ephemerals removed at session close reach a recursive watch as NodeDeleted."""
    watcher = Api(env, "w")
    owner = env.client()
    b = env.base
    owner.create(f"{b}/members", b"")
    watcher.add_watch("recursive members", f"{b}/members", ADD_WATCH_PERSISTENT_RECURSIVE)
    env.call("join 1", owner.create, f"{b}/members/m1", b"", ephemeral=True)
    env.call("join 2", owner.create, f"{b}/members/m2", b"", ephemeral=True)
    watcher.sync()
    owner.stop()
    time.sleep(0.3)
    watcher.sync()
    watcher.drain()


@scenario
def addwatch_persistent_and_multi(env):
    """A multi's changes reach persistent and recursive watches in op order."""
    watcher = Api(env, "w")
    recursive = Api(env, "r")
    writer = Api(env, "writer")
    b = env.base
    writer.create("p", f"{b}/p")
    recursive.add_watch("recursive p", f"{b}/p", ADD_WATCH_PERSISTENT_RECURSIVE)
    watcher.add_watch("persistent p", f"{b}/p", ADD_WATCH_PERSISTENT)
    writer.multi(
        "multi",
        [
            (OP_CREATE, create_payload(f"{b}/p/a")),
            (OP_SET_DATA, set_data_payload(f"{b}/p/a", b"1")),
            (OP_CREATE, create_payload(f"{b}/p/b")),
            (OP_DELETE, delete_payload(f"{b}/p/a")),
            (OP_SET_DATA, set_data_payload(f"{b}/p", b"p")),
        ],
    )
    watcher.sync()
    recursive.sync()
    recursive.drain()


@scenario
def addwatch_recursive_event_before_reply(env):
    """On the writer's own connection the recursive notification precedes the
    reply of the write that caused it."""
    api = Api(env, "self")
    b = env.base
    api.add_watch("recursive base", b, ADD_WATCH_PERSISTENT_RECURSIVE)
    api.create("create a", f"{b}/a")
    api.set_data("set a", f"{b}/a", b"1")
    api.delete("delete a", f"{b}/a")
    api.drain()


# ===================================================== check / remove watches


@scenario
def checkwatches_standard_types(env):
    """checkWatches for CHILDREN, DATA and ANY on one-shot watches, NoWatcher
    where there is none; an exists watch on a missing node is a DATA watch."""
    w = Api(env, "w")
    writer = env.client()
    b = env.base
    writer.create(f"{b}/d", b"")
    writer.create(f"{b}/c", b"")
    w.get_data("getData+watch d", f"{b}/d", watch=True)
    w.get_children("getChildren+watch c", f"{b}/c", watch=True)
    w.exists("exists+watch missing", f"{b}/missing", watch=True)
    for path in ("d", "c", "missing", "none"):
        for name, kind in (("CHILDREN", 1), ("DATA", 2), ("ANY", 3)):
            w.check_watches(f"check {path} {name}", f"{b}/{path}", kind)


@scenario
def checkwatches_after_trigger_and_other_session(env):
    """A fired one-shot watch is gone; another session cannot remove it. (Another
    session's checkWatches differs between 3.8 and 3.9: test_scenarios_api39_v39.py.)"""
    w = Api(env, "w")
    other = Api(env, "other")
    writer = env.client()
    b = env.base
    writer.create(f"{b}/d", b"")
    w.get_data("getData+watch", f"{b}/d", watch=True)
    other.remove_watches("other session: remove DATA", f"{b}/d", WATCHER_DATA)
    other.remove_watches("other session: remove ANY", f"{b}/d", WATCHER_ANY)
    w.check_watches("own: DATA", f"{b}/d", WATCHER_DATA)
    env.call("set", writer.set, f"{b}/d", b"1")
    w.sync()
    w.check_watches("after it fired: DATA", f"{b}/d", WATCHER_DATA)
    w.check_watches("after it fired: ANY", f"{b}/d", WATCHER_ANY)


@scenario
def removewatches_data_then_children(env):
    """removeWatches DATA leaves the child watch; the removed one never fires;
    removing again is NoWatcher."""
    w = Api(env, "w")
    writer = env.client()
    b = env.base
    writer.create(f"{b}/n", b"")
    w.get_data("getData+watch", f"{b}/n", watch=True)
    w.get_children("getChildren+watch", f"{b}/n", watch=True)
    w.remove_watches("remove DATA", f"{b}/n", WATCHER_DATA)
    w.remove_watches("remove DATA again", f"{b}/n", WATCHER_DATA)
    w.check_watches("check CHILDREN", f"{b}/n", WATCHER_CHILDREN)
    env.call("set (no data watch now)", writer.set, f"{b}/n", b"1")
    env.call("create child", writer.create, f"{b}/n/c", b"")
    w.sync()
    w.remove_watches("remove CHILDREN after it fired", f"{b}/n", WATCHER_CHILDREN)
    w.drain()


@scenario
def removewatches_any_and_missing(env):
    """ANY removes data and child watches together; a path without watches,
    a missing path and another session's watch are NoWatcher."""
    w = Api(env, "w")
    other = Api(env, "other")
    writer = env.client()
    b = env.base
    writer.create(f"{b}/n", b"")
    w.get_data("getData+watch", f"{b}/n", watch=True)
    w.get_children("getChildren+watch", f"{b}/n", watch=True)
    w.exists("exists+watch missing", f"{b}/m", watch=True)
    other.remove_watches("other session ANY", f"{b}/n", WATCHER_ANY)
    w.remove_watches("ANY", f"{b}/n", WATCHER_ANY)
    w.remove_watches("ANY again", f"{b}/n", WATCHER_ANY)
    w.remove_watches("missing path CHILDREN", f"{b}/m", WATCHER_CHILDREN)
    w.remove_watches("missing path DATA (exists watch)", f"{b}/m", WATCHER_DATA)
    w.remove_watches("no such path", f"{b}/zz", WATCHER_ANY)
    env.call("set n", writer.set, f"{b}/n", b"1")
    env.call("create n/c", writer.create, f"{b}/n/c", b"")
    env.call("create m", writer.create, f"{b}/m", b"")
    w.sync()
    w.drain()


@scenario
def removewatches_bad_type(env):
    """WatcherType values outside 1..5 are not a WatcherType."""
    w = Api(env, "w")
    writer = env.client()
    b = env.base
    writer.create(f"{b}/n", b"")
    w.get_data("getData+watch", f"{b}/n", watch=True)
    w.remove_watches("type 0", f"{b}/n", 0)
    w.remove_watches("type 6", f"{b}/n", 6)
    w.check_watches("check type 0", f"{b}/n", 0)
    w.check_watches("check type -1", f"{b}/n", -1)
    w.check_watches("watch still there", f"{b}/n", WATCHER_DATA)


@scenario
def removewatches_any_on_persistent(env):
    """ANY finds and removes persistent and recursive watches; afterwards they
    stay silent."""
    w = Api(env, "w")
    writer = env.client()
    b = env.base
    writer.create(f"{b}/p", b"")
    writer.create(f"{b}/r", b"")
    w.add_watch("persistent p", f"{b}/p", ADD_WATCH_PERSISTENT)
    w.add_watch("recursive r", f"{b}/r", ADD_WATCH_PERSISTENT_RECURSIVE)
    w.check_watches("check p ANY", f"{b}/p", WATCHER_ANY)
    w.check_watches("check r ANY", f"{b}/r", WATCHER_ANY)
    w.check_watches("check r/x DATA (below a recursive watch)", f"{b}/r/x", WATCHER_DATA)
    env.call("set p", writer.set, f"{b}/p", b"1")
    env.call("create r/x", writer.create, f"{b}/r/x", b"")
    w.sync()
    w.remove_watches("remove p ANY", f"{b}/p", WATCHER_ANY)
    w.remove_watches("remove r ANY", f"{b}/r", WATCHER_ANY)
    w.check_watches("check p ANY after", f"{b}/p", WATCHER_ANY)
    env.call("set p again", writer.set, f"{b}/p", b"2")
    env.call("set r/x", writer.set, f"{b}/r/x", b"2")
    w.sync()
    w.drain()


# ============================================ notifications filtered by READ


def alice_only() -> list[ACL]:
    return [ACL(PERMS_ALL, Id("digest", digest_id("alice:pw")))]


@scenario
def notifications_filtered_by_read_acl(env):
    """A notification about a node the watcher may not READ is not delivered
    (CVE-2024-23944: 3.9, 3.8.4, and Debian's 3.8.0 backport); a one-shot watch
    is used up all the same. The parent's child event uses the parent's ACL.
    (Each watch mode on its own connection: 3.8 and 3.9 differ when one
    connection mixes modes on one path, see test_scenarios_api39_v39.py.)"""
    watcher = Api(env, "watcher")
    children = Api(env, "children")
    recursive = Api(env, "recursive")
    alice = env.client(auth_data=[("digest", "alice:pw")])
    b = env.base
    alice.create(f"{b}/s", b"")
    alice.create(f"{b}/o", b"")
    watcher.get_data("getData+watch s", f"{b}/s", watch=True)
    watcher.exists("exists+watch s2", f"{b}/s2", watch=True)
    children.get_children("children+watch base", b, watch=True)
    recursive.add_watch("recursive base", b, ADD_WATCH_PERSISTENT_RECURSIVE)
    env.call("setACL s: alice only", alice.set_acls, f"{b}/s", alice_only())
    env.call("set s", alice.set, f"{b}/s", b"1")
    env.call("create s2 alice only", alice.create, f"{b}/s2", b"", acl=alice_only())
    env.call("set o", alice.set, f"{b}/o", b"1")
    env.call("delete s", alice.delete, f"{b}/s")
    for api in (watcher, children, recursive):
        api.sync()
    watcher.check_watches("s2 exists watch used up", f"{b}/s2", WATCHER_DATA)
    env.call("setACL s2 open", alice.set_acls, f"{b}/s2", OPEN_ACL_UNSAFE)
    env.call("set s2", alice.set, f"{b}/s2", b"1")
    for api in (watcher, children, recursive):
        api.sync()
    recursive.drain()


@scenario
def notifications_below_an_unreadable_root(env):
    """addWatch needs no READ: a recursive watch on an unreadable node hears
    about readable nodes below it, never about the root itself; a persistent
    watch there hears nothing. With the owner's auth everything arrives."""
    recursive = Api(env, "recursive")
    persistent = Api(env, "persistent")
    reader = Api(env, "reader")
    alice = env.client(auth_data=[("digest", "alice:pw")])
    b = env.base
    alice.create(f"{b}/private", b"", acl=alice_only())
    recursive.add_watch("recursive private", f"{b}/private", ADD_WATCH_PERSISTENT_RECURSIVE)
    persistent.add_watch("persistent private", f"{b}/private", ADD_WATCH_PERSISTENT)
    reader.add_auth("reader: add digest alice", "digest", b"alice:pw")
    reader.add_watch("reader: recursive private", f"{b}/private", ADD_WATCH_PERSISTENT_RECURSIVE)
    env.call("set private", alice.set, f"{b}/private", b"1")
    env.call("create private/pub", alice.create, f"{b}/private/pub", b"")
    env.call("create private/hidden", alice.create, f"{b}/private/hidden", b"", acl=alice_only())
    env.call("set private/pub", alice.set, f"{b}/private/pub", b"1")
    env.call("set private/hidden", alice.set, f"{b}/private/hidden", b"1")
    env.call("delete private/hidden", alice.delete, f"{b}/private/hidden")
    for api in (recursive, persistent, reader):
        api.sync()
    reader.drain(0.1)


# ========================================= reconfig, getConfig, SASL (standalone)


@scenario
def reconfig_refused_on_standalone(env):
    """reconfig (16) on a standalone server without reconfigEnabled is
    ReconfigDisabled; getConfig is a getData of /zookeeper/config."""
    api = Api(env, "r")
    api.call(
        "reconfig",
        OP_RECONFIG,
        ustring("server.2=127.0.0.1:2888:3888;2181") + ustring(None) + ustring(None) + int64(-1),
        dec_data_stat,
    )
    api.exists("session still usable", env.base)
    api.call(
        "getConfig (getData /zookeeper/config)",
        OP_GET_DATA,
        path_watch("/zookeeper/config"),
        lambda body: ("data+stat", len(body) > 0),
    )


@scenario
def sasl_packet_without_sasl(env):
    """A SASL (102) token on a server without SASL configured: ZooKeeper answers
    a SetSASLResponse and the session goes on."""
    api = Api(env, "s")
    api.call(
        "sasl", OP_SASL, buffer(b"\x00\x01token"), lambda body: ("token", Reader(body).buffer())
    )
    api.call("next request", OP_EXISTS, path_watch("/"), lambda body: "stat")


# ================================================================ SetWatches2


@scenario
def setwatches2_replays_every_kind(env):
    """SetWatches2 on a resumed session: one-shot lists behave as SetWatches
    (changes while away fire at once); persistent and recursive watches are
    re-armed without replay and fire on the next changes."""
    writer = env.client()
    b = env.base
    for name in ("d", "c", "p", "r"):
        writer.create(f"{b}/{name}", b"0")
    api = Api(env, "resumed")
    seen = api.last_zxid()
    env.record("relative zxid", Zxid(seen))
    api.drop_connection()
    env.call("set d while away", writer.set, f"{b}/d", b"1")
    env.call("create c/x while away", writer.create, f"{b}/c/x", b"")
    env.call("set p while away", writer.set, f"{b}/p", b"1")
    env.call("create r/x while away", writer.create, f"{b}/r/x", b"")
    api.resume(seen)
    api.set_watches2(
        "setWatches2",
        set_watches2(
            seen,
            data=[f"{b}/d"],
            exist=[f"{b}/e"],
            child=[f"{b}/c"],
            persistent=[f"{b}/p"],
            recursive=[f"{b}/r"],
        ),
    )
    api.sync()
    env.call("set p", writer.set, f"{b}/p", b"2")
    env.call("set p again", writer.set, f"{b}/p", b"3")
    env.call("create r/x/y", writer.create, f"{b}/r/x/y", b"")
    env.call("create e", writer.create, f"{b}/e", b"")
    env.call("set d (one-shot already fired)", writer.set, f"{b}/d", b"2")
    api.sync()
    api.check_watches("p persistent still there (ANY)", f"{b}/p", WATCHER_ANY)
    api.drain()


@scenario
def setwatches2_empty_and_on_fresh_session(env):
    """SetWatches2 with empty lists is accepted; on a brand-new session it arms
    watches just the same."""
    writer = env.client()
    b = env.base
    writer.create(f"{b}/n", b"")
    api = Api(env, "fresh")
    api.set_watches2("empty setWatches2", set_watches2(0))
    api.set_watches2(
        "setWatches2 on a fresh session",
        set_watches2(api.last_zxid(), persistent=[f"{b}/n"], recursive=[f"{b}/t"]),
    )
    env.call("set n", writer.set, f"{b}/n", b"1")
    env.call("create t/u", writer.create, f"{b}/t/u", b"", makepath=True)
    api.sync()
    api.drain()


@scenario
def setwatches_v1_after_addwatch(env):
    """The old SetWatches (101) carries no persistent lists: persistent watches
    are not restored by it after a reconnect."""
    writer = env.client()
    b = env.base
    writer.create(f"{b}/n", b"")
    api = Api(env, "w")
    api.add_watch("persistent n", f"{b}/n", ADD_WATCH_PERSISTENT)
    seen = api.last_zxid()
    api.drop_connection()
    api.resume(seen)
    api.call(
        "setWatches (v1) with data watch on n",
        OP_SET_WATCHES,
        int64(seen) + string_vector([f"{b}/n"]) + string_vector([]) + string_vector([]),
        xid=SET_WATCHES_XID,
    )
    env.call("set 1", writer.set, f"{b}/n", b"1")
    env.call("set 2", writer.set, f"{b}/n", b"2")
    api.sync()
    api.drain()


# ================================================================= multiRead


@scenario
def multiread_data_and_children(env):
    """multiRead returns getData (data, Stat) and getChildren (names) results in
    op order; a null data node reads as null."""
    api = Api(env, "r")
    zk = env.client()
    b = env.base
    zk.create(f"{b}/a", b"alpha")
    zk.create(f"{b}/a/x", b"")
    zk.create(f"{b}/a/y", b"")
    zk.create(f"{b}/empty", b"")
    nul = Api(env, "nul")
    nul.create("null data node", f"{b}/nul", data=None)
    api.multi_read(
        "multiRead",
        [
            (OP_GET_DATA, path_watch(f"{b}/a")),
            (OP_GET_CHILDREN, path_watch(f"{b}/a")),
            (OP_GET_DATA, path_watch(f"{b}/nul")),
            (OP_GET_CHILDREN, path_watch(f"{b}/empty")),
            (OP_GET_DATA, path_watch(f"{b}/a/x")),
        ],
    )
    api.multi_read("empty multiRead", [])


@scenario
def multiread_per_op_errors(env):
    """Each op of a multiRead fails on its own (NoNode, NoAuth) and the rest still
    answer: unlike multi, nothing is all-or-nothing."""
    api = Api(env, "r")
    zk = env.client()
    b = env.base
    zk.create(f"{b}/ok", b"fine")
    zk.create(f"{b}/secret", b"hidden", acl=no_read_acl())
    api.multi_read(
        "multiRead with failures",
        [
            (OP_GET_DATA, path_watch(f"{b}/missing")),
            (OP_GET_DATA, path_watch(f"{b}/ok")),
            (OP_GET_CHILDREN, path_watch(f"{b}/secret")),
            (OP_GET_DATA, path_watch(f"{b}/secret")),
            (OP_GET_CHILDREN, path_watch(f"{b}/missing")),
            (OP_GET_CHILDREN, path_watch(b)),
        ],
    )


@scenario
def multiread_bad_requests(env):
    """A write op in multiRead, or a read op in multi, is not a valid request;
    the session survives it."""
    api = Api(env, "r")
    b = env.base
    api.create("n", f"{b}/n", b"x")
    api.multi_read("multiRead with a create", [(OP_CREATE, create_payload(f"{b}/c"))])
    api.multi_read(
        "multiRead mixing read and write",
        [(OP_GET_DATA, path_watch(f"{b}/n")), (OP_SET_DATA, set_data_payload(f"{b}/n", b"y"))],
    )
    api.multi("multi with a getData", [(OP_GET_DATA, path_watch(f"{b}/n"))])
    api.get_data("session still fine", f"{b}/n")
    api.exists("c not created", f"{b}/c")


@scenario
def multiread_sets_no_watch(env):
    """The watch flag inside a multiRead op is dropped: no watch is left behind."""
    api = Api(env, "r")
    writer = env.client()
    b = env.base
    writer.create(f"{b}/n", b"")
    api.multi_read(
        "multiRead with watch=true",
        [(OP_GET_DATA, path_watch(f"{b}/n", True)), (OP_GET_CHILDREN, path_watch(f"{b}/n", True))],
    )
    api.check_watches("no watch left", f"{b}/n", WATCHER_ANY)
    env.call("set", writer.set, f"{b}/n", b"1")
    env.call("create child", writer.create, f"{b}/n/c", b"")
    api.sync()
    api.drain()


# ============================================================== getEphemerals


@scenario
def getephemerals_prefix_rules(env):
    """getEphemerals lists only this session's ephemerals; the prefix is a plain
    string prefix (not a path); "/" and "" mean all."""
    api = Api(env, "owner")
    other = Api(env, "other")
    b = env.base
    api.create("dir", f"{b}/e")
    for path in (f"{b}/e/one", f"{b}/eph", f"{b}/e/two", f"{b}/x"):
        api.create(f"ephemeral {path[len(b) :]}", path, flags=EPHEMERAL)
    api.create("sequential ephemeral", f"{b}/e/s-", flags=EPHEMERAL_SEQUENTIAL)
    other.create("other session's", f"{b}/e/other", flags=EPHEMERAL)
    api.create("persistent not listed", f"{b}/e/persistent")
    api.get_ephemerals("prefix base/e", f"{b}/e")
    api.get_ephemerals("prefix base/e/", f"{b}/e/")
    api.get_ephemerals("prefix base/", f"{b}/")
    api.get_ephemerals("prefix base/e/t", f"{b}/e/t")
    api.get_ephemerals("prefix no match", f"{b}/zzz")
    api.get_ephemerals("other's", f"{b}/")


@scenario
def getephemerals_all_and_after_delete(env):
    """With "/" (or an empty prefix) all of the session's ephemerals come back;
    a deleted one disappears from the list."""
    api = Api(env, "owner")
    fresh = Api(env, "fresh")
    b = env.base
    api.create("a", f"{b}/a", flags=EPHEMERAL)
    api.create("b", f"{b}/b", flags=EPHEMERAL)
    api.get_ephemerals("prefix /", "/")
    api.get_ephemerals("prefix empty", "")
    api.get_ephemerals("prefix spaces", "  ")
    api.delete("delete a", f"{b}/a")
    api.get_ephemerals("after delete", "/")
    fresh.get_ephemerals("session without ephemerals", "/")


@scenario
def getephemerals_in_multi_and_sequential(env):
    """Ephemerals made by a multi are listed; a failed multi's are not."""
    api = Api(env, "owner")
    b = env.base
    api.multi(
        "multi creates two ephemerals",
        [
            (OP_CREATE, create_payload(f"{b}/m1", b"", EPHEMERAL)),
            (OP_CREATE, create_payload(f"{b}/m-", b"", EPHEMERAL_SEQUENTIAL)),
        ],
    )
    api.multi(
        "failing multi",
        [
            (OP_CREATE, create_payload(f"{b}/m3", b"", EPHEMERAL)),
            (OP_CREATE, create_payload(f"{b}/m1", b"", EPHEMERAL)),
        ],
    )
    api.get_ephemerals("listed", b)


# ======================================================== getAllChildrenNumber


@scenario
def getallchildrennumber_counts(env):
    """getAllChildrenNumber counts every node below the path, not the node itself;
    a leaf is 0; a missing node NoNode; a sibling with the same prefix is not below."""
    api = Api(env, "n")
    zk = env.client()
    b = env.base
    for p in ("t/a/x", "t/a/y", "t/b", "tt/z"):
        zk.create(f"{b}/{p}", b"", makepath=True)
    api.get_all_children_number("t", f"{b}/t")
    api.get_all_children_number("t/a", f"{b}/t/a")
    api.get_all_children_number("leaf", f"{b}/t/b")
    api.get_all_children_number("base", b)
    api.get_all_children_number("missing", f"{b}/nope")
    env.call("delete t/a/x", zk.delete, f"{b}/t/a/x")
    api.create("ephemeral", f"{b}/t/e", flags=EPHEMERAL)
    api.get_all_children_number("t after changes", f"{b}/t")


@scenario
def getallchildrennumber_acl(env):
    """getAllChildrenNumber needs READ on the node itself (not on the children)."""
    api = Api(env, "n")
    zk = env.client()
    b = env.base
    zk.create(f"{b}/secret", b"", acl=no_read_acl())
    zk.create(f"{b}/open", b"")
    zk.create(f"{b}/open/hidden", b"", acl=no_read_acl())
    zk.create(f"{b}/open/hidden/x", b"")
    api.get_all_children_number("no READ", f"{b}/secret")
    api.get_all_children_number("READ here, not below", f"{b}/open")


# ===================================================================== whoAmI


@scenario
def whoami_ip_and_digest(env):
    """whoAmI lists the connection's auth ids as (scheme, user): the ip always,
    each digest user once however often it is added."""
    api = Api(env, "w")
    api.who_am_i("anonymous")
    api.add_auth("add digest alice", "digest", b"alice:secret")
    api.who_am_i("after alice")
    api.add_auth("add digest bob", "digest", b"bob:pw:with:colons")
    api.add_auth("add alice again", "digest", b"alice:secret")
    api.who_am_i("after bob and alice again")
    other = Api(env, "other")
    other.who_am_i("another connection is anonymous")


@scenario
def whoami_after_reconnect(env):
    """Auth belongs to the connection: a resumed session starts anonymous again."""
    api = Api(env, "w")
    api.add_auth("add digest", "digest", b"carol:pw")
    api.who_am_i("with digest")
    seen = api.last_zxid()
    api.drop_connection()
    api.resume(seen)
    api.who_am_i("resumed")


# ==================================================================== quotas


QUOTA_ROOT = "/zookeeper/quota"  # Quotas.quotaZookeeper


def quota_limits_text(count=-1, bytes_=-1, count_hard=-1, bytes_hard=-1) -> bytes:
    """StatsTrack.toString as SetQuotaCommand writes zookeeper_limits."""
    extras = {"countHardLimit": count_hard, "byteHardLimit": bytes_hard}
    tail = "".join(f";{k}={v}" for k, v in sorted(extras.items()))
    return f"count={count},bytes={bytes_}={tail}".encode()


def set_quota(env, zk, path: str, **limits) -> None:
    """SetQuotaCommand.createQuota through kazoo: the parents of the quota path,
    zookeeper_limits, then zookeeper_stats with count=0,bytes=0."""
    quota = QUOTA_ROOT + path
    zk.ensure_path(quota)
    limits_path = zk.create(quota + "/zookeeper_limits", quota_limits_text(**limits))
    stats_path = zk.create(quota + "/zookeeper_stats", b"count=0,bytes=0")
    env.record("setquota created", [_quota_relative(env, p) for p in (limits_path, stats_path)])


def _quota_relative(env, path: str) -> str:
    """/zookeeper/quota<base>/x as "<quota><base>/x", equal on both servers."""
    return path.replace(QUOTA_ROOT + env.base, "<quota><base>", 1)


def list_quota(env, zk, path: str, label: str) -> None:
    """ListQuotaCommand: the two nodes' text (stats are kept by the server)."""
    quota = QUOTA_ROOT + path
    env.call(f"{label}: limits", _data, zk, quota + "/zookeeper_limits")
    env.call(f"{label}: stats", _data, zk, quota + "/zookeeper_stats")


def _data(zk, path: str) -> bytes:
    return zk.get(path)[0]


def del_quota(zk, path: str) -> None:
    """DelQuotaCommand without options: delete the quota node and, bottom-up, the
    parents it alone needed."""
    quota = QUOTA_ROOT + path
    zk.delete(quota, recursive=True)
    parent = quota.rsplit("/", 1)[0]
    while parent != QUOTA_ROOT and not zk.get_children(parent):
        zk.delete(parent)
        parent = parent.rsplit("/", 1)[0]


@scenario
def quota_stats_start_from_the_subtree(env):
    """Creating zookeeper_stats makes the server count the existing subtree (the
    node itself included) and replace the client's count=0,bytes=0."""
    zk = env.client()
    b = env.base
    zk.create(f"{b}/q/a", b"12345", makepath=True)
    zk.create(f"{b}/q/b", b"xy")
    set_quota(env, zk, f"{b}/q", count=10)
    list_quota(env, zk, f"{b}/q", "after setquota -n 10")
    env.call("stats stat", zk.exists, QUOTA_ROOT + f"{b}/q/zookeeper_stats")
    del_quota(zk, f"{b}/q")


@scenario
def quota_stats_follow_changes(env):
    """Creates, deletes and data changes below the quota root update the stats
    text (count and bytes); nodes outside are not counted."""
    zk = env.client()
    b = env.base
    zk.create(f"{b}/q", b"")
    set_quota(env, zk, f"{b}/q", bytes_=100)
    env.call("create a", zk.create, f"{b}/q/a", b"aaaa")
    env.call("create a/deep", zk.create, f"{b}/q/a/deep", b"dd")
    env.call("set a bigger", zk.set, f"{b}/q/a", b"aaaaaaaaaa")
    list_quota(env, zk, f"{b}/q", "after creates")
    env.call("delete a/deep", zk.delete, f"{b}/q/a/deep")
    env.call("set a smaller", zk.set, f"{b}/q/a", b"a")
    env.call("outside", zk.create, f"{b}/q2", b"not counted")
    env.call("ephemeral inside", zk.create, f"{b}/q/e", b"eph", ephemeral=True)
    list_quota(env, zk, f"{b}/q", "after deletes")
    del_quota(zk, f"{b}/q")


@scenario
def quota_exceeded_without_enforce(env):
    """Without enforceQuota, soft and hard limits are only bookkeeping: every
    create and setData beyond them succeeds."""
    zk = env.client()
    b = env.base
    zk.create(f"{b}/q", b"")
    set_quota(env, zk, f"{b}/q", count=2, count_hard=3, bytes_hard=5)
    for i in range(4):
        env.call(f"create {i}", zk.create, f"{b}/q/n{i}", b"")
    env.call("set beyond bytes", zk.set, f"{b}/q/n0", b"0123456789")
    list_quota(env, zk, f"{b}/q", "beyond every limit")
    del_quota(zk, f"{b}/q")


@scenario
def quota_update_and_delete(env):
    """setquota on an existing quota rewrites zookeeper_limits in place (setData);
    delquota removes the nodes and the server stops counting."""
    zk = env.client()
    b = env.base
    zk.create(f"{b}/q/x", b"abc", makepath=True)
    set_quota(env, zk, f"{b}/q", count=5)
    quota = QUOTA_ROOT + f"{b}/q"
    env.call(
        "setquota -B 100 (rewrite)",
        zk.set,
        quota + "/zookeeper_limits",
        quota_limits_text(count=5, bytes_hard=100),
    )
    list_quota(env, zk, f"{b}/q", "after update")
    env.call("quota dir children", zk.get_children, quota)
    del_quota(zk, f"{b}/q")
    env.call("quota dir gone", zk.exists, quota)
    env.call("create after delquota", zk.create, f"{b}/q/y", b"")
    set_quota(env, zk, f"{b}/q", count=5)
    list_quota(env, zk, f"{b}/q", "fresh quota")
    del_quota(zk, f"{b}/q")


@scenario
def quota_nested_prefix(env):
    """A node counts towards the deepest quota root above it only."""
    zk = env.client()
    b = env.base
    zk.create(f"{b}/outer/inner", b"", makepath=True)
    set_quota(env, zk, f"{b}/outer", count=100)
    set_quota(env, zk, f"{b}/outer/inner", count=100)
    env.call("create in inner", zk.create, f"{b}/outer/inner/x", b"123")
    env.call("create in outer", zk.create, f"{b}/outer/y", b"12")
    list_quota(env, zk, f"{b}/outer", "outer")
    list_quota(env, zk, f"{b}/outer/inner", "inner")
    del_quota(zk, f"{b}/outer/inner")
    del_quota(zk, f"{b}/outer")
