"""kazoo over TLS to zkcompat's secure client port: every key and trust store format, the
client certificate's x509 id (by whoAmI) and ACLs on it, ssl.clientAuth's three values, and
the plaintext port beside it on the same pipeline."""

from __future__ import annotations

import threading

import pytest
from kazoo.exceptions import InvalidACLError, NoAuthError
from kazoo.security import make_acl
from tls_servers import plain_client, secure_cfg, start, tls_client, whoami

from conftest import CLIENT_ID, PEER_ID

STORE_KINDS = ("PEM", "PKCS12", "JKS")
WATCH_TIMEOUT_S = 10.0


def _x509_ids(zk) -> list[str]:
    return [user for scheme, user in whoami(zk) if scheme == "x509"]


def _started(zk):
    zk.start(timeout=10)
    return zk


def _stop(*clients) -> None:
    for zk in clients:
        zk.stop()
        zk.close()


@pytest.fixture
def server(material, tmp_path):
    """zkcompat with clientAuth=need (the default), PKCS12 stores, both ports."""
    server = start("zkcompat", tmp_path, secure_cfg(material))
    yield server
    server.stop()


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_kazoo_over_tls_with_each_store_format(kind, material, tmp_path):
    """The server's key store and trust store both in `kind`: a client with a certificate
    the trust store's CA signed gets a session, its writes and reads work, and whoAmI
    says x509 with the certificate's subject as ZooKeeper formats it."""
    server = start("zkcompat", tmp_path, secure_cfg(material, kind, kind))
    try:
        zk = _started(tls_client(server, material, material.client))
        try:
            zk.create("/tls", b"over tls")
            assert zk.get("/tls")[0] == b"over tls"
            assert _x509_ids(zk) == [CLIENT_ID]
        finally:
            _stop(zk)
    finally:
        server.stop()


def test_x509_acl_is_enforced_for_each_certificate(server, material):
    """A node whose ACL is x509:<client's subject> is the client's alone: another
    certificate the same CA signed gets NoAuth for reads and writes, and so does a
    plaintext session; an "auth" ACL made over TLS expands to the x509 id."""
    owner = _started(tls_client(server, material, material.client))
    other = _started(tls_client(server, material, material.peer))
    plain = _started(plain_client(server))
    try:
        assert _x509_ids(other) == [PEER_ID]
        owner.create("/mine", b"secret", acl=[make_acl("x509", CLIENT_ID, all=True)])
        owner.create("/by-auth", b"", acl=[make_acl("auth", "", all=True)])
        acls, _ = owner.get_acls("/by-auth")
        assert [(a.id.scheme, a.id.id) for a in acls] == [("x509", CLIENT_ID)]

        assert owner.get("/mine")[0] == b"secret"
        owner.set("/mine", b"still mine")
        for zk in (other, plain):
            with pytest.raises(NoAuthError):
                zk.get("/mine")
            with pytest.raises(NoAuthError):
                zk.set("/mine", b"taken")
            with pytest.raises(NoAuthError):
                zk.create("/mine/child", b"")
            with pytest.raises(NoAuthError):
                zk.get("/by-auth")
        assert owner.get("/mine")[0] == b"still mine"
        owner.create("/mine/child", b"")
        owner.delete("/mine/child")
    finally:
        _stop(owner, other, plain)


def test_x509_acl_ids_are_checked_like_x500principal(server, material):
    """An x509 ACL id must parse as an X.500 name (X509AuthenticationProvider.isValid)."""
    zk = _started(tls_client(server, material, material.client))
    try:
        zk.create("/rfc1779", b"", acl=[make_acl("x509", "CN=a, OU=b; O=c", read=True)])
        for bad in ("not a name", "CN=a,=b", "XX=unknown keyword", "CN=a\\"):
            with pytest.raises(InvalidACLError):
                zk.create("/bad", b"", acl=[make_acl("x509", bad, read=True)])
    finally:
        _stop(zk)


def test_x509_is_unknown_without_a_secure_port(material, tmp_path):
    """Without secureClientPort (or authProvider.N naming X509AuthenticationProvider) no
    x509 provider is registered: an x509 ACL is an InvalidACL, as in ZooKeeper."""
    server = start("zkcompat", tmp_path, {})  # clientPort only
    try:
        zk = _started(plain_client(server))
        try:
            with pytest.raises(InvalidACLError):
                zk.create("/x", b"", acl=[make_acl("x509", CLIENT_ID, read=True)])
        finally:
            _stop(zk)
    finally:
        server.stop()


@pytest.mark.parametrize("client_auth, with_cert, expected", [
    ("want", True, [CLIENT_ID]),
    ("want", False, []),
    ("none", True, []),  # no certificate asked for, so none to name the session by
])
def test_client_auth_want_and_none(client_auth, with_cert, expected, material, tmp_path):
    server = start("zkcompat", tmp_path, secure_cfg(material, **{"ssl.clientAuth": client_auth}))
    try:
        party = material.client if with_cert else None
        zk = _started(tls_client(server, material, party))
        try:
            assert _x509_ids(zk) == expected
            zk.create("/ok", b"")
        finally:
            _stop(zk)
    finally:
        server.stop()


def test_plaintext_port_serves_the_same_tree(server, material):
    """Both ports lead to one pipeline: a write over either is read over the other, and a
    watch set over the plaintext port fires for a write made over TLS."""
    secure = _started(tls_client(server, material, material.client))
    plain = _started(plain_client(server))
    try:
        secure.create("/shared", b"from tls")
        assert plain.get("/shared")[0] == b"from tls"
        plain.create("/shared/plain", b"from plaintext")
        assert secure.get("/shared/plain")[0] == b"from plaintext"

        fired = threading.Event()
        events = []

        def watcher(event):
            events.append((event.type, event.path))
            fired.set()

        plain.get("/shared", watch=watcher)
        secure.set("/shared", b"changed over tls")
        assert fired.wait(WATCH_TIMEOUT_S)
        assert events == [("CHANGED", "/shared")]
        assert plain.get("/shared")[0] == b"changed over tls"
        assert secure.client_id[0] != plain.client_id[0]
    finally:
        _stop(secure, plain)
