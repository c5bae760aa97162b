"""Quorum SASL (quorum.auth.*): the QuorumAuthPacket exchange a learner and a server run on a
fresh election or quorum connection, as ZooKeeper's SaslQuorumAuthLearner/Server run it, with
DIGEST-MD5 only. Sans-I/O: bytes in, bytes to send out, and the bytes that follow the exchange.

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
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path

from zkcompat.jute import records as r
from zkcompat.jute.errors import JuteError
from zkcompat.security import jaas
from zkcompat.security.digest_md5 import DigestMd5Client, DigestMd5Server, SaslError

log = logging.getLogger(__name__)

# QuorumAuth's keys and defaults.
ENABLE_SASL = "quorum.auth.enableSasl"
SERVER_REQUIRE_SASL = "quorum.auth.serverRequireSasl"
LEARNER_REQUIRE_SASL = "quorum.auth.learnerRequireSasl"
SERVICE_PRINCIPAL = "quorum.auth.kerberos.servicePrincipal"
SERVICE_PRINCIPAL_DEFAULT = "zkquorum/localhost"
LEARNER_LOGIN_CONTEXT = "quorum.auth.learner.saslLoginContext"
LEARNER_LOGIN_CONTEXT_DEFAULT = "QuorumLearner"
SERVER_LOGIN_CONTEXT = "quorum.auth.server.saslLoginContext"
SERVER_LOGIN_CONTEXT_DEFAULT = "QuorumServer"
# QuorumAuth.QUORUM_SERVER_PROTOCOL_NAME and QUORUM_SERVER_SASL_DIGEST: the digest-uri is
# "zookeeper-quorum/zk-quorum-sasl-md5" and the realm "zk-quorum-sasl-md5".
PROTOCOL = "zookeeper-quorum"
SERVER_NAME = "zk-quorum-sasl-md5"
# QuorumAuth.QUORUM_AUTH_MAGIC_NUMBER is written -0xa0dbcafecafe1234L: in Java that literal
# is a negative long, so its negation is this positive one (the source's comment calling it
# negative is wrong). On the wire: 5f 24 35 01 35 01 ed cc.
QUORUM_AUTH_MAGIC_NUMBER = 0x5F2435013501EDCC
MAX_RETRIES = 5  # SaslQuorumAuthServer.MAX_RETRIES: challenges before giving up
# ZooKeeper reads a token as any jute buffer (up to jute.maxbuffer plus its extra allowance,
# about 2 MB). DIGEST-MD5 tokens are at most 4096 bytes (RFC 2831 2.1.2), so a longer one is
# never an exchange in progress: it is refused long before ZooKeeper's bound.
TOKEN_MAX_BYTES = 64 * 1024
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
KRB5_LOGIN_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
USER_PREFIX = "user_"  # SaslQuorumServerCallbackHandler.USER_PREFIX

_HEAD = struct.Struct(">qii")  # magic, status, token length
_MAGIC = struct.Struct(">q")
MAGIC_BYTES = _MAGIC.pack(QUORUM_AUTH_MAGIC_NUMBER)


class Status(IntEnum):
    """QuorumAuth.Status."""

    IN_PROGRESS = 0
    SUCCESS = 1
    ERROR = -1


class QuorumAuthError(Exception):
    """The peer failed to authenticate or broke the exchange: close the connection.
    `to_send` holds bytes to write first (the ERROR packet a server sends), maybe empty."""

    def __init__(self, message: str, to_send: bytes = b""):
        super().__init__(message)
        self.to_send = to_send


class QuorumSaslSetupError(ValueError):
    """A quorum.auth.* setting or JAAS section ZooKeeper would not start with; the message
    names the key or section."""


# -- QuorumAuthPacket -------------------------------------------------------------------------

def encode_packet(status: Status, token: bytes | None) -> bytes:
    """QuorumAuth.createPacket, on the wire."""
    return r.QuorumAuthPacket(QUORUM_AUTH_MAGIC_NUMBER, int(status), token).to_bytes()


def next_packet_is_auth(first8: bytes) -> bool:
    """QuorumAuth.nextPacketIsAuth: the next 8 bytes are the magic number."""
    if len(first8) < _MAGIC.size:
        raise ValueError("next_packet_is_auth needs the next 8 bytes")
    return bytes(first8[:_MAGIC.size]) == MAGIC_BYTES


def packet_end(buf: bytes | bytearray, token_max_bytes: int = TOKEN_MAX_BYTES) -> int:
    """Where the QuorumAuthPacket at the start of buf ends, -1 if buf does not hold all of
    it yet; a JuteError for a token length no peer sends."""
    if len(buf) < _HEAD.size:
        return -1
    _, _, n = _HEAD.unpack_from(buf)
    if n < -1 or n > token_max_bytes:
        raise JuteError(f"QuorumAuthPacket token length {n} out of range "
                        f"(at most {token_max_bytes})")
    end = _HEAD.size + max(n, 0)
    return end if len(buf) >= end else -1


def decode_packet(buf: bytes | bytearray) -> r.QuorumAuthPacket:
    """A whole packet (as packet_end found it); a JuteError if it is not one."""
    packet, _ = r.QuorumAuthPacket.decode(bytes(buf))
    return packet


def _status(value: int) -> Status:
    """QuorumAuth.Status.getStatus: an unknown status counts as ERROR."""
    try:
        return Status(value)
    except ValueError:
        log.error("event=quorum_sasl_unknown_status status=%d", value)
        return Status.ERROR


class _PacketReader:
    """Buffers stream bytes and cuts whole QuorumAuthPackets off the front."""

    def __init__(self, token_max_bytes: int):
        self.buf = bytearray()
        self._token_max_bytes = token_max_bytes

    def next(self) -> r.QuorumAuthPacket | None:
        try:
            end = packet_end(self.buf, self._token_max_bytes)
            if end < 0:
                return None
            packet = decode_packet(self.buf[:end])
        except JuteError as e:
            raise QuorumAuthError(f"malformed QuorumAuthPacket: {e}") from None
        del self.buf[:end]
        if packet.magic != QUORUM_AUTH_MAGIC_NUMBER:
            # ZooKeeper checks the magic of the first packet only, but always sends it:
            # a packet without it is not ZooKeeper's quorum SASL.
            raise QuorumAuthError(f"QuorumAuthPacket with magic {packet.magic:#x}")
        return packet


# -- settings ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class QuorumSaslSettings:
    enable_sasl: bool = False
    learner_require_sasl: bool = False
    server_require_sasl: bool = False
    learner_login_context: str = LEARNER_LOGIN_CONTEXT_DEFAULT
    server_login_context: str = SERVER_LOGIN_CONTEXT_DEFAULT
    service_principal: str = SERVICE_PRINCIPAL_DEFAULT  # read; Kerberos only, so unused
    jaas_path: Path | None = None
    # The QuorumServer section's user_NAME="password" options.
    users: Mapping[str, str] = field(default_factory=dict)
    # The QuorumLearner section's username= and password= (None when it has none).
    learner_username: str | None = None
    learner_password: str | None = None


def _quorum_boolean(props: Mapping[str, str], key: str) -> bool:
    """QuorumPeerConfig.parseBoolean of the trimmed value: true or false in any case."""
    value = props.get(key)
    if value is None:
        return False
    v = value.strip().lower()
    if v not in ("true", "false"):
        raise QuorumSaslSetupError(f"{key}: Invalid option {value.strip()} for {key}. "
                                   "Choose 'true' or 'false.'")
    return v == "true"


def quorum_sasl_settings(props: Mapping[str, str],
                         environ: Mapping[str, str]) -> QuorumSaslSettings:
    """The quorum.auth.* keys of zoo.cfg, checked as QuorumPeerConfig.parseProperties checks
    them, and with enableSasl the JAAS file (found as the client port's is) with both login
    sections, which SaslQuorumAuthServer's and SaslQuorumAuthLearner's constructors need
    whatever the require flags say. QuorumSaslSetupError for what stops ZooKeeper's start."""
    enable = _quorum_boolean(props, ENABLE_SASL)
    server_require = _quorum_boolean(props, SERVER_REQUIRE_SASL)
    learner_require = _quorum_boolean(props, LEARNER_REQUIRE_SASL)
    if not enable and server_require:
        raise QuorumSaslSetupError(f"{SERVER_REQUIRE_SASL}: {ENABLE_SASL} is disabled, so "
                                   f"cannot enable {SERVER_REQUIRE_SASL}")
    if not enable and learner_require:
        raise QuorumSaslSetupError(f"{LEARNER_REQUIRE_SASL}: {ENABLE_SASL} is disabled, so "
                                   f"cannot enable {LEARNER_REQUIRE_SASL}")
    # A server that demands SASL from learners must itself authenticate as a learner, or it
    # could never join the quorum it guards.
    if not learner_require and server_require:
        raise QuorumSaslSetupError(f"{SERVER_REQUIRE_SASL}: {LEARNER_REQUIRE_SASL} is "
                                   f"disabled, so cannot enable {SERVER_REQUIRE_SASL}")
    learner_context = props.get(LEARNER_LOGIN_CONTEXT, LEARNER_LOGIN_CONTEXT_DEFAULT).strip()
    server_context = props.get(SERVER_LOGIN_CONTEXT, SERVER_LOGIN_CONTEXT_DEFAULT).strip()
    principal = props.get(SERVICE_PRINCIPAL, SERVICE_PRINCIPAL_DEFAULT).strip()
    base = QuorumSaslSettings(enable, learner_require, server_require, learner_context,
                              server_context, principal)
    if not enable:
        return base
    path, sections = _jaas_sections(props, environ)
    users = _server_users(_section(sections, server_context, path), server_context, path)
    username, password = _learner_credentials(_section(sections, learner_context, path),
                                              learner_context, path, learner_require)
    return QuorumSaslSettings(enable, learner_require, server_require, learner_context,
                              server_context, principal, Path(path), users, username, password)


def _jaas_sections(props: Mapping[str, str],
                   environ: Mapping[str, str]) -> tuple[str, dict[str, list[jaas.LoginModule]]]:
    path = jaas.location(props, environ)
    if path is None:
        # Java's Configuration.getConfiguration() throws: no login configuration to read.
        raise QuorumSaslSetupError(f"{ENABLE_SASL}: quorum SASL needs a JAAS file "
                                   f"(-D{jaas.JAAS_PROPERTY}= in SERVER_JVMFLAGS, or "
                                   f"{jaas.JAAS_PROPERTY} in zoo.cfg)")
    try:
        return path, jaas.parse(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise QuorumSaslSetupError(f"{jaas.JAAS_PROPERTY}: cannot read {path}: {e}") from None
    except jaas.JaasError as e:
        raise QuorumSaslSetupError(f"{jaas.JAAS_PROPERTY}: {path}: {e}") from None


def _section(sections: Mapping[str, list[jaas.LoginModule]], name: str,
             path: str) -> list[jaas.LoginModule]:
    modules = sections.get(name)
    if not modules:
        raise QuorumSaslSetupError(f"SASL-authentication failed because the specified JAAS "
                                   f"configuration section '{name}' could not be found "
                                   f"in {path}")
    for module in modules:
        if module.class_name == KRB5_LOGIN_MODULE:
            raise QuorumSaslSetupError(f"{path}: section '{name}': zkcompat's quorum SASL is "
                                       f"DIGEST-MD5 only (DigestLoginModule); Kerberos "
                                       f"({KRB5_LOGIN_MODULE}) is not supported")
        if module.class_name != DIGEST_LOGIN_MODULE:
            raise QuorumSaslSetupError(f"{path}: section '{name}': login module "
                                       f"{module.class_name} is not supported; zkcompat's "
                                       f"quorum SASL takes {DIGEST_LOGIN_MODULE} only")
    return modules


def _server_users(modules: list[jaas.LoginModule], name: str, path: str) -> dict[str, str]:
    users = {key[len(USER_PREFIX):]: value for module in modules
             for key, value in module.options.items() if key.startswith(USER_PREFIX)}
    if not users:
        # ZooKeeper starts, and refuses every learner; say so at start-up.
        log.warning("event=quorum_sasl_no_users section=%s jaas=%s", name, path)
    return users


def _learner_credentials(modules: list[jaas.LoginModule], name: str, path: str,
                         required: bool) -> tuple[str | None, str | None]:
    """DigestLoginModule's username= and password= (the first module that has a username,
    as the learner takes the subject's first credentials). ZooKeeper only needs them when it
    authenticates, i.e. with learnerRequireSasl; zkcompat then refuses to start without them
    rather than fail each connection."""
    for module in modules:
        if "username" in module.options:
            return module.options["username"], module.options.get("password", "")
    if required:
        raise QuorumSaslSetupError(f"{LEARNER_REQUIRE_SASL}: {path}: section '{name}' has "
                                   f"no username= and password= for the learner")
    return None, None


# -- the exchanges ----------------------------------------------------------------------------

class QuorumAuthLearnerExchange:
    """SaslQuorumAuthLearner.authenticate on a connection this server opened, after its
    election ConnectionHeader or, on the quorum port, before FOLLOWERINFO. Without
    learnerRequireSasl it is done at once and sends nothing. Otherwise send start()'s bytes,
    then feed() every byte received, sending what it returns, until `done`; `leftover` is
    then what was received past the server's SUCCESS packet (the next layer's). A
    QuorumAuthError (ERROR status, a bad packet or rspauth) means close the connection."""

    def __init__(self, settings: QuorumSaslSettings, token_max_bytes: int = TOKEN_MAX_BYTES,
                 new_cnonce: Callable[[], str] | None = None):
        self._required = settings.enable_sasl and settings.learner_require_sasl
        self._reader = _PacketReader(token_max_bytes)
        self._client: DigestMd5Client | None = None
        if self._required:
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
        """The first packet: IN_PROGRESS with an empty token, DIGEST-MD5 having no initial
        response; nothing without learnerRequireSasl."""
        if self._started:
            raise RuntimeError("QuorumAuthLearnerExchange.start called twice")
        self._started = True
        if not self._required:
            return b""
        return encode_packet(Status.IN_PROGRESS, b"")

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
        status = _status(packet.status)
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
        self._reader = _PacketReader(token_max_bytes)
        users = dict(settings.users)
        self._new_server = new_server or (lambda: DigestMd5Server(
            users.get, new_nonce, protocol=PROTOCOL, server_name=SERVER_NAME))
        self._server: DigestMd5Server | None = None
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
            if len(self._reader.buf) < _MAGIC.size:
                return b""
            if not next_packet_is_auth(self._reader.buf):
                if self._required:
                    raise QuorumAuthError("Learner not trying to authenticate and "
                                          "authentication is required")
                return self._finish(b"")
            self._server = self._new_server()
        try:
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
            username, authzid = self._server.username, self._server.authzid
            # SaslQuorumServerCallbackHandler authorizes a DIGEST-MD5 learner only as itself.
            if authzid is not None and authzid != username:
                raise QuorumAuthError(f"DIGEST-MD5: {authzid} is not authorized to act as "
                                      f"{username}")
            self.username, self.done = username, True
            return encode_packet(Status.SUCCESS, challenge)
        self._tries += 1
        if self._tries > MAX_RETRIES:
            # ZooKeeper sends ERROR and then lets the connection through, required or not
            # (it throws nothing here); DIGEST-MD5 never takes this many rounds.
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
