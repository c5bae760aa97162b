"""Config, every setting of one server, and load(): zoo.cfg and dataDir/myid read as
ZooKeeper reads them (QuorumPeerConfig), and under zoo.cfg the system properties of the JVM
flags (-D in SERVER_JVMFLAGS, JVMFLAGS or java.env: config/sysprops.py).

Unknown keys are logged and ignored; the keys ZooKeeper would obey and zkcompat does not
(config/status.py) are named in one start-up warning; a bad value stops start-up with a message
that names the key. Defaults are ZooKeeper's, except where a standalone zkcompat needs one
ZooKeeper leaves unset (dataDir: ./data).
"""

import difflib
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from zkcompat.config import limits as client_limits
from zkcompat.config import status as config_status
from zkcompat.config import sysprops
from zkcompat.config.dynamic import read_dynamic_file
from zkcompat.config.properties import ConfigError, parse_int, parse_port, parse_properties
from zkcompat.config.security import security_key, setup_security
from zkcompat.config.servers import (
    WILDCARD_ADDRESS,
    LearnerType,
    QuorumServer,
    peer_type,
    setup_quorum,
)
from zkcompat.security import settings as security

# Every module of config/ logs as "zkcompat.config": the one name operators filter on.
log = logging.getLogger("zkcompat.config")

TICK_TIME_DEFAULT_MS = 2000  # ZooKeeperServer.DEFAULT_TICK_TIME
JUTE_MAXBUFFER_DEFAULT_BYTES = 0xFFFFF  # jute.maxbuffer
MAX_CLIENT_CNXNS_DEFAULT = 60  # per client address
# A session's unanswered requests at which its connection stops reading, until half are
# answered: zkcompat's own bound, beside ZooKeeper's server-wide globalOutstandingLimit.
OUTSTANDING_REQUESTS_MAX = 1000
ELECTION_ALG = 3  # QuorumPeerConfig: "Only 3 is supported" (FastLeaderElection)
CNX_TIMEOUT_DEFAULT_MS = 5000  # QuorumCnxManager.cnxTO
ELECTION_PORT_BIND_RETRY_DEFAULT = 3  # QuorumCnxManager.Listener.DEFAULT_PORT_BIND_MAX_RETRY
# JettyAdminServer.DEFAULT_PORT and DEFAULT_COMMAND_URL. ZooKeeper binds 0.0.0.0
# (DEFAULT_ADDRESS); zkcompat binds loopback unless admin.serverAddress says otherwise.
ADMIN_SERVER_PORT_DEFAULT = 8080
ADMIN_SERVER_ADDRESS_DEFAULT = "127.0.0.1"
ADMIN_COMMAND_URL_DEFAULT = "/commands"
# metricsProvider.className values: the Prometheus provider turns /metrics on; the default
# provider (in-process counters only, what mntr shows) leaves it off.
PROMETHEUS_PROVIDER = "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider"
DEFAULT_METRICS_PROVIDER = "org.apache.zookeeper.metrics.impl.DefaultMetricsProvider"
METRICS_HTTP_PORT_DEFAULT = 7000  # PrometheusMetricsProvider's httpPort
METRICS_HTTP_HOST_DEFAULT = "127.0.0.1"  # ZooKeeper's is 0.0.0.0, as for the AdminServer
# How like a known key an unknown one must be to be named as its likely spelling
# (difflib's ratio: tickTme/tickTime 0.93; noSuchSetting/any key at most 0.49).
DID_YOU_MEAN_CUTOFF = 0.8


@dataclass
class Config:
    tick_time_ms: int = TICK_TIME_DEFAULT_MS
    data_dir: Path = Path("data")
    client_port: int = 2181
    client_port_address: str = "0.0.0.0"
    max_client_cnxns: int = MAX_CLIENT_CNXNS_DEFAULT
    min_session_timeout_ms: int = -1  # -1: 2 x tickTime
    max_session_timeout_ms: int = -1  # -1: 20 x tickTime
    four_letter_words: frozenset[str] = frozenset({"srvr"})
    jute_maxbuffer: int = JUTE_MAXBUFFER_DEFAULT_BYTES
    super_digest: str | None = None
    extended_types_enabled: bool = False
    enforce_quota: bool = False
    container_check_interval_ms: int = 60_000  # znode.container.checkIntervalMs
    container_max_per_minute: int = 10_000  # znode.container.maxPerMinute
    container_max_never_used_ms: int = 300_000  # znode.container.maxNeverUsedIntervalMs
    outstanding_requests_max: int = OUTSTANDING_REQUESTS_MAX
    # globalOutstandingLimit, maxCnxns, connection_throttle_*, request_throttle_*
    limits: client_limits.LimitSettings = field(default_factory=client_limits.LimitSettings)
    server_id: int = 0  # dataDir/myid; 0: none (ZooKeeper's UNSET_SERVERID is -1)
    servers: dict[int, QuorumServer] = field(default_factory=dict)  # server.N lines by N
    init_limit: int = 0  # ticks; 0: unset, which an ensemble refuses
    sync_limit: int = 0  # ticks; 0: unset, which an ensemble refuses
    standalone_enabled: bool = True
    reconfig_enabled: bool = False  # reconfigEnabled: dynamic reconfiguration
    dynamic_config_file: Path | None = None  # dynamicConfigFile: where server.N lines are
    config_version: int = 0  # the membership's version: the dynamic file's, else 0
    membership_keys: list[str] = field(default_factory=list)  # its file's keys, in order
    peer_type: LearnerType = LearnerType.PARTICIPANT  # as this server's server.N line says
    readonly_mode_enabled: bool = False
    digest_enabled: bool = True  # zookeeper.digest.enabled
    election_alg: int = ELECTION_ALG
    quorum_listen_on_all_ips: bool = False
    sync_enabled: bool = True  # an observer logs and snapshots what it learns
    # quorumSync (not ZooKeeper's): the leader confirms its leadership with a quorum round
    # before it answers a sync, so sync-then-read is linearizable (ZOOKEEPER-1675).
    quorum_sync: bool = False
    leader_serves: bool = True  # zookeeper.leaderServes
    cnx_timeout_ms: int = CNX_TIMEOUT_DEFAULT_MS  # zookeeper.cnxTimeout
    election_port_bind_retry: int = ELECTION_PORT_BIND_RETRY_DEFAULT  # 0: retry forever
    data_log_dir: Path | None = None
    force_sync: bool = True
    snap_count: int = 100_000
    snap_retain_count: int = 3
    purge_interval_hours: int = 0
    admin_enable_server: bool = True  # admin.enableServer
    admin_server_address: str = ADMIN_SERVER_ADDRESS_DEFAULT
    admin_server_port: int = ADMIN_SERVER_PORT_DEFAULT
    admin_command_url: str = ADMIN_COMMAND_URL_DEFAULT
    metrics_enabled: bool = False  # metricsProvider.className is the Prometheus provider
    metrics_http_host: str = METRICS_HTTP_HOST_DEFAULT
    metrics_http_port: int = METRICS_HTTP_PORT_DEFAULT
    metrics_export_jvm_info: bool = True  # here: the process and Python collectors
    secure_client_port: int | None = None  # secureClientPort: TLS, on the same pipeline
    secure_client_port_address: str = WILDCARD_ADDRESS
    client_port_enabled: bool = True  # False: secureClientPort without clientPort
    # client.portUnification: clientPort takes TLS too, told apart by the first bytes.
    client_port_unification: bool = False
    client_cert_reload: bool = False  # client.certReload: ssl.* stores read when they change
    # The ssl.* settings, with a secure port or a unified client port.
    tls: security.TlsSettings | None = None
    # sslQuorum / portUnification and the ssl.quorum.* settings (QuorumTls), else None.
    quorum_tls: object | None = None
    auth_schemes: frozenset[str] = frozenset()  # registered beyond ip and digest (x509, sasl)
    sasl: object | None = None  # security.sasl.SaslSettings: a JAAS Server section's users
    # security.quorum_sasl_settings.QuorumSaslSettings with quorum.auth.enableSasl=true, else None.
    quorum_sasl: object | None = None
    # security.enforce.AuthEnforcement: enforce.auth.*, allowSaslFailedClients
    auth_enforcement: object | None = None
    source: Path | None = None
    raw: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.finish()

    def finish(self) -> "Config":
        if self.min_session_timeout_ms == -1:
            self.min_session_timeout_ms = 2 * self.tick_time_ms
        if self.max_session_timeout_ms == -1:
            self.max_session_timeout_ms = 20 * self.tick_time_ms
        if self.min_session_timeout_ms > self.max_session_timeout_ms:
            raise ConfigError("minSessionTimeout must not be larger than maxSessionTimeout")
        return self

    @property
    def voters(self) -> frozenset[int]:
        """The sids of the participants: the servers whose votes and ACKs count."""
        return frozenset(s.sid for s in self.servers.values()
                         if s.role == LearnerType.PARTICIPANT)

    @property
    def observers(self) -> frozenset[int]:
        return frozenset(s.sid for s in self.servers.values() if s.role == LearnerType.OBSERVER)

    @property
    def is_ensemble(self) -> bool:
        """Replicated mode, as QuorumPeerConfig.isDistributed decides it: more than one
        participant, or any server.N line with standaloneEnabled=false."""
        return bool(self.servers) and (not self.standalone_enabled or len(self.voters) > 1)

    @property
    def quorum_size(self) -> int:
        """Votes a proposal or an election needs: more than half the participants
        (QuorumMaj.containsQuorum); 1 for a standalone server."""
        return len(self.voters) // 2 + 1 if self.is_ensemble else 1


_BOOLEAN_WORDS = ("true", "false", "yes", "no")


def _boolean_word(key: str, value: str) -> str:
    v = value.strip()
    if v.lower() not in _BOOLEAN_WORDS:
        raise ConfigError(f"{key}: {value!r} is not one of {', '.join(_BOOLEAN_WORDS)}")
    return v


def _java_boolean(key: str, value: str) -> bool:
    """Boolean.parseBoolean, as ZooKeeper reads extendedTypesEnabled and enforceQuota:
    "true" in any case is true, the other words false (a non-word is refused)."""
    return _boolean_word(key, value).lower() == "true"


def _force_sync(key: str, value: str) -> bool:
    """ZooKeeper syncs unless zookeeper.forceSync is exactly "no" (FileTxnLog); the leader
    serves clients unless zookeeper.leaderServes is exactly "no" (Leader.lead)."""
    return _boolean_word(key, value) != "no"


def _quorum_boolean(key: str, value: str) -> bool:
    """QuorumPeerConfig.parseBoolean: true or false in any case, nothing else."""
    v = value.strip().lower()
    if v not in ("true", "false"):
        raise ConfigError(f"{key}: Invalid option {value.strip()} for {key}. "
                          "Choose 'true' or 'false.'")
    return v == "true"


def _admin_enabled(key: str, value: str) -> bool:
    """AdminServerFactory: the server starts when the property equals "true", exactly
    (System.getProperty(...).equals("true")): "TRUE" or "yes" turn it off."""
    return value.strip() == "true"


def _command_url(key: str, value: str) -> str:
    url = value.strip()
    if not url.startswith("/"):
        raise ConfigError(f"{key}: {url!r} is not a path (it must start with /)")
    return url.rstrip("/") or "/"


def _metrics_provider(key: str, value: str) -> bool:
    name = value.strip()
    if name == PROMETHEUS_PROVIDER:
        return True
    if name in ("", DEFAULT_METRICS_PROVIDER):
        return False
    raise ConfigError(f"{key}: Cannot boot MetricsProvider {name} (zkcompat has "
                      f"{PROMETHEUS_PROVIDER} and {DEFAULT_METRICS_PROVIDER})")


def _election_alg(key: str, value: str) -> int:
    n = parse_int(key, value, minimum=-(2**31))
    if n != ELECTION_ALG:
        raise ConfigError(f"{key}: Invalid electionAlg value. Only 3 is supported.")
    return n


FOUR_LETTER_WORDS = frozenset(
    "ruok srvr stat conf envi mntr cons wchs wchc wchp dump reqs crst srst dirs isro gtmk stmk "
    "hash".split()
)


def _whitelist(key: str, value: str) -> frozenset[str]:
    # srvr is always allowed (FourLetterCommands.resetWhiteList): `zkServer.sh status` uses it.
    words = {w.strip() for w in value.split(",") if w.strip()} | {"srvr"}
    if "*" in words:
        return FOUR_LETTER_WORDS
    unknown = words - FOUR_LETTER_WORDS
    if unknown:
        log.warning("event=config_unknown_4lw key=%s words=%s", key, ",".join(sorted(unknown)))
    return frozenset(words & FOUR_LETTER_WORDS)


# zoo.cfg keys this server uses, and how each becomes a Config field.
_KEYS = {
    "tickTime": ("tick_time_ms", lambda k, v: parse_int(k, v, 1)),
    "dataDir": ("data_dir", lambda k, v: Path(v.strip())),
    "clientPort": ("client_port", parse_port),
    "clientPortAddress": ("client_port_address", lambda k, v: v.strip()),
    "maxClientCnxns": ("max_client_cnxns", lambda k, v: parse_int(k, v, 0)),
    "minSessionTimeout": ("min_session_timeout_ms", lambda k, v: parse_int(k, v, -1)),
    "maxSessionTimeout": ("max_session_timeout_ms", lambda k, v: parse_int(k, v, -1)),
    "4lw.commands.whitelist": ("four_letter_words", _whitelist),
    "jute.maxbuffer": ("jute_maxbuffer", lambda k, v: parse_int(k, v, 1)),
    "superDigest": ("super_digest", lambda k, v: v.strip()),
    # ZooKeeper turns unknown zoo.cfg keys into "zookeeper."-prefixed system properties,
    # so users set the super digest either way.
    "DigestAuthenticationProvider.superDigest": ("super_digest", lambda k, v: v.strip()),
    "zookeeper.DigestAuthenticationProvider.superDigest": ("super_digest", lambda k, v: v.strip()),
    "dataLogDir": ("data_log_dir", lambda k, v: Path(v.strip())),
    "forceSync": ("force_sync", _force_sync),
    "zookeeper.forceSync": ("force_sync", _force_sync),
    "snapCount": ("snap_count", lambda k, v: parse_int(k, v, 2)),
    "zookeeper.snapCount": ("snap_count", lambda k, v: parse_int(k, v, 2)),
    # ZooKeeper raises a retain count below 3 to 3 (DatadirCleanupManager).
    "autopurge.snapRetainCount": ("snap_retain_count", lambda k, v: max(3, parse_int(k, v, 1))),
    "autopurge.purgeInterval": ("purge_interval_hours", lambda k, v: parse_int(k, v, 0)),
    "extendedTypesEnabled": ("extended_types_enabled", _java_boolean),
    "zookeeper.extendedTypesEnabled": ("extended_types_enabled", _java_boolean),
    "enforceQuota": ("enforce_quota", _java_boolean),
    "zookeeper.enforceQuota": ("enforce_quota", _java_boolean),
    "znode.container.checkIntervalMs": (
        "container_check_interval_ms", lambda k, v: parse_int(k, v, 1)),
    "znode.container.maxPerMinute": ("container_max_per_minute", lambda k, v: parse_int(k, v, 1)),
    "znode.container.maxNeverUsedIntervalMs": (
        "container_max_never_used_ms", lambda k, v: parse_int(k, v, 0)),
    "initLimit": ("init_limit", lambda k, v: parse_int(k, v, 0)),
    "syncLimit": ("sync_limit", lambda k, v: parse_int(k, v, 0)),
    "standaloneEnabled": ("standalone_enabled", _quorum_boolean),
    "reconfigEnabled": ("reconfig_enabled", _quorum_boolean),
    "dynamicConfigFile": ("dynamic_config_file", lambda k, v: Path(v.strip())),
    "peerType": ("peer_type", peer_type),
    "electionAlg": ("election_alg", _election_alg),
    "quorumListenOnAllIPs": ("quorum_listen_on_all_ips", _quorum_boolean),
    "syncEnabled": ("sync_enabled", _quorum_boolean),
    "quorumSync": ("quorum_sync", _quorum_boolean),
    # The rest are system properties in ZooKeeper, which zoo.cfg sets with or without the
    # "zookeeper." prefix (unknown keys become zookeeper.KEY). readonlymode.enabled, like
    # jute.maxbuffer and znode.container.*, is the exception (sysprops.UNPREFIXED): only
    # -Dreadonlymode.enabled sets it in ZooKeeper; here zoo.cfg can too.
    "digest.enabled": ("digest_enabled", _java_boolean),
    "zookeeper.digest.enabled": ("digest_enabled", _java_boolean),
    "leaderServes": ("leader_serves", _force_sync),
    "zookeeper.leaderServes": ("leader_serves", _force_sync),
    "cnxTimeout": ("cnx_timeout_ms", lambda k, v: parse_int(k, v, 0)),
    "zookeeper.cnxTimeout": ("cnx_timeout_ms", lambda k, v: parse_int(k, v, 0)),
    "electionPortBindRetry": ("election_port_bind_retry", lambda k, v: parse_int(k, v, 0)),
    "zookeeper.electionPortBindRetry": (
        "election_port_bind_retry", lambda k, v: parse_int(k, v, 0)),
    "readonlymode.enabled": ("readonly_mode_enabled", _java_boolean),
    "metricsProvider.className": ("metrics_enabled", _metrics_provider),
    "metricsProvider.httpHost": ("metrics_http_host", lambda k, v: v.strip()),
    "metricsProvider.httpPort": ("metrics_http_port", parse_port),
    "metricsProvider.exportJvmInfo": ("metrics_export_jvm_info", _java_boolean),
}
# The AdminServer's settings are system properties (zookeeper.admin.*) in ZooKeeper, which
# zoo.cfg sets with or without the prefix.
for _key, _field in (("enableServer", ("admin_enable_server", _admin_enabled)),
                     ("serverAddress", ("admin_server_address", lambda k, v: v.strip())),
                     ("serverPort", ("admin_server_port", parse_port)),
                     ("commandURL", ("admin_command_url", _command_url))):
    _KEYS[f"admin.{_key}"] = _KEYS[f"zookeeper.admin.{_key}"] = _field
# Keys of features zkcompat does not have, whose absence would silently change the quorum.
_REFUSED = {
    "group": "hierarchical quorums (group.N, weight.N) are not supported",
    "weight": "hierarchical quorums (group.N, weight.N) are not supported",
}


def load(path: Path | None = None, overrides: dict[str, str] | None = None,
         environ: Mapping[str, str] | None = None) -> Config:
    """zoo.cfg (overrides win), dataDir/myid, and under them the system properties of the
    JVM flags in `environ` (os.environ by default; config/sysprops.py)."""
    environ = os.environ if environ is None else environ
    props = parse_properties(Path(path).read_text()) if path is not None else {}
    props.update(overrides or {})
    jvm = sysprops.read(environ, _conf_dir(path, environ), props, _reads)
    values: dict = {}
    not_implemented: list[str] = []
    for key, value in props.items():
        refused = _REFUSED.get(key) or _REFUSED.get(key.split(".", 1)[0])
        if refused:
            raise ConfigError(f"{key}: {refused}")
        if key in _KEYS:
            name, conv = _KEYS[key]
            values[name] = conv(key, value)
        elif (config_status.lookup(key) is None and not key.startswith("server.")
              and not security_key(key) and client_limits.limit_key(key) is None):
            hint = _did_you_mean(key)
            log.warning("event=config_unknown_key key=%s%s", key,
                        f" did_you_mean={hint}" if hint else "")
        if config_status.not_implemented(key, value):
            not_implemented.append(key)
    for key, value in jvm.settings.items():
        name, conv = _KEYS.get(key, (None, None))
        if name is not None and name not in values:  # zoo.cfg set it under another key
            values[name] = conv(f"-D{jvm.flags[key]}", value)
    not_implemented += jvm.not_implemented
    if not_implemented:
        # One line an operator can read at start-up: everything ZooKeeper would obey here
        # and zkcompat will not (README, "zoo.cfg settings", says why for each).
        log.warning("event=config_not_implemented keys=%s", ",".join(sorted(not_implemented)))
    settings = {**jvm.settings, **props}
    membership_keys = list(props)
    if values.get("dynamic_config_file") is not None:
        # QuorumPeerConfig.parse: the server.N lines come from the dynamic file alone.
        servers, values["config_version"] = read_dynamic_file(values["dynamic_config_file"])
        settings = {k: v for k, v in settings.items() if not k.startswith("server.")}
        settings.update(servers)
        membership_keys = [*servers, "version"]
    cfg = Config(**values, limits=_limits(settings), source=path, raw=props,
                 membership_keys=membership_keys)
    setup_quorum(cfg, settings, "clientPort" in props)
    setup_security(cfg, settings, environ)
    return cfg


def _reads(key: str) -> bool:
    """Whether zkcompat reads this zoo.cfg key (a -D flag that stands for it is read too)."""
    return (key in _KEYS or security_key(key) or client_limits.limit_key(key) is not None)


def _conf_dir(path: Path | None, environ: Mapping[str, str]) -> Path | None:
    """Where zkEnv.sh would find java.env: $ZOOCFGDIR, else zoo.cfg's directory."""
    if environ.get(sysprops.CONF_DIR_ENV):
        return Path(environ[sysprops.CONF_DIR_ENV])
    return Path(path).parent if path is not None else None


def _did_you_mean(key: str) -> str | None:
    """The known key an unknown one resembles (tickTme: tickTime), case aside; None if none
    is close. ZooKeeper says nothing of a misspelt key; it is still ignored here."""
    known = {k.lower(): k for k in (*_KEYS, *config_status.BY_KEY, *client_limits.KEYS)}
    close = difflib.get_close_matches(key.lower(), known, n=1, cutoff=DID_YOU_MEAN_CUTOFF)
    return known[close[0]] if close else None


def _limits(props: Mapping[str, str]) -> client_limits.LimitSettings:
    """globalOutstandingLimit, maxCnxns and the throttles (config/limits.py reads them)."""
    try:
        return client_limits.settings(props)
    except client_limits.SettingError as e:
        raise ConfigError(str(e)) from None
