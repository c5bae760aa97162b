"""SASL GSSAPI (Kerberos V5, RFC 4752) as Java's GssKrb5Server and GssKrb5Client do it for
ZooKeeper: the GSS context, then the security-layer handshake (qop "auth" only, ZooKeeper's
default). The server side makes the client port's sasl id (SaslServerCallbackHandler:
kerberos.removeHostFromPrincipal, kerberos.removeRealmFromPrincipal) unless its caller
authorizes otherwise (quorum SASL); the client side is a quorum learner's. The `gssapi`
package (MIT krb5) is imported only by a server whose JAAS file names Kerberos."""

import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from zkcompat.security.digest_md5 import SaslError

QOP_AUTH = 1  # RFC 4752's "no security layer": javax.security.sasl.qop "auth", the default
RECV_MAX_BUF_BYTES = 65536  # GssKrb5Server's default javax.security.sasl.maxbuffer
QOP_HEADER_BYTES = 4  # one byte of qop bits, three of maximum buffer size (RFC 4752 3.1)
# RFC 4752 3.1: the client's maximum buffer size "MUST be 0 if the client does not support
# any security layer", and GssKrb5Client (JDK 11+) sends 0 with qop "auth".
NO_LAYER_MAX_BUF = bytes(3)
# The authorization callback: (authentication id, authorization id) -> the authorized id,
# raising SaslError when it is not authorized (AuthorizeCallback.setAuthorized(false)).
Authorize = Callable[[str, str], str]


@dataclass(frozen=True)
class KerberosSettings:
    """The JAAS Server section's Krb5LoginModule options ZooKeeper's server logs in with."""

    principal: str  # principal=, the service's: zookeeper/host@REALM
    keytab: Path  # keyTab=
    remove_host: bool  # zookeeper.kerberos.removeHostFromPrincipal
    remove_realm: bool  # zookeeper.kerberos.removeRealmFromPrincipal


class KerberosName(NamedTuple):
    """ZooKeeper's KerberosName: service[/host][@realm]."""

    service: str
    host: str | None
    realm: str | None

    @classmethod
    def parse(cls, name: str) -> "KerberosName":
        if "@" in name:
            rest, realm = name.rsplit("@", 1)
        else:
            rest, realm = name, None
        service, slash, host = rest.partition("/")
        if "/" in host or "@" in rest:
            raise SaslError(f"Malformed Kerberos name: {name}")
        return cls(service, host if slash else None, realm)


def authorized_id(authentication_id: str, authorization_id: str, default_realm: str,
                  remove_host: bool, remove_realm: bool) -> str:
    """SaslServerCallbackHandler.handleAuthorizeCallback: the short name (auth_to_local's
    DEFAULT rule: the first component, for a principal of the default realm), with /host
    and @REALM appended unless removed. A principal of another realm matches no rule: the
    handler logs the IOException and the id stays the client's authorization id."""
    name = KerberosName.parse(authentication_id)
    if name.realm is not None and name.realm != default_realm:
        return authorization_id
    ident = name.service
    if not remove_host and name.host is not None:
        ident += "/" + name.host
    if not remove_realm and name.realm is not None:
        ident += "@" + name.realm
    return ident


class GssapiServer:
    """One connection's GSSAPI exchange; evaluate() answers each client token, raising
    SaslError where GssKrb5Server throws SaslException."""

    def __init__(self, credentials, default_realm: str, settings: KerberosSettings,
                 authorize: Authorize | None = None):
        import gssapi  # noqa: PLC0415 - only a Kerberos server needs it

        self._gssapi = gssapi
        self._ctx = gssapi.SecurityContext(creds=credentials, usage="accept")
        self._default_realm = default_realm
        self._settings = settings
        self._authorize = authorize or self._client_port_id
        self._stage = 0  # 0: the GSS context; 1: the qop handshake; 2: its answer; 3: done
        self._peer = ""
        self.username: str | None = None  # the authorized id, once complete

    @property
    def complete(self) -> bool:
        return self._stage == 3

    def evaluate(self, token: bytes) -> bytes | None:
        try:
            if self._stage == 0:
                return self._accept(token)
            if self._stage == 1:
                return self._handshake1(token)
            if self._stage == 2:
                return self._handshake2(token)
        except self._gssapi.exceptions.GSSError as e:
            raise SaslError(f"GSS initiate failed: {e}") from None
        raise SaslError("GSSAPI: authentication already complete")

    def _accept(self, token: bytes) -> bytes | None:
        out = self._ctx.step(token)
        if not self._ctx.complete:
            return out
        self._stage = 1
        self._peer = str(self._ctx.initiator_name)
        return self._handshake1(b"") if not out else out

    def _handshake1(self, token: bytes) -> bytes:
        if token:
            raise SaslError("Final handshake step failed: client's response too long")
        offer = bytes((QOP_AUTH,)) + RECV_MAX_BUF_BYTES.to_bytes(3, "big")
        self._stage = 2
        return self._ctx.wrap(offer, False).message

    def _handshake2(self, token: bytes) -> None:
        data = self._ctx.unwrap(token).message
        if len(data) < QOP_HEADER_BYTES:
            raise SaslError("Final handshake failed: token too short")
        if not data[0] & QOP_AUTH:
            raise SaslError(f"Client selected unsupported protection: {data[0]}")
        if len(data) > QOP_HEADER_BYTES:
            authzid = data[QOP_HEADER_BYTES:].decode("utf-8", "replace")
        else:
            authzid = self._peer
        self.username = self._authorize(self._peer, authzid)
        self._stage = 3
        return None

    def _client_port_id(self, authentication_id: str, authorization_id: str) -> str:
        s = self._settings
        return authorized_id(authentication_id, authorization_id, self._default_realm,
                             s.remove_host, s.remove_realm)


class GssapiAcceptor:
    """What a Kerberos server's connections share: the service's credentials from its
    keytab, read once (a bad keytab or principal stops start-up), and the default realm."""

    def __init__(self, settings: KerberosSettings):
        import gssapi  # noqa: PLC0415 - only a Kerberos server needs it

        self.settings = settings
        try:
            name = gssapi.Name(settings.principal, gssapi.NameType.kerberos_principal)
            self.credentials = gssapi.Credentials(name=name, usage="accept",
                                                  store={"keytab": str(settings.keytab)})
            # A name without a realm, canonicalised, gains the default one (krb5.conf's).
            bare = gssapi.Name("x", gssapi.NameType.kerberos_principal)
            self.default_realm = str(bare.canonicalize(gssapi.MechType.kerberos)).split("@")[1]
        except gssapi.exceptions.GSSError as e:
            raise SaslError(f"Kerberos login as {settings.principal} with keytab "
                            f"{settings.keytab} failed: {e}") from None

    def start(self, authorize: Authorize | None = None) -> GssapiServer:
        """A connection's exchange; `authorize` replaces the client port's sasl id."""
        return GssapiServer(self.credentials, self.default_realm, self.settings, authorize)


class GssapiClient:
    """One connection's GSSAPI exchange as GssKrb5Client runs it: initial_response() is the
    first context token (GSSAPI has an initial response), evaluate() answers each server
    token, raising SaslError where GssKrb5Client throws SaslException. The context asks for
    integrity and confidentiality but not mutual authentication, as GssKrb5Client does
    without javax.security.sasl.server.authentication: the server proves itself by the
    wrapped security-layer offer only it can make."""

    def __init__(self, credentials, service: str, host: str, authzid: str):
        import gssapi  # noqa: PLC0415 - only a Kerberos learner needs it

        self._gssapi = gssapi
        # GssKrb5Client imports "service@host" as a host-based service name, so the
        # realm comes from krb5.conf's domain_realm (or the default realm), never from
        # the service principal ZooKeeper was given.
        target = gssapi.Name(f"{service}@{host}", gssapi.NameType.hostbased_service)
        flags = gssapi.RequirementFlag.integrity | gssapi.RequirementFlag.confidentiality
        self._ctx = gssapi.SecurityContext(name=target, creds=credentials, usage="initiate",
                                           mech=gssapi.MechType.kerberos, flags=flags)
        self._authzid = authzid.encode("utf-8")
        self._stage = 0  # 0: the GSS context; 1: the server's qop offer; 2: done

    @property
    def complete(self) -> bool:
        return self._stage == 2

    def initial_response(self) -> bytes:
        return self.evaluate(b"")

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self._stage == 0:
                out = self._ctx.step(token or None)
                if self._ctx.complete:
                    self._stage = 1
                # GssKrb5Client answers "nothing more" with an empty token, never null.
                return out or b""
            if self._stage == 1:
                return self._handshake(token)
        except self._gssapi.exceptions.GSSError as e:
            raise SaslError(f"GSS initiate failed: {e}") from None
        raise SaslError("GSSAPI: authentication already complete")

    def _handshake(self, token: bytes) -> bytes:
        offer = self._ctx.unwrap(token).message
        if len(offer) != QOP_HEADER_BYTES:
            raise SaslError(f"Final handshake failed: the server's offer is {len(offer)} "
                            f"bytes, not {QOP_HEADER_BYTES}")
        if not offer[0] & QOP_AUTH:
            raise SaslError("No common protection layer between client and server "
                            f"(server offers {offer[0]})")
        answer = bytes((QOP_AUTH,)) + NO_LAYER_MAX_BUF + self._authzid
        self._stage = 2
        return self._ctx.wrap(answer, False).message


_ccache_ids = itertools.count()


class GssapiInitiator:
    """A Kerberos client's login from a keytab, as Krb5LoginModule's useKeyTab: MIT krb5
    gets the TGT from the keytab when first needed (and again when it expires) into a
    credential cache of this process's memory, where the service tickets stay too, so
    neither the user's ticket cache nor another login's is touched. A keytab without the
    principal's key is refused here."""

    def __init__(self, principal: str, keytab: Path):
        import gssapi  # noqa: PLC0415 - only a Kerberos learner needs it

        self.keytab = keytab
        try:
            name = gssapi.Name(principal, gssapi.NameType.kerberos_principal)
            # The full name, realm included, is GssKrb5Client's authorization id.
            self.principal = str(name.canonicalize(gssapi.MechType.kerberos))
            ccache = f"MEMORY:zkcompat-{os.getpid()}-{next(_ccache_ids)}"
            self.credentials = gssapi.Credentials(
                name=name, usage="initiate",
                store={"client_keytab": str(keytab), "ccache": ccache})
        except gssapi.exceptions.GSSError as e:
            raise SaslError(f"Kerberos login as {principal} with keytab {keytab} "
                            f"failed: {e}") from None

    def start(self, service: str, host: str) -> GssapiClient:
        """A connection's exchange with the service at host (the target is service@host)."""
        return GssapiClient(self.credentials, service, host, self.principal)
