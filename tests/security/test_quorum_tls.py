"""TLS between servers, below ZAB: the ssl.quorum.* settings, UnifiedServerSocket's test of a
connection's first bytes, ZKTrustManager's host check, and peer/links.py's listener and
connector over loopback sockets (plaintext, TLS and both on one port; every byte a peer
sends reaches the layer above, in order; a refused peer is closed with a logged reason)."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import ssl

import pytest

from conftest import PASSWORD
from zkcompat.peer.links import Listener, open_link
from zkcompat.security import quorum_tls, unified
from zkcompat.security.settings import SettingError
from zkcompat.security.tls import TlsSetupError

TIMEOUT_S = 10.0


def props(material, party=None, **more) -> dict[str, str]:
    party = party or material.server
    return {"sslQuorum": "true",
            "ssl.quorum.keyStore.location": str(party.p12),
            "ssl.quorum.keyStore.password": PASSWORD,
            "ssl.quorum.trustStore.location": str(material.trust_jks),
            "ssl.quorum.trustStore.password": PASSWORD, **more}


# -- settings ---------------------------------------------------------------------------


def test_quorum_tls_is_off_without_sslquorum_or_port_unification(material):
    assert quorum_tls.quorum_tls({}) is None
    assert quorum_tls.quorum_tls({"sslQuorum": "false", "portUnification": "no"}) is None
    # The client port's ssl.* are not the quorum's.
    assert quorum_tls.quorum_tls({"ssl.keyStore.location": str(material.server.p12)}) is None


def test_quorum_tls_modes_and_settings(material):
    tls = quorum_tls.quorum_tls(props(material))
    assert (tls.ssl_quorum, tls.port_unification, tls.accepts_plaintext) == (True, False, False)
    assert tls.settings.enabled_protocols == ("TLSv1.3",)  # 3.9's default
    assert tls.detection_timeout_s == 5.0
    unified = quorum_tls.quorum_tls({**props(material), "sslQuorum": "false",
                                     "zookeeper.portUnification": "true",
                                     "ssl.quorum.handshakeDetectionTimeoutMillis": "1500"})
    assert (unified.ssl_quorum, unified.accepts_plaintext) == (False, True)
    assert unified.detection_timeout_s == 1.5


@pytest.mark.parametrize(("key", "value", "message"), [
    ("ssl.quorum.clientAuth", "sometimes", "ssl.quorum.clientAuth: No enum constant"),
    ("ssl.quorum.protocol", "SSLv3", "ssl.quorum.protocol: SSLv3 SSLContext not available"),
    ("ssl.quorum.keyStore.location", "", "ssl.quorum.keyStore.location: a secure port needs"),
    ("ssl.quorum.keyStore.password", "wrong", "ssl.quorum.keyStore"),
    ("ssl.quorum.handshakeDetectionTimeoutMillis", "soon", "handshakeDetectionTimeoutMillis"),
])
def test_bad_quorum_settings_name_their_key(material, key, value, message):
    with pytest.raises((SettingError, TlsSetupError), match=message):
        quorum_tls.quorum_tls({**props(material), key: value})


# -- the first bytes and the host check -------------------------------------------------


def test_looks_like_tls():
    assert unified.looks_like_tls(bytes([22, 3, 1, 0x02, 0x00]))  # a ClientHello record
    assert unified.looks_like_tls(bytes([22, 3, 3, 0x00, 0x31]))
    # QuorumCnxManager's header starts with protocol version -65536: ff ff 00 00 ...
    assert not unified.looks_like_tls(bytes.fromhex("ffff0000000000000000"))
    # A QuorumPacket starts with its type, FOLLOWERINFO = 11: 00 00 00 0b.
    assert not unified.looks_like_tls(bytes.fromhex("0000000b00"))
    assert not unified.looks_like_tls(bytes([22, 3, 1]))  # too few to tell
    assert not unified.looks_like_tls(bytes([22, 2, 1, 0, 5]))  # SSLv2-ish: not TLS
    assert not unified.looks_like_tls(bytes([22, 3, 1, 0, 0]))  # an empty record


def _der(party) -> bytes:
    return ssl.PEM_cert_to_DER_cert(party.cert.read_text())


def test_names_peer(material):
    server = _der(material.server)  # IP:127.0.0.1, DNS:localhost
    assert quorum_tls.names_peer(server, "127.0.0.1") is None
    assert "does not name 127.0.0.2" in quorum_tls.names_peer(server, "127.0.0.2")
    assert quorum_tls.names_peer(server, "127.0.0.2", "localhost") is None
    assert quorum_tls.names_peer(server, "127.0.0.2", "LOCALHOST.") is None
    assert "neither" in quorum_tls.names_peer(server, "127.0.0.2", "other.example")
    misnamed = _der(material.misnamed)  # IP:127.0.0.9, DNS:elsewhere.example
    assert quorum_tls.names_peer(misnamed, "127.0.0.9") is None
    assert quorum_tls.names_peer(misnamed, "127.0.0.1") is not None
    # No dNSName at all: the subject's CN stands in (client has CN=client, no SAN).
    assert quorum_tls.names_peer(_der(material.client), "127.0.0.1", "client") is None
    assert quorum_tls._dns_match("*.example.org", "zk1.example.org")
    assert not quorum_tls._dns_match("*.example.org", "a.zk1.example.org")
    assert not quorum_tls._dns_match("*.org", "example.org")


# -- links over loopback ----------------------------------------------------------------


class Collect(asyncio.Protocol):
    def __init__(self):
        self.data = bytearray()
        self.closed = asyncio.get_running_loop().create_future()

    def data_received(self, data):
        self.data += data

    def connection_lost(self, exc):
        if not self.closed.done():
            self.closed.set_result(None)


async def _serve(tls, what="quorum"):
    links = asyncio.Queue()

    def on_link(link):
        proto = Collect()
        link.attach(proto)
        links.put_nowait((link, proto))

    listener = Listener(tls, on_link, what)
    await listener.start("127.0.0.1", 0)
    port = listener._sock.getsockname()[1] if listener._sock else \
        listener._server.sockets[0].getsockname()[1]
    return listener, port, links


async def _send_and_collect(tls_client, port, links, chunks):
    link = await open_link(tls_client, "127.0.0.1", port, TIMEOUT_S, "quorum")
    for chunk in chunks:
        link.transport.write(chunk)
        await asyncio.sleep(0.02)
    server_link, proto = await asyncio.wait_for(links.get(), TIMEOUT_S)
    want = b"".join(chunks)
    for _ in range(200):
        if len(proto.data) >= len(want):
            break
        await asyncio.sleep(0.01)
    link.close()
    return server_link, bytes(proto.data)


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


@pytest.mark.parametrize("client_tls", [False, True])
def test_port_unification_takes_both_and_loses_no_byte(material, client_tls):
    unified = quorum_tls.quorum_tls({**props(material), "sslQuorum": "false",
                                     "portUnification": "true"})
    client = quorum_tls.quorum_tls(props(material)) if client_tls else None
    # A first write shorter than a TLS record header, then the rest: every byte arrives.
    chunks = [b"\x00\x00", b"\x00\x0bfollowerinfo", b"x" * 100_000]

    async def scenario():
        listener, port, links = await _serve(unified)
        try:
            return await _send_and_collect(client, port, links, chunks)
        finally:
            await listener.close()

    link, data = _run(scenario())
    assert link.secure is client_tls
    assert data == b"".join(chunks)


def test_tls_only_port_refuses_plaintext(material, caplog):
    tls = quorum_tls.quorum_tls(props(material))

    async def scenario():
        listener, port, links = await _serve(tls, "election")
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(bytes.fromhex("ffff000000000000") + b"header")
            try:
                got = await asyncio.wait_for(reader.read(10), TIMEOUT_S)
            except ConnectionResetError:  # closed with our bytes unread
                got = b""
            writer.close()
            return got, links.qsize()
        finally:
            await listener.close()

    with caplog.at_level(logging.WARNING, logger="zkcompat.peer.links"):
        got, accepted = _run(scenario())
    assert (got, accepted) == (b"", 0)
    assert any("event=quorum_link_refused port=election" in r.getMessage()
               and "plaintext" in r.getMessage() for r in caplog.records)


def test_untrusted_client_certificate_fails_the_handshake(material, caplog):
    tls = quorum_tls.quorum_tls(props(material))
    stranger = quorum_tls.quorum_tls(props(material, material.stranger))

    async def scenario():
        listener, port, links = await _serve(tls)
        try:
            with pytest.raises((ConnectionError, OSError)):
                link = await open_link(stranger, "127.0.0.1", port, TIMEOUT_S, "quorum")
                # TLS 1.3: the server's verdict on our certificate comes after ours.
                proto = Collect()
                link.attach(proto)
                await asyncio.wait_for(proto.closed, TIMEOUT_S)
                raise ConnectionError("closed by the server")
            return links.qsize()
        finally:
            await listener.close()

    with caplog.at_level(logging.WARNING, logger="zkcompat.peer.links"):
        assert _run(scenario()) == 0
    assert any("TLS handshake failed" in r.getMessage() for r in caplog.records)


def test_a_peer_whose_certificate_names_another_address_is_refused_both_ways(material,
                                                                             caplog):
    good = quorum_tls.quorum_tls(props(material))
    misnamed = quorum_tls.quorum_tls(props(material, material.misnamed))

    async def scenario():
        # We connect to it: its certificate does not name 127.0.0.1.
        listener, port, _ = await _serve(misnamed)
        try:
            with pytest.raises(ConnectionError, match="does not name 127.0.0.1"):
                await open_link(good, "127.0.0.1", port, TIMEOUT_S, "quorum")
        finally:
            await listener.close()
        # It connects to us: we refuse its certificate once the handshake is done.
        listener, port, links = await _serve(good)
        try:
            link = await open_link(misnamed, "127.0.0.1", port, TIMEOUT_S, "quorum")
            proto = Collect()
            link.attach(proto)
            await asyncio.wait_for(proto.closed, TIMEOUT_S)
            return links.qsize()
        finally:
            await listener.close()

    with caplog.at_level(logging.WARNING, logger="zkcompat.peer.links"):
        assert _run(scenario()) == 0
    refusals = [r.getMessage() for r in caplog.records if "quorum_link_refused" in r.getMessage()]
    assert len(refusals) == 2, refusals
    assert all("does not name 127.0.0.1" in m for m in refusals)


def test_hostname_verification_off_lets_the_misnamed_peer_in(material):
    good = quorum_tls.quorum_tls(props(material, **{"ssl.quorum.hostnameVerification": "false"}))
    misnamed = quorum_tls.quorum_tls(props(material, material.misnamed))

    async def scenario():
        listener, port, links = await _serve(good)
        try:
            return await _send_and_collect(misnamed, port, links, [b"hello"])
        finally:
            await listener.close()

    link, data = _run(scenario())
    assert link.secure and data == b"hello"


# -- sslQuorumReloadCertFiles -----------------------------------------------------------


def test_sslquorumreloadcertfiles_is_a_strict_boolean(material):
    assert quorum_tls.quorum_tls(props(material)).reload_cert_files is False
    on = quorum_tls.quorum_tls(props(material, sslQuorumReloadCertFiles="TRUE"))
    assert on.reload_cert_files is True
    with pytest.raises(SettingError, match="Choose 'true' or 'false.'"):
        quorum_tls.quorum_tls(props(material, sslQuorumReloadCertFiles="yes"))


def test_quorum_listener_presents_the_reloaded_certificate(material, tmp_path):
    """The listener's key store becomes a certificate that does not name 127.0.0.1: the
    link opened before the change is checked and made, the one after is refused by the
    opening side's host check, so the listener presented the new certificate."""
    key_store = tmp_path / "quorum.p12"
    shutil.copyfile(material.server.p12, key_store)
    server_tls = quorum_tls.quorum_tls({**props(material), "sslQuorumReloadCertFiles": "true",
                                        "ssl.quorum.keyStore.location": str(key_store)})
    client_tls = quorum_tls.quorum_tls(props(material))

    async def scenario():
        listener, port, _ = await _serve(server_tls)
        try:
            before = await open_link(client_tls, "127.0.0.1", port, TIMEOUT_S, "quorum")
            before.close()
            fresh = key_store.with_name("quorum.p12.new")  # a rotation: renamed over it
            shutil.copyfile(material.misnamed.p12, fresh)
            os.replace(fresh, key_store)
            assert server_tls.stores.check()
            try:
                await open_link(client_tls, "127.0.0.1", port, TIMEOUT_S, "quorum")
            except ConnectionError as e:
                return str(e)
            return "linked"
        finally:
            await listener.close()

    assert "does not name 127.0.0.1" in _run(scenario())
