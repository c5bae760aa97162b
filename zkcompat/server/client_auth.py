"""Client authentication decisions for one connection's session: the ids an addauth packet
gives (ZooKeeper's AuthenticationProviders), what a failed SASL step does
(ZooKeeperServer.processSasl), and whether a request is refused for want of an
authenticated id (AuthenticationHelper.enforceAuthentication).

Ids in, ids and error codes out: the connection decodes the packets, sends the replies and
closes; nothing here does I/O.
"""

from collections.abc import Iterable

from zkcompat.jute.constants import Code, OpCode
from zkcompat.security.enforce import AuthEnforcement, is_authenticated
from zkcompat.tree.acl import SUPER_ID, digest_id

Id = tuple[str, str]  # (scheme, id), as an ACL's Id

X509_SCHEME = "x509"  # X509AuthenticationProvider.getScheme
# Read for every request of a server that enforces authentication: module globals, not
# OpCode attribute lookups.
_AUTH, _SASL = OpCode.AUTH, OpCode.SASL


def add_ids(ids: list[Id], new: Iterable[Id]) -> None:
    """Each of `new` not yet among `ids` joins them, in order (ServerCnxn.addAuthInfo
    keeps a set)."""
    for auth_id in new:
        if auth_id not in ids:
            ids.append(auth_id)


def add_auth(config, scheme: str, auth: bytes | None, ids: list[Id],
             certificate_ids: list[Id]) -> int:
    """An AuthPacket, as the provider of its scheme handles it: Code.OK with the ids it
    grants added to `ids`, or Code.AUTHFAILED.

    - digest: the id of "user:password" (and super, for zookeeper.DigestAuthenticationProvider
      .superDigest's);
    - ip: OK, adding nothing (the connection has its address's id already);
    - x509, when registered (ssl.authProvider): the connection's verified client
      certificate's ids, whatever the packet holds; none (plaintext, or a TLS client
      without one) is AUTHFAILED;
    - any other scheme: no provider, AUTHFAILED.
    """
    if scheme == "digest" and auth is not None:
        ident = digest_id(auth.decode("utf-8", "replace"))
        if ident == config.super_digest:
            ids.append(SUPER_ID)
        add_ids(ids, (("digest", ident),))
        return Code.OK
    if scheme == "ip":
        return Code.OK
    if scheme == X509_SCHEME and X509_SCHEME in config.auth_schemes:
        add_ids(ids, certificate_ids)
        return Code.OK if certificate_ids else Code.AUTHFAILED
    return Code.AUTHFAILED


def refuses_unauthenticated(enforcement: AuthEnforcement, op: int, ids: list[Id]) -> bool:
    """enforceAuthentication, before anything else reads the request (pings, closeSession
    and malformed requests too): a session without an id of an enforced scheme is refused.
    Auth and SASL packets are how a session gets such an id: never refused."""
    return (bool(enforcement.schemes) and op != _AUTH and op != _SASL
            and not is_authenticated(enforcement.schemes, ids))


def sasl_failure_code(enforcement: AuthEnforcement | None) -> int | None:
    """processSasl's SaslException: the err to answer with (and a null token) before the
    connection closes, SESSIONCLOSEDREQUIRESASLAUTH when sasl is an enforced scheme and
    AUTHFAILED otherwise; None when zookeeper.allowSaslFailedClients keeps the connection
    open (never when sasl is enforced)."""
    sasl_required = enforcement is not None and enforcement.sasl_required
    keep = enforcement is not None and enforcement.allow_sasl_failed_clients
    if keep and not sasl_required:
        return None
    return Code.SESSIONCLOSEDREQUIRESASLAUTH if sasl_required else Code.AUTHFAILED
