"""Replies leave when their unit of work ends (a connection's data_received, a batch of
applied txns), one write per connection, not one event-loop turn later."""

import asyncio
import struct

from bench import wire
from bench.inproc import QuietTransport, open_session
from zkcompat.config import Config
from zkcompat.jute import records as r
from zkcompat.jute.constants import CreateMode, OpCode
from zkcompat.peer.node import build_standalone
from zkcompat.server.connection import Connection, ConnState

_HDR = struct.Struct(">iiqi")  # frame length, then ReplyHeader{xid, zxid, err}


class RecordingTransport(QuietTransport):
    def __init__(self):
        super().__init__()
        self.writes: list[bytes] = []

    def write(self, data) -> None:
        self.writes.append(bytes(data))


def xids(data: bytes) -> list[int]:
    """The xid of every frame in one write."""
    out, off = [], 0
    while off < len(data):
        n, xid, _, _ = _HDR.unpack_from(data, off)
        out.append(xid)
        off += 4 + n
    return out


async def open_connection(ctx) -> tuple[Connection, RecordingTransport]:
    transport = RecordingTransport()
    cnxn = await open_session(ctx, transport)
    transport.writes.clear()
    return cnxn, transport


def test_read_replies_are_written_before_data_received_returns(tmp_path):
    async def go():
        ctx = build_standalone(Config(data_dir=tmp_path, force_sync=False))
        cnxn, transport = await open_connection(ctx)
        cnxn.data_received(wire.request(1, OpCode.GET_DATA, r.GetDataRequest("/", False))
                           + wire.request(2, OpCode.EXISTS, r.ExistsRequest("/zookeeper", False)))
        return list(transport.writes)  # before asyncio.run runs what is left

    writes = asyncio.run(go())
    assert [xids(w) for w in writes] == [[1, 2]]


def test_a_synced_batch_answers_and_notifies_before_its_callback_returns(tmp_path):
    async def go():
        ctx = build_standalone(Config(data_dir=tmp_path, force_sync=False))
        watcher, watcher_out = await open_connection(ctx)
        writer, writer_out = await open_connection(ctx)
        watcher.data_received(wire.request(1, OpCode.EXISTS, r.ExistsRequest("/x", True)))
        watcher_out.writes.clear()
        seen = []
        txn_log = ctx.pipeline.txn_log
        on_synced = txn_log.on_synced

        def record(zxid):
            on_synced(zxid)
            seen.append((list(watcher_out.writes), list(writer_out.writes)))

        txn_log.on_synced = record
        writer.data_received(
            wire.request(7, OpCode.CREATE, r.CreateRequest("/x", b"", wire.OPEN_ACL,
                                                           int(CreateMode.PERSISTENT)))
            + wire.request(8, OpCode.SET_DATA, r.SetDataRequest("/x", b"v", -1)))
        for _ in range(1000):
            if seen and len(seen[-1][1]) and xids(b"".join(seen[-1][1]))[-1] == 8:
                break
            await asyncio.sleep(0.005)
        return seen[-1]

    watcher_writes, writer_writes = asyncio.run(go())
    assert [xids(w) for w in watcher_writes] == [[-1]]  # the NodeCreated event
    assert [x for w in writer_writes for x in xids(w)] == [7, 8]


class RefusingTransport(RecordingTransport):
    """What uvloop does after the peer closed, before connection_lost arrives: it raises."""

    def __init__(self):
        super().__init__()
        self.refuse = False

    def write(self, data) -> None:
        if self.refuse:
            raise RuntimeError("unable to perform operation; the handler is closed")
        super().write(data)


def test_a_connection_that_refuses_writes_does_not_strand_the_others(tmp_path, caplog):
    async def go():
        ctx = build_standalone(Config(data_dir=tmp_path, force_sync=False))
        watcher = Connection(ctx)
        watcher_out = RefusingTransport()
        watcher.connection_made(watcher_out)
        watcher.data_received(wire.connect_request())
        writer, writer_out = await open_connection(ctx)
        while watcher._state is not ConnState.OPEN:
            await asyncio.sleep(0.005)
        watcher.data_received(wire.request(1, OpCode.EXISTS, r.ExistsRequest("/x", True)))
        watcher_out.refuse = True  # its NodeCreated event, queued first, will raise
        writer.data_received(wire.request(7, OpCode.CREATE, r.CreateRequest(
            "/x", b"", wire.OPEN_ACL, int(CreateMode.PERSISTENT))))
        for _ in range(1000):
            if writer_out.writes:
                break
            await asyncio.sleep(0.005)
        return list(writer_out.writes)

    writes = asyncio.run(go())
    assert [xids(w) for w in writes] == [[7]]
    assert any("event=flush_failed" in m for m in caplog.messages)
