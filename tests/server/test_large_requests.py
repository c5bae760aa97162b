"""largeRequestThreshold / largeRequestMaxBytes, throttled_op_wait_time and the TLS handshake
count, in process: a Connection of a server with a threshold counts its large requests from
receipt until answered and closes at one that would pass the maximum; the request throttler
answers a request that waited too long THROTTLEDOP without carrying it out; the handshake
count refuses past netty.server.outstandingHandshake.limit. tests/abuse/test_limits_more_vs_
zookeeper.py shows the same on real sockets, on ZooKeeper 3.8 and zkcompat."""

import asyncio

import pytest
from test_limits import FlowTransport, all_applied, replies, server

from bench import wire
from zkcompat.config import Config
from zkcompat.config import limits as LS
from zkcompat.config.limits import RequestThrottleSettings
from zkcompat.jute import records as r
from zkcompat.jute.constants import Code, OpCode
from zkcompat.server import limits as L
from zkcompat.server.connection import ConnState
from zkcompat.server.large_requests import LargeRequestConnection
from zkcompat.server.metrics import counters

THRESHOLD = 1000
MAX_BYTES = 5000
_BODY_EXTRA = len(wire.request(0, OpCode.SET_DATA, r.SetDataRequest("/n", b"", -1))) - 12


def set_frame(xid: int, body_bytes: int) -> bytes:
    """A setData whose body (the frame less its RequestHeader) is body_bytes long."""
    return wire.request(xid, OpCode.SET_DATA,
                        r.SetDataRequest("/n", b"x" * (body_bytes - _BODY_EXTRA), -1))


def create(xid: int, path: str = "/n") -> bytes:
    return wire.request(xid, OpCode.CREATE, r.CreateRequest(path, b"", wire.OPEN_ACL, 0))


async def large_session(ctx, transport: FlowTransport) -> LargeRequestConnection:
    cnxn = LargeRequestConnection(ctx)
    transport.protocol = cnxn
    cnxn.connection_made(transport)
    cnxn.data_received(wire.connect_request())
    for _ in range(2000):
        if cnxn._state is ConnState.OPEN:
            break
        await asyncio.sleep(0.001)
    await asyncio.sleep(0)
    transport.drain()
    return cnxn


def large_server(tmp_path):
    return server(tmp_path, large_request_threshold=THRESHOLD, large_request_max_bytes=MAX_BYTES)


def test_the_settings_are_read_and_bad_values_replaced_as_zookeeper_replaces_them():
    s = LS.settings({"largeRequestThreshold": "1000", "zookeeper.largeRequestMaxBytes": "5000",
                    "netty.server.outstandingHandshake.limit": "3",
                    "zookeeper.throttled_op_wait_time": "20"})
    assert (s.large_request_threshold, s.large_request_max_bytes) == (1000, 5000)
    assert s.outstanding_handshake_limit == 3
    assert s.request_throttle.throttled_op_wait_time_ms == 20
    assert LS.settings({}) == LS.LimitSettings()
    assert (LS.LimitSettings().large_request_threshold, LS.LimitSettings().large_request_max_bytes,
            LS.LimitSettings().outstanding_handshake_limit) == (-1, 100 * 1024 * 1024, -1)
    # setLargeRequestThreshold: 0 or below -1 is -1; setLargeRequestMaxBytes: <= 0 keeps 100 MB
    for bad in ("0", "-2"):
        assert LS.settings({"largeRequestThreshold": bad}).large_request_threshold == -1
    assert LS.settings({"largeRequestMaxBytes": "0"}).large_request_max_bytes == 100 * 1024 * 1024


def test_large_requests_count_until_answered_and_one_past_the_maximum_closes(tmp_path):
    async def go():
        ctx = large_server(tmp_path)
        limits = ctx.limits
        a, a_out = await large_session(ctx, t := FlowTransport()), t
        a.data_received(create(1))
        await all_applied(ctx)
        # Two of 2400 bytes are in at once (4800 <= 5000), a third would pass the maximum.
        a.data_received(set_frame(2, 2400) + set_frame(3, 2400))
        counted = limits.large_request_bytes
        await all_applied(ctx)
        answered = (limits.large_request_bytes, replies(a_out.drain()))
        b, b_out = await large_session(ctx, t := FlowTransport()), t
        a.data_received(set_frame(4, 2400) + set_frame(5, 2400))
        b.data_received(set_frame(1, 900) + set_frame(2, 2400))  # 900: not a large one
        refused = (b_out.closing, limits.large_request_bytes, limits.large_requests_rejected)
        await all_applied(ctx)
        return (counted, answered, refused, replies(a_out.drain()), replies(b_out.drain()),
                limits, ctx.tree.nodes["/n"].stat().version)

    counted, answered, refused, a_replies, b_replies, limits, version = asyncio.run(go())
    assert counted == 4800
    assert answered == (0, [(1, 0), (2, 0), (3, 0)])
    assert refused == (True, 4800, 1)  # b's second: its frame would pass the maximum
    assert a_replies == [(4, 0), (5, 0)]
    # The one read before it goes on (version 5), its reply lost to the close, as in
    # ZooKeeper, whose IOException closes the connection at once.
    assert b_replies == [] and version == 5
    assert limits.large_request_bytes == 0
    assert dict(counters(type("S", (), {"limits": limits, "stats": _stats()})))[
        "large_requests_rejected"] == 1


def _stats():
    from zkcompat.server.stats import ServerStats
    return ServerStats()


def test_a_frame_over_the_maximum_alone_is_refused_and_nothing_stays_counted(tmp_path):
    async def go():
        ctx = large_server(tmp_path)
        a, a_out = await large_session(ctx, t := FlowTransport()), t
        a.data_received(create(1) + set_frame(2, MAX_BYTES + 1))
        closed = a_out.closing
        a.connection_lost(None)
        await all_applied(ctx)
        return closed, replies(a_out.drain()), ctx.limits

    closed, a_replies, limits = asyncio.run(go())
    assert closed and limits.large_requests_rejected == 1
    assert a_replies == []  # the close came first: the create's reply had no connection
    assert limits.large_request_bytes == 0


def test_a_closed_connection_counts_its_unanswered_large_requests_out(tmp_path):
    async def go():
        ctx = large_server(tmp_path)
        a, a_out = await large_session(ctx, t := FlowTransport()), t
        a.data_received(create(1))
        await all_applied(ctx)
        a.data_received(set_frame(2, 3000))
        counted = ctx.limits.large_request_bytes
        a_out.closing = True
        a.connection_lost(None)
        after_close = ctx.limits.large_request_bytes
        await all_applied(ctx)
        return counted, after_close, ctx.limits.large_request_bytes, ctx.tree.nodes["/n"].stat()

    counted, after_close, at_end, stat = asyncio.run(go())
    assert (counted, after_close, at_end) == (3000, 0, 0)
    assert stat.version == 1  # the write itself went on, as in ZooKeeper


def test_auth_packets_are_never_counted(tmp_path):
    async def go():
        ctx = large_server(tmp_path)
        a, a_out = await large_session(ctx, t := FlowTransport()), t
        auth = wire.request(1, OpCode.AUTH, r.AuthPacket(0, "digest", b"u:" + b"p" * 3000))
        a.data_received(auth)
        await asyncio.sleep(0)
        return ctx.limits.large_request_bytes, replies(a_out.drain()), a_out.closing

    assert asyncio.run(go()) == (0, [(1, 0)], False)


def test_only_a_server_with_a_threshold_counts_large_requests():
    """node._listen makes LargeRequestConnections only when this holds."""
    assert not L.ClientLimits(Config()).large_requests_counted
    assert L.ClientLimits(Config(limits=LS.LimitSettings(large_request_threshold=1)))\
        .large_requests_counted


def test_a_large_request_connection_keeps_pythons_shared_key_instance_dict(tmp_path):
    async def go():
        return await large_session(large_server(tmp_path), FlowTransport())

    assert len(vars(asyncio.run(go()))) <= 30


# -- throttled_op_wait_time -------------------------------------------------------------------


def test_a_request_that_waited_too_long_is_answered_throttledop_and_not_carried_out(tmp_path):
    """RequestThrottler.shouldThrottleOp: the ones the throttler held longer than the wait
    time are answered THROTTLEDOP in their session's order, and not applied; a ping and a
    request that never waited are not."""
    async def go():
        ctx = server(tmp_path, request_throttle=RequestThrottleSettings(
            max_requests=1, stall_time_ms=0, throttled_op_wait_time_ms=50))
        clock = [0]
        throttler = ctx.limits.request_throttler
        throttler.clock_ms = lambda: clock[0]
        a, a_out = await large_session(ctx, t := FlowTransport()), t
        a.data_received(create(1, "/n"))
        await all_applied(ctx)
        a_out.drain()
        first = [create(x, f"/n/{x}") for x in range(2, 6)]
        a.data_received(b"".join(first) + wire.request(-2, OpCode.PING, None))
        for req in [s_r[1] for s_r in throttler.waiting]:
            req.t0_ms = 0
        clock[0] = 51  # they waited 51 ms > 50
        for _ in range(20):
            await all_applied(ctx)
            if not throttler.waiting:
                break
        await all_applied(ctx)
        return (replies(a_out.drain()), sorted(ctx.tree.nodes["/n"].children or ()),
                throttler.throttled_ops, ctx.tree.last_processed_zxid)

    got, children, throttled, zxid = asyncio.run(go())
    assert got == [(2, 0), (3, Code.THROTTLEDOP), (4, Code.THROTTLEDOP), (5, Code.THROTTLEDOP),
                   (-2, 0)]
    assert children == ["2"] and throttled == 3


def test_without_a_wait_time_nothing_is_throttled(tmp_path):
    async def go():
        ctx = server(tmp_path, request_throttle=RequestThrottleSettings(max_requests=1,
                                                                        stall_time_ms=0))
        a, a_out = await large_session(ctx, t := FlowTransport()), t
        a.data_received(create(1, "/n"))
        await all_applied(ctx)
        a.data_received(b"".join(create(x, f"/n/{x}") for x in range(2, 6)))
        throttler = ctx.limits.request_throttler
        for _ in range(20):
            await all_applied(ctx)
            if not throttler.waiting:
                break
        await all_applied(ctx)
        return replies(a_out.drain()), throttler.throttled_ops, throttler.queue_time.count

    got, throttled, observed = asyncio.run(go())
    assert got == [(x, 0) for x in range(1, 6)] and throttled == 0 and observed == 5


# -- the TLS handshake count ------------------------------------------------------------------


@pytest.mark.parametrize("limit", [-1, 0, 2])
def test_handshakes_past_the_limit_are_refused_and_counted(limit):
    limits = L.ClientLimits(Config(limits=LS.LimitSettings(outstanding_handshake_limit=limit)))
    started = [limits.handshake_started() for _ in range(3)]
    if limit > 0:
        assert started == [True, True, False] and limits.tls_handshakes_exceeded == 1
    else:  # 0 or less: no limit (handshakeThrottlingEnabled is limit > 0)
        assert started == [True] * 3 and limits.tls_handshakes_exceeded == 0
    assert limits.outstanding_handshakes == sum(started)
    limits.handshake_finished()
    assert limits.handshake_started()
