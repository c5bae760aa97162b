"""The scripted stale_leader fault: a deposed leader that has not noticed yet answers a
sync-then-read, ZooKeeper's ZOOKEEPER-1675, unless quorumSync confirms its leadership.

The script, every choice from the fault's pick:
  1. a probe session on the stale side (the leader itself with 3 servers; with 5 or more,
     one of its followers, which forwards its sync) creates a znode of its own, "old";
  2. the other clients are cut off from that stale side, and once what they asked of it
     has committed (a sync waits for the proposals before it), the leader and that
     follower are cut off from the other voters too, the probe still reaching them, and
     frozen (SIGSTOP: a GC pause), so their ticks do not count the silence;
  3. a second probe session writes "new" through the majority once it has elected a new
     leader;
  4. the frozen side resumes: its ticks have not seen syncLimit pass, so it still serves,
     and the first session asks sync + getData at once.
Both sessions' calls are in the linearizability history, so a stale "old" is a failure
the checker reports. With quorumSync the sync is never answered (the leader's PINGs reach
no quorum; it steps down at syncLimit), and the read's outcome stays unknown.
"""

from __future__ import annotations

import asyncio
import random
import struct

from zkcompat.jute import records as r
from zkcompat.jute.constants import Code, OpCode
from zkcompat.jute.framing import FrameReader, frame
from zkcompat.sim import history as h
from zkcompat.sim.clients import (
    CONNECT_TIMEOUT_MS,
    OPEN_ACL,
    READ_TIMEOUT_MS,
    SESSION_TIMEOUT_MS,
    WORK_DIR,
    AckedWrite,
)
from zkcompat.sim.loop import Node
from zkcompat.sim.server import CLIENT_PORT

PROBE_CID_BASE = 1000  # probe sessions' client ids in the history (SimClients count from 1)
FRAME_MAX_BYTES = 1 << 20
RETRY_S = 0.1
WRITE_WITHIN_S = 3.5  # the majority's new leader commits by then, or the probe gives up
SETTLE_S = 1.0  # the ensemble settles between the probe's steps and after the read
QUIESCE_S = 0.5  # what the cut-off clients had asked of the stale side commits meanwhile
_REPLY_HEADER = struct.Struct(">iqi")
NOTIFICATION_XID = -1
PING_XID = -2


class ProbeSession:
    """One session of a probe: requests pipelined on one connection, replies by xid order."""

    def __init__(self, cluster, cid: int):
        self.cluster = cluster
        self.cid = cid
        self.node = Node(f"p{cid}")
        cluster.network.add_node(self.node)
        cluster.probe_nodes.append(self.node)
        self.session_id = 0
        self.passwd = b"\0" * 16
        self.xid = 0
        self.transport = None
        self.waiting: list[tuple[int, asyncio.Future]] = []
        self.handshake: asyncio.Future | None = None
        self.host = ""

    async def connect(self, host: str) -> bool:
        loop = asyncio.get_running_loop()
        session = self
        self.host = host

        class Proto(asyncio.Protocol):
            def __init__(self):
                self.reader = FrameReader(FRAME_MAX_BYTES)

            def data_received(self, data):
                for f in self.reader.feed(data):
                    session._on_frame(bytes(f))

            def connection_lost(self, exc):
                session._lost()

        try:
            self.transport, _ = await asyncio.wait_for(
                loop.create_connection(Proto, host, CLIENT_PORT), CONNECT_TIMEOUT_MS / 1000)
        except (OSError, TimeoutError):
            return False
        self.handshake = loop.create_future()
        req = r.ConnectRequest(0, 0, SESSION_TIMEOUT_MS, self.session_id, self.passwd, False)
        self.transport.write(frame(req.to_bytes()))
        try:
            return await asyncio.wait_for(self.handshake, CONNECT_TIMEOUT_MS / 1000)
        except TimeoutError:
            self.close()
            return False

    def send(self, op: int, record) -> asyncio.Future:
        """The reply's (zxid, err, body), or None if the connection is lost first."""
        self.xid += 1
        out = bytearray()
        r.RequestHeader(self.xid, op).encode(out)
        if record is not None:
            record.encode(out)
        fut = asyncio.get_running_loop().create_future()
        self.waiting.append((self.xid, fut))
        self.transport.write(frame(out))
        return fut

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        self._lost()

    def _on_frame(self, data: bytes) -> None:
        fut = self.handshake
        if fut is not None and not fut.done():
            resp, _ = r.ConnectResponse.decode(data, 0)
            ok = resp.timeOut > 0 and resp.sessionId != 0
            self.session_id, self.passwd = resp.sessionId, resp.passwd
            fut.set_result(ok)
            return
        xid, zxid, err = _REPLY_HEADER.unpack_from(data)
        if xid in (NOTIFICATION_XID, PING_XID) or not self.waiting:
            return
        want, fut = self.waiting.pop(0)
        assert want == xid, f"probe reply xid={xid}, oldest outstanding {want}"
        if not fut.done():
            fut.set_result((zxid, err, data[_REPLY_HEADER.size:]))

    def _lost(self) -> None:
        self.transport = None
        if self.handshake is not None and not self.handshake.done():
            self.handshake.set_result(False)
        for _, fut in self.waiting:
            if not fut.done():
                fut.set_result(None)
        self.waiting.clear()


async def _wait(fut: asyncio.Future, timeout_s: float):
    try:
        return await asyncio.wait_for(asyncio.shield(fut), timeout_s)
    except TimeoutError:
        return None


class StaleLeaderProbe:
    def __init__(self, nemesis, fault):
        self.nemesis = nemesis
        self.cluster = nemesis.cluster
        self.fault = fault
        self.rng = random.Random(fault.pick)

    def trace(self, text: str) -> None:
        self.cluster.trace(f"nemesis stale_leader {text}")

    async def run(self) -> None:
        c = self.cluster
        leader = c.serving_leader()
        if leader is None:
            self.trace("no serving leader, nothing done")
            return
        followers = [s for s in c.servers if s is not leader and s.up and s.mode == "follower"]
        stale = [leader]
        if len(c.servers) >= 5 and followers:
            stale.append(followers[self.rng.randrange(len(followers))])
        rest = [s for s in c.servers if s not in stale]
        target = stale[-1]  # the leader itself, or its follower that forwards the sync
        n = c.probes = c.probes + 1
        path = f"{WORK_DIR}/p{n}"
        reader = ProbeSession(c, PROBE_CID_BASE + 2 * n)
        writer = ProbeSession(c, PROBE_CID_BASE + 2 * n + 1)
        if not await reader.connect(target.host):
            self.trace(f"no session at {target.host}, nothing done")
            return
        if not await self._call(reader, OpCode.CREATE, r.CreateRequest(path, b"old", OPEN_ACL, 0),
                                h.Create(path, b"old")):
            self.trace(f"create {path} at {target.host} failed, nothing done")
            reader.close()
            return
        hosts = [s.host for s in stale]
        others = [s.host for s in rest] + [cl.node.name for cl in c.clients]
        cuts = {(a, b) for a in hosts for b in others} | {(b, a) for a in hosts for b in others}
        net = c.network
        clients = [cl.node.name for cl in c.clients]
        net.set_cuts(net.cuts | {(a, b) for a in hosts for b in clients}
                     | {(b, a) for a in hosts for b in clients})
        await asyncio.sleep(QUIESCE_S)
        net.set_cuts(net.cuts | cuts)
        for s in stale:
            c.loop.pause_node(s.node)
        self.trace(f"cut and paused {hosts}; the probe reads at {target.host}")
        wrote = await self._write_through(writer, rest, path)
        for s in stale:
            if s.up:
                c.loop.resume_node(s.node)
        self.trace(f"resumed {hosts} (write {'done' if wrote else 'not done'})")
        if wrote and reader.transport is not None:
            call = h.GetData(path)
            op_id = c.history.invoke(reader.cid, call, c.event_time())
            reader.send(OpCode.SYNC, r.SyncRequest(path))
            reply = await _wait(reader.send(OpCode.GET_DATA, r.GetDataRequest(path, False)),
                                READ_TIMEOUT_MS / 1000)
            if reply is not None:
                result = _get_data_result(reply[1], reply[2])
                c.history.complete(op_id, result, c.event_time())
                self.trace(f"sync+read at {target.host}: {h.describe_result(result)}")
            else:
                self.trace(f"sync+read at {target.host}: no answer")
        reader.close()
        writer.close()
        await asyncio.sleep(max(0.0, SETTLE_S))
        net.set_cuts(net.cuts - cuts)
        self.trace("healed")

    async def _write_through(self, writer: ProbeSession, servers, path: str) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WRITE_WITHIN_S
        i = self.rng.randrange(len(servers)) if servers else 0
        while servers and loop.time() < deadline:
            s = servers[i % len(servers)]
            i += 1
            if s.up and s.ctx is not None and s.ctx.serving and (
                    writer.transport is not None or await writer.connect(s.host)):
                if await self._call(writer, OpCode.SET_DATA, r.SetDataRequest(path, b"new", -1),
                                    h.SetData(path, b"new", -1)):
                    return True
                writer.close()
            await asyncio.sleep(RETRY_S)
        return False

    async def _call(self, session: ProbeSession, op: int, record, call) -> bool:
        """One write, in the history (an unanswered one stays of unknown outcome)."""
        c = self.cluster
        op_id = c.history.invoke(session.cid, call, c.event_time())
        cxid = session.xid + 1
        reply = await _wait(session.send(op, record), READ_TIMEOUT_MS / 1000)
        if reply is None:
            session.close()
            return False
        zxid, err, body = reply
        result = _RESULT[op](err, body)
        c.history.complete(op_id, result, c.event_time())
        if err:
            return False
        c.acked(AckedWrite(session.cid, session.session_id, cxid, zxid, call))
        return True


def _get_data_result(err: int, body: bytes) -> h.Result:
    if err:
        return h.Err(Code(err))
    resp = r.GetDataResponse.decode(body, 0)[0]
    return h.Ok((resp.data, resp.stat.version))


def _create_result(err: int, body: bytes) -> h.Result:
    return h.Err(Code(err)) if err else h.Ok(r.CreateResponse.decode(body, 0)[0].path)


def _set_data_result(err: int, body: bytes) -> h.Result:
    return h.Err(Code(err)) if err else h.Ok(r.Stat.decode(body, 0)[0].version)


_RESULT = {OpCode.CREATE: _create_result, OpCode.SET_DATA: _set_data_result}
