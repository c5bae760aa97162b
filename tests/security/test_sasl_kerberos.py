"""SASL GSSAPI (Kerberos) on the client port against a real MIT KDC started here (kdc.py):
the sasl id made of a principal (kerberos.removeHostFromPrincipal/removeRealmFromPrincipal),
then zkcompat and ZooKeeper 3.8 with the same JAAS Server section (Krb5LoginModule with a
keytab) and zoo.cfg: kazoo (GSSAPI through pure-sasl and pykerberos) and the stock Java client
(a JAAS Client section with Krb5LoginModule and a keytab) authenticate as alice, and an ACL
on sasl:alice@REALM holds (alice reads, bob and a plaintext session get NoAuth); with
kerberos.removeHostFromPrincipal and removeRealmFromPrincipal set, the ids are the short
names on both servers."""

from __future__ import annotations

import struct

import pytest
from java_client import run_client
from kazoo.client import KazooClient
from kazoo.security import make_acl
from kdc import REALM, krb5_login_section
from test_auth_enforce import OP_SASL, _raw_session, _sasl_body
from test_sasl_digest import SASL_PROVIDER
from tls_servers import outcome, plain_client, start, whoami

from zkcompat.config import ConfigError, load
from zkcompat.security.gss import authorized_id

KINDS = ("zookeeper", "zkcompat")
SERVICE = f"zookeeper/localhost@{REALM}"  # what the clients ask for: zookeeper@localhost
ALICE, BOB = f"alice@{REALM}", f"bob@{REALM}"
HOSTED = f"carol/localhost@{REALM}"  # a principal with a host part


@pytest.mark.parametrize("principal, remove_host, remove_realm, expected", [
    ("alice@R", False, False, "alice@R"),
    ("alice@R", False, True, "alice"),
    ("carol/h.example@R", False, False, "carol/h.example@R"),
    ("carol/h.example@R", True, False, "carol@R"),
    ("carol/h.example@R", True, True, "carol"),
    ("alice@OTHER", True, True, "authzid"),  # no auth_to_local rule: the authzid stays
])
def test_sasl_id_as_the_callback_handler_makes_it(principal, remove_host, remove_realm,
                                                    expected):
    assert authorized_id(principal, "authzid", "R", remove_host, remove_realm) == expected


def test_a_wrong_keytab_stops_start_up(kdc, tmp_path, monkeypatch):
    monkeypatch.setenv("KRB5_CONFIG", str(kdc.krb5_conf))
    jaas_path = tmp_path / "server.jaas"
    jaas_path.write_text(krb5_login_section("Server", SERVICE, kdc.keytab(ALICE)))  # alice's keytab
    with pytest.raises(ConfigError, match="Kerberos login as"):
        load(None, {"dataDir": str(tmp_path), "java.security.auth.login.config": str(jaas_path)},
             environ={})


REMOVE_BOTH = {"kerberos.removeHostFromPrincipal": "true",
               "kerberos.removeRealmFromPrincipal": "true"}


def _expected_id(principal: str, cfg: dict[str, str]) -> str:
    return principal.split("/")[0].split("@")[0] if cfg else principal


@pytest.fixture(scope="module", params=[{}, REMOVE_BOTH], ids=["full names", "short names"])
def servers(kdc, tmp_path_factory, request):
    jaas_path = tmp_path_factory.mktemp("jaas") / "server.jaas"
    jaas_path.write_text(krb5_login_section("Server", SERVICE, kdc.keytab(SERVICE)))
    flags = (f"-Djava.security.auth.login.config={jaas_path}",
             f"-Djava.security.krb5.conf={kdc.krb5_conf}")
    cfg = {"authProvider.1": SASL_PROVIDER, **request.param}
    started = {}
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("KRB5_CONFIG", str(kdc.krb5_conf))
            for kind in KINDS:
                started[kind] = start(kind, tmp_path_factory.mktemp(kind), cfg, flags)
        yield request.param, started
    finally:
        for server in started.values():
            server.stop()


def _gssapi_client(server, kdc, principal: str, monkeypatch) -> KazooClient:
    """kazoo as `principal` (a credential cache kinit filled from its keytab); localhost, so
    that pure-sasl asks for zookeeper@localhost, as the Java client does."""
    monkeypatch.setenv("KRB5_CONFIG", str(kdc.krb5_conf))
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{kdc.kinit(principal)}")
    return KazooClient(hosts=f"localhost:{server.port}", timeout=5.0,
                       connection_retry={"max_tries": 0},
                       sasl_options={"mechanism": "GSSAPI", "service": "zookeeper"})


def _story(server, kdc, path: str, alice_id: str, monkeypatch) -> list:
    seen = []
    alice = _gssapi_client(server, kdc, ALICE, monkeypatch)
    alice.start(timeout=10)
    try:
        seen.append(("alice whoami", sorted(s for s in whoami(alice) if s[0] != "ip")))
        alice.create(path, b"alice's", acl=[make_acl("sasl", alice_id, all=True)])
        seen.append(("alice get", alice.get(path)[0]))
        # Each client made just before it starts: KRB5CCNAME is the process's.
        for who, client in (("bob", lambda: _gssapi_client(server, kdc, BOB, monkeypatch)),
                            ("carol", lambda: _gssapi_client(server, kdc, HOSTED, monkeypatch)),
                            ("plaintext", lambda: plain_client(server))):
            zk = client()
            zk.start(timeout=10)
            try:
                if who != "plaintext":
                    seen.append((f"{who} whoami",
                                 sorted(s for s in whoami(zk) if s[0] != "ip")))
                seen.append((who, "get", outcome(lambda zk=zk: zk.get(path))))
                seen.append((who, "set", outcome(lambda zk=zk: zk.set(path, b"x"))))
            finally:
                zk.stop()
                zk.close()
    finally:
        alice.stop()
        alice.close()
    return seen


def test_kazoo_gssapi_sees_the_same(servers, kdc, monkeypatch):
    cfg, started = servers
    alice_id = _expected_id(ALICE, cfg)
    stories = {kind: _story(s, kdc, "/krb-kazoo", alice_id, monkeypatch)
               for kind, s in started.items()}
    assert stories["zkcompat"] == stories["zookeeper"]
    story = stories["zkcompat"]
    assert ("alice whoami", [("sasl", alice_id)]) in story
    assert ("alice get", b"alice's") in story
    assert ("bob whoami", [("sasl", _expected_id(BOB, cfg))]) in story
    assert ("carol whoami", [("sasl", _expected_id(HOSTED, cfg))]) in story
    assert ("carol", "get", "NoAuthError") in story
    assert ("bob", "get", "NoAuthError") in story
    assert ("plaintext", "set", "NoAuthError") in story


def test_java_client_with_a_kerberos_jaas_client_section(servers, kdc, java_classes, tmp_path):
    cfg, started = servers
    alice_id = _expected_id(ALICE, cfg)
    client_jaas = tmp_path / "client.jaas"
    client_jaas.write_text(krb5_login_section("Client", ALICE, kdc.keytab(ALICE)))
    props = {"java.security.auth.login.config": str(client_jaas),
             "java.security.krb5.conf": str(kdc.krb5_conf)}
    outputs = {kind: run_client(java_classes, f"localhost:{s.port}", "/krb-java", alice_id,
                                "sasl", props)
               for kind, s in started.items()}
    assert outputs["zkcompat"] == outputs["zookeeper"]
    assert outputs["zkcompat"] == [
        "connect: ok",
        f"whoami: sasl {alice_id}",
        "create: /krb-java",
        f"getACL: [31,s{{'sasl,'{alice_id}}} ]",
        "getData: x",
    ]


def test_a_token_that_is_no_gss_token_is_refused_alike(servers):
    """AUTHFAILED with a null token, and the connection closed, on both."""
    _, started = servers
    seen = {kind: _raw_session(s, [(1, OP_SASL, _sasl_body(b"\x60\x03not gss"))])
            for kind, s in started.items()}
    assert seen["zkcompat"] == seen["zookeeper"]
    assert seen["zkcompat"] == [struct.pack(">iqii", 1, 0, -115, -1), b"<closed>"]
