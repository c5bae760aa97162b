"""The limits on the secure client port, on ZooKeeper 3.8 (Netty) and zkcompat under the same
zoo.cfg lines: jute.maxbuffer bounds a frame over TLS as over plaintext (a frame over it
closes the connection, one of exactly its size is answered), and a session the connection
throttle has no token for is closed with no ConnectResponse; a connection accepted while
netty.server.outstandingHandshake.limit handshakes are underway is closed before its own.
(tests/abuse has the plaintext port's cases.)"""

from __future__ import annotations

import socket
import ssl
import struct
import time

import pytest
from tls_servers import (
    handshake_outcome,
    mntr,
    read_until_closed,
    secure_cfg,
    start,
    tls_handshake,
)

from bench import wire
from conformance_tests.servers import HOST
from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.jute.framing import FrameReader

pytestmark = pytest.mark.timeout(180)

MAXBUFFER = 4096
KINDS = ("zookeeper", "zkcompat")


def launch(kind: str, material, tmp_path, **cfg):
    """zkcompat reads jute.maxbuffer from zoo.cfg; ZooKeeper only as a JVM property."""
    maxbuffer = cfg.pop("maxbuffer", None)
    lines = secure_cfg(material, **{k: str(v) for k, v in cfg.items()})
    flags = ()
    if maxbuffer is not None:
        if kind == "zkcompat":
            lines["jute.maxbuffer"] = str(maxbuffer)
        else:
            flags = (f"-Djute.maxbuffer={maxbuffer}",)
    return start(kind, tmp_path / kind, lines, flags)


def tls_session(server, material) -> tuple[ssl.SSLSocket, list[bytes]] | None:
    """A TLS connection with its ConnectRequest sent: (socket, frames read) once the
    ConnectResponse came, None if the server closed it instead."""
    sock = tls_handshake(server, material, material.client)
    sock.sendall(wire.connect_request())
    reader, sock_frames = FrameReader(1 << 20), []
    sock.settimeout(10)
    while not sock_frames:
        try:
            data = sock.recv(1 << 16)
        except (ssl.SSLError, ConnectionResetError):
            data = b""
        if not data:
            sock.close()
            return None
        sock_frames += reader.feed(data)
    return sock, sock_frames


def set_data_frame(xid: int, frame_bytes: int) -> bytes:
    base = len(wire.request(xid, OpCode.SET_DATA, r.SetDataRequest("/d", b"", -1))) - 4
    return wire.request(xid, OpCode.SET_DATA,
                        r.SetDataRequest("/d", b"x" * (frame_bytes - base), -1))


def first_reply(sock) -> tuple[int, int] | str:
    reader = FrameReader(1 << 20)
    sock.settimeout(10)
    while True:
        try:
            data = sock.recv(1 << 16)
        except (ssl.SSLError, ConnectionResetError):
            return "closed"
        if not data:
            return "closed"
        for f in reader.feed(data):
            xid, _, err = wire.REPLY_HEADER.unpack_from(f)
            if xid != wire.NOTIFICATION_XID:
                return xid, err


@pytest.mark.parametrize("kind", KINDS)
def test_jute_maxbuffer_on_the_secure_port(kind, material, tmp_path):
    server = launch(kind, material, tmp_path, maxbuffer=MAXBUFFER)
    try:
        opened = tls_session(server, material)
        assert opened is not None
        sock, _ = opened
        try:
            sock.sendall(wire.request(1, OpCode.CREATE, r.CreateRequest("/d", b"", wire.OPEN_ACL,
                                                                         0)))
            assert first_reply(sock) == (1, 0)
            sock.sendall(set_data_frame(2, MAXBUFFER))
            assert first_reply(sock) == (2, 0)
            sock.sendall(struct.pack(">i", MAXBUFFER + 1) + b"\0" * 64)
            assert read_until_closed(sock) == b""
        finally:
            sock.close()
    finally:
        server.stop()


@pytest.mark.parametrize("kind", KINDS)
def test_the_connection_throttle_on_the_secure_port(kind, material, tmp_path):
    """zkcompat's launcher opens a session to see the server up (ZooKeeper's asks srvr), so
    the bucket of 2 has one token or two left: sessions, then closes with no response."""
    server = launch(kind, material, tmp_path, connection_throttle_tokens=2,
                    connection_throttle_fill_time=600_000)
    try:
        outcomes = []
        for _ in range(4):
            opened = tls_session(server, material)
            outcomes.append("closed" if opened is None else "session")
            if opened is not None:
                opened[0].close()
        assert outcomes in (["session"] + ["closed"] * 3, ["session"] * 2 + ["closed"] * 2)
    finally:
        server.stop()


HANDSHAKE_LIMIT = 2


@pytest.mark.parametrize("kind", KINDS)
def test_handshakes_past_the_outstanding_limit(kind, material, tmp_path):
    """netty.server.outstandingHandshake.limit, with two connections on the secure port that
    never start their handshake. zkcompat closes a third before its own (counted in
    tls_handshake_exceeded; the outstanding_tls_handshake gauge shows the two), and takes
    handshakes again once they go. ZooKeeper 3.8 (3.9 and master alike) never applies the
    limit to a secureClientPort: NettyServerCnxnFactory's constructor works out
    handshakeThrottlingEnabled while `secure` is still false, and configure() sets it after,
    so only a plaintext port with client.portUnification is limited. This shows that
    difference, which zkcompat keeps on purpose (docs/limits.md)."""
    server = launch(kind, material, tmp_path,
                    **{"netty.server.outstandingHandshake.limit": HANDSHAKE_LIMIT,
                       "4lw.commands.whitelist": "*"})
    try:
        assert handshake_outcome(server, material) == "session"
        stalled = [socket.create_connection((HOST, server.secure_port))
                   for _ in range(HANDSHAKE_LIMIT)]
        try:
            deadline = time.monotonic() + 10
            while kind == "zkcompat" and mntr(server, "outstanding_tls_handshake") < 2:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            third = handshake_outcome(server, material)
            exceeded = mntr(server, "tls_handshake_exceeded")
        finally:
            for s in stalled:
                s.close()
        if kind == "zookeeper":
            assert (third, exceeded) == ("session", 0)
            log = server.log_path.read_text(errors="replace")
            assert ("handshakeThrottlingEnabled = false, zookeeper.netty.server."
                    f"outstandingHandshake.limit = {HANDSHAKE_LIMIT}") in log
            return
        assert (third, exceeded) == ("refused", 1)
        deadline = time.monotonic() + 10
        while handshake_outcome(server, material) != "session":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert mntr(server, "tls_handshake_exceeded") == 1
        assert mntr(server, "outstanding_tls_handshake") == 0
    finally:
        server.stop()
