"""Simulated clients: kazoo-like sessions speaking the client protocol as bytes to a
server's real Connection, recording a history for the checks.

Each client keeps one session: it connects to a random server, pipelines a few requests,
and when a reply is late (2/3 of the session timeout, kazoo's read timeout) or the
connection drops, it counts every unanswered request as of unknown outcome and reconnects
elsewhere with its sessionId and lastZxidSeen. A refused reconnect means the session
expired: it starts a new one. Writes and sync-then-getData are in the linearizability
history; plain reads (served from a possibly lagging replica) only in the ordering checks.
Half the plain reads set a watch; every reply and notification that says something of a
watched znode goes to the watch log (watchlog.py). Each client also runs the lock recipe
of locks.py: acquire, a few fenced writes, release; an attempt under way takes one step
in every batch, so the lock changes hands many times a run.
"""

from __future__ import annotations

import asyncio
import struct
from collections import deque
from dataclasses import dataclass

from zkcompat.jute import records as r
from zkcompat.jute.constants import Code, CreateMode, EventType, OpCode, Perms
from zkcompat.jute.framing import FrameReader, frame
from zkcompat.jute.multi import MultiRequest, decode_multi_response
from zkcompat.sim import history as h
from zkcompat.sim import watchlog as wl
from zkcompat.sim.locks import FENCE_PATH, LOCK_DIR, Acquired, Fenced, sequence_of
from zkcompat.sim.loop import Node
from zkcompat.sim.server import CLIENT_PORT

SESSION_TIMEOUT_MS = 4000
READ_TIMEOUT_MS = SESSION_TIMEOUT_MS * 2 // 3  # kazoo: read timeout = 2/3 of the session's
CONNECT_TIMEOUT_MS = 1000
PIPELINE_MAX = 3  # requests a client has in flight at once
THINK_MAX_MS = 250
RECONNECT_BACKOFF_MS = 50
FRAME_MAX_BYTES = 1 << 20

OPEN_ACL = [r.ACL(int(Perms.ALL), r.Id("world", "anyone"))]
_REPLY_HEADER = struct.Struct(">iqi")
NOTIFICATION_XID = -1
PING_XID = -2

WORK_DIR = "/w"
KEYS = ("/w/k0", "/w/k1", "/w/k2")
QUEUE_DIR = "/w/q"
SEQ_PREFIX = "/w/q/s-"
# Created before any client starts (not part of the history): the checker's initial tree.
SETUP_PATHS = (WORK_DIR, QUEUE_DIR, LOCK_DIR, FENCE_PATH)
LOCK_FENCED_WRITES_MAX = 3  # a holder's fenced writes before it releases the lock
CONN_IDS_PER_CLIENT = 1_000_000


@dataclass
class AckedWrite:
    """A write a client heard OK for: its txn must be at `zxid` in the final history."""

    client: int
    session_id: int
    cxid: int
    zxid: int
    call: object


class _Pending:
    __slots__ = ("xid", "op", "kind", "op_id", "call", "path", "token")

    def __init__(self, xid, op, kind, op_id=None, call=None, path=None, token=None):
        self.xid = xid
        self.op = op
        self.kind = kind  # "hist", "sync", "read", "lock", "close", "ping"
        self.op_id = op_id
        self.call = call
        self.path = path  # a KEYS znode this reply may say something of (the watch log)
        self.token = token  # the watch-setting read it is, for the watch log


class _LockState:
    """One attempt at the lock, within one session."""

    __slots__ = ("prefix", "session_id", "node", "token", "held", "writes", "busy")

    def __init__(self, prefix: str, session_id: int):
        self.prefix = prefix  # LOCK_DIR/c<cid>.<attempt>-: finds our node after a timeout
        self.session_id = session_id
        self.node: str | None = None
        self.token = -1
        self.held = False
        self.writes = 0
        self.busy = False  # a lock request is outstanding


class _Proto(asyncio.Protocol):
    def __init__(self, client: SimClient):
        self.client = client
        self.reader = FrameReader(FRAME_MAX_BYTES)
        self.transport = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.client.proto is not self:
            return
        for f in self.reader.feed(data):
            if self.client.proto is not self:
                return
            self.client.on_frame(bytes(f))

    def connection_lost(self, exc) -> None:
        if self.client.proto is self:
            self.client.on_lost(f"connection lost: {exc!r}")


class SimClient:
    def __init__(self, cluster, cid: int, rng):
        self.cluster = cluster
        self.cid = cid
        self.rng = rng
        self.node = Node(f"c{cid}")
        cluster.network.add_node(self.node)
        self.session_id = 0
        self.passwd = b"\0" * 16
        self.last_zxid = 0
        self.xid = 0
        self.proto: _Proto | None = None
        self.state = "closed"  # closed -> connecting -> open
        self.pending: deque[_Pending] = deque()
        self.idle = asyncio.Event()
        self.handshake: asyncio.Future | None = None
        self.seq = 0
        self.versions: dict[str, int] = {}
        self.sessions_started = 0
        self.stopping = False
        self.conn_id = cid * CONN_IDS_PER_CLIENT
        self.watch_tokens = 0
        self.lock: _LockState | None = None
        self.lock_attempts = 0

    def trace(self, text: str) -> None:
        self.cluster.trace(f"c{self.cid} {text}")

    # -- the run ----------------------------------------------------------------------

    async def run(self, until_s: float) -> None:
        loop = asyncio.get_running_loop()
        while loop.time() < until_s:
            if self.state != "open":
                if not await self._connect():
                    await asyncio.sleep(RECONNECT_BACKOFF_MS / 1000 * (1 + self.rng.random()))
                continue
            self._send_batch()
            await self._wait_replies()
            await asyncio.sleep(self.rng.uniform(0, THINK_MAX_MS) / 1000)
        self.stopping = True
        if self.state == "open" and self.rng.random() < 0.5:
            self._send(OpCode.CLOSE_SESSION, None,
                       _Pending(self._next_xid(), OpCode.CLOSE_SESSION, "close"))
            await self._wait_replies()
        self._drop("client done")

    async def _connect(self) -> bool:
        servers = self.cluster.servers
        target = servers[self.rng.randrange(len(servers))]
        loop = asyncio.get_running_loop()
        try:
            _, proto = await asyncio.wait_for(
                loop.create_connection(lambda: _Proto(self), target.host, CLIENT_PORT),
                CONNECT_TIMEOUT_MS / 1000)
        except (OSError, TimeoutError):
            return False
        self.proto = proto
        self.conn_id += 1  # watches live and die with their connection
        self.state = "connecting"
        self.target = target.host
        self.handshake = loop.create_future()
        req = r.ConnectRequest(0, self.last_zxid, SESSION_TIMEOUT_MS, self.session_id,
                               self.passwd, False)
        proto.transport.write(frame(req.to_bytes()))
        try:
            ok = await asyncio.wait_for(asyncio.shield(self.handshake), CONNECT_TIMEOUT_MS / 1000)
        except TimeoutError:
            self._drop("handshake timed out")
            return False
        return ok

    def _on_connect_response(self, data: bytes) -> None:
        resp, _ = r.ConnectResponse.decode(data, 0)
        fut = self.handshake
        if resp.timeOut <= 0 or resp.sessionId == 0:
            # kazoo: SessionExpiredError; the session's ephemerals are gone.
            self.trace(f"session 0x{self.session_id:x} expired (refused by {self.target})")
            self.session_id = 0
            self.passwd = b"\0" * 16
            self._drop("session expired")
            if fut is not None and not fut.done():
                fut.set_result(False)
            return
        if self.session_id != resp.sessionId:
            self.sessions_started += 1
            self.trace(f"session 0x{resp.sessionId:x} at {self.target}")
        else:
            self.trace(f"session 0x{resp.sessionId:x} resumed at {self.target}")
        self.session_id = resp.sessionId
        self.passwd = resp.passwd
        self.state = "open"
        if fut is not None and not fut.done():
            fut.set_result(True)

    # -- requests ---------------------------------------------------------------------

    def _next_xid(self) -> int:
        self.xid += 1
        return self.xid

    def _send(self, op: int, record, p: _Pending) -> None:
        out = bytearray()
        r.RequestHeader(p.xid, op).encode(out)
        if record is not None:
            record.encode(out)
        self.pending.append(p)
        self.proto.transport.write(frame(out))

    def _invoke(self, call) -> int:
        return self.cluster.history.invoke(self.cid, call, self.cluster.event_time())

    def _data(self) -> bytes:
        self.seq += 1
        return f"c{self.cid}.{self.seq}".encode()

    def _key(self) -> str:
        return KEYS[self.rng.randrange(len(KEYS))]

    def _version(self, path: str) -> int:
        if self.rng.random() < 0.5:
            return h.ANY_VERSION
        return self.versions.get(path, 0)

    def _send_batch(self) -> None:
        if self.lock is not None and not self.lock.busy:
            # An attempt under way moves on every batch: a holder releases soon, and a
            # waiter finds out it holds the lock soon after it is free (instead of at its
            # next random lock step: 3.9 acquisitions a run, now 17).
            self._lock_step()
        n = 1 + self.rng.randrange(PIPELINE_MAX)
        for _ in range(n):
            self._send_one()
        self.idle.clear()

    def _send_one(self) -> None:
        rng = self.rng
        x = rng.random()
        if x < 0.14:
            path = self._key()
            data = self._data()
            self._hist(OpCode.CREATE, r.CreateRequest(path, data, OPEN_ACL, 0), h.Create(path, data))
        elif x < 0.34:
            path = self._key()
            data = self._data()
            v = self._version(path)
            self._hist(OpCode.SET_DATA, r.SetDataRequest(path, data, v), h.SetData(path, data, v))
        elif x < 0.42:
            path = self._key()
            v = self._version(path)
            self._hist(OpCode.DELETE, r.DeleteRequest(path, v), h.Delete(path, v))
        elif x < 0.58:
            path = self._key()
            call = h.GetData(path)
            op_id = self._invoke(call)  # the sync's invocation is the read's
            self._send(OpCode.SYNC, r.SyncRequest(path),
                       _Pending(self._next_xid(), OpCode.SYNC, "sync"))
            self._send(OpCode.GET_DATA, r.GetDataRequest(path, False),
                       _Pending(self._next_xid(), OpCode.GET_DATA, "hist", op_id, call))
        elif x < 0.66:
            self._read(OpCode.GET_DATA, r.GetDataRequest)
        elif x < 0.70:
            self._read(OpCode.EXISTS, r.ExistsRequest)
        elif x < 0.80:
            self._multi()
        elif x < 0.88:
            data = self._data()
            self._hist(OpCode.CREATE, r.CreateRequest(SEQ_PREFIX, data, OPEN_ACL,
                                                      int(CreateMode.PERSISTENT_SEQUENTIAL)),
                       h.CreateSequential(SEQ_PREFIX, data))
        else:
            self._lock_step()

    def _hist(self, op: int, record, call) -> None:
        op_id = self._invoke(call)
        path = getattr(call, "path", None)
        self._send(op, record, _Pending(self._next_xid(), op, "hist", op_id, call, path))

    def _read(self, op: int, request) -> None:
        """A plain read of a key; half of them set a watch (always, for exists)."""
        path = self._key()
        watch = op == OpCode.EXISTS or self.rng.random() < 0.5
        token = None
        if watch:
            self.watch_tokens += 1
            token = self.watch_tokens
            self.cluster.watch_log.append(wl.WatchSet(self.conn_id, token, path))
        self._send(op, request(path, watch),
                   _Pending(self._next_xid(), op, "read", path=path, token=token))

    # -- the lock recipe (locks.py) -----------------------------------------------------

    def _lock_step(self) -> None:
        st = self.lock
        if st is not None and st.session_id != self.session_id:
            st = self.lock = None  # that session's ephemeral node died with it
        if st is not None and st.busy:
            return
        if st is None:
            self.lock_attempts += 1
            st = self.lock = _LockState(f"{LOCK_DIR}/c{self.cid}.{self.lock_attempts}-",
                                        self.session_id)
            self._lock_send(OpCode.CREATE, r.CreateRequest(
                st.prefix, b"", OPEN_ACL, int(CreateMode.EPHEMERAL_SEQUENTIAL)))
        elif not st.held:
            self._lock_send(OpCode.GET_CHILDREN, r.GetChildrenRequest(LOCK_DIR, False))
        elif st.writes < LOCK_FENCED_WRITES_MAX:
            data = f"{st.token}:{self.cid}:{st.writes}".encode()
            self._lock_send(OpCode.MULTI, MultiRequest([
                (OpCode.CHECK, r.CheckVersionRequest(st.node, 0)),
                (OpCode.SET_DATA, r.SetDataRequest(FENCE_PATH, data, -1))]))
        else:
            self._lock_send(OpCode.DELETE, r.DeleteRequest(st.node, -1))

    def _lock_send(self, op: int, record) -> None:
        self.lock.busy = True
        self._send(op, record, _Pending(self._next_xid(), op, "lock"))

    def _lock_reply(self, p: _Pending, zxid: int, err: int, body: bytes) -> None:
        st = self.lock
        if st is None:
            return
        st.busy = False
        if p.op == OpCode.CREATE:
            if err:
                self.lock = None
            else:
                st.node = r.CreateResponse.decode(body, 0)[0].path
        elif p.op == OpCode.GET_CHILDREN:
            if err:
                return
            children = r.GetChildrenResponse.decode(body, 0)[0].children
            mine_prefix = st.prefix[len(LOCK_DIR) + 1:]
            mine = [c for c in children if c.startswith(mine_prefix)]
            if not mine:
                self.lock = None  # never created (a lost create), or gone with the session
                return
            st.node = f"{LOCK_DIR}/{mine[0]}"
            lowest = min(children, key=sequence_of)
            if lowest == mine[0]:
                st.held = True
                st.token = sequence_of(lowest)
                self.cluster.lock_acquired.append(
                    Acquired(self.cid, self.session_id, st.token, zxid))
        elif p.op == OpCode.MULTI:
            if isinstance(_multi_result(err, body), h.Ok):
                st.writes += 1
                self.cluster.lock_fenced.append(Fenced(self.cid, self.session_id, st.token, zxid))
            else:
                self.lock = None  # the lock node is gone: the lock is lost
        elif p.op == OpCode.DELETE:
            self.lock = None

    # -- the watch log ------------------------------------------------------------------

    def _log_reply(self, p: _Pending, err: int, body: bytes) -> None:
        state = _revealed(p.op, err, body)
        if state is None:
            return
        armed = p.token is not None and (err == 0 or p.op == OpCode.EXISTS)
        self.cluster.watch_log.append(wl.Seen(self.conn_id, p.path, state, p.token, armed))

    def _on_notification(self, body: bytes) -> None:
        event, _ = r.WatcherEvent.decode(body, 0)
        if event.type != EventType.NONE and event.path in KEYS:
            self.cluster.watch_log.append(wl.Event(self.conn_id, event.path, event.type))

    def _multi(self) -> None:
        a, b = self._key(), self._key()
        if self.rng.random() < 0.5:
            v = self.versions.get(a, 0)
            data = self._data()
            ops = [(OpCode.CHECK, r.CheckVersionRequest(a, v)),
                   (OpCode.SET_DATA, r.SetDataRequest(b, data, -1))]
            call = h.Multi((h.Check(a, v), h.SetData(b, data, -1)))
        else:
            data = self._data()
            ops = [(OpCode.CREATE, r.CreateRequest(a, data, OPEN_ACL, 0)),
                   (OpCode.DELETE, r.DeleteRequest(b, -1))]
            call = h.Multi((h.Create(a, data), h.Delete(b, -1)))
        self._hist(OpCode.MULTI, MultiRequest(ops), call)

    async def _wait_replies(self) -> None:
        if not self.pending:
            return
        try:
            await asyncio.wait_for(self.idle.wait(), READ_TIMEOUT_MS / 1000)
        except TimeoutError:
            self._drop("read timed out")

    # -- replies ----------------------------------------------------------------------

    def on_frame(self, data: bytes) -> None:
        if self.state == "connecting":
            self._on_connect_response(data)
            return
        xid, zxid, err = _REPLY_HEADER.unpack_from(data)
        body = data[_REPLY_HEADER.size:]
        if xid == NOTIFICATION_XID:
            self._on_notification(body)
            return
        if xid == PING_XID:
            return
        if not self.pending:
            self.cluster.fail(f"c{self.cid}: reply xid={xid} with nothing outstanding")
            return
        p = self.pending.popleft()
        if p.xid != xid:
            self.cluster.fail(f"c{self.cid} session 0x{self.session_id:x}: reply xid={xid} "
                              f"but the oldest outstanding request is xid={p.xid}")
            self._drop("reply out of order")
            return
        if zxid > 0:
            if zxid < self.last_zxid:
                self.cluster.fail(f"c{self.cid} session 0x{self.session_id:x}: reply zxid "
                                  f"0x{zxid:x} after having seen 0x{self.last_zxid:x}")
            self.last_zxid = max(self.last_zxid, zxid)
        if p.path is not None:
            self._log_reply(p, err, body)
        if p.kind == "hist":
            self._complete(p, zxid, err, body)
        elif p.kind == "lock":
            self._lock_reply(p, zxid, err, body)
        elif p.kind == "close":
            self.session_id = 0
        if not self.pending:
            self.idle.set()

    def _complete(self, p: _Pending, zxid: int, err: int, body: bytes) -> None:
        result = _RESULT[p.op](err, body)
        if isinstance(result, h.Ok):
            self._learn_version(p.call, result)
            if p.op != OpCode.GET_DATA:
                self.cluster.acked(AckedWrite(self.cid, self.session_id, p.xid, zxid, p.call))
        self.cluster.history.complete(p.op_id, result, self.cluster.event_time())

    def _learn_version(self, call, result: h.Ok) -> None:
        if isinstance(call, h.SetData):
            self.versions[call.path] = result.value
        elif isinstance(call, h.GetData):
            self.versions[call.path] = result.value[1]
        elif isinstance(call, h.Create):
            self.versions[call.path] = 0

    def on_lost(self, reason: str) -> None:
        self._drop(reason)

    def _drop(self, reason: str) -> None:
        """Close the connection; whatever is unanswered has an unknown outcome."""
        if self.proto is None:
            return
        proto, self.proto = self.proto, None
        if self.pending and not self.stopping:
            self.trace(f"dropped from {getattr(self, 'target', '?')} with "
                       f"{len(self.pending)} outstanding: {reason}")
        if self.lock is not None:
            self.lock.busy = False  # its outcome is unknown: the next step finds out
        self.pending.clear()
        self.state = "closed"
        self.idle.set()
        if self.handshake is not None and not self.handshake.done():
            self.handshake.set_result(False)
        if proto.transport is not None:
            proto.transport.close()


def _revealed(op: int, err: int, body: bytes) -> wl.State | None:
    """What a reply says of its znode: (exists, version or None), or None if nothing."""
    if err == Code.NONODE:
        return (False, None) if op in _REVEALS else None
    if err == Code.NODEEXISTS and op == OpCode.CREATE:
        return (True, None)
    if err:
        return None
    if op == OpCode.GET_DATA:
        return (True, r.GetDataResponse.decode(body, 0)[0].stat.version)
    if op in (OpCode.EXISTS, OpCode.SET_DATA):
        return (True, r.Stat.decode(body, 0)[0].version)
    if op == OpCode.CREATE:
        return (True, 0)
    if op == OpCode.DELETE:
        return (False, None)
    return None


_REVEALS = (OpCode.GET_DATA, OpCode.EXISTS, OpCode.SET_DATA, OpCode.DELETE)


def _ok_or_err(err: int, value=None) -> h.Result:
    return h.Ok(value) if err == 0 else h.Err(Code(err))


def _create_result(err: int, body: bytes) -> h.Result:
    if err:
        return h.Err(Code(err))
    return h.Ok(r.CreateResponse.decode(body, 0)[0].path)


def _set_data_result(err: int, body: bytes) -> h.Result:
    if err:
        return h.Err(Code(err))
    return h.Ok(r.Stat.decode(body, 0)[0].version)


def _delete_result(err: int, body: bytes) -> h.Result:
    return _ok_or_err(err)


def _get_data_result(err: int, body: bytes) -> h.Result:
    if err:
        return h.Err(Code(err))
    resp = r.GetDataResponse.decode(body, 0)[0]
    return h.Ok((resp.data, resp.stat.version))


def _multi_result(err: int, body: bytes) -> h.Result:
    if err:
        return h.Err(Code(err))
    results, _ = decode_multi_response(body, 0)
    values = []
    for op_type, rec in results:
        if op_type == OpCode.ERROR:
            if rec.err not in (0, Code.RUNTIMEINCONSISTENCY):
                return h.Err(Code(rec.err))
            continue
        if op_type in (OpCode.CREATE, OpCode.CREATE2):
            values.append(rec.path)
        elif op_type == OpCode.SET_DATA:
            values.append(rec.stat.version)
        else:
            values.append(None)
    return h.Ok(tuple(values))


_RESULT = {
    OpCode.CREATE: _create_result,
    OpCode.SET_DATA: _set_data_result,
    OpCode.DELETE: _delete_result,
    OpCode.GET_DATA: _get_data_result,
    OpCode.MULTI: _multi_result,
}
