"""largeRequestThreshold/largeRequestMaxBytes and throttled_op_wait_time on real sockets, on a
real ZooKeeper 3.8 and on zkcompat under the same zoo.cfg lines: a frame that would take the
large requests in process past the maximum closes its connection with no reply
(large_requests_rejected in mntr), smaller ones and those under the threshold are answered;
a request the request throttler held longer than throttled_op_wait_time is answered
THROTTLEDOP (-127) in order and never carried out (throttled_ops in mntr); a connection over
maxClientCnxns counts in connection_rejected."""

from __future__ import annotations

import socket

import pytest
from abuse_load import open_raw_session
from kazoo.client import KazooClient

from bench import wire
from conformance_tests.servers import HOST, four_letter_word
from zkcompat.jute import records as r
from zkcompat.jute.constants import Code, OpCode
from zkcompat.jute.framing import FrameReader

pytestmark = pytest.mark.timeout(240)

KINDS = ("zookeeper", "zkcompat")
THRESHOLD = 1000
MAX_BYTES = 5000


@pytest.fixture
def start(start):
    """conftest's, with every four-letter word on (these tests read mntr)."""
    return lambda kind, cfg: start(kind, {"4lw.commands.whitelist": "*", **cfg})


def mntr(server, name: str, source: str | None = None) -> int:
    if source is None:
        text = four_letter_word(HOST, server.port, "mntr")
    else:
        with socket.create_connection((HOST, server.port), timeout=10,
                                      source_address=(source, 0)) as s:
            s.sendall(b"mntr")
            chunks = []
            while chunk := s.recv(65536):
                chunks.append(chunk)
        text = b"".join(chunks).decode()
    for line in text.splitlines():
        key, _, value = line.partition("\t")
        if key == f"zk_{name}":
            return int(float(value))
    raise AssertionError(f"zk_{name} not in mntr")


def set_frame(xid: int, frame_bytes: int) -> bytes:
    """A setData of /big whose frame (less its 4-byte length) is frame_bytes long."""
    base = len(wire.request(xid, OpCode.SET_DATA, r.SetDataRequest("/big", b"", -1))) - 4
    return wire.request(xid, OpCode.SET_DATA,
                        r.SetDataRequest("/big", b"x" * (frame_bytes - base), -1))


def read_replies(sock: socket.socket, most: int) -> tuple[list[tuple[int, int]], bool]:
    """(xid, err) of each reply until `most` came or the server closed; and whether it closed."""
    reader, out = FrameReader(1 << 20), []
    sock.settimeout(30)
    while len(out) < most:
        try:
            data = sock.recv(1 << 16)
        except ConnectionResetError:
            data = b""
        if not data:
            return out, True
        for f in reader.feed(data):
            xid, _, err = wire.REPLY_HEADER.unpack_from(f)
            if xid != wire.NOTIFICATION_XID:
                out.append((xid, err))
    return out, False


def closed_without_reply(sock: socket.socket) -> bool:
    got, closed = read_replies(sock, 1)
    return closed and got == []


@pytest.mark.parametrize("kind", KINDS)
def test_large_requests_past_the_maximum_close_their_connection(kind, start):
    server = start(kind, {"largeRequestThreshold": THRESHOLD, "largeRequestMaxBytes": MAX_BYTES})
    setup = open_raw_session(HOST, server.port)
    setup.sendall(wire.request(1, OpCode.CREATE, r.CreateRequest("/big", b"", wire.OPEN_ACL, 0)))
    assert read_replies(setup, 1) == ([(1, 0)], False)
    setup.close()

    # One frame over the maximum on its own: closed, no reply.
    sock = open_raw_session(HOST, server.port)
    sock.sendall(set_frame(1, MAX_BYTES + 100))
    assert closed_without_reply(sock)
    sock.close()
    assert mntr(server, "large_requests_rejected") == 1

    # Pipelined 3000-byte frames: one is in process when the next arrives (a write waits
    # for its fsync), and 3000 + 3000 is past 5000: closed before all are answered.
    sock = open_raw_session(HOST, server.port)
    sock.sendall(b"".join(set_frame(x, 3000) for x in range(1, 21)))
    got, closed = read_replies(sock, 20)
    sock.close()
    assert closed and len(got) < 20 and all(err == 0 for _, err in got)
    assert mntr(server, "large_requests_rejected") == 2

    # The total drains as requests finish: one of 4000 bytes is answered, and any number
    # under the threshold, pipelined.
    sock = open_raw_session(HOST, server.port)
    try:
        sock.sendall(set_frame(1, 4000))
        assert read_replies(sock, 1) == ([(1, 0)], False)
        sock.sendall(b"".join(set_frame(x, THRESHOLD - 100) for x in range(2, 52)))
        assert read_replies(sock, 50) == ([(x, 0) for x in range(2, 52)], False)
    finally:
        sock.close()
    assert mntr(server, "large_requests_rejected") == 2


THROTTLED_CREATES = 300


@pytest.mark.parametrize("kind", KINDS)
def test_requests_held_past_throttled_op_wait_time_are_answered_throttledop(kind, start):
    server = start(kind, {"request_throttle_max_requests": 1, "throttled_op_wait_time": 1})
    sock = open_raw_session(HOST, server.port)
    try:
        sock.sendall(wire.request(1, OpCode.CREATE, r.CreateRequest("/t", b"", wire.OPEN_ACL, 0)))
        assert read_replies(sock, 1) == ([(1, 0)], False)
        sock.sendall(b"".join(wire.request(x, OpCode.CREATE, r.CreateRequest(
            f"/t/{x}", b"", wire.OPEN_ACL, 0)) for x in range(2, THROTTLED_CREATES + 2)))
        got, closed = read_replies(sock, THROTTLED_CREATES)
    finally:
        sock.close()
    assert not closed
    assert [xid for xid, _ in got] == list(range(2, THROTTLED_CREATES + 2))  # in order
    throttled = {xid for xid, err in got if err == Code.THROTTLEDOP}
    assert throttled and {err for _, err in got} <= {0, Code.THROTTLEDOP}
    zk = KazooClient(hosts=server.connect_string)
    zk.start(timeout=10)
    try:
        created = {int(c) for c in zk.get_children("/t")}
    finally:
        zk.stop()
        zk.close()
    assert created == {xid for xid, err in got if err == 0}  # a THROTTLEDOP one never happened
    assert mntr(server, "throttled_ops") == len(throttled)


@pytest.mark.parametrize("kind", KINDS)
def test_connection_rejected_counts_connections_over_max_client_cnxns(kind, start):
    server = start(kind, {"maxClientCnxns": 2})
    kept = [open_raw_session(HOST, server.port) for _ in range(2)]
    try:
        # Closed as it is accepted: connect() itself can see that (EPIPE, ECONNRESET).
        try:
            with socket.create_connection((HOST, server.port), timeout=10) as sock:
                sock.sendall(wire.connect_request())
                assert closed_without_reply(sock)
        except (BrokenPipeError, ConnectionResetError):
            pass
    finally:
        for s in kept:
            s.close()
    # mntr from another address: maxClientCnxns counts per address.
    assert mntr(server, "connection_rejected", source="127.0.0.2") == 1
