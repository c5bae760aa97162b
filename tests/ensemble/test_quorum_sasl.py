"""Quorum SASL (quorum.auth.*, DIGEST-MD5 from a JAAS file's QuorumServer and QuorumLearner
sections), alone, over TLS, and with Apache ZooKeeper 3.8 in one ensemble: every election
and quorum connection is authenticated before ZAB speaks on it, writes replicate, a killed
leader is replaced; a server with a wrong password is kept out while the others go on.

The JAAS file reaches ZooKeeper as zkServer.sh passes it (SERVER_JVMFLAGS) and zkcompat
reads the same variable."""

from __future__ import annotations

import re

import pytest

from tests.certs import make_material

from .harness import FAST, AckedWrites, check_acked_everywhere, wait_for
from .test_quorum_tls import (
    ROOT,
    fail_over_and_rejoin,
    set_cfg,
    start_and_replicate,
    stores,
    write_through_each,
)

REQUIRED = {"quorum.auth.enableSasl": "true", "quorum.auth.learnerRequireSasl": "true",
            "quorum.auth.serverRequireSasl": "true"}
JAAS = """QuorumServer {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_zkpeer="%(server)s";
};
QuorumLearner {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="zkpeer"
    password="%(learner)s";
};
"""
ZOOKEEPER_AUTH_LINE = r"Successfully completed the authentication using SASL"
ZKCOMPAT_AUTH_LINE = r"event=quorum_sasl_authenticated [^\n]*port={port}"


@pytest.fixture(scope="module")
def material(tmp_path_factory):
    return make_material(tmp_path_factory.mktemp("quorum-sasl-tls"))


def use_jaas(monkeypatch, tmp_path, name: str, learner_password: str = "s3cret") -> None:
    path = tmp_path / f"{name}.jaas"
    path.write_text(JAAS % {"server": "s3cret", "learner": learner_password})
    monkeypatch.setenv("SERVER_JVMFLAGS", f"-Djava.security.auth.login.config={path}")


def auth_lines(ensemble, sid: int, port: str) -> list[str]:
    pattern = (ZOOKEEPER_AUTH_LINE if ensemble.member(sid).kind == "zookeeper"
               else ZKCOMPAT_AUTH_LINE.format(port=port))
    return re.findall(pattern, ensemble.log_since(sid))


def test_zkcompat_ensemble_with_quorum_sasl_over_tls(ensemble, material, monkeypatch,
                                                      tmp_path):
    use_jaas(monkeypatch, tmp_path, "good")
    leader, _ = start_and_replicate(ensemble, {**FAST, **REQUIRED, "sslQuorum": "true",
                                               **stores(material)})
    for sid in ensemble.sids:
        assert auth_lines(ensemble, sid, "election"), f"server.{sid}: no SASL logged"
        assert "event=quorum_link_tls" in ensemble.log_since(sid)
    learner_lines = re.findall(r"event=quorum_sasl_authenticated port=quorum remote=\S+ "
                               r"user=zkpeer", ensemble.log_since(leader))
    assert len(learner_lines) >= 2, ensemble.log_since(leader)


@pytest.mark.parametrize("kinds", ["zookeeper,zkcompat,zkcompat", "zkcompat,zookeeper,zookeeper"])
def test_mixed_ensemble_with_quorum_sasl(ensemble, monkeypatch, tmp_path, kinds):
    use_jaas(monkeypatch, tmp_path, "good")
    leader, acked = start_and_replicate(ensemble, {**FAST, **REQUIRED}, kinds)
    for sid in ensemble.sids:
        assert auth_lines(ensemble, sid, "election"), f"server.{sid}: no SASL logged"
    fail_over_and_rejoin(ensemble, leader, acked)


def test_a_learner_with_a_wrong_password_is_kept_out(ensemble, monkeypatch, tmp_path):
    use_jaas(monkeypatch, tmp_path, "good")
    ensemble.start(3, kind="zookeeper,zkcompat,zkcompat", settings={**FAST, **REQUIRED})
    ensemble.wait_one_leader()
    ensemble.stop_server(3)
    offsets = {sid: ensemble.log_size(sid) for sid in (1, 2)}
    use_jaas(monkeypatch, tmp_path, "wrong", learner_password="not-the-password")
    set_cfg(ensemble, 3, {})  # unchanged: only its JAAS file differs
    with pytest.raises(AssertionError, match="did not come up"):
        ensemble.run("start-server", "3", "--timeout", "8", timeout_s=8)
    # ZooKeeper (server.1) and zkcompat (server.2) each refuse it.
    ensemble.wait_log(1, r"Failed to authenticate using SASL", offsets[1])
    ensemble.wait_log(2, r"event=quorum_sasl_failed [^\n]*action=close", offsets[2])
    ensemble.wait_log(3, r"event=quorum_sasl_failed ")
    acked = AckedWrites()
    ensemble.client(ensemble.hosts(1)).ensure_path(ROOT)
    write_through_each(ensemble, acked, "two", [1, 2])
    check_acked_everywhere(ensemble, acked, [1, 2])


def test_rolling_change_to_required_sasl(ensemble, monkeypatch, tmp_path):
    """ZooKeeper's documented steps, one rolling restart each, on a mixed ensemble that
    keeps its quorum and takes a write after every restart: enableSasl (servers answer an
    exchange but ask for none), then learnerRequireSasl (each authenticates what it opens),
    then serverRequireSasl (each refuses a peer that does not)."""
    use_jaas(monkeypatch, tmp_path, "good")
    ensemble.start(3, kind="zookeeper,zkcompat,zkcompat", settings={**FAST})
    ensemble.wait_one_leader()
    acked = AckedWrites()
    ensemble.client().ensure_path(ROOT)
    steps = [("enabled", {"quorum.auth.enableSasl": "true"}),
             ("learners", {"quorum.auth.learnerRequireSasl": "true"}),
             ("servers", {"quorum.auth.serverRequireSasl": "true"})]
    for step, settings in steps:
        for sid in ensemble.sids:
            ensemble.stop_server(sid)
            set_cfg(ensemble, sid, settings)
            ensemble.start_server(sid)
            wait_for(lambda sid=sid: ensemble.mode(sid) in ("leader", "follower"), 60,
                     f"server.{sid} back in the quorum after step {step}")
            write_through_each(ensemble, acked, f"{step}-{sid}")
    check_acked_everywhere(ensemble, acked)
    for sid in ensemble.sids:  # the last restarts authenticated
        assert auth_lines(ensemble, sid, "election"), f"server.{sid}: no SASL logged"
