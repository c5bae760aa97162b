"""zkcompat against a real ZooKeeper 3.8 under the same zoo.cfg TLS lines and the same stores:
what kazoo and the Java client (Netty, TLS) see must be the same on both: the session's
whoami, an x509 ACL's getACL and its enforcement (each operation's error code for another
certificate and for a plaintext session), and a client refused under clientAuth=need.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from cryptography import x509 as cx509
from cryptography.hazmat.primitives.serialization import Encoding
from java_client import netty_tls_props, run_client, run_zkcli
from kazoo.security import make_acl
from tls_servers import (
    BOTH_PROTOCOLS,
    outcome,
    plain_client,
    read_until_closed,
    secure_cfg,
    start,
    tls_client,
    tls_handshake,
    tried,
    whoami,
)

from conftest import CLIENT_ID
from zkcompat.security.x509 import subject_id

KINDS = ("zookeeper", "zkcompat")


@pytest.fixture(scope="module")
def servers(material, tmp_path_factory):
    """Both servers, clientAuth=need (ZooKeeper's default), a PKCS12 key store and a JKS
    trust store: the same lines in both zoo.cfg files. The odd certificate's id is the
    x509 superUser (its backslashes doubled, as java.util.Properties reads them)."""
    cfg = secure_cfg(material, "PKCS12", "JKS", **BOTH_PROTOCOLS)
    cfg["X509AuthenticationProvider.superUser"] = _id_of(material.odd).replace("\\", "\\\\")
    started = {}
    try:
        for kind in KINDS:
            cfg["secureClientPort"] = secure_cfg(material)["secureClientPort"]
            started[kind] = start(kind, tmp_path_factory.mktemp(kind), cfg)
        yield started
    finally:
        for server in started.values():
            server.stop()


def _kazoo_story(server, material, path: str) -> list:
    """What kazoo clients see: the owner's whoami, an x509 ACL made and read back, then
    every operation on that node by a session with another trusted certificate and by a
    plaintext session."""
    seen = []
    owner = _started(tls_client(server, material, material.client))
    try:
        seen.append(("whoami", sorted(s for s in whoami(owner) if s[0] != "ip")))
        owner.create(path, b"mine", acl=[make_acl("x509", CLIENT_ID, all=True)])
        owner.create(path + "/owned", b"")
        acls, _ = owner.get_acls(path)
        seen.append(("getACL", [(a.perms, a.id.scheme, a.id.id) for a in acls]))
        seen.append(("get", owner.get(path)[0]))
        for who, zk in (("peer", tls_client(server, material, material.peer)),
                        ("plaintext", plain_client(server))):
            _started(zk)
            try:
                seen.extend((who, op, result) for op, result in tried(zk, path))
            finally:
                _stop(zk)
        owner.set(path, b"still mine")
        owner.delete(path + "/owned")
        seen.append(("owner after", owner.get(path)[0], owner.get_children(path)))
        seen.append(("invalid x509 ACL", outcome(
            lambda: owner.create(path + "-bad", b"", acl=[make_acl("x509", "CN=a,=b")]))))
    finally:
        _stop(owner)
    return seen


def _as_39(story: list) -> list:
    """ZooKeeper 3.9's answer where 3.8's differs on purpose (deliberate.EXISTS_NEEDS_READ)."""
    return [(e[0], "exists", "NoAuthError") if e[1:] == ("exists", "ok") else e
            for e in story]


def test_kazoo_sees_the_same_x509_identity_and_acl(servers, material):
    stories = {kind: _kazoo_story(s, material, "/x509-kazoo") for kind, s in servers.items()}
    assert stories["zkcompat"] == _as_39(stories["zookeeper"])
    assert ("whoami", [("x509", CLIENT_ID)]) in stories["zkcompat"]
    assert ("peer", "get", "NoAuthError") in stories["zkcompat"]
    assert ("plaintext", "set", "NoAuthError") in stories["zkcompat"]
    assert ("invalid x509 ACL", "InvalidACLError") in stories["zkcompat"]


def test_escaped_subject_is_the_same_id_and_the_super_user(servers, material):
    """A subject with RFC 2253's escapes, a multi-valued RDN and a hex value, named as the
    x509 superUser: the same whoAmI on both (super and x509), an ACL on that id admits its
    holder, and as super it reads a node whose ACL names only another certificate."""
    seen = {}
    for kind, server in servers.items():
        owner = _started(tls_client(server, material, material.client))
        odd = _started(tls_client(server, material, material.odd))
        try:
            owner.create("/owned", b"owner's", acl=[make_acl("x509", CLIENT_ID, all=True)])
            who = sorted(s for s in whoami(odd) if s[0] != "ip")
            x509_id = [u for s, u in who if s == "x509"][0]
            odd.create("/odd", b"", acl=[make_acl("x509", x509_id, all=True)])
            odd.set("/odd", b"mine")
            seen[kind] = (who, odd.get("/odd")[0],
                          outcome(lambda zk=odd: zk.get("/owned")),
                          outcome(lambda zk=odd: zk.set("/owned", b"super's")))
        finally:
            _stop(owner)
            _stop(odd)
    assert seen["zkcompat"] == seen["zookeeper"], seen
    odd_id = _id_of(material.odd)
    assert seen["zkcompat"] == ([("super", ""), ("x509", odd_id)], b"mine", "ok", "ok")
    assert "\\, Inc." in odd_id


def test_addauth_x509_and_ip(servers, material):
    """addauth x509 over TLS is answered from the connection's certificate (the packet's
    bytes do not matter); over plaintext there is none: AuthFailed, the session closed.
    addauth ip always succeeds (the address is the id)."""
    outcomes = {}
    for kind, server in servers.items():
        secure = _started(tls_client(server, material, material.peer))
        plain = _started(plain_client(server))
        try:
            outcomes[kind] = [
                ("tls x509", outcome(lambda zk=secure: zk.add_auth("x509", "CN=someone"))),
                ("tls whoami", sorted(s for s in whoami(secure) if s[0] != "ip")),
                ("tls ip", outcome(lambda zk=secure: zk.add_auth("ip", "anything"))),
                ("plain ip", outcome(lambda zk=plain: zk.add_auth("ip", "anything"))),
                ("plain x509", outcome(lambda zk=plain: zk.add_auth("x509", "CN=peer"))),
                ("plain after", plain.state),
            ]
        finally:
            _stop(secure)
            _stop(plain)
    assert outcomes["zkcompat"] == outcomes["zookeeper"], outcomes
    assert outcomes["zkcompat"][0] == ("tls x509", "ok")
    assert outcomes["zkcompat"][4] == ("plain x509", "AuthFailedError")


def _id_of(party) -> str:
    der = cx509.load_pem_x509_certificate(party.cert.read_bytes()).public_bytes(Encoding.DER)
    return subject_id(der)


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
def test_no_client_certificate_is_refused_alike_under_need(servers, material, version):
    """clientAuth=need: a client without a certificate never gets a session; neither
    server sends a byte of ZooKeeper's protocol. Under TLSv1.2 the handshake itself fails;
    under TLSv1.3 the client's side of it completes before the server has judged its
    (empty) certificate, and the connection is closed at the client's first read."""
    outcomes = {}
    for kind, server in servers.items():
        try:
            sock = tls_handshake(server, material, max_version=version)
        except (ssl.SSLError, ConnectionResetError) as e:
            outcomes[kind] = ("handshake refused", isinstance(e, ssl.SSLError))
            continue
        with sock:
            try:
                sock.sendall(b"\x00\x00\x00\x2c" + bytes(44))  # a ConnectRequest's size
                data = read_until_closed(sock)
            except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
                data = b""
            outcomes[kind] = ("closed after the handshake", data)
    assert outcomes["zkcompat"] == outcomes["zookeeper"], outcomes
    expected = (("handshake refused", True) if version == ssl.TLSVersion.TLSv1_2
                else ("closed after the handshake", b""))
    assert outcomes["zkcompat"] == expected, outcomes


def _started(zk):
    zk.start(timeout=10)
    return zk


def _stop(zk) -> None:
    zk.stop()
    zk.close()


def run_java(classes: Path, server, material, path: str) -> list[str]:
    return run_client(classes, f"127.0.0.1:{server.secure_port}", path, CLIENT_ID, "x509",
                      netty_tls_props(material))


def test_java_client_over_netty_tls_sees_the_same(servers, material, java_classes):
    outputs = {kind: run_java(java_classes, s, material, "/x509-java")
               for kind, s in servers.items()}
    assert outputs["zkcompat"] == outputs["zookeeper"]
    assert outputs["zkcompat"] == [
        "connect: ok",
        f"whoami: x509 {CLIENT_ID}",
        "create: /x509-java",
        f"getACL: [31,s{{'x509,'{CLIENT_ID.replace(',', '%2C')}}} ]",
        "getData: x",
    ]


def test_zkcli_over_netty_tls_sees_the_same(servers, material):
    """zkCli's whoami, create, get and getAcl over TLS: the same lines from both."""
    commands = ["whoami", "create /zkcli-tls data", "get /zkcli-tls", "getAcl /zkcli-tls"]
    outputs = {kind: run_zkcli(f"127.0.0.1:{s.secure_port}", commands, netty_tls_props(material))
               for kind, s in servers.items()}
    assert outputs["zkcompat"] == outputs["zookeeper"]
    for line in (f"x509: {CLIENT_ID}", "data", "Created /zkcli-tls",
                 "WatchedEvent state:SyncConnected type:None path:null"):
        assert line in outputs["zkcompat"], outputs["zkcompat"]
