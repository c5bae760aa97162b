"""Which sessions may make requests at all, as ZooKeeper 3.7+'s AuthenticationHelper decides:
enforce.auth.enabled with enforce.auth.schemes (or the older sessionRequireClientSASLAuth,
which means sasl alone), and zookeeper.allowSaslFailedClients for a failed SASL exchange."""

from collections.abc import Mapping
from dataclasses import dataclass

from zkcompat.security.settings import PROPERTY_PREFIX, get_property

ENFORCE_AUTH_ENABLED = "enforce.auth.enabled"  # AuthenticationHelper.ENFORCE_AUTH_ENABLED
ENFORCE_AUTH_SCHEMES = "enforce.auth.schemes"  # AuthenticationHelper.ENFORCE_AUTH_SCHEMES
# AuthenticationHelper.SESSION_REQUIRE_CLIENT_SASL_AUTH: true means enforce.auth for sasl.
SESSION_REQUIRE_CLIENT_SASL_AUTH = "sessionRequireClientSASLAuth"
ALLOW_SASL_FAILED_CLIENTS = "allowSaslFailedClients"  # ZooKeeperServer.ALLOW_SASL_FAILED_CLIENTS
PROPERTIES = (ENFORCE_AUTH_ENABLED, ENFORCE_AUTH_SCHEMES, SESSION_REQUIRE_CLIENT_SASL_AUTH,
              ALLOW_SASL_FAILED_CLIENTS)
SASL_SCHEME = "sasl"  # AuthenticationHelper.SASL_AUTH_SCHEME
ALWAYS_REGISTERED = frozenset(("ip", "digest"))  # ProviderRegistry's own providers


class EnforceSetupError(ValueError):
    """What AuthenticationHelper throws at start-up (IllegalArgumentException)."""


@dataclass(frozen=True)
class AuthEnforcement:
    schemes: frozenset[str]  # a session needs an id of one of these; empty: not enforced
    allow_sasl_failed_clients: bool  # a failed SASL exchange leaves the session open

    @property
    def sasl_required(self) -> bool:
        """AuthenticationHelper.isSaslAuthRequired: a failed SASL exchange is then
        SESSIONCLOSEDREQUIRESASLAUTH, and allowSaslFailedClients does not apply."""
        return SASL_SCHEME in self.schemes


def _java_boolean(value: str | None) -> bool:
    """Boolean.parseBoolean of a zoo.cfg value (QuorumPeerConfig trims it first)."""
    return value is not None and value.strip().lower() == "true"


def _java_split(value: str) -> list[str]:
    """String.split(","): trailing empty strings dropped, but "" is [""] (which no provider
    has a scheme for)."""
    if "," not in value:
        return [value]
    parts = value.split(",")
    while parts and not parts[-1]:
        parts.pop()
    return parts


def auth_enforcement(props: Mapping[str, str],
                     registered: frozenset[str]) -> AuthEnforcement | None:
    """AuthenticationHelper.initConfigurations and validateConfiguredProperties, with the
    schemes `registered` beyond ip and digest (authProvider.N, x509 on a secure port).
    None for ZooKeeper's defaults (nothing enforced, failed SASL clients closed), so that
    a connection's hot path tests one attribute."""
    allow_failed = _java_boolean(get_property(props, ALLOW_SASL_FAILED_CLIENTS))
    if _java_boolean(get_property(props, SESSION_REQUIRE_CLIENT_SASL_AUTH)):
        enabled, schemes = True, [SASL_SCHEME]
    else:
        enabled = _java_boolean(get_property(props, ENFORCE_AUTH_ENABLED))
        listed = get_property(props, ENFORCE_AUTH_SCHEMES)
        schemes = [] if listed is None else [s.strip() for s in _java_split(listed.strip())]
    if not enabled:
        return AuthEnforcement(frozenset(), True) if allow_failed else None
    if not schemes:
        raise EnforceSetupError(f"{PROPERTY_PREFIX}{ENFORCE_AUTH_ENABLED} is true "
                                f"{PROPERTY_PREFIX}{ENFORCE_AUTH_SCHEMES} must be  configured.")
    for scheme in schemes:
        if scheme not in registered and scheme not in ALWAYS_REGISTERED:
            raise EnforceSetupError(f"Authentication scheme {scheme} is not available.")
    return AuthEnforcement(frozenset(schemes), allow_failed)


def is_authenticated(schemes: frozenset[str], auth_ids: list[tuple[str, str]]) -> bool:
    """AuthenticationHelper.isCnxnAuthenticated: any id of an enforced scheme."""
    return any(scheme in schemes for scheme, _ in auth_ids)
