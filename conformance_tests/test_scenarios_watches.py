"""Differential scenarios: one-shot watches, their triggers, order and replay.

kazoo scenarios record events per watcher label (arrival order within a label
is compared exactly). Where the order on the wire itself is the point (an
event before the reply that caused it, SetWatches replay, persistent watches)
the scenario speaks the protocol through a RawClient and records every frame.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

from kazoo.protocol.states import KazooState
from kazoo.security import OPEN_ACL_UNSAFE

from .harness import Zxid, scenario
from .rawclient import (
    OP_CREATE,
    OP_EXISTS,
    OP_GET_CHILDREN,
    OP_GET_DATA,
    OP_SET_DATA,
    REPLY_HEADER,
    ConnectionClosed,
    acl_vector,
    boolean,
    buffer,
    int32,
    int64,
    read_ustring,
    ustring,
)

# ZooDefs.OpCode and the client's reserved xids (ClientCnxn).
OP_SET_WATCHES = 101
OP_ADD_WATCH = 106
NOTIFICATION_XID = -1
SET_WATCHES_XID = -8
# AddWatchMode
ADD_WATCH_PERSISTENT = 0
ADD_WATCH_PERSISTENT_RECURSIVE = 1
# Watcher.Event.EventType / KeeperState, as numbers on the wire.
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
RECONNECT_TIMEOUT_S = 10.0
QUIET_S = 0.5  # how long "nothing more arrives" is watched for


# ------------------------------------------------------------- raw helpers


class Wire:
    """Pipelined requests on one RawClient; every frame read is logged in order."""

    def __init__(self, env, rc, name: str) -> None:
        self.env = env
        self.rc = rc
        self.name = name
        self.xid = 0
        self.labels: dict[int, str] = {}

    def send(self, label: str, op: int, payload: bytes, xid: int | None = None) -> int:
        if xid is None:
            self.xid += 1
            xid = self.xid
        self.labels[xid] = label
        self.rc.send_frame(int32(xid) + int32(op) + payload)
        return xid

    def read_until(self, xid: int, timeout_s: float = 5.0) -> None:
        """Log every frame up to and including the reply to xid."""
        self.rc._sock.settimeout(timeout_s)
        while True:
            body = self.rc.recv_frame()
            rxid, zxid, err = REPLY_HEADER.unpack_from(body, 0)
            if rxid == NOTIFICATION_XID:
                self.env.record(f"{self.name} frame", notification(self.env, body))
                continue
            label = self.labels.get(rxid, f"xid {rxid}")
            self.env.record(f"{self.name} frame", ("reply", label, err))
            if rxid == xid:
                return

    def drain(self, quiet_s: float = QUIET_S) -> None:
        """Log whatever notifications arrive within quiet_s (one-shot: none)."""
        self.rc._sock.settimeout(quiet_s)
        try:
            while True:
                body = self.rc.recv_frame()
                rxid, _, err = REPLY_HEADER.unpack_from(body, 0)
                if rxid == NOTIFICATION_XID:
                    self.env.record(f"{self.name} frame", notification(self.env, body))
                else:
                    self.env.record(f"{self.name} frame", ("unexpected reply", rxid, err))
        except TimeoutError:
            self.env.record(f"{self.name} quiet", True)


def notification(env, body: bytes) -> tuple:
    etype, state = struct.unpack_from(">ii", body, REPLY_HEADER.size)
    path, _ = read_ustring(body, REPLY_HEADER.size + 8)
    return (
        "event",
        EVENT_TYPES.get(etype, etype),
        KEEPER_STATES.get(state, state),
        path,
    )


def path_watch(path: str, watch: bool = True) -> bytes:
    return ustring(path) + boolean(watch)


def string_vector(paths: list[str]) -> bytes:
    return int32(len(paths)) + b"".join(ustring(p) for p in paths)


def set_watches(relative_zxid: int, data: list[str], exist: list[str], child: list[str]) -> bytes:
    return int64(relative_zxid) + string_vector(data) + string_vector(exist) + string_vector(child)


def create_payload(path: str, data: bytes = b"", flags: int = 0) -> bytes:
    return ustring(path) + buffer(data) + acl_vector() + int32(flags)


def last_zxid(rc) -> int:
    """The zxid the server reports in a reply header: the session's view."""
    return rc.exists("/").zxid


# --------------------------------------------------------- one-shot basics


@scenario
def watch_data_fires_once(env):
    """A getData watch fires NodeDataChanged once; the second set is silent."""
    zk = env.client()
    other = env.client()
    path = env.base + "/a"
    zk.create(path, b"0")
    w = env.watcher("data")
    env.call("get+watch", zk.get, path, watch=w)
    env.call("set 1", other.set, path, b"1")
    env.wait_events(1)
    env.call("set 2", other.set, path, b"2")
    env.call("set 3 same client", zk.set, path, b"3")
    env.wait_events(1)
    env.call("get", zk.get, path)


@scenario
def watch_exists_missing_then_create(env):
    """exists() on a missing node leaves a watch that fires NodeCreated, once."""
    zk = env.client()
    other = env.client()
    path = env.base + "/later"
    w = env.watcher("exists")
    env.call("exists missing+watch", zk.exists, path, watch=w)
    env.call("create", other.create, path, b"x")
    env.wait_events(1)
    env.call("set after create", other.set, path, b"y")
    env.call("delete", other.delete, path)
    env.wait_events(1)


@scenario
def watch_exists_existing_fires_on_set_and_delete(env):
    """exists() on a present node watches its data: NodeDataChanged, then re-armed NodeDeleted."""
    zk = env.client()
    path = env.base + "/a"
    zk.create(path, b"0")
    w = env.watcher("exists")
    env.call("exists+watch", zk.exists, path, watch=w)
    env.call("set", zk.set, path, b"1")
    env.wait_events(1)
    env.call("exists+watch again", zk.exists, path, watch=w)
    env.call("delete", zk.delete, path)
    env.wait_events(2)


@scenario
def watch_children_fires_once(env):
    """A child watch fires NodeChildrenChanged once; child data changes never fire it."""
    zk = env.client()
    other = env.client()
    zk.create(env.base + "/p/c0", b"", makepath=True)
    w = env.watcher("children")
    env.call("children+watch", zk.get_children, env.base + "/p", watch=w)
    env.call("set child data", other.set, env.base + "/p/c0", b"changed")
    env.call("set parent data", other.set, env.base + "/p", b"changed")
    env.call("create grandchild", other.create, env.base + "/p/c0/g", b"")
    env.wait_events(0)
    env.call("create child 1", other.create, env.base + "/p/c1", b"")
    env.call("create child 2", other.create, env.base + "/p/c2", b"")
    env.call("delete child 1", other.delete, env.base + "/p/c1")
    env.wait_events(1)


@scenario
def watch_delete_fires_data_and_child_watches(env):
    """Deleting a node fires its data watch, its exists watch and its own child watch
    (NodeDeleted each) and the parent's child watch (NodeChildrenChanged)."""
    zk = env.client()
    other = env.client()
    node = env.base + "/p/n"
    zk.create(node, b"", makepath=True)
    data_w = env.watcher("data")
    child_w = env.watcher("own children")
    parent_w = env.watcher("parent children")
    env.call("get+watch", zk.get, node, watch=data_w)
    env.call("children+watch", zk.get_children, node, watch=child_w)
    env.call("parent children+watch", zk.get_children, env.base + "/p", watch=parent_w)
    env.call("delete", other.delete, node)
    env.wait_events(3)
    env.call("recreate", other.create, node, b"")
    env.wait_events(3)


@scenario
def watch_parent_deleted(env):
    """Watches on a child and on its parent when the whole subtree is deleted."""
    zk = env.client()
    other = env.client()
    zk.create(env.base + "/p/c", b"", makepath=True)
    child_data = env.watcher("child data")
    parent_data = env.watcher("parent data")
    parent_children = env.watcher("parent children")
    missing_grandchild = env.watcher("grandchild exists")
    env.call("get child+watch", zk.get, env.base + "/p/c", watch=child_data)
    env.call("get parent+watch", zk.get, env.base + "/p", watch=parent_data)
    env.call("children parent+watch", zk.get_children, env.base + "/p", watch=parent_children)
    env.call("exists grandchild+watch", zk.exists, env.base + "/p/c/g", watch=missing_grandchild)
    env.call("delete child", other.delete, env.base + "/p/c")
    env.call("delete parent", other.delete, env.base + "/p")
    env.wait_events(3)
    env.call("exists parent", zk.exists, env.base + "/p")
    env.call("create p/c/g again", other.create, env.base + "/p/c/g", b"", makepath=True)
    env.wait_events(4)


@scenario
def watch_get_on_missing_node_sets_nothing(env):
    """getData/getChildren on a missing node fail with NoNode and leave no watch."""
    zk = env.client()
    other = env.client()
    path = env.base + "/missing"
    data_w = env.watcher("get watch")
    child_w = env.watcher("children watch")
    env.call("get missing+watch", zk.get, path, watch=data_w)
    env.call("children missing+watch", zk.get_children, path, watch=child_w)
    env.call("create", other.create, path, b"")
    env.call("create child", other.create, path + "/c", b"")
    env.call("set", other.set, path, b"x")
    env.wait_events(0)


@scenario
def watch_several_clients_one_node(env):
    """Three sessions watching one node each get exactly one event per kind."""
    path = env.base + "/shared"
    writer = env.client()
    writer.create(path, b"0")
    watchers = []
    for i in range(3):
        zk = env.client()
        w = env.watcher(f"client {i}")
        env.call(f"client {i} get+watch", zk.get, path, watch=w)
        env.call(f"client {i} exists+watch", zk.exists, path, watch=w)
        watchers.append(zk)
    env.call("set", writer.set, path, b"1")
    env.wait_events(3)
    env.call("set again", writer.set, path, b"2")
    env.wait_events(3)


@scenario
def watch_set_acl_fires_nothing(env):
    """setACL changes no data: data, exists and child watches all stay armed."""
    zk = env.client()
    other = env.client()
    path = env.base + "/a"
    zk.create(path, b"0")
    w = env.watcher("all")
    env.call("get+watch", zk.get, path, watch=w)
    env.call("children+watch", zk.get_children, path, watch=w)
    env.call("set_acls", other.set_acls, path, OPEN_ACL_UNSAFE)
    env.call("stat after set_acls", other.exists, path)
    env.wait_events(0)
    env.call("set data", other.set, path, b"1")
    env.call("create child", other.create, path + "/c", b"")
    env.wait_events(2)


@scenario
def watch_sync_fires_nothing(env):
    """sync and reads change nothing; watches stay armed."""
    zk = env.client()
    path = env.base + "/a"
    zk.create(path, b"0")
    w = env.watcher("data")
    env.call("get+watch", zk.get, path, watch=w)
    env.call("sync", zk.sync, path)
    env.call("get again", zk.get, path)
    env.call("children", zk.get_children, path)
    env.wait_events(0)
    env.call("set", zk.set, path, b"1")
    env.wait_events(1)


@scenario
def watch_sequential_and_ephemeral_children(env):
    """Sequential and ephemeral creates fire the parent's child watch; ephemeral
    removal at session close fires data and child watches of other sessions."""
    zk = env.client()
    owner = env.client()
    parent = env.base + "/q"
    zk.create(parent, b"")
    w = env.watcher("children")
    env.call("children+watch", zk.get_children, parent, watch=w)
    eph = env.call(
        "create ephemeral sequential",
        owner.create,
        parent + "/n-",
        b"",
        ephemeral=True,
        sequence=True,
    )
    env.wait_events(1)
    eph_w = env.watcher("ephemeral data")
    env.call("children+watch again", zk.get_children, parent, watch=w)
    env.call("get ephemeral+watch", zk.get, eph, watch=eph_w)
    owner.stop()
    env.wait_events(3)
    env.call("children after close", zk.get_children, parent)


# ----------------------------------------------------------- multi (txns)


@scenario
def watch_multi_events_in_op_order(env):
    """A multi's events arrive in the order of its ops, on one watcher."""
    zk = env.client()
    other = env.client()
    b = env.base
    for name in ("a", "c", "d"):
        zk.create(f"{b}/{name}", b"0")
    w = env.watcher("one watcher")
    env.call("get d+watch", zk.get, f"{b}/d", watch=w)
    env.call("exists b+watch", zk.exists, f"{b}/b", watch=w)
    env.call("children c+watch", zk.get_children, f"{b}/c", watch=w)
    env.call("get a+watch", zk.get, f"{b}/a", watch=w)
    tx = other.transaction()
    tx.set_data(f"{b}/a", b"1")
    tx.create(f"{b}/b", b"")
    tx.create(f"{b}/c/x", b"")
    tx.delete(f"{b}/d")
    env.call("multi", tx.commit)
    env.wait_events(4)


@scenario
def watch_failed_multi_fires_nothing(env):
    """A multi that fails on its last op applies nothing and so fires nothing."""
    zk = env.client()
    other = env.client()
    b = env.base
    zk.create(f"{b}/a", b"0")
    w = env.watcher("watch")
    env.call("get a+watch", zk.get, f"{b}/a", watch=w)
    env.call("exists b+watch", zk.exists, f"{b}/b", watch=w)
    env.call("children base+watch", zk.get_children, b, watch=w)
    tx = other.transaction()
    tx.set_data(f"{b}/a", b"1")
    tx.create(f"{b}/b", b"")
    tx.check(f"{b}/a", 99)
    env.call("failing multi", tx.commit)
    env.wait_events(0)
    env.call("state after", zk.get, f"{b}/a")
    env.call("create b for real", other.create, f"{b}/b", b"")
    env.wait_events(2)


# ------------------------------------------------------- order on the wire


@scenario
def watch_event_before_reply_same_client(env):
    """On one connection the notification precedes the reply of the write that
    caused it, and replies keep request order."""
    rc = env.raw()
    wire = Wire(env, rc, "wire")
    path = env.base + "/a"
    rc.create(path, b"0")
    rc.create(env.base + "/other", b"")
    wire.send("getData+watch", OP_GET_DATA, path_watch(path))
    wire.send("getChildren+watch", OP_GET_CHILDREN, path_watch(env.base))
    wire.send("exists missing+watch", OP_EXISTS, path_watch(env.base + "/b"))
    wire.send("setData", OP_SET_DATA, ustring(path) + buffer(b"1") + int32(-1))
    wire.send("getData after", OP_GET_DATA, path_watch(path, False))
    wire.send("create b", OP_CREATE, create_payload(env.base + "/b"))
    last = wire.send("exists b", OP_EXISTS, path_watch(env.base + "/b", False))
    wire.read_until(last)
    wire.drain()


@scenario
def watch_event_before_reply_other_client(env):
    """A watcher sees the event before the reply to any later read it sends."""
    writer = env.client()
    rc = env.raw()
    wire = Wire(env, rc, "watcher")
    path = env.base + "/a"
    writer.create(path, b"0")
    wire.read_until(wire.send("getData+watch", OP_GET_DATA, path_watch(path)))
    env.call("writer set", writer.set, path, b"1")
    # The set is committed; any read now must come after the notification.
    wire.read_until(wire.send("getData", OP_GET_DATA, path_watch(path, False)))
    wire.drain()


# ---------------------------------------------------------------- replay


@scenario
def watch_set_watches_replay_after_reconnect(env):
    """SetWatches on a resumed session: changes made while the client was away
    fire at once (data, exists, child lists, in that order); unchanged paths
    are re-armed and fire later."""
    writer = env.client()
    b = env.base
    for name in ("d_changed", "d_same", "d_gone", "c_changed", "c_same", "c_gone"):
        writer.create(f"{b}/{name}", b"0")
    first = env.raw()
    sid, passwd = first.connect_result.session_id, first.connect_result.passwd
    seen = last_zxid(first)
    env.record("relative zxid", Zxid(seen))
    first.close()  # the connection goes; the session stays (10 s timeout)

    env.call("change d_changed", writer.set, f"{b}/d_changed", b"1")
    env.call("delete d_gone", writer.delete, f"{b}/d_gone")
    env.call("create e_created", writer.create, f"{b}/e_created", b"")
    env.call("create c_changed/x", writer.create, f"{b}/c_changed/x", b"")
    env.call("delete c_gone", writer.delete, f"{b}/c_gone")

    second = env.raw(connect=False)
    result = second.connect(timeout_ms=10_000, session_id=sid, passwd=passwd, last_zxid_seen=seen)
    env.record("resumed same session", result.session_id == sid)
    wire = Wire(env, second, "resumed")
    payload = set_watches(
        seen,
        data=[f"{b}/d_changed", f"{b}/d_same", f"{b}/d_gone"],
        exist=[f"{b}/e_created", f"{b}/e_missing"],
        child=[f"{b}/c_changed", f"{b}/c_same", f"{b}/c_gone"],
    )
    wire.send("setWatches", OP_SET_WATCHES, payload, xid=SET_WATCHES_XID)
    wire.read_until(wire.send("ping-like exists", OP_EXISTS, path_watch("/", False)))
    wire.drain(0.3)
    # The re-armed ones fire on their next change.
    env.call("set d_same", writer.set, f"{b}/d_same", b"1")
    env.call("create e_missing", writer.create, f"{b}/e_missing", b"")
    env.call("create c_same/x", writer.create, f"{b}/c_same/x", b"")
    env.call("set d_changed again", writer.set, f"{b}/d_changed", b"2")
    wire.drain()


@scenario
def watch_not_carried_to_a_new_connection(env):
    """Watches belong to the connection: a session resumed on a new connection
    without SetWatches hears nothing, and neither does a connection the session
    was taken away from."""
    writer = env.client()
    b = env.base
    writer.create(f"{b}/a", b"0")
    first = env.raw()
    sid, passwd = first.connect_result.session_id, first.connect_result.passwd
    wire1 = Wire(env, first, "first")
    wire1.read_until(wire1.send("getData+watch", OP_GET_DATA, path_watch(f"{b}/a")))
    wire1.read_until(wire1.send("exists missing+watch", OP_EXISTS, path_watch(f"{b}/x")))
    second = env.raw(connect=False)
    result = second.connect(timeout_ms=10_000, session_id=sid, passwd=passwd)
    env.record("took over same session", result.session_id == sid)
    wire2 = Wire(env, second, "second")
    env.call("set a", writer.set, f"{b}/a", b"1")
    env.call("create x", writer.create, f"{b}/x", b"")
    wire2.read_until(wire2.send("getData+watch", OP_GET_DATA, path_watch(f"{b}/a")))
    wire2.drain()
    env.call("set a again", writer.set, f"{b}/a", b"2")
    wire2.drain()
    try:
        wire1.drain(0.2)
    except ConnectionClosed:
        env.record("first connection", "closed by server")


@scenario
def watch_kazoo_reconnect(env):
    """kazoo 2.11 sends no SetWatches: on a dropped connection it fires its
    watchers with a NONE/CONNECTING event, resumes the same session, and
    watches set after the reconnect work."""
    zk = env.client()
    other = env.client()
    path = env.base + "/a"
    zk.create(path, b"0")
    states: list[str] = []
    reconnected = threading.Event()

    def listener(state) -> None:
        states.append(str(state))
        if state == KazooState.CONNECTED:
            reconnected.set()

    zk.add_listener(listener)
    w = env.watcher("old watch")
    env.call("get+watch", zk.get, path, watch=w)
    session_before = zk.client_id
    zk._connection._socket.shutdown(socket.SHUT_RDWR)  # the server sees the connection drop
    env.record("reconnected", reconnected.wait(RECONNECT_TIMEOUT_S))
    env.record("states", states[:2])
    env.record("same session", zk.client_id == session_before)
    env.call("set after reconnect", other.set, path, b"1")
    time.sleep(QUIET_S)
    env.wait_events(0)
    fresh = env.watcher("new watch")
    env.call("get+watch after reconnect", zk.get, path, watch=fresh)
    env.call("set again", other.set, path, b"2")
    env.wait_events(1)


# ----------------------------------------------------- persistent watches


@scenario
def watch_persistent_recursive(env):
    """addWatch PERSISTENT_RECURSIVE sees every change below the path, many times;
    PERSISTENT on a node sees its own and its children's changes, not grandchildren."""
    writer = env.client()
    b = env.base
    writer.create(f"{b}/tree", b"")
    writer.create(f"{b}/flat", b"")
    rc = env.raw()
    wire = Wire(env, rc, "watcher")
    wire.send(
        "addWatch recursive",
        OP_ADD_WATCH,
        ustring(f"{b}/tree") + int32(ADD_WATCH_PERSISTENT_RECURSIVE),
    )
    wire.read_until(
        wire.send(
            "addWatch persistent", OP_ADD_WATCH, ustring(f"{b}/flat") + int32(ADD_WATCH_PERSISTENT)
        )
    )
    env.call("create tree/a", writer.create, f"{b}/tree/a", b"")
    env.call("create tree/a/b", writer.create, f"{b}/tree/a/b", b"")
    env.call("set tree/a/b", writer.set, f"{b}/tree/a/b", b"1")
    env.call("set tree/a/b again", writer.set, f"{b}/tree/a/b", b"2")
    env.call("delete tree/a/b", writer.delete, f"{b}/tree/a/b")
    env.call("set flat", writer.set, f"{b}/flat", b"1")
    env.call("set flat again", writer.set, f"{b}/flat", b"2")
    env.call("create flat/c", writer.create, f"{b}/flat/c", b"")
    env.call("create flat/c/g", writer.create, f"{b}/flat/c/g", b"")
    env.call("set flat/c", writer.set, f"{b}/flat/c", b"1")
    wire.read_until(wire.send("read", OP_GET_DATA, path_watch(f"{b}/tree", False)))
    wire.drain()
