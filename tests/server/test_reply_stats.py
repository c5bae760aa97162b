"""Every reply is accounted for as ServerCnxn.updateStatsForResponse does it: packets sent
and received, latency min/max/total, and the connection's last op, cxid and zxid, which
srvr, mntr and cons report. Connection.reply does this inline, once per request."""

import asyncio

from zkcompat.bench import wire
from zkcompat.bench.inproc import CountingTransport, open_session
from zkcompat.config import Config
from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.node import build_standalone


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
