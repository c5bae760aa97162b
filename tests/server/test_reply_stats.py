"""Every reply is accounted for as ServerCnxn.updateStatsForResponse does it: packets sent
and received, latency min/max/total, and the connection's last op, cxid and zxid, which
srvr, mntr and cons report. The connection does this once per flush, for all the replies
the flush writes."""

import asyncio
import time

from bench import wire
from bench.inproc import CountingTransport, open_session
from zkcompat.config import Config
from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.peer.node import build_standalone
from zkcompat.server.request import Request


def test_replies_update_connection_and_server_statistics(tmp_path):
    async def go():
        ctx = build_standalone(Config(data_dir=tmp_path, force_sync=False))
        transport = CountingTransport()
        cnxn = await open_session(ctx, transport)
        writes0 = transport.writes
        server = ctx.stats
        sent0, received0, count0 = server.packets_sent, server.packets_received, \
            server.latency.count
        cnxn.data_received(wire.request(1, OpCode.GET_DATA, r.GetDataRequest("/", False))
                           + wire.request(2, OpCode.EXISTS, r.ExistsRequest("/nope", False)))
        after_reads = (cnxn.stats.last_op, cnxn.stats.last_cxid, transport.writes - writes0)
        cnxn.data_received(wire.request(3, OpCode.SET_DATA, r.SetDataRequest("/", b"v", -1)))
        await ctx.pipeline.txn_log.sync()
        for _ in range(100):
            if cnxn.stats.last_cxid == 3:
                break
            await asyncio.sleep(0.005)
        return cnxn.stats, server, (sent0, received0, count0), after_reads, ctx

    stats, server, (sent0, received0, count0), after_reads, ctx = asyncio.run(go())
    assert after_reads == ("EXIS", 2, 1)  # both reads answered, in one write
    assert (stats.last_op, stats.last_cxid) == ("SETD", 3)
    assert stats.last_zxid == ctx.pipeline.tree.last_processed_zxid
    assert stats.received == stats.sent == 4  # the ConnectRequest, then three requests
    assert server.packets_sent - sent0 == 3
    assert server.packets_received - received0 == 3
    assert stats.latency.count == 4  # createSession's reply counts too ("SESS")
    assert server.latency.count - count0 == 3
    for lat in (stats.latency, server.latency):
        assert 0 <= lat.min <= lat.max
        assert lat.min * lat.count <= lat.total <= lat.max * lat.count
    assert stats.last_latency <= stats.latency.max
    assert stats.last_response_ms > 0


def test_a_flushed_batch_counts_each_reply_latency(tmp_path):
    """Replies queued together are accounted for at the flush, each with its own latency
    from receipt: min, max and total as if counted one by one."""

    async def go():
        ctx = build_standalone(Config(data_dir=tmp_path, force_sync=False))
        cnxn = await open_session(ctx, CountingTransport())
        cnxn.stats.reset()  # as crst and srst do: the handshake's own reply is forgotten
        ctx.stats.reset()
        now = time.monotonic_ns() // 1_000_000
        for xid, age_ms in ((10, 40), (11, 5), (12, 20)):
            req = Request(cnxn.session.session_id, xid, OpCode.GET_DATA, None, cnxn, [],
                          now - age_ms)
            cnxn.reply(req, b"\0\0\0\0", 7)
        cnxn.flush()
        done = time.monotonic_ns() // 1_000_000
        return cnxn.stats, ctx.stats, done - now

    stats, server, slack = asyncio.run(go())
    for lat in (stats.latency, server.latency):
        assert lat.count == 3
        assert 40 <= lat.max <= 40 + slack
        assert 5 <= lat.min <= 5 + slack
        assert 65 <= lat.total <= 65 + 3 * slack
    assert (stats.last_op, stats.last_cxid, stats.last_zxid) == ("GETD", 12, 7)
    assert 20 <= stats.last_latency <= 20 + slack
    assert stats.sent == 3
