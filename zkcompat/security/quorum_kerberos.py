"""Kerberos for quorum SASL: keytab logins made once per process, the service principal a
learner asks for ("_HOST"), and whom a server lets in (ZOOKEEPER-4753)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from zkcompat.security.digest_md5 import SaslError
from zkcompat.security.gss import KerberosSettings

HOSTNAME_PATTERN = "_HOST"  # SecurityUtils.QUORUM_HOSTNAME_PATTERN


@dataclass(frozen=True)
class KerberosLogin:
    """A Krb5LoginModule's keyTab= and principal= (zkcompat logs in from a keytab only)."""

    principal: str
    keytab: Path


_logins: dict[tuple[str, KerberosLogin], object] = {}


def acceptor(login: KerberosLogin):
    """The server side's gss.GssapiAcceptor for login, made once per process."""
    if ("accept", login) not in _logins:
        from zkcompat.security.gss import GssapiAcceptor  # noqa: PLC0415 - needs gssapi

        _logins["accept", login] = GssapiAcceptor(
            KerberosSettings(login.principal, login.keytab, False, False))
    return _logins["accept", login]


def initiator(login: KerberosLogin):
    """The learner side's gss.GssapiInitiator for login, made once per process, so that its
    memory credential cache (TGT and service tickets) serves every connection."""
    if ("initiate", login) not in _logins:
        from zkcompat.security.gss import GssapiInitiator  # noqa: PLC0415 - needs gssapi

        _logins["initiate", login] = GssapiInitiator(login.principal, login.keytab)
    return _logins["initiate", login]


def server_principal(principal_config: str, host: str) -> str:
    """SecurityUtils.getServerPrincipal: "service/_HOST" becomes "service/host" in lower
    case; anything else (a realm after _HOST included) is left as it is."""
    components = principal_config.split("/")
    if len(components) != 2 or components[1] != HOSTNAME_PATTERN:
        return principal_config
    return f"{components[0]}/{host.lower()}"


def kerberos_authorizer(authz_hosts: frozenset[str]) -> Callable[[str, str], str]:
    """SaslQuorumServerCallbackHandler.handleAuthorizeCallback for a Kerberos server
    (ZooKeeper 3.8.4/3.9.2+, ZOOKEEPER-4753): the learner acts only as itself, and its
    principal is service/host@REALM with a host among the ensemble's (QuorumPeer.initialize
    collects every server.N's hostname). A principal without a host is refused; ZooKeeper
    3.8.0-3.8.3 and 3.9.0-3.9.1 let it in."""

    def authorize(authentication_id: str, authorization_id: str) -> str:
        if authentication_id != authorization_id:
            raise SaslError(f"{authentication_id} is not authorized to act as "
                            f"{authorization_id}")
        components = re.split("[/@]", authorization_id)
        while components and not components[-1]:
            components.pop()  # Java's String.split drops trailing empty strings
        if len(components) != 3 or components[1] not in authz_hosts:
            raise SaslError(f"SASL authorization completed, {authorization_id} is not "
                            "authorized to connect")
        return authorization_id

    return authorize
