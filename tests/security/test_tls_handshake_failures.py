"""TLS handshakes that fail on zkcompat's secure port: each closes its own connection, sends
no byte of ZooKeeper's protocol, and leaves exactly one log line naming that connection
(event=tls_handshake_failed with a reason), while sessions on both ports carry on and the
server stays up. The server has ZooKeeper 3.9's defaults: clientAuth=need, TLSv1.3 only."""

from __future__ import annotations

import socket
import ssl
import time

import pytest
from tls_servers import (
    CONNECT_TIMEOUT_S,
    log_events,
    plain_client,
    read_until_closed,
    secure_cfg,
    start,
    tls_client,
    tls_handshake,
)

from conformance_tests.servers import HOST
from zkcompat.security.tls import HANDSHAKE_TIMEOUT_S

LOG_WAIT_S = 5.0
# A ConnectRequest frame as a plaintext client sends it first: length 44, protocolVersion 0,
# lastZxidSeen 0, timeOut 4000, sessionId 0, a 16-byte empty password, readOnly false.
CONNECT_REQUEST = (b"\x00\x00\x00\x2d" + bytes(12) + (4000).to_bytes(4, "big") + bytes(8)
                   + b"\x00\x00\x00\x10" + bytes(16) + b"\x00")
TLS_ALERT = 0x15  # a TLS record of type alert: the only thing a refused client may read


@pytest.fixture(scope="module")
def server(material, tmp_path_factory):
    server = start("zkcompat", tmp_path_factory.mktemp("failures"), secure_cfg(material))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def sessions(server, material):
    """A session on each port, opened before any failure and checked after each."""
    secure = tls_client(server, material, material.client)
    plain = plain_client(server)
    for zk in (secure, plain):
        zk.start(timeout=10)
    secure.create("/alive", b"0")
    yield secure, plain
    for zk in (secure, plain):
        zk.stop()
        zk.close()


def _lines_about(server, port: int) -> list[str]:
    """Every log line naming the connection from local port `port`."""
    text = server.log_path.read_text(errors="replace")
    return [line for line in text.splitlines() if f"remote={HOST}:{port} " in line + " "]


def _one_failure_logged(server, port: int) -> str:
    """The single line logged about that connection, once it is there; its reason."""
    deadline = time.monotonic() + LOG_WAIT_S
    while not (lines := _lines_about(server, port)) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)  # a second line about the same connection would be a bug: wait for it
    lines = _lines_about(server, port)
    assert len(lines) == 1, lines
    assert "event=tls_handshake_failed " in lines[0], lines[0]
    reason = lines[0].split("reason=", 1)[1]
    assert reason.strip("'\" "), lines[0]
    return reason


def _still_serving(server, sessions, step: int) -> None:
    secure, plain = sessions
    secure.set("/alive", str(step).encode())
    assert plain.get("/alive")[0] == str(step).encode()
    assert server.is_alive()
    assert "Traceback" not in server.log_path.read_text(errors="replace")


def _refused(sock) -> bytes:
    """What the server sends a refused connection until it closes it."""
    try:
        sock.sendall(CONNECT_REQUEST)
        return read_until_closed(sock)
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        return b""


def _assert_no_zookeeper_bytes(data: bytes) -> None:
    assert b"<still open>" not in data, "the server kept the connection open"
    assert data == b"" or data[0] == TLS_ALERT, data


def test_plaintext_bytes_to_the_tls_port(server, sessions):
    with socket.create_connection((HOST, server.secure_port), timeout=CONNECT_TIMEOUT_S) as s:
        port = s.getsockname()[1]
        data = _refused(s)
    _assert_no_zookeeper_bytes(data)
    assert "version" in _one_failure_logged(server, port).lower()
    _still_serving(server, sessions, 1)


@pytest.mark.parametrize("who", ["stranger", "nobody"])
def test_untrusted_or_missing_client_certificate(who, server, sessions, material):
    """A certificate of a CA the trust store lacks, or none, under clientAuth=need. On
    TLSv1.3 the client finishes its side first, so the refusal comes at its first read."""
    party = material.stranger if who == "stranger" else None
    try:
        sock = tls_handshake(server, material, party)
    except (ssl.SSLError, ConnectionResetError) as e:
        pytest.fail(f"TLSv1.3 client should finish its side of the handshake: {e}")
    with sock:
        port = sock.getsockname()[1]
        data = _refused(sock)
    _assert_no_zookeeper_bytes(data)
    reason = _one_failure_logged(server, port).lower()
    assert "certificate" in reason, reason
    _still_serving(server, sessions, 2)


def test_protocol_the_server_does_not_enable(server, sessions, material):
    """A TLSv1.2-only client (a 3.8 Java client's default) against 3.9's default, TLSv1.3
    alone: no common protocol, so the handshake fails on both sides."""
    ctx = ssl.create_default_context(cafile=str(material.ca_cert))
    ctx.check_hostname = False
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(material.client.cert), str(material.client.key))
    with socket.create_connection((HOST, server.secure_port), timeout=CONNECT_TIMEOUT_S) as raw:
        port = raw.getsockname()[1]
        with pytest.raises(ssl.SSLError):
            ctx.wrap_socket(raw)
    assert "protocol" in _one_failure_logged(server, port).lower()
    _still_serving(server, sessions, 3)


def test_client_that_goes_away_mid_handshake(server, sessions, material):
    """Half a ClientHello, then the client is gone."""
    ctx = ssl.create_default_context(cafile=str(material.ca_cert))
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    hello = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        hello.do_handshake()
    client_hello = outgoing.read()
    with socket.create_connection((HOST, server.secure_port), timeout=CONNECT_TIMEOUT_S) as s:
        port = s.getsockname()[1]
        s.sendall(client_hello[:len(client_hello) // 2])
    _one_failure_logged(server, port)
    _still_serving(server, sessions, 4)


def test_silent_client_is_dropped_at_the_handshake_timeout(server, sessions):
    """A client that connects and says nothing is closed after Netty's 10 s handshake
    timeout (HANDSHAKE_TIMEOUT_S), with its one line, while the sessions carry on."""
    with socket.create_connection((HOST, server.secure_port), timeout=CONNECT_TIMEOUT_S) as s:
        port = s.getsockname()[1]
        started = time.monotonic()
        data = read_until_closed(s, timeout_s=HANDSHAKE_TIMEOUT_S + 5)
        waited = time.monotonic() - started
    _assert_no_zookeeper_bytes(data)
    assert HANDSHAKE_TIMEOUT_S - 1 <= waited < HANDSHAKE_TIMEOUT_S + 5, waited
    assert "10" in _one_failure_logged(server, port)
    _still_serving(server, sessions, 6)


def test_many_failures_at_once_leave_the_server_serving(server, sessions, material):
    """Twenty refused connections in a burst (plaintext frames and a malformed TLS record):
    twenty lines, one each, then the sessions work."""
    before = len(log_events(server, "tls_handshake_failed"))
    socks = []
    for i in range(20):
        s = socket.create_connection((HOST, server.secure_port), timeout=CONNECT_TIMEOUT_S)
        s.sendall(CONNECT_REQUEST if i % 2 else b"\x16\x03\x01\x00\x05garbage")
        socks.append(s)
    for s in socks:
        _assert_no_zookeeper_bytes(read_until_closed(s))
        s.close()
    deadline = time.monotonic() + LOG_WAIT_S
    while (len(log_events(server, "tls_handshake_failed")) < before + 20
           and time.monotonic() < deadline):
        time.sleep(0.05)
    assert len(log_events(server, "tls_handshake_failed")) == before + 20
    _still_serving(server, sessions, 5)
