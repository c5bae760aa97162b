"""client_auth's decisions, one provider or rule at a time: what an addauth packet grants,
who is refused for want of an authenticated id, and what a failed SASL step does."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from zkcompat.jute.constants import Code, OpCode
from zkcompat.security.enforce import AuthEnforcement
from zkcompat.server import client_auth
from zkcompat.tree.acl import SUPER_ID, digest_id

IP = ("ip", "127.0.0.1")
CERT_IDS = [("x509", "CN=client")]


def _config(super_digest: str | None = None, schemes: frozenset = frozenset()):
    return SimpleNamespace(super_digest=super_digest, auth_schemes=schemes)


def test_digest_adds_its_id_once():
    ids = [IP]
    for _ in range(2):
        assert client_auth.add_auth(_config(), "digest", b"bob:pw", ids, []) == Code.OK
    assert ids == [IP, ("digest", digest_id("bob:pw"))]


def test_digest_of_the_super_user_adds_super_first():
    ids = [IP]
    config = _config(super_digest=digest_id("super:secret"))
    assert client_auth.add_auth(config, "digest", b"super:secret", ids, []) == Code.OK
    assert ids == [IP, SUPER_ID, ("digest", digest_id("super:secret"))]


@pytest.mark.parametrize("scheme, auth", [("digest", None), ("world", b"anyone"),
                                          ("x509", b"ignored")])  # x509 not registered
def test_no_provider_or_no_credential_fails(scheme, auth):
    ids = [IP]
    assert client_auth.add_auth(_config(), scheme, auth, ids, CERT_IDS) == Code.AUTHFAILED
    assert ids == [IP]


def test_ip_grants_nothing_new():
    ids = [IP]
    assert client_auth.add_auth(_config(), "ip", b"10.0.0.1", ids, []) == Code.OK
    assert ids == [IP]


def test_x509_gives_the_certificates_ids_whatever_the_packet_says():
    config = _config(schemes=frozenset({"x509"}))
    ids = [IP, *CERT_IDS]
    assert client_auth.add_auth(config, "x509", b"CN=someone-else", ids, CERT_IDS) == Code.OK
    assert ids == [IP, *CERT_IDS]
    assert client_auth.add_auth(config, "x509", b"", [IP], []) == Code.AUTHFAILED


def test_enforcement_refuses_only_sessions_without_an_enforced_id():
    digest = AuthEnforcement(frozenset({"digest"}), allow_sasl_failed_clients=False)
    unauthenticated, authenticated = [IP], [IP, ("digest", "bob:x")]
    assert client_auth.refuses_unauthenticated(digest, OpCode.GET_DATA, unauthenticated)
    assert client_auth.refuses_unauthenticated(digest, OpCode.PING, unauthenticated)
    assert not client_auth.refuses_unauthenticated(digest, OpCode.GET_DATA, authenticated)
    for op in (OpCode.AUTH, OpCode.SASL):  # how a session gets such an id
        assert not client_auth.refuses_unauthenticated(digest, op, unauthenticated)
    nothing = AuthEnforcement(frozenset(), allow_sasl_failed_clients=True)
    assert not client_auth.refuses_unauthenticated(nothing, OpCode.GET_DATA, unauthenticated)


@pytest.mark.parametrize("schemes, allow, code", [
    (None, None, Code.AUTHFAILED),  # ZooKeeper's defaults
    (frozenset(), False, Code.AUTHFAILED),
    (frozenset(), True, None),  # allowSaslFailedClients: the connection stays open
    (frozenset({"sasl"}), False, Code.SESSIONCLOSEDREQUIRESASLAUTH),
    (frozenset({"sasl"}), True, Code.SESSIONCLOSEDREQUIRESASLAUTH),  # enforced: never kept
    (frozenset({"digest"}), True, None),
])
def test_sasl_failure(schemes, allow, code):
    enforcement = None if schemes is None else AuthEnforcement(schemes, allow)
    assert client_auth.sasl_failure_code(enforcement) == code
