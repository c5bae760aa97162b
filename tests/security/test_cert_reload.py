"""client.certReload: key and trust stores read again when their files change.
ReloadingStores by itself (what counts as a change, a store that cannot be read, a file
gone and back), and a zkcompat server whose client port starts presenting a new
certificate and trusting a new CA with no restart while an open session goes on
(test_quorum_tls has sslQuorumReloadCertFiles). ZooKeeper 3.8 has no client.certReload
(3.9 added it), so there is no ZooKeeper to run beside it here."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import ssl
import time

import pytest
from tls_servers import handshake_outcome, start, tls_client

from conformance_tests.servers import HOST, free_port
from conftest import PASSWORD
from zkcompat.security import settings as tls_keys
from zkcompat.security.reload import ReloadingStores
from zkcompat.security.tls import server_context

pytestmark = pytest.mark.timeout(120)

WAIT_S = 15.0  # several of the server's one-second looks
TIMEOUT_S = 10.0


def _replace(path, source) -> None:
    """Put source's bytes at path as a rotation does: a new file renamed over the old."""
    fresh = path.with_name(path.name + ".new")
    shutil.copyfile(source, fresh)
    os.replace(fresh, path)


def _settings(material, key_store):
    return tls_keys.tls_settings({"ssl.keyStore.location": str(key_store),
                                  "ssl.keyStore.password": PASSWORD,
                                  **material.trust_store("PKCS12")})


# -- ReloadingStores --------------------------------------------------------------------


def test_a_changed_store_is_read_again_and_an_unchanged_one_is_not(material, tmp_path):
    key_store = tmp_path / "server.p12"
    shutil.copyfile(material.server.p12, key_store)
    stores = ReloadingStores(_settings(material, key_store), server_context, "ssl")
    first = stores.current
    assert stores.check() is False and stores.current is first
    _replace(key_store, material.misnamed.p12)
    assert stores.check() is True
    assert stores.current is not first and stores.reloads == 1
    assert stores.check() is False


def test_an_unreadable_store_leaves_the_old_in_use_until_it_is_fixed(material, tmp_path,
                                                                    caplog):
    key_store = tmp_path / "server.p12"
    shutil.copyfile(material.server.p12, key_store)
    stores = ReloadingStores(_settings(material, key_store), server_context, "ssl")
    first = stores.current
    key_store.write_bytes(material.server.p12.read_bytes()[:100])  # half written
    with caplog.at_level(logging.ERROR, logger="zkcompat.security.reload"):
        assert stores.check() is False
    assert stores.current is first
    assert any("event=tls_reload_failed stores=ssl" in r.getMessage() for r in caplog.records)
    assert stores.check() is False  # the same bad file is not tried again and again
    _replace(key_store, material.misnamed.p12)
    assert stores.check() is True and stores.current is not first


def test_a_store_gone_is_waited_for(material, tmp_path):
    key_store = tmp_path / "server.p12"
    shutil.copyfile(material.server.p12, key_store)
    stores = ReloadingStores(_settings(material, key_store), server_context, "ssl")
    first = stores.current
    key_store.unlink()
    assert stores.check() is False and stores.current is first
    shutil.copyfile(material.misnamed.p12, key_store)
    assert stores.check() is True and stores.current is not first


# -- a server's client port -------------------------------------------------------------


def _presented_subject(port: int, material) -> str:
    """The CN of the certificate the server presents (the client sends its own)."""
    ctx = ssl.create_default_context(cafile=str(material.ca_cert))
    ctx.check_hostname = False
    ctx.load_cert_chain(str(material.client.cert), str(material.client.key))
    with socket.create_connection((HOST, port), timeout=TIMEOUT_S) as raw, \
            ctx.wrap_socket(raw) as sock:
        subject = dict(pair for rdn in sock.getpeercert()["subject"] for pair in rdn)
    return subject["commonName"]


def _until(predicate, timeout_s: float = WAIT_S):
    deadline = time.monotonic() + timeout_s
    while True:
        got = predicate()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def test_client_port_rotates_its_certificate_and_trust(material, tmp_path):
    key_store = tmp_path / "stores" / "server.p12"
    trust_store = tmp_path / "stores" / "trust.pem"
    key_store.parent.mkdir()
    shutil.copyfile(material.server.p12, key_store)
    trust_store.write_bytes(material.ca_cert.read_bytes())
    port = free_port()
    server = start("zkcompat", tmp_path / "zkcompat", {
        "secureClientPort": str(port), "secureClientPortAddress": HOST,
        "ssl.keyStore.location": str(key_store), "ssl.keyStore.password": PASSWORD,
        "ssl.trustStore.location": str(trust_store), "client.certReload": "true"})
    try:
        assert _presented_subject(port, material) == "localhost"
        assert handshake_outcome(server, material, material.stranger) == "refused"
        open_session = tls_client(server, material, material.client)
        open_session.start(timeout=TIMEOUT_S)
        try:
            open_session.create("/before", b"")
            _replace(key_store, material.misnamed.p12)
            other_ca = material.dir / "other-ca.crt"
            fresh = trust_store.with_name("trust.pem.new")
            fresh.write_bytes(material.ca_cert.read_bytes() + other_ca.read_bytes())
            os.replace(fresh, trust_store)
            rotated = _until(lambda: _presented_subject(port, material) != "localhost")
            assert rotated, "the server still presents its old certificate"
            assert _presented_subject(port, material) == "elsewhere.example"
            assert handshake_outcome(server, material, material.stranger) == "session"
            open_session.create("/after", b"")  # the session made before goes on
            assert {"before", "after"} <= set(open_session.get_children("/"))
        finally:
            open_session.stop()
            open_session.close()
        log = server.log_path.read_text(errors="replace")
        assert "event=tls_reload_on stores=ssl" in log
        assert "event=tls_reloaded stores=ssl" in log
    finally:
        server.stop()


def test_without_certreload_the_stores_stay(material, tmp_path):
    key_store = tmp_path / "server.p12"
    shutil.copyfile(material.server.p12, key_store)
    port = free_port()
    server = start("zkcompat", tmp_path / "zkcompat", {
        "secureClientPort": str(port), "secureClientPortAddress": HOST,
        "ssl.keyStore.location": str(key_store), "ssl.keyStore.password": PASSWORD,
        **material.trust_store("PKCS12")})
    try:
        _replace(key_store, material.misnamed.p12)
        time.sleep(2.5)  # two of the looks a reloading server would have made
        assert _presented_subject(port, material) == "localhost"
    finally:
        server.stop()
