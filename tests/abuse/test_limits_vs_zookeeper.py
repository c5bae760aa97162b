"""What a client sees of each limit, on a real ZooKeeper 3.8 and on zkcompat under the same
zoo.cfg lines: a session the connection throttle has no token for, and a connection over
maxClientCnxns or maxCnxns, are closed with no ConnectResponse; globalOutstandingLimit and the
request throttler only delay a pipelining client (every request answered, in order); and the
request throttler drops what a closed connection left waiting (request_throttle_drop_stale),
or, with drop_stale=false, still applies it."""

from __future__ import annotations

import socket
import time

import pytest
from abuse_load import open_raw_session

from bench import wire
from conformance_tests.servers import HOST
from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.jute.framing import FrameReader

pytestmark = pytest.mark.timeout(240)

KINDS = ("zookeeper", "zkcompat")


def handshake(port: int, source: str = HOST) -> str:
    """"session" (a ConnectResponse with a session id), or "closed" (no response at all)."""
    sock = socket.socket()
    sock.settimeout(10)
    try:
        sock.bind((source, 0))
        try:
            sock.connect((HOST, port))
            sock.sendall(wire.connect_request())
            data = sock.recv(4096)
        except (ConnectionResetError, BrokenPipeError):
            return "closed"
        if not data:
            return "closed"
        frames = FrameReader().feed(data)
        resp, _ = r.ConnectResponse.decode(frames[0], 0)
        return "session" if resp.sessionId else "refused-session"
    finally:
        sock.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_session_without_a_token_is_closed_with_no_response(kind, start):
    server = start(kind, {"connection_throttle_tokens": 2,
                          "connection_throttle_fill_time": 600_000})
    assert [handshake(server.port) for _ in range(4)] == ["session", "session", "closed",
                                                          "closed"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_connection_over_max_client_cnxns_is_closed_at_once(kind, start):
    server = start(kind, {"maxClientCnxns": 2})
    kept = [open_raw_session(HOST, server.port) for _ in range(2)]
    try:
        assert handshake(server.port) == "closed"
        assert handshake(server.port, "127.0.0.2") == "session"  # another address may
    finally:
        for s in kept:
            s.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_connection_over_max_cnxns_is_closed_at_once(kind, start):
    server = start(kind, {"maxCnxns": 2})
    kept = [open_raw_session(HOST, server.port), open_raw_session(HOST, server.port)]
    try:
        assert handshake(server.port, "127.0.0.3") == "closed"
    finally:
        for s in kept:
            s.close()
    deadline = time.monotonic() + 10  # the server notices the two closes
    while handshake(server.port, "127.0.0.3") != "session":
        assert time.monotonic() < deadline


def replies(sock: socket.socket, n: int) -> list[tuple[int, int]]:
    """The next n replies' (xid, err), notifications skipped."""
    reader, out = FrameReader(), []
    sock.settimeout(30)
    while len(out) < n:
        data = sock.recv(1 << 16)
        assert data, f"closed after {len(out)} replies"
        for f in reader.feed(data):
            xid, _, err = wire.REPLY_HEADER.unpack_from(f)
            if xid != wire.NOTIFICATION_XID:
                out.append((xid, err))
    return out


PIPELINED = 300


@pytest.mark.parametrize("kind", KINDS)
def test_a_throttled_pipelining_client_sees_only_delay(kind, start):
    server = start(kind, {"globalOutstandingLimit": 1, "request_throttle_max_requests": 1})
    sock = open_raw_session(HOST, server.port)
    try:
        sock.sendall(wire.request(1, OpCode.CREATE, r.CreateRequest("/p", b"", wire.OPEN_ACL, 0))
                     + b"".join(wire.request(x, OpCode.CREATE, r.CreateRequest(
                         f"/p/{x}", b"", wire.OPEN_ACL, 0)) for x in range(2, PIPELINED + 1)))
        assert replies(sock, PIPELINED) == [(x, 0) for x in range(1, PIPELINED + 1)]
    finally:
        sock.close()


STALE_CREATES = 500


def children_when_settled(server, path: str) -> int:
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=server.connect_string)
    zk.start(timeout=10)
    try:
        last, since = -1, time.monotonic()
        while time.monotonic() - since < 1.5:
            n = len(zk.get_children(path))
            if n != last:
                last, since = n, time.monotonic()
            time.sleep(0.1)
        return last
    finally:
        zk.stop()
        zk.close()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("drop_stale", [True, False])
def test_the_request_throttler_drops_what_a_closed_connection_left(kind, drop_stale, start):
    server = start(kind, {"request_throttle_max_requests": 1,
                          "request_throttle_drop_stale": str(drop_stale).lower()})
    sock = open_raw_session(HOST, server.port)
    sock.sendall(wire.request(1, OpCode.CREATE, r.CreateRequest("/s", b"", wire.OPEN_ACL, 0)))
    assert replies(sock, 1) == [(1, 0)]
    sock.sendall(b"".join(wire.request(x, OpCode.CREATE, r.CreateRequest(
        f"/s/{x}", b"", wire.OPEN_ACL, 0)) for x in range(2, STALE_CREATES + 2)))
    # The client goes away at once, while most of them still wait in the throttler. A FIN,
    # not an RST: close() with replies unread would reset the connection, and the server's
    # kernel would throw away the requests the server had not read yet.
    sock.shutdown(socket.SHUT_WR)
    sock.settimeout(30)
    while sock.recv(1 << 16):
        pass
    sock.close()
    created = children_when_settled(server, "/s")
    if drop_stale:
        assert created < STALE_CREATES // 2
    else:
        assert created == STALE_CREATES
