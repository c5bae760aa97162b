"""Quorum SASL with Kerberos (GSSAPI) in an ensemble of Apache ZooKeeper 3.8 and zkcompat
servers, against a real MIT KDC started here: every server logs in from one keytab as
zkquorum/localhost@REALM (QuorumServer and QuorumLearner sections with a Krb5LoginModule, as
ZooKeeper's QuorumKerberosAuthTest has them), every election and quorum connection is
authenticated before ZAB speaks on it, writes through each member replicate and agree, and a
killed leader is replaced and rejoins; a server whose learner principal names a host that is
no server of the ensemble is kept out by ZooKeeper and zkcompat alike.

The server.N lines say 127.0.0.1, and a server lets a Kerberos learner in only if its
principal's host is one of the server.N host names: kerberos.canonicalizeHostNames=true makes
that host name localhost on ZooKeeper (QuorumServer) and zkcompat alike."""

from __future__ import annotations

import re

import pytest

from tests.security.kdc import REALM, krb5_login_section, start_kdc

from .harness import FAST, AckedWrites, check_acked_everywhere
from .test_quorum_sasl import REQUIRED, auth_lines
from .test_quorum_tls import (
    ROOT,
    fail_over_and_rejoin,
    set_cfg,
    start_and_replicate,
    write_through_each,
)

PRINCIPAL = f"zkquorum/localhost@{REALM}"
OTHER_HOST = f"zkquorum/otherhost@{REALM}"
KERBEROS = {**FAST, **REQUIRED, "kerberos.canonicalizeHostNames": "true"}


def _module(section: str, keytab, principal: str = PRINCIPAL) -> str:
    return krb5_login_section(section, principal, keytab)


@pytest.fixture
def kdc(tmp_path):
    (tmp_path / "kdc").mkdir()
    started = start_kdc(tmp_path / "kdc")
    try:
        yield started
    finally:
        started.stop()


def use_kerberos(monkeypatch, tmp_path, kdc, learner: str = PRINCIPAL) -> None:
    """One JAAS file for every server started next: ZooKeeper's JVM gets it and krb5.conf
    through SERVER_JVMFLAGS, zkcompat reads the same variable and MIT krb5 KRB5_CONFIG."""
    path = tmp_path / f"quorum-kerberos-{learner.split('@')[0].replace('/', '_')}.jaas"
    path.write_text(_module("QuorumServer", kdc.keytab(PRINCIPAL))
                    + _module("QuorumLearner", kdc.keytab(learner), learner))
    monkeypatch.setenv("SERVER_JVMFLAGS", f"-Djava.security.auth.login.config={path} "
                                          f"-Djava.security.krb5.conf={kdc.krb5_conf}")
    monkeypatch.setenv("KRB5_CONFIG", str(kdc.krb5_conf))


@pytest.mark.parametrize("service", [None, "zkquorum/_HOST"])
def test_mixed_ensemble_with_kerberos_quorum_sasl(ensemble, monkeypatch, tmp_path, kdc,
                                                  service):
    """With the default service principal, and with _HOST: each learner puts in the host
    name of the server it connects to (its server.N host, canonicalized)."""
    use_kerberos(monkeypatch, tmp_path, kdc)
    settings = dict(KERBEROS)
    if service is not None:
        settings["quorum.auth.kerberos.servicePrincipal"] = service
    leader, acked = start_and_replicate(ensemble, settings, "zookeeper,zkcompat,zkcompat")
    for sid in ensemble.sids:
        assert auth_lines(ensemble, sid, "election"), f"server.{sid}: no SASL logged"
    # ZooKeeper really used Kerberos: its learner chose GSSAPI, and its server let in
    # learners (zkcompat's among them) that showed the principal; each zkcompat server
    # let in learners that showed it.
    zookeeper_log = ensemble.log_since(1)
    assert "QuorumLearner will use GSSAPI as SASL mechanism" in zookeeper_log, zookeeper_log
    assert re.search(rf"Successfully authenticated learner: authenticationID="
                     rf"{re.escape(PRINCIPAL)}", zookeeper_log), zookeeper_log
    for sid in (2, 3):
        assert re.search(rf"event=quorum_sasl_authenticated [^\n]*user={re.escape(PRINCIPAL)}",
                         ensemble.log_since(sid)), ensemble.log_since(sid)
    if ensemble.member(leader).kind == "zkcompat":
        learners = re.findall(r"event=quorum_sasl_authenticated port=quorum remote=\S+ "
                              rf"user={re.escape(PRINCIPAL)}", ensemble.log_since(leader))
        assert len(learners) >= 2, ensemble.log_since(leader)
    fail_over_and_rejoin(ensemble, leader, acked)
    for sid in ensemble.sids:  # a peer killed mid-exchange may fail one, never Kerberos
        assert not re.search(r"(quorum_sasl_failed|Failed to authenticate)[^\n]*"
                             r"(not authorized|GSS)", ensemble.log_since(sid))


def test_a_learner_principal_of_another_host_is_kept_out(ensemble, monkeypatch, tmp_path,
                                                         kdc):
    use_kerberos(monkeypatch, tmp_path, kdc)
    ensemble.start(3, kind="zookeeper,zkcompat,zkcompat", settings=KERBEROS)
    ensemble.wait_one_leader()
    ensemble.stop_server(3)
    offsets = {sid: ensemble.log_size(sid) for sid in (1, 2)}
    # server.3 now logs in as zkquorum/otherhost: a valid Kerberos principal, but of no
    # host in the server.N lines.
    use_kerberos(monkeypatch, tmp_path, kdc, learner=OTHER_HOST)
    set_cfg(ensemble, 3, {})  # unchanged: only its JAAS file differs
    with pytest.raises(AssertionError, match="did not come up"):
        ensemble.run("start-server", "3", "--timeout", "8", timeout_s=8)
    refused = f"{re.escape(OTHER_HOST)} is not authorized to connect"
    ensemble.wait_log(1, refused, offsets[1])  # ZooKeeper's SaslQuorumServerCallbackHandler
    ensemble.wait_log(2, rf"event=quorum_sasl_failed [^\n]*{refused}[^\n]*action=close",
                      offsets[2])
    ensemble.wait_log(3, r"event=quorum_sasl_failed ")
    acked = AckedWrites()
    ensemble.client(ensemble.hosts(1)).ensure_path(ROOT)
    write_through_each(ensemble, acked, "two", [1, 2])
    check_acked_everywhere(ensemble, acked, [1, 2])
