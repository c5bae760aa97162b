"""The client-facing security entry points under bad bytes, as the plaintext frames are in
tests/test_bad_input.py: a zkcompat server with a secure port, x509 and SASL DIGEST-MD5
takes seeded random bytes before and inside TLS handshakes, random and mutated SASL tokens
(op 102) on both ports, and stays up: no traceback in its log, a session made before the
flood never loses its connection, and afterwards SASL and x509 still authenticate.

In-process, Hypothesis feeds the DIGEST-MD5 server and the quorum SASL exchanges arbitrary
bytes in arbitrary splits: they answer or refuse with their own error, nothing else."""

from __future__ import annotations

import random
import socket
import ssl
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState
from tls_servers import CONNECT_TIMEOUT_S, plain_client, secure_cfg, start, tls_client, whoami

from conformance_tests.servers import HOST
from zkcompat.jute.errors import JuteError
from zkcompat.security import quorum_auth_packet, quorum_sasl, quorum_sasl_settings
from zkcompat.security.digest_md5 import DigestMd5Server, SaslError

SEED = 1717
CASES_PER_ENTRY = 60
OP_SASL = 102
JAAS = """Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_alice="wonderland";
};
"""


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def connect_request() -> bytes:
    return frame(struct.pack(">iqiqi", 0, 0, 10_000, 0, 16) + b"\0" * 16 + b"\0")


def sasl_request(xid: int, token: bytes) -> bytes:
    return frame(struct.pack(">iii", xid, OP_SASL, len(token)) + token)


def client_tokens(rng: random.Random) -> list[bytes]:
    """Random tokens, and a real DIGEST-MD5 response with bytes flipped, cut or grown."""
    real = (b'charset=utf-8,username="alice",realm="zk-sasl-md5",nonce="abc",nc=00000001,'
            b'cnonce="xyz",digest-uri="zookeeper/zk-sasl-md5",maxbuf=65536,'
            b'response=0123456789abcdef0123456789abcdef,qop=auth,authzid="alice"')
    out = [b"", b"\0" * 5000, real + b"," * 3000]
    for _ in range(CASES_PER_ENTRY):
        kind = rng.randrange(4)
        if kind == 0:
            out.append(rng.randbytes(rng.randrange(1, 600)))
        elif kind == 1:
            cut = rng.randrange(len(real))
            out.append(real[:cut])
        elif kind == 2:
            data = bytearray(real)
            for _ in range(rng.randrange(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            out.append(bytes(data))
        else:
            out.append(real.replace(b"=", b"=\"", rng.randrange(1, 4)))
    return out


def drain(sock: socket.socket, limit_s: float = 0.5) -> None:
    sock.settimeout(limit_s)
    try:
        while sock.recv(65536):
            pass
    except (OSError, ssl.SSLError):
        pass


def send_sasl(sock: socket.socket, tokens: list[bytes]) -> None:
    """A ConnectRequest, then SASL requests: a second token once the first was answered
    (the server's challenge), and so on; a closed connection ends it."""
    try:
        sock.sendall(connect_request())
        for xid, token in enumerate(tokens, start=1):
            sock.sendall(sasl_request(xid, token))
    except OSError:
        pass
    drain(sock)


def raw_tls_records(rng: random.Random) -> list[bytes]:
    """Bytes that look like TLS records (right content type and version) but are not."""
    out = []
    for _ in range(CASES_PER_ENTRY):
        body = rng.randbytes(rng.randrange(0, 300))
        length = rng.choice([len(body), rng.randrange(65536), 0])
        out.append(bytes([rng.choice([20, 21, 22, 23, 24]), 3, rng.randrange(5)])
                   + struct.pack(">H", length) + body)
    return out


@pytest.fixture(scope="module")
def server(material, tmp_path_factory):
    work = tmp_path_factory.mktemp("fuzz")
    jaas = work / "server.jaas"
    jaas.write_text(JAAS)
    cfg = secure_cfg(material, **{"ssl.clientAuth": "want",
                                  "authProvider.1": "org.apache.zookeeper.server.auth."
                                                    "SASLAuthenticationProvider"})
    proc = start("zkcompat", work, cfg, (f"-Djava.security.auth.login.config={jaas}",))
    yield proc
    proc.stop()


def test_security_entry_points_survive_bad_bytes(server, material):
    rng = random.Random(SEED)
    watcher = plain_client(server)
    states = []
    watcher.start(timeout=CONNECT_TIMEOUT_S)
    watcher.add_listener(states.append)
    watcher.create("/fuzz-canary", b"before")
    try:
        # 1. The secure port, before any handshake: random bytes and fake TLS records.
        for data in [rng.randbytes(rng.randrange(1, 400)) for _ in range(CASES_PER_ENTRY)]:
            with socket.create_connection((HOST, server.secure_port), timeout=5) as sock:
                sock.sendall(data)
                drain(sock, 0.05)
        for data in raw_tls_records(rng):
            with socket.create_connection((HOST, server.secure_port), timeout=5) as sock:
                try:
                    sock.sendall(data)
                except OSError:
                    continue
                drain(sock, 0.05)
        # 2. SASL tokens on the plaintext port, and inside TLS on the secure one.
        tokens = client_tokens(rng)
        for i in range(0, len(tokens), 3):
            with socket.create_connection((HOST, server.port), timeout=5) as sock:
                send_sasl(sock, tokens[i:i + 3])
        ctx = ssl.create_default_context(cafile=str(material.ca_cert))
        ctx.check_hostname = False
        for i in range(0, len(tokens), 6):
            raw = socket.create_connection((HOST, server.secure_port), timeout=5)
            with ctx.wrap_socket(raw) as sock:
                send_sasl(sock, tokens[i:i + 6])
        # 3. Garbage after a good handshake, where the ConnectRequest should be.
        for _ in range(20):
            raw = socket.create_connection((HOST, server.secure_port), timeout=5)
            with ctx.wrap_socket(raw) as sock:
                try:
                    sock.sendall(rng.randbytes(rng.randrange(1, 200)))
                except OSError:
                    continue
                drain(sock, 0.1)

        assert watcher.get("/fuzz-canary")[0] == b"before"
        assert states == [], f"the session made before the flood saw {states}"
    finally:
        watcher.stop()
        watcher.close()

    # Every mechanism still authenticates.
    sasl = KazooClient(hosts=server.connect_string, timeout=5.0,
                       sasl_options={"mechanism": "DIGEST-MD5", "username": "alice",
                                     "password": "wonderland"})
    sasl.start(timeout=CONNECT_TIMEOUT_S)
    try:
        assert ("sasl", "alice") in whoami(sasl)
        assert sasl.state == KazooState.CONNECTED
    finally:
        sasl.stop()
        sasl.close()
    x509 = tls_client(server, material, material.client)
    x509.start(timeout=CONNECT_TIMEOUT_S)
    try:
        assert any(scheme == "x509" for scheme, _ in whoami(x509))
    finally:
        x509.stop()
        x509.close()
    log = server.log_path.read_text(errors="replace")
    assert "Traceback" not in log, log[log.index("Traceback") - 2000:][:6000]
    assert server.is_alive()


# -- in-process: the mechanisms themselves ----------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=700), min_size=1, max_size=4))
def test_digest_md5_server_refuses_any_bytes_with_its_own_error(tokens):
    server = DigestMd5Server({"alice": "wonderland"}.get)
    server.evaluate(b"")  # the challenge
    for token in tokens:
        try:
            server.evaluate(token)
        except SaslError:
            return
    # Random bytes that pass as a response would have to carry alice's digest.
    pytest.fail(f"accepted {tokens!r}")


JAAS_SETTINGS = quorum_sasl_settings.QuorumSaslSettings(
    enable_sasl=True, learner_require_sasl=True, server_require_sasl=True,
    users={"zkpeer": "s3cret"}, learner_username="zkpeer", learner_password="s3cret")


def _splits(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, last = [], 0
    for p in points:
        pieces.append(data[last:p])
        last = p
    pieces.append(data[last:])
    return [p for p in pieces if p]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.lists(st.integers(0, 400), max_size=6), st.booleans())
def test_quorum_sasl_server_takes_any_bytes(garbage, cuts, with_magic):
    data = (quorum_auth_packet.MAGIC_BYTES + garbage) if with_magic else garbage
    exchange = quorum_sasl.QuorumAuthServerExchange(JAAS_SETTINGS)
    try:
        for piece in _splits(data, cuts):
            exchange.feed(piece)
            if exchange.done:
                break
    except (quorum_auth_packet.QuorumAuthError, JuteError):
        return
    assert not exchange.done or exchange.username is None


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.lists(st.integers(0, 400), max_size=6))
def test_quorum_sasl_learner_takes_any_reply(garbage, cuts):
    exchange = quorum_sasl.QuorumAuthLearnerExchange(JAAS_SETTINGS)
    exchange.start()
    try:
        for piece in _splits(garbage, cuts):
            exchange.feed(piece)
            if exchange.done:
                break
    except (quorum_auth_packet.QuorumAuthError, JuteError):
        return
    assert not exchange.done, f"authenticated by {garbage!r}"
