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
"""

from __future__ import annotations

import logging
import re
import socket
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path

from zkcompat.jute import records as r
from zkcompat.jute.errors import JuteError
from zkcompat.security import jaas
from zkcompat.security.digest_md5 import DigestMd5Client, DigestMd5Server, SaslError
from zkcompat.security.gss import KerberosName, KerberosSettings
from zkcompat.security.settings import java_true

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
# about 2 MB). DIGEST-MD5 tokens are at most 4096 bytes (RFC 2831 2.1.2) and a Kerberos
# AP-REQ is about 1 KB (tens of KB with a large authorization-data PAC), so a longer one is
# never an exchange in progress: it is refused long before ZooKeeper's bound.
TOKEN_MAX_BYTES = 64 * 1024
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
KRB5_LOGIN_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
USER_PREFIX = "user_"  # SaslQuorumServerCallbackHandler.USER_PREFIX
HOSTNAME_PATTERN = "_HOST"  # SecurityUtils.QUORUM_HOSTNAME_PATTERN
# QuorumPeer.CONFIG_KEY_KERBEROS_CANONICALIZE_HOST_NAMES, a system property zoo.cfg may set.
CANONICALIZE_HOST_NAMES = "kerberos.canonicalizeHostNames"

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
class KerberosLogin:
    """A Krb5LoginModule's keyTab= and principal= (zkcompat logs in from a keytab only)."""

    principal: str
    keytab: Path


@dataclass(frozen=True)
class QuorumSaslSettings:
    enable_sasl: bool = False
    learner_require_sasl: bool = False
    server_require_sasl: bool = False
    learner_login_context: str = LEARNER_LOGIN_CONTEXT_DEFAULT
    server_login_context: str = SERVER_LOGIN_CONTEXT_DEFAULT
    service_principal: str = SERVICE_PRINCIPAL_DEFAULT  # what a Kerberos learner asks for
    jaas_path: Path | None = None
    # The QuorumServer section's user_NAME="password" options.
    users: Mapping[str, str] = field(default_factory=dict)
    # The QuorumLearner section's username= and password= (None when it has none).
    learner_username: str | None = None
    learner_password: str | None = None
    # A Krb5LoginModule in QuorumServer / QuorumLearner: that side is GSSAPI.
    server_kerberos: KerberosLogin | None = None
    learner_kerberos: KerberosLogin | None = None
    # Each server.N host as written -> QuorumServer.hostname (itself unless
    # kerberos.canonicalizeHostNames): the names a Kerberos learner's principal may have,
    # and what "_HOST" becomes for a peer.
    host_names: Mapping[str, str] = field(default_factory=dict)

    def peer_host_name(self, host: str) -> str:
        """QuorumServer.hostname of the peer whose server.N line says host."""
        return self.host_names.get(host, host)


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
    server_modules = _section(sections, server_context, path)
    learner_modules = _section(sections, learner_context, path)
    server_kerberos = _kerberos_login(server_modules, server_context, path)
    learner_kerberos = _kerberos_login(learner_modules, learner_context, path)
    users: dict[str, str] = {}
    username = password = None
    if server_kerberos is not None:
        _check_server_login(server_kerberos, server_context)
    else:
        users = _server_users(server_modules, server_context, path)
    if learner_kerberos is not None:
        _check_learner_login(learner_kerberos, principal, learner_context)
    else:
        username, password = _learner_credentials(learner_modules, learner_context, path,
                                                  learner_require)
    return QuorumSaslSettings(enable, learner_require, server_require, learner_context,
                              server_context, principal, Path(path), users, username, password,
                              server_kerberos, learner_kerberos, _host_names(props))


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
        if module.class_name not in (DIGEST_LOGIN_MODULE, KRB5_LOGIN_MODULE):
            raise QuorumSaslSetupError(f"{path}: section '{name}': login module "
                                       f"{module.class_name} is not supported; zkcompat's "
                                       f"quorum SASL takes {DIGEST_LOGIN_MODULE} or "
                                       f"{KRB5_LOGIN_MODULE}")
    return modules


def _kerberos_login(modules: list[jaas.LoginModule], name: str,
                    path: str) -> KerberosLogin | None:
    """The section's Krb5LoginModule, if it has one: then that side is GSSAPI whatever else
    the section holds, as the subject has a principal (SecurityUtils)."""
    for module in modules:
        if module.class_name != KRB5_LOGIN_MODULE:
            continue
        principal, keytab = module.options.get("principal"), module.options.get("keyTab")
        if not principal or not keytab:
            raise QuorumSaslSetupError(f"{path}: section '{name}': zkcompat's "
                                       f"Krb5LoginModule needs useKeyTab=true, keyTab= and "
                                       f"principal= (no ticket cache)")
        return KerberosLogin(principal, Path(keytab))
    return None


def _check_server_login(login: KerberosLogin, name: str) -> None:
    """The server's keys, read now so that a wrong keytab or principal stops start-up as
    ZooKeeper's Login does. SecurityUtils.createSaslServer cuts service and host out of the
    principal and gets no SaslServer without a "/": refused here rather than at every
    learner."""
    if "/" not in login.principal.split("@", 1)[0]:
        raise QuorumSaslSetupError(f"section '{name}': the quorum server's principal "
                                   f"{login.principal} is not service/host@REALM")
    try:
        acceptor(login)
    except ImportError as e:
        raise QuorumSaslSetupError(f"Kerberos needs the gssapi package (pip install "
                                   f"'zkcompat[kerberos]'): {e}") from None
    except SaslError as e:
        raise QuorumSaslSetupError(f"section '{name}': {e}") from None


def _check_learner_login(login: KerberosLogin, service_principal: str, name: str) -> None:
    if HOSTNAME_PATTERN + "@" in service_principal:
        # SecurityUtils.getServerPrincipal replaces "_HOST" only as the whole host part of
        # a principal without a realm: ZooKeeper would ask for a host called "_HOST".
        log.warning("event=quorum_sasl_host_pattern_kept service_principal=%s",
                    service_principal)
    try:
        initiator(login)
    except ImportError as e:
        raise QuorumSaslSetupError(f"Kerberos needs the gssapi package (pip install "
                                   f"'zkcompat[kerberos]'): {e}") from None
    except SaslError as e:
        raise QuorumSaslSetupError(f"section '{name}': {e}") from None


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


def _server_hosts(props: Mapping[str, str]) -> list[str]:
    """The host of every server.N address, as ConfigUtils.getHostAndPort cuts it."""
    hosts = []
    for key, value in props.items():
        if not key.startswith("server."):
            continue
        for address in value.split(";", 1)[0].split("|"):
            address = address.strip()
            if address.startswith("[") and "]" in address:
                hosts.append(address[1:address.index("]")])
            else:
                hosts.append(address.split(":", 1)[0])
    return hosts


def _host_names(props: Mapping[str, str]) -> dict[str, str]:
    """QuorumServer.hostname for each server.N host: with kerberos.canonicalizeHostNames the
    canonical name of its address (when that is neither the name given nor the address),
    and a host that does not resolve stops start-up, as in ZooKeeper."""
    canonicalize = java_true(props.get(CANONICALIZE_HOST_NAMES,
                                       props.get("zookeeper." + CANONICALIZE_HOST_NAMES)))
    names = {}
    for host in _server_hosts(props):
        names[host] = _canonical_host_name(host) if canonicalize else host
    return names


def _canonical_host_name(host: str) -> str:
    try:
        address = socket.getaddrinfo(host, None)[0][4][0]
    except (OSError, UnicodeError):
        raise QuorumSaslSetupError(f"{CANONICALIZE_HOST_NAMES}: Unable to canonicalize "
                                   f"address {host} because it's not resolvable") from None
    try:
        canonical = socket.gethostbyaddr(address)[0]
    except OSError:
        return host  # InetAddress.getCanonicalHostName gives the address: kept as given
    return host if canonical in (host, address) else canonical


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
    QuorumAuthError (ERROR status, a bad packet or rspauth, a Kerberos failure) means close
    the connection.

    peer_host is the host of the peer's server.N line, as written there (ZooKeeper passes
    that QuorumServer's hostname): a Kerberos learner puts it for "_HOST" in the service
    principal. Without it, a service principal with "_HOST" fails the exchange."""

    def __init__(self, settings: QuorumSaslSettings, token_max_bytes: int = TOKEN_MAX_BYTES,
                 new_cnonce: Callable[[], str] | None = None, peer_host: str | None = None):
        self._required = settings.enable_sasl and settings.learner_require_sasl
        self._reader = _PacketReader(token_max_bytes)
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
        status = _status(packet.status)
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
            if len(self._reader.buf) < _MAGIC.size:
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
