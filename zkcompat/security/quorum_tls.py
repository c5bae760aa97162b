"""TLS between the servers of an ensemble, as ZooKeeper's QuorumX509Util, UnifiedServerSocket
and ZKTrustManager have it: sslQuorum, portUnification and the ssl.quorum.* settings read
into two SSLContexts, the test that tells a TLS ClientHello from plaintext, and the check
that a peer's certificate names the address it connects from or to."""

import ipaddress
import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography import x509
from cryptography.x509.oid import ExtensionOID, NameOID

from zkcompat.security import settings as tls_keys
from zkcompat.security import tls
from zkcompat.security.reload import ReloadingStores
from zkcompat.security.settings import get_property, java_true

log = logging.getLogger(__name__)

SSL_QUORUM = "sslQuorum"
PORT_UNIFICATION = "portUnification"
RELOAD_CERT_FILES = "sslQuorumReloadCertFiles"
# X509Util's default for <prefix>handshakeDetectionTimeoutMillis: how long an accepted
# connection may take to send the 5 bytes that say TLS or not, and then its handshake.
DETECTION_TIMEOUT_MS = 5000


@dataclass(frozen=True)
class QuorumTls:
    """What a server's quorum and election connections do. ssl_quorum: they open TLS, and
    the ports accept only TLS unless port_unification; port_unification alone: they open
    plaintext, and the ports take both (the middle step of a rolling change to TLS).
    With reload_cert_files (sslQuorumReloadCertFiles) `stores.run()` reads the ssl.quorum.*
    stores again when they change; each connection takes the contexts of its time."""

    settings: tls_keys.TlsSettings
    ssl_quorum: bool
    port_unification: bool
    stores: ReloadingStores[tuple[ssl.SSLContext, ssl.SSLContext]]
    detection_timeout_s: float
    reload_cert_files: bool = False

    @property
    def accepts_plaintext(self) -> bool:
        return self.port_unification or not self.ssl_quorum

    @property
    def server_context(self) -> ssl.SSLContext:
        return self.stores.current[0]

    @property
    def client_context(self) -> ssl.SSLContext:
        return self.stores.current[1]


def _contexts(settings: tls_keys.TlsSettings) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    return tls.server_context(settings), tls.client_context(settings)


def _parse_boolean(key: str, value: str | None) -> bool:
    """QuorumPeerConfig.parseBoolean: true or false in any case, anything else refused."""
    if value is None:
        return False
    word = value.strip().lower()
    if word not in ("true", "false"):
        raise tls_keys.SettingError(f"{key}: Invalid option {value.strip()} for {key}. "
                                    f"Choose 'true' or 'false.'")
    return word == "true"


def quorum_tls(props: Mapping[str, str]) -> QuorumTls | None:
    """sslQuorum, portUnification and ssl.quorum.* (QuorumPeerConfig, QuorumX509Util); None
    when neither is on: the quorum is plaintext and its stores are not read. A setting that
    gives no context raises tls_keys.SettingError or tls.TlsSetupError naming its key, so the
    server does not start, as ZooKeeper's does not."""
    ssl_quorum = java_true(get_property(props, SSL_QUORUM))
    unification = java_true(get_property(props, PORT_UNIFICATION))
    reload = _parse_boolean(RELOAD_CERT_FILES, props.get(RELOAD_CERT_FILES))
    if not (ssl_quorum or unification):
        return None
    settings = tls_keys.tls_settings(props, tls_keys.QUORUM_SSL_PREFIX)
    key = f"{tls_keys.QUORUM_SSL_PREFIX}handshakeDetectionTimeoutMillis"
    raw = get_property(props, key)
    try:
        timeout_ms = int(raw) if raw is not None and raw.strip() else DETECTION_TIMEOUT_MS
    except ValueError:
        raise tls_keys.SettingError(f"{key}: not a number: {raw!r}") from None
    if timeout_ms < 1:
        raise tls_keys.SettingError(f"{key}: must be positive, not {timeout_ms}")
    return QuorumTls(settings, ssl_quorum, unification,
                     ReloadingStores(settings, _contexts, "ssl.quorum"), timeout_ms / 1000,
                     reload)


def names_peer(cert_der: bytes, address: str, host_name: str | None = None) -> str | None:
    """ZKTrustManager.performHostVerification with ZKHostnameVerifier: None if the
    certificate names the peer's IP address (a subjectAltName iPAddress), or else
    `host_name` (a dNSName, '*' allowed as the whole leftmost label; the subject's most
    specific CN when there is no dNSName); otherwise why not. `host_name` is the name the
    connection was opened to, or the reverse lookup of an accepted peer's address when
    <prefix>allowReverseDnsLookup is on."""
    try:
        cert = x509.load_der_x509_certificate(cert_der)
    except ValueError as e:
        return f"unreadable certificate: {e}"
    try:
        san = cert.extensions.get_extension_for_oid(ExtensionOID.SUBJECT_ALTERNATIVE_NAME).value
        ips = san.get_values_for_type(x509.IPAddress)
        dns = san.get_values_for_type(x509.DNSName)
    except x509.ExtensionNotFound:
        ips, dns = [], []
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        ip = None
    if ip is not None and ip in ips:
        return None
    if host_name:
        names = dns or [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
                        ][-1:]
        if any(_dns_match(str(n), host_name) for n in names):
            return None
        return (f"certificate names neither {address} nor {host_name} (iPAddress "
                f"{[str(i) for i in ips]}, names {[str(n) for n in names]})")
    return f"certificate does not name {address} (iPAddress {[str(i) for i in ips]})"


def _dns_match(pattern: str, host: str) -> bool:
    pattern, host = pattern.lower().rstrip("."), host.lower().rstrip(".")
    if pattern == host:
        return True
    if not pattern.startswith("*."):
        return False
    head, _, rest = host.partition(".")
    return bool(head) and rest == pattern[2:] and "." in rest
