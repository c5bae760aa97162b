"""The quorum.auth.* settings and the JAAS login sections they name, read and checked once at
start-up as QuorumPeerConfig and ZooKeeper's Login check them (QuorumSaslSetupError)."""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from zkcompat.security import jaas
from zkcompat.security.digest_md5 import SaslError
from zkcompat.security.quorum_kerberos import HOSTNAME_PATTERN, KerberosLogin, acceptor, initiator
from zkcompat.security.settings import java_true

# Quorum SASL's one logger, whichever of its modules logs: operators filter on its name.
log = logging.getLogger("zkcompat.security.quorum_sasl")

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
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
KRB5_LOGIN_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
USER_PREFIX = "user_"  # SaslQuorumServerCallbackHandler.USER_PREFIX
# QuorumPeer.CONFIG_KEY_KERBEROS_CANONICALIZE_HOST_NAMES, a system property zoo.cfg may set.
CANONICALIZE_HOST_NAMES = "kerberos.canonicalizeHostNames"


class QuorumSaslSetupError(ValueError):
    """A quorum.auth.* setting or JAAS section ZooKeeper would not start with; the message
    names the key or section."""


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
