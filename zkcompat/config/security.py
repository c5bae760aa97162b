"""The security settings of zoo.cfg into Config: the secure client port and its TLS, the
auth providers, SASL and its enforcement, and the quorum's TLS and SASL (zkcompat.security
reads each; this module decides which apply, as QuorumPeerConfig.parse does)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from zkcompat.config import status as config_status
from zkcompat.config.properties import ConfigError, parse_port
from zkcompat.security import settings as security

if TYPE_CHECKING:
    from zkcompat.config.zoocfg import Config


PORT_UNIFICATION_KEY = "client.portUnification"
CERT_RELOAD_KEY = "client.certReload"
_SECURITY_KEYS = ("secureClientPort", "secureClientPortAddress", "serverCnxnFactory",
                  "sslQuorum", "portUnification", "sslQuorumReloadCertFiles",
                  "quorum.auth.enableSasl",
                  "quorum.auth.learnerRequireSasl", "quorum.auth.serverRequireSasl",
                  "quorum.auth.learner.saslLoginContext", "quorum.auth.server.saslLoginContext",
                  "quorum.auth.kerberos.servicePrincipal")
# System properties zoo.cfg may set (with or without "zookeeper."), read by setup_security.
_SECURITY_PROPERTIES = (security.X509_SUPER_USER, "java.security.auth.login.config",
                        "sasl.serverconfig", "superUser", "enforce.auth.enabled",
                        "enforce.auth.schemes", "sessionRequireClientSASLAuth",
                        PORT_UNIFICATION_KEY, CERT_RELOAD_KEY,
                        "allowSaslFailedClients", "kerberos.removeHostFromPrincipal",
                        "kerberos.removeRealmFromPrincipal", "kerberos.canonicalizeHostNames")


def security_key(key: str) -> bool:
    """secureClientPort[Address], ssl.*, authProvider.N, serverCnxnFactory and the x509
    superUser: read by setup_security."""
    bare = key.removeprefix(security.PROPERTY_PREFIX)
    return (security.ssl_key(key) is not None or bare.startswith(security.AUTH_PROVIDER_PREFIX)
            or bare.startswith(security.QUORUM_SSL_PREFIX) and bare not in config_status.BY_KEY
            or key in _SECURITY_KEYS or bare in _SECURITY_PROPERTIES)


def setup_security(cfg: Config, props: Mapping[str, str], environ: Mapping[str, str]) -> None:
    """secureClientPort's TLS settings and the auth providers (QuorumPeerConfig.parse,
    configureSSLAuth). Without clientPort (in zoo.cfg or the server.N line) only the secure
    port listens, as in ZooKeeper."""
    if "secureClientPort" in props:
        cfg.secure_client_port = parse_port("secureClientPort", props["secureClientPort"])
    if "secureClientPortAddress" in props:
        cfg.secure_client_port_address = props["secureClientPortAddress"].strip()
    secure = cfg.secure_client_port is not None
    if "secureClientPortAddress" in props and not secure:
        raise ConfigError("secureClientPortAddress: secureClientPortAddress is set but "
                          "secureClientPort is not set")
    me = cfg.servers.get(cfg.server_id)
    cfg.client_port_enabled = (not secure or "clientPort" in props
                               or me is not None and me.client_port is not None)
    # NettyServerCnxnFactory's zookeeper.client.portUnification (Boolean.getBoolean): the
    # plaintext factory takes TLS too, and registers the x509 provider as a secure one does.
    cfg.client_port_unification = cfg.client_port_enabled and security.java_true(
        security.get_property(props, PORT_UNIFICATION_KEY))
    try:
        if "serverCnxnFactory" in props:
            security.server_cnxn_factory("serverCnxnFactory", props["serverCnxnFactory"])
        any_tls = secure or cfg.client_port_unification
        cfg.auth_schemes = security.auth_providers(props, any_tls)
        if any_tls:
            cfg.tls = security.tls_settings(props)
            cfg.client_cert_reload = security.java_true(
                security.get_property(props, CERT_RELOAD_KEY))
    except security.SettingError as e:
        raise ConfigError(str(e)) from None
    from zkcompat.security import (  # noqa: PLC0415 - as tls below
        enforce,
        quorum_sasl_settings,
        sasl,
    )

    try:
        cfg.sasl = sasl.sasl_settings(props, environ)
        quorum_auth = quorum_sasl_settings.quorum_sasl_settings(props, environ)
        cfg.quorum_sasl = quorum_auth if quorum_auth.enable_sasl else None
        cfg.auth_enforcement = enforce.auth_enforcement(props, cfg.auth_schemes)
    except (sasl.SaslSetupError, enforce.EnforceSetupError,
            quorum_sasl_settings.QuorumSaslSetupError) as e:
        raise ConfigError(str(e)) from None
    if cfg.tls is not None or security.QUORUM_SECURITY_KEYS & props.keys():
        # The stores are read now, so a bad one stops start-up as ZooKeeper's initSSL does.
        from zkcompat.security import quorum_tls, tls  # noqa: PLC0415 - only a secure server

        try:
            if cfg.tls is not None:
                tls.server_context(cfg.tls)
            cfg.quorum_tls = quorum_tls.quorum_tls(props)
        except (tls.TlsSetupError, security.SettingError) as e:
            raise ConfigError(str(e)) from None
