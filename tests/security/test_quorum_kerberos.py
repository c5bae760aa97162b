"""Quorum SASL with Kerberos (GSSAPI) against a real MIT KDC started here (kdc.py): the JAAS
QuorumServer/QuorumLearner sections with a Krb5LoginModule as ZooKeeper's
QuorumKerberos(HostBased)AuthTest write them, "_HOST" in quorum.auth.kerberos.servicePrincipal
as SecurityUtils.getServerPrincipal replaces it, which learner principals a server lets in
(SaslQuorumServerCallbackHandler: itself only, service/host@REALM with an ensemble host), our
learner and server against each other over loopback sockets, and each against ZooKeeper
3.8's own SaslQuorumAuthServer and SaslQuorumAuthLearner (tests/security/java)."""

from __future__ import annotations

import logging
import socket
import subprocess
import threading
from pathlib import Path

import pytest
from java_client import JAVA_TIMEOUT_S, SLF4J_NOP_JAR, ZOOKEEPER_JAR
from kdc import REALM, krb5_login_section
from test_quorum_sasl import (
    JAVA_LEARNER_NEXT,
    JAVA_SERVER_NEXT,
    LEARNER_NEXT,
    OUR_NEXT,
    SERVER_NEXT,
    SOCKET_TIMEOUT_S,
    _drive,
    _java_lines,
    _pump,
    _splitter,
    _whole,
    quorum_peer_classes,  # noqa: F401 - the fixture that compiles QuorumSaslPeer.java
)

from zkcompat.security import quorum_auth_packet as qap
from zkcompat.security import quorum_sasl_settings as qss
from zkcompat.security.digest_md5 import SaslError
from zkcompat.security.quorum_auth_packet import QuorumAuthError, Status
from zkcompat.security.quorum_kerberos import (
    KerberosLogin,
    kerberos_authorizer,
    server_principal,
)
from zkcompat.security.quorum_sasl import QuorumAuthLearnerExchange, QuorumAuthServerExchange
from zkcompat.security.quorum_sasl_settings import (
    QuorumSaslSettings,
    QuorumSaslSetupError,
    quorum_sasl_settings,
)

QUORUM = f"zkquorum/localhost@{REALM}"  # every server's principal, as in ZooKeeper's tests
OTHER_HOST = f"zkquorum/otherhost@{REALM}"  # a host that is no server of the ensemble
HOSTLESS = f"learner@{REALM}"  # QuorumKerberosHostBasedAuthTest's "missing host" learner
ENSEMBLE_HOSTS = {"localhost": "localhost"}


@pytest.fixture(autouse=True)
def krb5_config(kdc, monkeypatch):
    # MIT krb5 reads KRB5_CONFIG whenever it makes a context: set for every test here.
    monkeypatch.setenv("KRB5_CONFIG", str(kdc.krb5_conf))


def _module(section: str, principal: str, keytab: Path) -> str:
    return krb5_login_section(section, principal, keytab, debug="false",
                              refreshKrb5Config="true")


def _jaas_file(tmp_path: Path, kdc, server: str = QUORUM, learner: str = QUORUM,
               server_keytab: Path | None = None, name: str = "quorum.jaas") -> Path:
    path = tmp_path / name
    path.write_text(_module("QuorumServer", server, server_keytab or kdc.keytab(server))
                    + _module("QuorumLearner", learner, kdc.keytab(learner)))
    return path


def _settings(kdc, server_requires: bool = True, learner: str = QUORUM,
              server: str = QUORUM, service_principal: str = "zkquorum/localhost",
              hosts: dict[str, str] | None = None) -> QuorumSaslSettings:
    return QuorumSaslSettings(
        True, True, server_requires, service_principal=service_principal,
        server_kerberos=KerberosLogin(server, kdc.keytab(server)),
        learner_kerberos=KerberosLogin(learner, kdc.keytab(learner)),
        host_names=ENSEMBLE_HOSTS if hosts is None else hosts)


# -- settings and names -----------------------------------------------------------------------

def test_settings_read_kerberos_sections(kdc, tmp_path):
    path = _jaas_file(tmp_path, kdc)
    props = {"quorum.auth.enableSasl": "true", "quorum.auth.learnerRequireSasl": "true",
             "quorum.auth.serverRequireSasl": "true", "java.security.auth.login.config": str(path),
             "quorum.auth.kerberos.servicePrincipal": "zkquorum/_HOST",
             "server.1": "localhost:2888:3888;2181", "server.2": "127.0.0.1:2889:3889",
             "server.3": "[::1]:2890:3890:participant;[::1]:2183"}
    s = quorum_sasl_settings(props, {})
    assert s.server_kerberos == KerberosLogin(QUORUM, kdc.keytab(QUORUM))
    assert s.learner_kerberos == KerberosLogin(QUORUM, kdc.keytab(QUORUM))
    assert s.users == {} and s.learner_username is None
    assert s.service_principal == "zkquorum/_HOST"
    assert s.host_names == {"localhost": "localhost", "127.0.0.1": "127.0.0.1", "::1": "::1"}
    # kerberos.canonicalizeHostNames: QuorumServer.hostname becomes the address's name.
    s = quorum_sasl_settings({**props, "kerberos.canonicalizeHostNames": "true"}, {})
    assert s.host_names["127.0.0.1"] == "localhost" and s.peer_host_name("127.0.0.1") == \
        "localhost"
    assert s.peer_host_name("elsewhere") == "elsewhere"
    with pytest.raises(QuorumSaslSetupError, match="not resolvable"):
        quorum_sasl_settings({**props, "zookeeper.kerberos.canonicalizeHostNames": "true",
                              "server.4": "no-such-host.invalid:2891:3891"}, {})


def test_a_wrong_keytab_or_principal_stops_start_up(kdc, tmp_path):
    base = {"quorum.auth.enableSasl": "true"}
    # The server's section with another principal's keytab: the keys are not there.
    wrong = _jaas_file(tmp_path, kdc, server_keytab=kdc.keytab(OTHER_HOST), name="w.jaas")
    with pytest.raises(QuorumSaslSetupError, match="Kerberos login as"):
        quorum_sasl_settings({**base, "java.security.auth.login.config": str(wrong)}, {})
    # createSaslServer needs service/host in the server's principal.
    hostless = _jaas_file(tmp_path, kdc, server=HOSTLESS, name="h.jaas")
    with pytest.raises(QuorumSaslSetupError, match="not service/host@REALM"):
        quorum_sasl_settings({**base, "java.security.auth.login.config": str(hostless)}, {})
    # A learner whose keytab lacks its principal.
    path = tmp_path / "l.jaas"
    path.write_text(_module("QuorumServer", QUORUM, kdc.keytab(QUORUM))
                    + _module("QuorumLearner", f"nobody@{REALM}", kdc.keytab(QUORUM)))
    with pytest.raises(QuorumSaslSetupError, match="Kerberos login as nobody"):
        quorum_sasl_settings({**base, "java.security.auth.login.config": str(path)}, {})
    # No keytab: zkcompat does not read ticket caches.
    path.write_text(_module("QuorumServer", QUORUM, kdc.keytab(QUORUM)).replace(
        "keyTab=", "ignored=") + _module("QuorumLearner", QUORUM, kdc.keytab(QUORUM)))
    with pytest.raises(QuorumSaslSetupError, match="keyTab= and principal="):
        quorum_sasl_settings({**base, "java.security.auth.login.config": str(path)}, {})


@pytest.mark.parametrize("config, host, expected", [
    ("zkquorum/_HOST", "Node1.Example.COM", "zkquorum/node1.example.com"),
    ("zkquorum/localhost", "node1", "zkquorum/localhost"),
    # getServerPrincipal splits on "/" only: a realm after _HOST keeps it unreplaced.
    ("zkquorum/_HOST@R", "node1", "zkquorum/_HOST@R"),
    ("a/b/_HOST", "node1", "a/b/_HOST"),
    ("zkquorum", "node1", "zkquorum"),
])
def test_host_pattern_as_get_server_principal_replaces_it(config, host, expected):
    assert server_principal(config, host) == expected


@pytest.mark.parametrize("authentication_id, authorization_id, allowed", [
    ("zkquorum/localhost@R", "zkquorum/localhost@R", True),
    ("zkquorum/node2@R", "zkquorum/node2@R", True),
    ("zkquorum/otherhost@R", "zkquorum/otherhost@R", False),  # not an ensemble host
    ("learner@R", "learner@R", False),  # no host: refused since ZOOKEEPER-4753
    ("zkquorum/localhost", "zkquorum/localhost", False),  # two components
    ("zkquorum/localhost@", "zkquorum/localhost@", False),  # Java's split drops the empty
    ("zkquorum/localhost@R", "zkquorum/node2@R", False),  # acting as another
])
def test_which_learners_a_kerberos_server_authorizes(authentication_id, authorization_id,
                                                     allowed):
    authorize = kerberos_authorizer(frozenset({"localhost", "node2"}))
    if allowed:
        assert authorize(authentication_id, authorization_id) == authorization_id
    else:
        with pytest.raises(SaslError, match="not authorized"):
            authorize(authentication_id, authorization_id)


# -- our learner and our server -----------------------------------------------------------------

def test_learner_and_server_in_memory_under_any_split(kdc):
    for chunks in (_whole, _splitter([]), _splitter([3, 7, 100, 2]), _splitter([13] * 200)):
        learner = QuorumAuthLearnerExchange(_settings(kdc))
        server = QuorumAuthServerExchange(_settings(kdc))
        run = _pump(learner, server, chunks)
        assert run.learner_error is None and run.server_error is None
        assert server.username == QUORUM
        assert run.server_next == LEARNER_NEXT and run.learner_next == SERVER_NEXT


def test_the_exchange_is_gssapi_with_the_rfc4752_layer_and_a_null_success(kdc):
    """The learner's first packet carries the AP-REQ (GSSAPI has an initial response); the
    server answers the wrapped 4-byte offer; the learner the wrapped choice; then SUCCESS
    with a null token, as SaslQuorumAuthServer sends the null final challenge."""
    learner = QuorumAuthLearnerExchange(_settings(kdc))
    server = QuorumAuthServerExchange(_settings(kdc))
    first = qap.decode_packet(learner.start())
    assert (first.status, first.token[:1]) == (Status.IN_PROGRESS, b"\x60")  # GSS token
    offer = server.feed(qap.encode_packet(Status.IN_PROGRESS, first.token))
    assert qap.decode_packet(offer).status == Status.IN_PROGRESS and not server.done
    choice = learner.feed(offer)
    assert qap.decode_packet(choice).status == Status.IN_PROGRESS and not learner.done
    success = server.feed(choice)
    assert success == qap.encode_packet(Status.SUCCESS, None) and server.done
    assert learner.feed(success) == b"" and learner.done and learner.leftover == b""


def _serve_once(listener: socket.socket, exchange: QuorumAuthServerExchange, out: dict):
    conn, _ = listener.accept()
    out["got"], out["error"] = b"", None
    try:
        out["got"], out["error"] = _drive(conn, exchange)
    except OSError as e:
        # Let through after a failure, the next layer finds the learner gone.
        out["closed"] = e


def _over_loopback(learner: QuorumAuthLearnerExchange, server: QuorumAuthServerExchange):
    """Both exchanges on a real loopback connection, the server on a thread."""
    out: dict = {}
    with socket.create_server(("127.0.0.1", 0)) as listener:
        thread = threading.Thread(target=_serve_once, args=(listener, server, out))
        thread.start()
        sock = socket.create_connection(listener.getsockname(), timeout=SOCKET_TIMEOUT_S)
        try:
            first = learner.start()
        except QuorumAuthError as e:
            sock.close()
            thread.join(SOCKET_TIMEOUT_S)
            return b"", e, out
        got, error = _drive(sock, learner, first)
        thread.join(SOCKET_TIMEOUT_S)
    assert not thread.is_alive()
    return got, error, out


def test_learner_and_server_over_loopback(kdc):
    learner = QuorumAuthLearnerExchange(_settings(kdc))
    server = QuorumAuthServerExchange(_settings(kdc))
    got, error, out = _over_loopback(learner, server)
    assert error is None and out["error"] is None
    assert server.username == QUORUM
    assert got == OUR_NEXT and out["got"] == OUR_NEXT  # every byte of the next layer kept


@pytest.mark.parametrize("learner_principal", [OTHER_HOST, HOSTLESS])
@pytest.mark.parametrize("server_requires", [True, False])
def test_a_learner_principal_the_ensemble_does_not_know_is_refused(kdc, learner_principal,
                                                                   server_requires):
    learner = QuorumAuthLearnerExchange(_settings(kdc, learner=learner_principal))
    server = QuorumAuthServerExchange(_settings(kdc, server_requires))
    got, error, out = _over_loopback(learner, server)
    assert isinstance(error, QuorumAuthError)
    assert "Authentication failed" in str(error)  # the learner got ERROR
    assert server.username is None
    if server_requires:
        assert "not authorized to connect" in str(out["error"])
    else:
        # Let through with the failure logged by the caller, as ZooKeeper keeps it.
        assert out["error"] is None and "not authorized to connect" in server.failure


def test_a_server_with_another_principal_cannot_read_the_ticket(kdc):
    """The learner asks for zkquorum/localhost; a server holding only otherhost's keys
    cannot accept it, and the learner is refused."""
    learner = QuorumAuthLearnerExchange(_settings(kdc))
    server = QuorumAuthServerExchange(_settings(kdc, server=OTHER_HOST))
    got, error, out = _over_loopback(learner, server)
    assert isinstance(error, QuorumAuthError) and isinstance(out["error"], QuorumAuthError)
    assert "GSS" in str(out["error"]) and server.username is None


def test_a_stale_learner_keytab_fails_the_exchange(kdc, tmp_path):
    """A keytab whose key the KDC has since changed: no ticket, so the learner's first
    token already fails and nothing reaches the server's next layer."""
    principal = f"zkquorum/stale@{REALM}"
    keytab = kdc.keytab(principal)
    kdc.run("kadmin.local", "-r", REALM, "-q", f"cpw -randkey {principal}")
    settings = _settings(kdc)
    stale = QuorumSaslSettings(True, True, True, server_kerberos=settings.server_kerberos,
                               learner_kerberos=KerberosLogin(principal, keytab),
                               host_names={"stale": "stale"})
    learner = QuorumAuthLearnerExchange(stale)
    with pytest.raises(QuorumAuthError):
        learner.start()
    assert learner.failed is not None and not learner.done


def test_host_pattern_takes_the_peers_host_name(kdc, caplog):
    settings = _settings(kdc, service_principal="zkquorum/_HOST",
                         hosts={"127.0.0.1": "LocalHost"})
    learner = QuorumAuthLearnerExchange(settings, peer_host="127.0.0.1")
    server = QuorumAuthServerExchange(_settings(kdc))
    run = _pump(learner, server)
    assert run.learner_error is None and server.username == QUORUM
    # Without the peer's host there is nothing to put for _HOST; a host with no principal
    # in the KDC gets no ticket.
    for peer_host, match in ((None, "needs the peer's host name"), ("nohost", "GSS")):
        learner = QuorumAuthLearnerExchange(settings, peer_host=peer_host)
        with pytest.raises(QuorumAuthError, match=match):
            learner.start()
    with caplog.at_level(logging.WARNING):
        qss._check_learner_login(KerberosLogin(QUORUM, kdc.keytab(QUORUM)),  # noqa: SLF001
                                 "zkquorum/_HOST@R", "QuorumLearner")
    assert "quorum_sasl_host_pattern_kept" in caplog.text


# -- against ZooKeeper's own classes --------------------------------------------------------------

def _java(classes: Path, jaas: Path, kdc, *args: str) -> subprocess.Popen:
    classpath = ":".join((str(classes), str(ZOOKEEPER_JAR), str(SLF4J_NOP_JAR)))
    return subprocess.Popen(
        ["java", "-Xshare:auto", "-XX:+UseSerialGC",
         f"-Djava.security.auth.login.config={jaas}",
         f"-Djava.security.krb5.conf={kdc.krb5_conf}", "-cp", classpath, "QuorumSaslPeer",
         *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _serve_java_learner(classes: Path, jaas: Path, kdc, server_cfg: QuorumSaslSettings,
                        *learner_args: str):
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        proc = _java(classes, jaas, kdc, "learner", str(port), "true", *learner_args)
        listener.settimeout(JAVA_TIMEOUT_S)
        conn, _ = listener.accept()
        exchange = QuorumAuthServerExchange(server_cfg)
        got, error = _drive(conn, exchange)
        return exchange, got, error, _java_lines(proc)


def _learn_from_java_server(classes: Path, jaas: Path, kdc, learner_cfg: QuorumSaslSettings,
                            server_requires: bool, authz_hosts: str = "localhost",
                            peer_host: str | None = None):
    proc = _java(classes, jaas, kdc, "server", str(server_requires).lower(), authz_hosts)
    first = proc.stdout.readline().split()
    assert first[0] == "port", (first, proc.stderr.read() if not first else "")
    sock = socket.create_connection(("127.0.0.1", int(first[1])), timeout=SOCKET_TIMEOUT_S)
    exchange = QuorumAuthLearnerExchange(learner_cfg, peer_host=peer_host)
    got, error = _drive(sock, exchange, exchange.start())
    return exchange, got, error, _java_lines(proc)


@pytest.mark.parametrize("learner_args", [(), ("zkquorum/_HOST", "LOCALHOST")],
                         ids=["fixed", "host-pattern"])
def test_java_learner_authenticates_to_our_server(quorum_peer_classes, kdc, tmp_path,  # noqa: F811
                                                  learner_args):
    exchange, got, error, java = _serve_java_learner(
        quorum_peer_classes, _jaas_file(tmp_path, kdc), kdc, _settings(kdc), *learner_args)
    assert error is None and java["result"] == "ok", java
    assert exchange.username == QUORUM
    assert got == JAVA_LEARNER_NEXT and bytes.fromhex(java["after"]) == OUR_NEXT


@pytest.mark.parametrize("learner", [OTHER_HOST, HOSTLESS])
def test_java_learner_the_ensemble_does_not_know_is_refused(quorum_peer_classes, kdc,  # noqa: F811
                                                            tmp_path, learner):
    exchange, got, error, java = _serve_java_learner(
        quorum_peer_classes, _jaas_file(tmp_path, kdc, learner=learner), kdc,
        _settings(kdc))
    assert java["result"].startswith("error Authentication failed against server addr"), java
    assert isinstance(error, QuorumAuthError) and "not authorized" in str(error)
    assert exchange.username is None


@pytest.mark.parametrize("server_requires", [True, False])
def test_our_learner_authenticates_to_java_server(quorum_peer_classes, kdc, tmp_path,  # noqa: F811
                                                  server_requires):
    exchange, got, error, java = _learn_from_java_server(
        quorum_peer_classes, _jaas_file(tmp_path, kdc), kdc, _settings(kdc), server_requires)
    assert error is None and exchange.done
    assert java["result"] == "ok", java
    assert got == JAVA_SERVER_NEXT and bytes.fromhex(java["after"]) == OUR_NEXT


def test_our_learner_with_host_pattern_to_java_server(quorum_peer_classes, kdc,  # noqa: F811
                                                      tmp_path):
    settings = _settings(kdc, service_principal="zkquorum/_HOST",
                         hosts={"127.0.0.1": "LocalHost"})
    exchange, got, error, java = _learn_from_java_server(
        quorum_peer_classes, _jaas_file(tmp_path, kdc), kdc, settings, True,
        peer_host="127.0.0.1")
    assert error is None and java["result"] == "ok", java


@pytest.mark.parametrize("learner, authz_hosts", [
    (QUORUM, "127.0.0.1"),  # the host is not among the Java server's
    (OTHER_HOST, "localhost"),
])
def test_our_learner_refused_by_java_server(quorum_peer_classes, kdc, tmp_path,  # noqa: F811
                                            learner, authz_hosts):
    exchange, got, error, java = _learn_from_java_server(
        quorum_peer_classes, _jaas_file(tmp_path, kdc), kdc, _settings(kdc, learner=learner),
        True, authz_hosts)
    assert isinstance(error, QuorumAuthError) and not exchange.done
    assert java["result"].startswith("error Failed to authenticate using SASL"), java
