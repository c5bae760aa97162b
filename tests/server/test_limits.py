"""Limits under abuse, in process: BlueThrottle's arithmetic, the settings as ZooKeeper reads
them, and a Connection that stops reading at globalOutstandingLimit, at its session's bound,
at a full transport and behind the request throttler, and reads again when it may, with every
count back at zero once everything is answered. tests/abuse/ has the same on real sockets."""

import asyncio
import random
import struct

import pytest

from bench import wire
from bench.inproc import QuietTransport, open_session
from zkcompat.config import Config, ConfigError, load
from zkcompat.config import limits as LS
from zkcompat.config.limits import ConnectionThrottleSettings, RequestThrottleSettings
from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.peer.node import build_standalone
from zkcompat.server import limits as L
from zkcompat.server.connection import OUT_SPILL_BYTES, Connection, ConnState
from zkcompat.server.throttle import ConnectionThrottle

_HDR = struct.Struct(">iiqi")  # frame length, then ReplyHeader{xid, zxid, err}
DATA = b"d" * 100


# -- BlueThrottle ---------------------------------------------------------------------------


def bucket(**kw) -> ConnectionThrottle:
    return ConnectionThrottle(ConnectionThrottleSettings(**kw), now_ms=0, rng=random.Random(7))


def test_without_tokens_every_session_is_allowed():
    t = bucket()
    assert all(t.check_limit(1, now) for now in range(1000))


def test_the_bucket_empties_then_refills_fill_count_per_fill_time():
    t = bucket(tokens=3, fill_time_ms=100, fill_count=2)
    assert [t.check_limit(1, 0) for _ in range(4)] == [True, True, True, False]
    assert t.deficit == 3
    assert not t.check_limit(1, 100)  # checkLimit refills only once diff > fill_time
    assert [t.check_limit(1, 101) for _ in range(3)] == [True, True, False]  # 101*2//100
    assert [t.check_limit(1, 10_000) for _ in range(4)] == [True, True, True, False]  # capped


def test_a_weighted_session_needs_its_weight_and_the_bucket_counts_global_sessions():
    s = LS.settings({"connection_throttle_tokens": "2", "connection_throttle_fill_count": "1",
                    "connection_throttle_weight_enabled": "true"})
    t = ConnectionThrottle(s.connection_throttle, now_ms=0)
    assert (t.max_tokens, t.fill_count) == (6, 3)  # BlueThrottle: weight x tokens, x fill_count
    assert (t.tokens_needed(renew=False), t.tokens_needed(renew=True)) == (3, 2)
    assert t.check_limit(3, 0) and t.check_limit(2, 0) and not t.check_limit(2, 0)
    assert t.check_limit(1, 0)


def test_blue_drops_at_random_once_the_bucket_stays_empty():
    t = bucket(tokens=1, fill_time_ms=1_000_000, freeze_time_ms=10, drop_increase=0.5,
               drop_decrease=0.25)
    assert t.check_limit(1, 0)
    assert not t.check_limit(1, 5)  # empty, within the freeze time: no drop chance yet
    assert t.drop == 0.0
    t.check_limit(1, 20)  # empty for a freeze period: +0.5
    t.check_limit(1, 40)
    assert t.drop == 1.0
    t.tokens = 1  # refilled: BLUE refuses anyway at drop 1.0
    assert not t.check_limit(1, 45) and t.tokens == 1
    t.decrease_point = 1.0  # deficit 0 <= threshold: the chance falls by drop_decrease
    t.check_limit(1, 60)
    assert t.drop == 0.75


# -- settings -------------------------------------------------------------------------------


def test_settings_are_read_with_or_without_the_property_prefix():
    cfg = load(None, {"globalOutstandingLimit": "7", "zookeeper.maxCnxns": "9",
                      "zookeeper.connection_throttle_tokens": "5",
                      "connection_throttle_fill_time": "250",
                      "connection_throttle_drop_increase": "0.5d",
                      "request_throttle_max_requests": "4",
                      "zookeeper.request_throttle_drop_stale": "FALSE",
                      "request_stale_latency_check": "true"})
    s = cfg.limits
    assert (s.global_outstanding_limit, s.max_cnxns) == (7, 9)
    c = s.connection_throttle
    assert (c.tokens, c.fill_time_ms, c.drop_increase) == (5, 250, 0.5)
    q = s.request_throttle
    assert (q.max_requests, q.stall_time_ms, q.drop_stale, q.stale_latency_check,
            q.stale_connection_check) == (4, 100, False, True, True)


def test_the_defaults_are_zookeepers():
    s = load(None, {}).limits
    assert s.global_outstanding_limit == 1000 and s.max_cnxns == 0
    assert s.connection_throttle == ConnectionThrottleSettings()
    assert s.request_throttle == RequestThrottleSettings(0, 100, True, True, False)


@pytest.mark.parametrize("key, value", [("globalOutstandingLimit", "many"),
                                        ("connection_throttle_tokens", "-1"),
                                        ("connection_throttle_drop_decrease", "0,1"),
                                        ("request_throttle_drop_stale", "yes"),
                                        ("zookeeper.maxCnxns", "2147483648")])
def test_a_bad_value_stops_start_up_naming_its_key(key, value):
    with pytest.raises(ConfigError, match=key):
        load(None, {key: value})


def test_a_bucket_that_never_refills_stops_start_up():
    with pytest.raises(ConfigError, match="connection_throttle_fill_time"):
        load(None, {"connection_throttle_tokens": "10", "connection_throttle_fill_time": "0"})


def test_weights_are_replaced_as_blue_throttle_replaces_them():
    c = LS.settings({"connection_throttle_global_session_weight": "0",
                    "connection_throttle_local_session_weight": "2",
                    "connection_throttle_renew_session_weight": "1"}).connection_throttle
    assert (c.global_session_weight, c.local_session_weight, c.renew_session_weight) == (3, 2, 2)


def test_negative_max_cnxns_means_none():
    assert LS.settings({"maxCnxns": "-5"}).max_cnxns == 0


@pytest.mark.parametrize("limit, voters, ensemble, expected",
                         [(1000, 1, False, 1000), (1000, 3, True, 500), (1000, 5, True, 250),
                          (1000, 2, True, 1000), (7, 4, True, 2), (-7, 4, True, -2)])
def test_an_ensemble_member_shares_the_limit_among_the_other_voters(limit, voters, ensemble,
                                                                    expected):
    assert L.outstanding_limit(limit, voters, ensemble) == expected


def test_connections_per_address_and_in_all():
    limits = L.ClientLimits(Config(max_client_cnxns=2,
                                   limits=LS.LimitSettings(max_cnxns=3)))
    assert limits.admit("10.0.0.1", 0) is None and limits.admit("10.0.0.1", 1) is None
    assert "from 10.0.0.1 - max is 2" in limits.admit("10.0.0.1", 2)
    assert limits.admit("10.0.0.2", 2) is None
    assert "max is 3" in limits.admit("10.0.0.3", 3)
    limits.release("10.0.0.1")
    assert limits.admit("10.0.0.1", 2) is None
    assert limits.connections_rejected == 2


# -- a connection at its bounds ---------------------------------------------------------------


class FlowTransport(QuietTransport):
    """Keeps what is written; says pause_writing past `high` bytes unsent, as asyncio's
    transports do, and drains only when told to."""

    def __init__(self, high: int = 1 << 62):
        super().__init__()
        self.protocol = None
        self.high = high
        self.unsent: list[bytes] = []
        self.reading = True
        self.closing = False
        self.aborted = False

    def write(self, data) -> None:
        before = self.get_write_buffer_size()
        self.unsent.append(bytes(data))
        if before <= self.high < self.get_write_buffer_size():
            self.protocol.pause_writing()

    def get_write_buffer_size(self) -> int:
        return sum(map(len, self.unsent))

    def drain(self) -> list[bytes]:
        data, self.unsent = self.unsent, []
        if self.protocol is not None:
            self.protocol.resume_writing()
        return data

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = self.aborted = True

    def is_closing(self) -> bool:
        return self.closing


def replies(chunks: list[bytes]) -> list[tuple[int, int]]:
    """(xid, err) of every frame written."""
    data, out, off = b"".join(chunks), [], 0
    while off < len(data):
        n, xid, _, err = _HDR.unpack_from(data, off)
        out.append((xid, err))
        off += 4 + n
    return out


async def session(ctx, transport: FlowTransport) -> Connection:
    cnxn = await open_session(ctx, transport)
    transport.protocol = cnxn
    transport.drain()
    return cnxn


async def all_applied(ctx) -> None:
    peer = ctx.pipeline.peer
    for _ in range(3000):
        if peer.last_committed_zxid == peer.last_proposed_zxid and not ctx.pipeline.requests._unproposed:
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            return
        await asyncio.sleep(0.001)
    raise AssertionError("writes were not applied")


def sets(first_xid: int, n: int, path: str = "/n") -> bytes:
    return b"".join(wire.request(x, OpCode.SET_DATA, r.SetDataRequest(path, DATA, -1))
                    for x in range(first_xid, first_xid + n))


def server(tmp_path, **limits):
    cfg = Config(data_dir=tmp_path, force_sync=False, limits=LS.LimitSettings(**limits))
    return build_standalone(cfg)


def test_global_outstanding_limit_stops_reading_until_the_server_is_under_it(tmp_path):
    async def go():
        ctx = server(tmp_path, global_outstanding_limit=10)
        a, a_out = await session(ctx, t := FlowTransport()), t
        b, b_out = await session(ctx, t := FlowTransport()), t
        a.data_received(wire.request(1, OpCode.CREATE, r.CreateRequest("/n", b"", wire.OPEN_ACL, 0)))
        await all_applied(ctx)
        a.data_received(sets(2, 8))
        assert a_out.reading and ctx.limits.in_process == 8
        b.data_received(sets(1, 5))  # 13 in process: over the limit, and b has some of them
        assert not b_out.reading and ctx.limits.in_process == 13
        a.data_received(sets(10, 1))  # a too, at its next request
        assert not a_out.reading
        await all_applied(ctx)
        assert a_out.reading and b_out.reading
        assert ctx.limits.in_process == 0
        return replies(a_out.drain()), replies(b_out.drain())

    a_replies, b_replies = asyncio.run(go())
    assert a_replies == [(x, 0) for x in range(1, 11)]
    assert b_replies == [(x, 0) for x in range(1, 6)]


def test_a_connection_with_nothing_outstanding_reads_on_over_the_limit(tmp_path):
    """shouldThrottle(outstandingCount) is false for a connection with none of its own."""
    async def go():
        ctx = server(tmp_path, global_outstanding_limit=2)
        a, a_out = await session(ctx, t := FlowTransport()), t
        b, b_out = await session(ctx, t := FlowTransport()), t
        a.data_received(wire.request(1, OpCode.CREATE, r.CreateRequest("/n", b"", wire.OPEN_ACL, 0)))
        await all_applied(ctx)
        a.data_received(sets(2, 5))
        b.data_received(wire.request(1, OpCode.GET_DATA, r.GetDataRequest("/n", False)))
        result = (a_out.reading, b_out.reading, replies(b_out.unsent))
        await all_applied(ctx)
        return result

    a_reading, b_reading, b_replies = asyncio.run(go())
    assert (a_reading, b_reading, b_replies) == (False, True, [(1, 0)])


def test_resume_writing_does_not_resume_a_session_at_its_bound(tmp_path):
    async def go():
        ctx = server(tmp_path)
        ctx.limits.session_outstanding_max = 4
        a, out = await session(ctx, t := FlowTransport()), t
        a.data_received(wire.request(1, OpCode.CREATE, r.CreateRequest("/n", b"", wire.OPEN_ACL, 0)))
        await all_applied(ctx)
        a.pause_writing()
        a.resume_writing()
        assert out.reading
        a.data_received(sets(2, 4))  # 4 queued: the session's bound
        assert not out.reading
        a.pause_writing()
        a.resume_writing()  # the transport drained; the session is still at its bound
        stuck = out.reading
        await all_applied(ctx)
        return stuck, out.reading

    assert asyncio.run(go()) == (False, True)


def test_a_client_that_reads_nothing_leaves_its_requests_unread(tmp_path):
    """Big replies: the rest of a pipelined batch waits, unread, until the transport drains,
    then goes on in order; the server holds about one spill of replies, not the batch's."""
    big = b"x" * 600_000

    async def go():
        ctx = server(tmp_path)
        a, out = await session(ctx, t := FlowTransport(high=64 * 1024)), t
        a.data_received(wire.request(1, OpCode.CREATE, r.CreateRequest("/big", big, wire.OPEN_ACL, 0)))
        await all_applied(ctx)
        out.drain()
        a.data_received(b"".join(wire.request(x, OpCode.GET_DATA, r.GetDataRequest("/big", False))
                                 for x in range(2, 102)))
        held = (out.get_write_buffer_size(), len(a._unread), out.reading)
        got = replies(out.drain())  # the client reads: the next requests are answered
        more = replies(out.drain())
        while a._unread:
            more += replies(out.drain())
        more += replies(out.drain())
        return held, got, more, out.reading

    (unsent, unread, reading), got, more, reading_after = asyncio.run(go())
    # Written once past OUT_SPILL_BYTES (the first reply of a flush uncounted): 3 replies.
    assert unsent <= OUT_SPILL_BYTES + 2 * 600_100 and not reading
    assert unread == 100 - len(got) and len(got) <= 3
    assert got + more == [(x, 0) for x in range(2, 102)]
    assert reading_after


def test_a_client_that_never_reads_is_dropped_at_the_unsent_bound(tmp_path):
    """Reads queued behind a write are answered together when it commits: past the bound
    the connection is aborted, and the server drops what it held for it."""
    async def go():
        ctx = server(tmp_path)
        ctx.limits.unsent_bytes_max = 3_000_000
        a, out = await session(ctx, t := FlowTransport(high=64 * 1024)), t
        a.data_received(wire.request(1, OpCode.CREATE, r.CreateRequest("/big", b"x" * 500_000,
                                                                         wire.OPEN_ACL, 0))
                        + wire.request(2, OpCode.CREATE, r.CreateRequest("/n", b"", wire.OPEN_ACL, 0)))
        await all_applied(ctx)
        a.data_received(sets(2, 1)
                        + b"".join(wire.request(x, OpCode.GET_DATA, r.GetDataRequest("/big", False))
                                   for x in range(3, 40)))
        await all_applied(ctx)
        return out.aborted, out.get_write_buffer_size(), a._state

    aborted, unsent, state = asyncio.run(go())
    assert aborted and state is ConnState.CLOSED and unsent < 3_000_000 + 2 * 500_100


def test_the_request_throttler_keeps_each_sessions_order_and_its_counts(tmp_path):
    async def go():
        ctx = server(tmp_path, request_throttle=RequestThrottleSettings(max_requests=2))
        a, a_out = await session(ctx, t := FlowTransport()), t
        b, b_out = await session(ctx, t := FlowTransport()), t
        a.data_received(wire.request(1, OpCode.CREATE, r.CreateRequest("/n", b"", wire.OPEN_ACL, 0)))
        await all_applied(ctx)
        a.data_received(sets(2, 6))
        b.data_received(wire.request(1, OpCode.GET_DATA, r.GetDataRequest("/n", False))
                        + sets(2, 2)
                        + wire.request(4, OpCode.EXISTS, r.ExistsRequest("/n", False)))
        throttler = ctx.limits.request_throttler
        waited = (ctx.limits.held, len(throttler.waiting), replies(b_out.unsent))
        for _ in range(20):
            await all_applied(ctx)
            if not throttler.waiting:
                break
        await all_applied(ctx)
        return waited, replies(a_out.drain()), replies(b_out.drain()), ctx.limits

    (held, waiting, b_early), a_replies, b_replies, limits = asyncio.run(go())
    assert held == waiting == 8 and b_early == []  # b's read waits behind a's writes
    assert a_replies == [(x, 0) for x in range(1, 8)]
    assert b_replies == [(x, 0) for x in range(1, 5)]
    assert (limits.held, limits.in_process, limits.request_throttler.held_by) == (0, 0, {})


def test_the_request_throttler_drops_a_closed_connections_requests(tmp_path):
    async def go():
        ctx = server(tmp_path, request_throttle=RequestThrottleSettings(max_requests=1))
        a, a_out = await session(ctx, t := FlowTransport()), t
        a.data_received(wire.request(1, OpCode.CREATE, r.CreateRequest("/n", b"", wire.OPEN_ACL, 0)))
        await all_applied(ctx)
        a.data_received(b"".join(wire.request(x, OpCode.CREATE, r.CreateRequest(
            f"/n/{x}", b"", wire.OPEN_ACL, 0)) for x in range(2, 12)))
        a_out.closing = True  # the client went away
        a.connection_lost(None)
        for _ in range(20):
            await all_applied(ctx)
        return sorted(ctx.tree.nodes["/n"].children or ()), ctx.limits

    children, limits = asyncio.run(go())
    assert children == ["2"]  # the one in process; the other nine were dropped
    # The first as stale (STALE_REQUESTS_DROPPED), the rest as its invalid connection's.
    assert limits.request_throttler.dropped == 1
    assert (limits.held, limits.in_process) == (0, 0)


def test_a_connection_keeps_pythons_shared_key_instance_dict(tmp_path):
    """Python 3.11 shares one key table among the instances of a class only up to 30
    attributes; past that every attribute read on the hot path gets slower."""
    async def go():
        ctx = server(tmp_path)
        return await session(ctx, FlowTransport())

    assert len(vars(asyncio.run(go()))) <= 30
