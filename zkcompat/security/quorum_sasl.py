"""Quorum SASL (quorum.auth.*): the QuorumAuthPacket exchange a learner and a server run on a
fresh election or quorum connection, as ZooKeeper's SaslQuorumAuthLearner/Server run it, with
DIGEST-MD5 (DigestLoginModule) or GSSAPI (Krb5LoginModule with a keytab). Sans-I/O: bytes in,
bytes to send out, and the bytes that follow the exchange (GSSAPI's only I/O is MIT krb5's own
talk with the KDC, inside the learner's first token).

What each side does, by ZooKeeper's settings (QuorumPeer.initialize, QuorumPeerConfig):

- enableSasl=false: NullQuorumAuthServer/Learner. Neither side sends or reads anything; every
  byte belongs to the next layer (server exchange done at once, empty leftover).
- enableSasl=true, learnerRequireSasl=false (so serverRequireSasl=false): the learner sends
  nothing. The server waits for 8 bytes: the magic starts an exchange (whose failure it
  answers with ERROR and then ignores, keeping the connection), anything else is the next
  layer's, all of it leftover.
- enableSasl=true, learnerRequireSasl=true, serverRequireSasl=false: the learner
  authenticates and fails (QuorumAuthError) on ERROR; the server as in the line above.
- all three true: as above, but the server also fails (QuorumAuthError, connection closed)
  when the first 8 bytes are not the magic or the exchange fails (after sending ERROR).
- serverRequireSasl without learnerRequireSasl, or either without enableSasl, is refused
  at start-up.

With Kerberos (SecurityUtils picks GSSAPI when the login has a principal) the learner asks
for quorum.auth.kerberos.servicePrincipal with "_HOST" put for the peer's host name, and the
server accepts with its own principal's keys; the server then authorizes a learner
(SaslQuorumServerCallbackHandler, ZooKeeper 3.8.4/3.9.2+, ZOOKEEPER-4753) only if its
principal is service/host@REALM with a host among the server.N host names (canonicalized
with kerberos.canonicalizeHostNames, as QuorumPeer.QuorumServer does).

The packet is quorum_auth_packet's, the settings and JAAS sections quorum_sasl_settings',
and the Kerberos logins and rules quorum_kerberos'.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from zkcompat.jute import records as r
from zkcompat.security.digest_md5 import DigestMd5Client, DigestMd5Server, SaslError
from zkcompat.security.gss import KerberosName
from zkcompat.security.quorum_auth_packet import (
    MAGIC_BYTES,
    TOKEN_MAX_BYTES,
    PacketReader,
    QuorumAuthError,
    Status,
    encode_packet,
    next_packet_is_auth,
    status_of,
)
from zkcompat.security.quorum_kerberos import (
    HOSTNAME_PATTERN,
    acceptor,
    initiator,
    kerberos_authorizer,
    server_principal,
)
from zkcompat.security.quorum_sasl_settings import (
    LEARNER_REQUIRE_SASL,
    SERVICE_PRINCIPAL,
    QuorumSaslSettings,
    QuorumSaslSetupError,
)

log = logging.getLogger(__name__)

# QuorumAuth.QUORUM_SERVER_PROTOCOL_NAME and QUORUM_SERVER_SASL_DIGEST: the digest-uri is
# "zookeeper-quorum/zk-quorum-sasl-md5" and the realm "zk-quorum-sasl-md5".
PROTOCOL = "zookeeper-quorum"
SERVER_NAME = "zk-quorum-sasl-md5"
MAX_RETRIES = 5  # SaslQuorumAuthServer.MAX_RETRIES: challenges before giving up


class QuorumAuthLearnerExchange:
    """SaslQuorumAuthLearner.authenticate on a connection this server opened, after its
    election ConnectionHeader or, on the quorum port, before FOLLOWERINFO. Without
    learnerRequireSasl it is done at once and sends nothing. Otherwise send start()'s bytes,
    then feed() every byte received, sending what it returns, until `done`; `leftover` is
    then what was received past the server's SUCCESS packet (the next layer's). A
    QuorumAuthError (ERROR status, a bad packet or rspauth, a Kerberos failure) means close
    the connection.

    peer_host is the host of the peer's server.N line, as written there (ZooKeeper passes
    that QuorumServer's hostname): a Kerberos learner puts it for "_HOST" in the service
    principal. Without it, a service principal with "_HOST" fails the exchange."""

    def __init__(self, settings: QuorumSaslSettings, token_max_bytes: int = TOKEN_MAX_BYTES,
                 new_cnonce: Callable[[], str] | None = None, peer_host: str | None = None):
        self._required = settings.enable_sasl and settings.learner_require_sasl
        self._reader = PacketReader(token_max_bytes)
        self._client = None  # a DigestMd5Client or a gss.GssapiClient
        self._settings = settings
        self._peer_host = peer_host
        if self._required and settings.learner_kerberos is None:
            if settings.learner_username is None:
                raise QuorumSaslSetupError(f"{LEARNER_REQUIRE_SASL}: no learner credentials")
            # SecurityUtils.createSaslClient passes the user name as authorization id too.
            self._client = DigestMd5Client(settings.learner_username,
                                           settings.learner_password or "", PROTOCOL,
                                           SERVER_NAME, authzid=settings.learner_username,
                                           new_cnonce=new_cnonce)
        self._started = False
        self.done = not self._required
        self.leftover = b""
        self.failed: QuorumAuthError | None = None

    def start(self) -> bytes:
        """The first packet: IN_PROGRESS with GSSAPI's initial response (the first context
        token, for which MIT krb5 may ask the KDC for a ticket), or with an empty token,
        DIGEST-MD5 having no initial response; nothing without learnerRequireSasl."""
        if self._started:
            raise RuntimeError("QuorumAuthLearnerExchange.start called twice")
        self._started = True
        if not self._required:
            return b""
        if self._settings.learner_kerberos is None:
            return encode_packet(Status.IN_PROGRESS, b"")
        try:
            self._client = self._gssapi_client()
            return encode_packet(Status.IN_PROGRESS, self._client.initial_response())
        except QuorumAuthError as e:
            self.failed = e
            raise
        except SaslError as e:
            self.failed = QuorumAuthError(str(e))
            raise self.failed from None

    def _gssapi_client(self):
        """SecurityUtils.createSaslClient's GSSAPI branch: only the service and host of the
        service principal count (its realm, if any, is never used)."""
        config = self._settings.service_principal
        if HOSTNAME_PATTERN in config.split("/") and self._peer_host is None:
            raise QuorumAuthError(f"{SERVICE_PRINCIPAL} {config} needs the peer's host name")
        host_name = self._settings.peer_host_name(self._peer_host or "")
        target = KerberosName.parse(server_principal(config, host_name))
        if target.host is None:
            raise QuorumAuthError(f"{SERVICE_PRINCIPAL} {config} has no host part "
                                  f"(service/host)")
        return initiator(self._settings.learner_kerberos).start(target.service, target.host)

    def feed(self, data: bytes) -> bytes:
        """Bytes received, in any split; returns the bytes to send."""
        if self.done or not self._started or self.failed is not None:
            raise RuntimeError("QuorumAuthLearnerExchange.feed when not exchanging")
        self._reader.buf += data
        out = bytearray()
        try:
            while not self.done:
                packet = self._reader.next()
                if packet is None:
                    break
                out += self._on_packet(packet)
        except QuorumAuthError as e:
            self.failed = e
            raise
        if self.done:
            self.leftover = bytes(self._reader.buf)
            self._reader.buf.clear()
        return bytes(out)

    def _on_packet(self, packet: r.QuorumAuthPacket) -> bytes:
        status = status_of(packet.status)
        if self._client.complete:
            # GSSAPI completes on the learner's last token: ZooKeeper's loop has ended, and
            # checkAuthStatus looks only at the status of the server's answer.
            if status is not Status.SUCCESS:
                raise QuorumAuthError("Authentication failed against the quorum server, "
                                      f"qpStatus: {status.name}")
            self.done = True
            return b""
        if status is Status.ERROR:
            raise QuorumAuthError("Authentication failed against the quorum server "
                                  f"(status {packet.status})")
        if packet.token is None:
            raise QuorumAuthError("Error in authenticating with a Zookeeper Quorum member: "
                                  "the quorum member's saslToken is null.")
        try:
            response = self._client.evaluate(packet.token)
        except SaslError as e:
            raise QuorumAuthError(str(e)) from None
        if status is Status.SUCCESS:
            if response is not None:
                raise QuorumAuthError("Protocol error: attempting to send response after "
                                      "completion")
            self.done = True
            return b""
        if response is None:
            # Complete while the server says IN_PROGRESS: checkAuthStatus refuses it.
            raise QuorumAuthError("Authentication failed against the quorum server, "
                                  "qpStatus: IN_PROGRESS")
        return encode_packet(Status.IN_PROGRESS, response)


class QuorumAuthServerExchange:
    """SaslQuorumAuthServer.authenticate (or NullQuorumAuthServer's nothing, without
    enableSasl) on a connection a learner opened: after reading its election
    ConnectionHeader, or as the quorum port accepts it (before its first QuorumPacket).
    feed() every byte received and send what it returns, until `done`; then `leftover` is
    every byte past the exchange, to hand to the next layer (all of them when the learner
    did not authenticate). `username` is who authenticated, None if nobody did. A
    QuorumAuthError means close the connection after writing its to_send."""

    def __init__(self, settings: QuorumSaslSettings, token_max_bytes: int = TOKEN_MAX_BYTES,
                 new_nonce: Callable[[], str] | None = None,
                 new_server: Callable[[], DigestMd5Server] | None = None):
        self._enabled = settings.enable_sasl
        self._required = settings.enable_sasl and settings.server_require_sasl
        self._reader = PacketReader(token_max_bytes)
        self._digest = settings.server_kerberos is None
        if new_server is not None:
            self._new_server = new_server
        elif self._digest:
            users = dict(settings.users)
            self._new_server = lambda: DigestMd5Server(
                users.get, new_nonce, protocol=PROTOCOL, server_name=SERVER_NAME)
        else:
            login = settings.server_kerberos
            authorize = kerberos_authorizer(frozenset(settings.host_names.values()))
            self._new_server = lambda: acceptor(login).start(authorize)
        self._server = None  # a DigestMd5Server or a gss.GssapiServer
        self._tries = 0
        self._received = False  # a whole packet has been read
        self.done = not self._enabled
        self.leftover = b""
        self.username: str | None = None
        self.failure: str | None = None  # why an unrequired exchange failed, for the log

    def feed(self, data: bytes) -> bytes:
        """Bytes received, in any split; returns the bytes to send."""
        if self.done:
            raise RuntimeError("QuorumAuthServerExchange.feed after done")
        self._reader.buf += data
        out = bytearray()
        if self._server is None:
            if len(self._reader.buf) < len(MAGIC_BYTES):
                return b""
            if not next_packet_is_auth(self._reader.buf):
                if self._required:
                    raise QuorumAuthError("Learner not trying to authenticate and "
                                          "authentication is required")
                return self._finish(b"")
        try:
            if self._server is None:
                self._server = self._new_server()
            while not self.done:
                packet = self._reader.next()
                if packet is None:
                    break
                self._received = True
                out += self._on_packet(packet)
        except (QuorumAuthError, SaslError) as e:
            return self._fail(out, str(e))
        return self._finish(bytes(out)) if self.done else bytes(out)

    def _on_packet(self, packet: r.QuorumAuthPacket) -> bytes:
        # The learner's status is not looked at, as in ZooKeeper: only its token.
        challenge = self._server.evaluate(packet.token or b"")
        if self._server.complete:
            # A GSSAPI learner was authorized (kerberos_authorizer) as its exchange ended.
            username = self._server.username
            authzid = self._server.authzid if self._digest else None
            # SaslQuorumServerCallbackHandler authorizes a DIGEST-MD5 learner only as itself.
            if authzid is not None and authzid != username:
                raise QuorumAuthError(f"DIGEST-MD5: {authzid} is not authorized to act as "
                                      f"{username}")
            self.username, self.done = username, True
            return encode_packet(Status.SUCCESS, challenge)
        self._tries += 1
        if self._tries > MAX_RETRIES:
            # ZooKeeper sends ERROR and then lets the connection through, required or not
            # (it throws nothing here); DIGEST-MD5 and GSSAPI never take this many rounds.
            log.warning("event=quorum_sasl_retries_exceeded tries=%d", self._tries)
            self.failure, self.done = "retries exceeded", True
            return encode_packet(Status.ERROR, challenge)
        return encode_packet(Status.IN_PROGRESS, challenge)

    def _fail(self, out: bytearray, reason: str) -> bytes:
        # ZooKeeper opens its output stream after reading the first packet, so a first
        # packet it cannot read gets no ERROR packet.
        error = bytes(out) + (encode_packet(Status.ERROR, b"") if self._received else b"")
        if self._required:
            raise QuorumAuthError(f"Failed to authenticate using SASL: {reason}", error)
        # ZooKeeper: "Maintaining learner connection despite SASL authentication failure";
        # the caller, who knows the peer, logs it.
        self.failure, self.done = reason, True
        return self._finish(error)

    def _finish(self, out: bytes) -> bytes:
        self.done = True
        self.leftover = bytes(self._reader.buf)
        self._reader.buf.clear()
        return out
