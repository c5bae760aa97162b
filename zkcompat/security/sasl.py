"""SASL on the client port (op 102) as ZooKeeper's server does it with a JAAS Server section:
DIGEST-MD5 for DigestLoginModule users, or GSSAPI (Kerberos) for a Krb5LoginModule's keytab
and principal; each connection's exchange, the ("sasl", id) it gives the session (and
("super", "") for zookeeper.superUser), and which sasl ACL ids are valid
(SASLAuthenticationProvider.isValid)."""

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from zkcompat.security import jaas
from zkcompat.security.digest_md5 import DigestMd5Server, SaslError
from zkcompat.security.gss import KerberosSettings
from zkcompat.security.settings import get_property, java_true

log = logging.getLogger(__name__)

SCHEME = "sasl"
SUPER_SCHEME, SUPER_ID = "super", ""  # what ZooKeeperServer.processSasl adds for superUser
SECTION_PROPERTY = "sasl.serverconfig"  # zookeeper.sasl.serverconfig
DEFAULT_SECTION = "Server"  # ZooKeeperSaslServer.DEFAULT_LOGIN_CONTEXT_NAME
SUPER_USER_PROPERTY = "superUser"  # zookeeper.superUser
USER_PREFIX = "user_"  # ServerCnxnFactory.getDigestMd5Credentials
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
KRB5_LOGIN_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
REMOVE_HOST_PROPERTY = "kerberos.removeHostFromPrincipal"  # zookeeper.kerberos.*
REMOVE_REALM_PROPERTY = "kerberos.removeRealmFromPrincipal"
PROVIDER_CLASS = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
# KerberosName's parser: service[/host]@REALM; a name with "@" that does not fit is invalid.
_KERBEROS_NAME = re.compile(r"([^/@]*)(/([^/@]*))?@([^/@]*)")


class SaslSetupError(ValueError):
    """A JAAS setup ZooKeeper's server would not start with; the message says why."""


@dataclass(frozen=True)
class SaslSettings:
    jaas_path: Path
    section: str
    users: Mapping[str, str]  # DIGEST-MD5 user name -> password, from user_NAME options
    super_user: str | None
    # A Krb5LoginModule's: then the server is GSSAPI only, as ZooKeeper's (SecurityUtils.
    # createSaslServer picks GSSAPI when the login has a Kerberos principal, else DIGEST-MD5).
    kerberos: KerberosSettings | None = None

    @property
    def mechanism(self) -> str:
        return "DIGEST-MD5" if self.kerberos is None else "GSSAPI"


def sasl_settings(props: Mapping[str, str], environ: Mapping[str, str]) -> SaslSettings | None:
    """ServerCnxnFactory.configureSaslLogin: the JAAS file's Server section (or the one
    sasl.serverconfig names) gives the DIGEST-MD5 users. No JAAS file, or a file without
    that section: no SASL, as in ZooKeeper. A Krb5LoginModule there makes it a Kerberos
    server, whose keytab and principal are tried now. A file that cannot be read or parsed,
    or a Kerberos login that fails, stops start-up. Other modules are logged and ignored."""
    path = jaas.location(props, environ)
    if path is None:
        return None
    section = (get_property(props, SECTION_PROPERTY) or DEFAULT_SECTION).strip()
    try:
        sections = jaas.parse(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise SaslSetupError(f"{jaas.JAAS_PROPERTY}: cannot read {path}: {e}") from None
    except jaas.JaasError as e:
        raise SaslSetupError(f"{jaas.JAAS_PROPERTY}: {path}: {e}") from None
    modules = sections.get(section)
    if modules is None:
        log.info("event=sasl_off reason=%r", f"no JAAS section named '{section}' in {path}")
        return None
    users: dict[str, str] = {}
    kerberos = None
    for module in modules:
        if module.class_name == KRB5_LOGIN_MODULE:
            kerberos = _kerberos_settings(props, module.options, path)
        elif module.class_name != DIGEST_LOGIN_MODULE:
            log.warning("event=sasl_not_implemented login_module=%s", module.class_name)
        for key, value in module.options.items():
            if key.startswith(USER_PREFIX):
                users[key[len(USER_PREFIX):]] = value
    return SaslSettings(Path(path), section, users, get_property(props, SUPER_USER_PROPERTY),
                        kerberos)


def _kerberos_settings(props: Mapping[str, str], options: Mapping[str, str],
                       path: str) -> KerberosSettings:
    """Krb5LoginModule's keyTab and principal (ZooKeeper's server logs in with them), tried
    at once so that a wrong one stops start-up as ZooKeeper's Login does."""
    principal, keytab = options.get("principal"), options.get("keyTab")
    if not principal or not keytab:
        raise SaslSetupError(f"{jaas.JAAS_PROPERTY}: {path}: zkcompat's Krb5LoginModule needs "
                             f"useKeyTab=true, keyTab= and principal= (no ticket cache)")
    settings = KerberosSettings(principal, Path(keytab),
                                java_true(get_property(props, REMOVE_HOST_PROPERTY)),
                                java_true(get_property(props, REMOVE_REALM_PROPERTY)))
    try:
        from zkcompat.security.gss import GssapiAcceptor  # noqa: PLC0415 - needs gssapi

        GssapiAcceptor(settings)
    except ImportError as e:
        raise SaslSetupError(f"Kerberos needs the gssapi package (pip install "
                             f"'zkcompat[kerberos]'): {e}") from None
    except SaslError as e:
        raise SaslSetupError(str(e)) from None
    return settings


def is_valid_id(ident: str) -> bool:
    """SASLAuthenticationProvider.isValid: new KerberosName(id) does not throw."""
    return "@" not in ident or _KERBEROS_NAME.fullmatch(ident) is not None


class SaslStep(NamedTuple):
    token: bytes | None  # the SetSASLResponse's token
    ids: list[tuple[str, str]]  # auth ids the session gains now
    error: str | None  # the exchange failed: AUTHFAILED and close, this in the log


class SaslExchange:
    """One connection's SASL: step() answers each GetSASLRequest token."""

    def __init__(self, settings: SaslSettings, acceptor=None):
        self._settings = settings
        self._server = (DigestMd5Server(settings.users.get) if acceptor is None
                        else acceptor.start())

    def step(self, token: bytes) -> SaslStep:
        try:
            answer = self._server.evaluate(token)
        except SaslError as e:
            return SaslStep(None, [], str(e))
        if not self._server.complete:
            return SaslStep(answer, [], None)
        ident = authorization_id(self._server.username)
        ids = [(SCHEME, ident)]
        if ident == self._settings.super_user:
            ids.append((SUPER_SCHEME, SUPER_ID))
        return SaslStep(answer, ids, None)


def authorization_id(username: str) -> str:
    """SaslServerCallbackHandler.handleAuthorizeCallback: the authenticated user's short
    name by KerberosName. A DIGEST-MD5 user name without "@" is its own short name; one
    with a realm keeps it (the auth_to_local rules that would map it belong to Kerberos,
    which zkcompat does not have)."""
    return username


class SaslAuthenticator:
    """What a server's connections share: the settings, and an exchange per connection."""

    def __init__(self, settings: SaslSettings):
        self.settings = settings
        self._acceptor = None
        if settings.kerberos is not None:
            from zkcompat.security.gss import GssapiAcceptor  # noqa: PLC0415 - needs gssapi

            self._acceptor = GssapiAcceptor(settings.kerberos)

    def start(self) -> SaslExchange:
        return SaslExchange(self.settings, self._acceptor)
