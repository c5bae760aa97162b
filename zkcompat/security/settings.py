"""ZooKeeper's ssl.* client-port settings and auth providers, read as X509Util, KeyStoreFileType
and QuorumPeerConfig.configureSSLAuth read them; a bad value is a SettingError naming its key."""

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

# zoo.cfg keys become "zookeeper."-prefixed system properties; zkcompat reads either form.
PROPERTY_PREFIX = "zookeeper."
SSL_PREFIX = "ssl."  # ClientX509Util.getConfigPrefix, less "zookeeper."
QUORUM_SSL_PREFIX = "ssl.quorum."  # QuorumX509Util's: the ensemble's TLS, not the client port's
# The keys that turn TLS on between servers (QuorumPeerConfig), with or without "zookeeper.".
QUORUM_SECURITY_KEYS = frozenset(("sslQuorum", "portUnification", "zookeeper.sslQuorum",
                                  "zookeeper.portUnification", "sslQuorumReloadCertFiles"))
AUTH_PROVIDER_PREFIX = "authProvider."  # ProviderRegistry.AUTHPROVIDER_PROPERTY_PREFIX
X509_SCHEME = "x509"
# X509Util.DEFAULT_PROTOCOL on a Java that has TLSv1.3 (every Java ZooKeeper 3.9 runs on).
DEFAULT_PROTOCOL = "TLSv1.3"
PROTOCOLS = ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")
# ssl.enabledProtocols left unset: ClientX509Util.getEnabledProtocols enables ssl.protocol
# alone (so a 3.9 server with the defaults speaks TLSv1.3 only, and a 3.8 Java client, whose
# default is TLSv1.2, cannot connect to it: ZOOKEEPER-5053). "TLS" is not a protocol Netty can
# enable (3.9 fails on it); zkcompat reads it as what Java's "TLS" context enables.
DEFAULT_ENABLED_PROTOCOLS = {"TLS": ("TLSv1.3", "TLSv1.2")}
# The authentication providers zkcompat has, by the class names authProvider.N gives them.
PROVIDER_CLASSES = {
    "org.apache.zookeeper.server.auth.X509AuthenticationProvider": X509_SCHEME,
    "org.apache.zookeeper.server.auth.DigestAuthenticationProvider": "digest",
    "org.apache.zookeeper.server.auth.IPAuthenticationProvider": "ip",
    "org.apache.zookeeper.server.auth.SASLAuthenticationProvider": "sasl",
}
# A system property ZooKeeper reads as "zookeeper.X509AuthenticationProvider.superUser"; in
# zoo.cfg, like any key it does not know, it becomes that property.
X509_SUPER_USER = "X509AuthenticationProvider.superUser"
X509_PROVIDER_CLASS = "org.apache.zookeeper.server.auth.X509AuthenticationProvider"
SERVER_CNXN_FACTORIES = ("org.apache.zookeeper.server.NettyServerCnxnFactory",
                         "org.apache.zookeeper.server.NIOServerCnxnFactory")


class SettingError(ValueError):
    """A setting zkcompat cannot use; the message starts with the key."""


class StoreType(StrEnum):
    """KeyStoreFileType: JKS, PEM and PKCS12 (BCFKS needs BouncyCastle: refused here)."""

    JKS = "JKS"
    PEM = "PEM"
    PKCS12 = "PKCS12"


# KeyStoreFileType's default file extensions, which decide a type left unset.
_EXTENSIONS = {".jks": StoreType.JKS, ".pem": StoreType.PEM, ".p12": StoreType.PKCS12}


class ClientAuth(StrEnum):
    """X509Util.ClientAuth: whether the server asks for a client certificate."""

    NONE = "none"
    WANT = "want"
    NEED = "need"


@dataclass(frozen=True)
class Store:
    """A key or trust store as its four settings name it."""

    location: Path
    password: str
    type: StoreType
    setting: str = "ssl.keyStore"  # its settings' common part, for messages naming a key


@dataclass(frozen=True)
class TlsSettings:
    key_store: Store | None
    trust_store: Store | None  # None: the system's CAs (Java's default trust store)
    protocol: str
    enabled_protocols: tuple[str, ...]
    ciphersuites: tuple[str, ...] | None  # None: X509Util's defaults
    client_auth: ClientAuth
    # The peer's certificate must name its address: on the quorum both ways (QuorumX509Util),
    # on the client port never (ClientX509Util does not check clients): kept for reading.
    hostname_verification: bool
    auth_provider: str  # the scheme that authenticates a client certificate
    super_user: str | None  # X509AuthenticationProvider.superUser: this x509 id is super too
    # ZKTrustManager: an address the certificate does not name may be looked up (3.9).
    allow_reverse_dns_lookup: bool = False
    prefix: str = SSL_PREFIX  # whose settings these are, for messages naming a key


def ssl_key(key: str) -> str | None:
    """The client-port ssl.* setting a zoo.cfg key names ("ssl.clientAuth" or
    "zookeeper.ssl.clientAuth" -> "clientAuth"), or None."""
    if key.startswith(PROPERTY_PREFIX):
        key = key[len(PROPERTY_PREFIX):]
    if key.startswith(SSL_PREFIX) and not key.startswith(QUORUM_SSL_PREFIX):
        return key[len(SSL_PREFIX):]
    return None


def get_property(props: Mapping[str, str], key: str) -> str | None:
    """A setting zoo.cfg may give as `key` or as the system property "zookeeper." + key
    (QuorumPeerConfig sets unknown keys as such properties)."""
    value = props.get(key)
    return props.get(PROPERTY_PREFIX + key) if value is None else value


def java_true(value: str | None) -> bool:
    """Boolean.getBoolean / parseBoolean of a zoo.cfg value, trimmed as QuorumPeerConfig
    trims it: "true" in any case, nothing else."""
    return value is not None and value.strip().lower() == "true"


def store_type(key: str, value: str | None, location: str) -> StoreType:
    """KeyStoreFileType.fromPropertyValueOrFileName: the type given (any case), else the one
    the file name's extension implies."""
    if value:
        try:
            return StoreType(value.upper())
        except ValueError:
            raise SettingError(f"{key}: Bad value for {key}: {value} (zkcompat reads "
                               f"{', '.join(StoreType)})") from None
    dot = location.rfind(".")
    found = _EXTENSIONS.get(location[dot:]) if dot >= 0 else None
    if found is None:
        raise SettingError(f"{key}: Unable to auto-detect store file type from file name: "
                           f"{location}")
    return found


def _password(props: Mapping[str, str], prefix: str, name: str) -> str:
    """X509Util.getPasswordFromConfigPropertyOrFile: passwordPath, if set, wins."""
    path = get_property(props, f"{prefix}{name}.passwordPath") or ""
    if not path:
        return get_property(props, f"{prefix}{name}.password") or ""
    try:
        secret = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise SettingError(f"{prefix}{name}.passwordPath: cannot read {path}: {e}") from None
    return secret.removesuffix("\n")


def _store(props: Mapping[str, str], prefix: str, name: str) -> Store | None:
    location = get_property(props, f"{prefix}{name}.location") or ""
    if not location:
        return None
    key = f"{prefix}{name}.type"
    kind = store_type(key, get_property(props, key), location)
    return Store(Path(location), _password(props, prefix, name), kind, f"{prefix}{name}")


def _protocols(key: str, value: str) -> tuple[str, ...]:
    names = tuple(p.strip() for p in value.split(",") if p.strip())
    unknown = [p for p in names if p not in PROTOCOLS]
    if unknown or not names:
        raise SettingError(f"{key}: unsupported protocol(s) {unknown or value!r} (zkcompat "
                           f"has {', '.join(PROTOCOLS)})")
    return names


def tls_settings(props: Mapping[str, str], prefix: str = SSL_PREFIX) -> TlsSettings:
    """The TLS settings under `prefix` in zoo.cfg's properties: ssl.* for the client port
    (ClientX509Util), ssl.quorum.* for the ensemble's own connections (QuorumX509Util)."""
    protocol = (get_property(props, f"{prefix}protocol") or DEFAULT_PROTOCOL).strip()
    if protocol not in DEFAULT_ENABLED_PROTOCOLS and protocol not in PROTOCOLS:
        raise SettingError(f"{prefix}protocol: {protocol} SSLContext not available")
    enabled = get_property(props, f"{prefix}enabledProtocols")
    enabled_protocols = (_protocols(f"{prefix}enabledProtocols", enabled) if enabled is not None
                         else DEFAULT_ENABLED_PROTOCOLS.get(protocol, (protocol,)))
    suites = get_property(props, f"{prefix}ciphersuites")
    ciphersuites = None
    if suites is not None:
        ciphersuites = tuple(s.strip() for s in suites.split(",") if s.strip())
    auth = (get_property(props, f"{prefix}clientAuth") or "").strip()
    try:
        client_auth = ClientAuth(auth.lower()) if auth else ClientAuth.NEED
    except ValueError:
        raise SettingError(f"{prefix}clientAuth: No enum constant ClientAuth.{auth.upper()} "
                           f"(none, want or need)") from None
    verify = (get_property(props, f"{prefix}hostnameVerification")
              or "true").strip().lower() != "false"
    reverse = java_true(get_property(props, f"{prefix}allowReverseDnsLookup"))
    return TlsSettings(
        key_store=_store(props, prefix, "keyStore"),
        trust_store=_store(props, prefix, "trustStore"),
        protocol=protocol,
        enabled_protocols=enabled_protocols,
        ciphersuites=ciphersuites,
        client_auth=client_auth,
        hostname_verification=verify,
        auth_provider=(get_property(props, "ssl.authProvider") or X509_SCHEME).strip(),
        super_user=get_property(props, X509_SUPER_USER),
        allow_reverse_dns_lookup=reverse,
        prefix=prefix,
    )


def auth_providers(props: Mapping[str, str], secure: bool) -> frozenset[str]:
    """The schemes registered beyond ip and digest (ProviderRegistry): those authProvider.N
    names, and x509 on a server with a secure client port unless ssl.authProvider names
    another (configureSSLAuth). A class zkcompat lacks is refused."""
    schemes = set()
    provider_keys = {}
    for key, value in props.items():
        bare = key[len(PROPERTY_PREFIX):] if key.startswith(PROPERTY_PREFIX) else key
        if not bare.startswith(AUTH_PROVIDER_PREFIX):
            continue
        scheme = PROVIDER_CLASSES.get(value.strip())
        if scheme is None:
            raise SettingError(f"{key}: zkcompat has no authentication provider "
                               f"{value.strip()} (it has {', '.join(PROVIDER_CLASSES)})")
        schemes.add(scheme)
        provider_keys[bare[len(AUTH_PROVIDER_PREFIX):]] = scheme
    if secure:
        chosen = (get_property(props, "ssl.authProvider") or X509_SCHEME).strip()
        if chosen not in provider_keys and chosen != X509_SCHEME:
            raise SettingError(f"ssl.authProvider: No auth provider configured for the SSL "
                               f"authentication scheme '{chosen}'.")
        if chosen != X509_SCHEME:
            # ZooKeeper looks the provider up by scheme, and X509AuthenticationProvider's is
            # x509: its NettyServerCnxnFactory then fails to start.
            raise SettingError(f"ssl.authProvider: Could not create SSLContext with specified "
                               f"auth provider: {chosen}")
        schemes.add(X509_SCHEME)
    return frozenset(schemes - {"ip", "digest"})


def server_cnxn_factory(key: str, value: str) -> str:
    """serverCnxnFactory: ZooKeeper's Netty factory (which its TLS needs) or NIO one; both
    mean the same server here."""
    name = value.strip()
    if name not in SERVER_CNXN_FACTORIES:
        raise SettingError(f"{key}: {name} is not one of {', '.join(SERVER_CNXN_FACTORIES)}")
    return name
