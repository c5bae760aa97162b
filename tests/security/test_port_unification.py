"""client.portUnification: the plaintext client port takes TLS too, told apart by a
connection's first bytes, on ZooKeeper 3.8 (Netty) and zkcompat under the same zoo.cfg
lines: kazoo in plaintext and in TLS on one port, each with the identity its kind of
connection gives; a four-letter word (4 bytes, fewer than a TLS record header) answered at
once; a TLS client without a certificate refused under clientAuth=need; the stock Java
client over Netty TLS; and netty.server.outstandingHandshake.limit applied to every
connection still being told apart, plaintext ones too, as NettyServerCnxnFactory applies
it on such a port.

One difference is on purpose. ZooKeeper (3.8 and 3.9.5 alike) registers the x509 provider
for such a port in its factory's constructor, after ProviderRegistry.initialize has run,
so without a secureClientPort or an authProvider.N line naming X509AuthenticationProvider
it closes every TLS connection once its handshake is done ("X509 Auth provider not found:
x509"). zkcompat registers it, as that constructor means to. The shared stories give both
servers the authProvider line; test_zookeeper_needs_the_authprovider_line shows the rest."""

from __future__ import annotations

import socket
import time

import pytest
from java_client import netty_tls_props, run_client
from tls_servers import (
    BOTH_PROTOCOLS,
    handshake_outcome,
    mntr,
    outcome,
    plain_client,
    read_frame,
    secure_cfg,
    start,
    tls_client,
    whoami,
)

from bench import wire
from conformance_tests.servers import HOST, four_letter_word
from tests.certs import CLIENT_ID
from zkcompat.security.unified import CLIENT_DETECTION_TIMEOUT_S

pytestmark = pytest.mark.timeout(240)

KINDS = ("zookeeper", "zkcompat")
HANDSHAKE_LIMIT = 2
WAIT_S = 10.0


def unified_cfg(material, **extra: str) -> dict[str, str]:
    """secure_cfg's TLS lines without a secure port: the plaintext port takes TLS (TLSv1.2
    as well, for the 3.8 Java client)."""
    cfg = secure_cfg(material, **BOTH_PROTOCOLS, **extra)
    del cfg["secureClientPort"], cfg["secureClientPortAddress"]
    cfg["client.portUnification"] = "true"
    cfg["4lw.commands.whitelist"] = "*"
    return cfg


X509_PROVIDER_LINE = {
    "authProvider.x509": "org.apache.zookeeper.server.auth.X509AuthenticationProvider"}


def launch(kind: str, material, workdir, **extra: str):
    server = start(kind, workdir, unified_cfg(material, **extra))
    server.secure_port = server.port  # what the TLS helpers connect to
    return server


def _started(zk):
    zk.start(timeout=WAIT_S)
    return zk


def _story(server, material) -> list:
    """Both kinds of client on the one port: what each may do and who it is."""
    seen = []
    secure = _started(tls_client(server, material, material.client))
    plain = _started(plain_client(server))
    try:
        seen.append(("tls create", outcome(lambda: secure.create("/u", b"over tls"))))
        seen.append(("plain reads it", plain.get("/u")[0]))
        seen.append(("plain set", outcome(lambda: plain.set("/u", b"in plaintext"))))
        seen.append(("tls reads it", secure.get("/u")[0]))
        seen.append(("tls whoami", sorted(s for s in whoami(secure) if s[0] != "ip")))
        seen.append(("plain whoami", sorted(s for s in whoami(plain) if s[0] != "ip")))
    finally:
        for zk in (secure, plain):
            zk.stop()
            zk.close()
    started = time.monotonic()
    seen.append(("ruok", four_letter_word(HOST, server.port, "ruok")))
    seen.append(("ruok at once", time.monotonic() - started < CLIENT_DETECTION_TIMEOUT_S / 2))
    seen.append(("tls, its certificate", handshake_outcome(server, material)))
    seen.append(("tls without a certificate", handshake_outcome(server, material, None)))
    return seen


@pytest.fixture(scope="module")
def servers(material, tmp_path_factory):
    started = {}
    try:
        for kind in KINDS:
            started[kind] = launch(kind, material, tmp_path_factory.mktemp(kind),
                                   **X509_PROVIDER_LINE)
        yield started
    finally:
        for server in started.values():
            server.stop()


@pytest.mark.parametrize("kind", KINDS)
def test_one_port_takes_plaintext_and_tls(kind, servers, material):
    """The same story on both servers, and it is the one expected: the TLS session is
    x509:<its subject>, the plaintext one has no such id, both see each other's writes."""
    story = _story(servers[kind], material)
    assert story == [
        ("tls create", "ok"),
        ("plain reads it", b"over tls"),
        ("plain set", "ok"),
        ("tls reads it", b"in plaintext"),
        ("tls whoami", [("x509", CLIENT_ID)]),
        ("plain whoami", []),
        ("ruok", "imok"),
        ("ruok at once", True),
        ("tls, its certificate", "session"),
        ("tls without a certificate", "refused"),
    ], story


def test_java_client_over_netty_tls_on_the_plaintext_port(servers, material, java_classes):
    outputs = {kind: run_client(java_classes, f"{HOST}:{s.port}", "/unified-java", CLIENT_ID,
                                "x509", netty_tls_props(material))
               for kind, s in servers.items()}
    assert outputs["zkcompat"] == outputs["zookeeper"]
    assert outputs["zkcompat"][:3] == ["connect: ok", f"whoami: x509 {CLIENT_ID}",
                                       "create: /unified-java"], outputs


def _plain_session(server) -> str:
    """A plaintext ConnectRequest on the unified port: "session" if answered, "refused"
    if the server closed the connection instead."""
    try:
        with socket.create_connection((HOST, server.port), timeout=WAIT_S) as sock:
            sock.sendall(wire.connect_request())
            return "session" if read_frame(sock) else "refused"
    except (ConnectionError, TimeoutError):
        return "refused"


def _until(server, want: str) -> str:
    """Tries a plaintext session until it comes out `want` or WAIT_S pass; the last outcome."""
    deadline = time.monotonic() + WAIT_S
    while True:
        got = _plain_session(server)
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


@pytest.fixture(scope="module")
def bare_servers(material, tmp_path_factory):
    """Unified ports with no authProvider line, and a handshake limit."""
    started = {}
    try:
        for kind in KINDS:
            started[kind] = launch(
                kind, material, tmp_path_factory.mktemp(f"bare-{kind}"),
                **{"netty.server.outstandingHandshake.limit": str(HANDSHAKE_LIMIT)})
        yield started
    finally:
        for server in started.values():
            server.stop()


def _still_open(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)


def _stalled(server, n: int) -> list[socket.socket]:
    """n connections that send nothing, each seen to hold its slot before the next opens:
    ZooKeeper's Netty workers count connections as they come to them, so two opened at
    once can be counted after a connection opened later."""
    socks, deadline = [], time.monotonic() + WAIT_S
    while len(socks) < n:
        assert time.monotonic() < deadline, "no silent connection stayed open"
        sock = socket.create_connection((HOST, server.port))
        time.sleep(0.3)
        if _still_open(sock):
            socks.append(sock)
        else:
            sock.close()
    return socks


@pytest.mark.parametrize("kind", KINDS)
def test_handshake_limit_holds_back_plaintext_too(kind, bare_servers):
    """Two connections that never send a byte hold both handshake slots: a plaintext
    session is refused until they go, then served again; tls_handshake_exceeded counted
    the refusals. (On a secureClientPort ZooKeeper never applies the limit: see
    test_tls_limits.)"""
    server = bare_servers[kind]
    assert _plain_session(server) == "session"
    stalled = _stalled(server, HANDSHAKE_LIMIT)
    try:
        while_stalled = _until(server, "refused")
        seen = "" if while_stalled == "refused" else (
            f"outstanding_tls_handshake {mntr(server, 'outstanding_tls_handshake')}, "
            f"tls_handshake_exceeded {mntr(server, 'tls_handshake_exceeded')}\n"
            f"{server.log_tail(40)}")
    finally:
        for sock in stalled:
            sock.close()
    after = _until(server, "session")
    assert (while_stalled, after) == ("refused", "session"), seen
    assert mntr(server, "tls_handshake_exceeded") >= 1


def test_zookeeper_needs_the_authprovider_line(bare_servers, material):
    """Without authProvider.x509, ZooKeeper closes a TLS session on the unified port once
    its handshake is done, and says why in its log; zkcompat serves it, x509 id and all."""
    outcomes = {kind: handshake_outcome(s, material) for kind, s in bare_servers.items()}
    assert outcomes == {"zookeeper": "refused", "zkcompat": "session"}
    log = bare_servers["zookeeper"].log_path.read_text(errors="replace")
    assert "X509 Auth provider not found: x509" in log
    zk = _started(tls_client(bare_servers["zkcompat"], material, material.client))
    try:
        assert ("x509", CLIENT_ID) in whoami(zk)
    finally:
        zk.stop()
        zk.close()
