"""zoo.cfg and dataDir/myid, read as ZooKeeper reads them (QuorumPeerConfig), into one Config.

Unknown keys are logged and ignored; the keys ZooKeeper would obey and zkcompat does not
(config_status) are named in one start-up warning; a bad value stops start-up with a message
that names the key. Defaults are ZooKeeper's, except where a standalone zkcompat needs one
ZooKeeper leaves unset (dataDir: ./data).
"""

import logging
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from zkcompat import config_status
from zkcompat.security import settings as security
from zkcompat.server import limits as client_limits

log = logging.getLogger(__name__)

TICK_TIME_DEFAULT_MS = 2000  # ZooKeeperServer.DEFAULT_TICK_TIME
JUTE_MAXBUFFER_DEFAULT_BYTES = 0xFFFFF  # jute.maxbuffer
MAX_CLIENT_CNXNS_DEFAULT = 60  # per client address
# A session's unanswered requests at which its connection stops reading, until half are
# answered: zkcompat's own bound, beside ZooKeeper's server-wide globalOutstandingLimit.
OUTSTANDING_REQUESTS_MAX = 1000
ELECTION_ALG = 3  # QuorumPeerConfig: "Only 3 is supported" (FastLeaderElection)
CNX_TIMEOUT_DEFAULT_MS = 5000  # QuorumCnxManager.cnxTO
ELECTION_PORT_BIND_RETRY_DEFAULT = 3  # QuorumCnxManager.Listener.DEFAULT_PORT_BIND_MAX_RETRY
# zookeeperAdmin: a myid "should have a value between 1 and 255"; session ids carry it in
# their top byte (SessionTrackerImpl.initializeNextSessionId), and 0 means "no myid" here.
SERVER_ID_MIN, SERVER_ID_MAX = 1, 255
MAX_EXTENDED_SERVER_ID = 0xFE  # EphemeralType.MAX_EXTENDED_SERVER_ID: TTL nodes need < 255
WILDCARD_ADDRESS = "0.0.0.0"
# In ZooKeeper readonlymode.enabled is a Java system property only (Boolean.getBoolean in
# QuorumPeer.run); zoo.cfg cannot set it. Users pass -Dreadonlymode.enabled=true in these
# variables (zkServer.sh hands both to java), so zkcompat reads them too.
JVM_FLAGS_ENV = ("SERVER_JVMFLAGS", "JVMFLAGS")
READONLY_PROPERTY = "readonlymode.enabled"
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


class ConfigError(Exception):
    pass


class LearnerType(StrEnum):
    """QuorumPeer.LearnerType: a participant votes, an observer only follows."""

    PARTICIPANT = "participant"
    OBSERVER = "observer"


@dataclass(frozen=True, slots=True)
class QuorumServer:
    """One server.N line: host:quorumPort:electionPort[:role][;[clientHost:]clientPort]
    (QuorumPeer.QuorumServer). client_host/client_port are None without a ";" part."""

    sid: int
    host: str
    quorum_port: int
    election_port: int
    role: LearnerType = LearnerType.PARTICIPANT
    client_host: str | None = None
    client_port: int | None = None


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
    # security.quorum_sasl.QuorumSaslSettings with quorum.auth.enableSasl=true, else None.
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


_JAVA_INT = re.compile(r"[+-]?[0-9]+")  # Integer.parseInt: no spaces, no underscores


def _int(key: str, value: str, minimum: int = 0) -> int:
    if not _JAVA_INT.fullmatch(value.strip()):
        raise ConfigError(f"{key}: {value!r} is not an integer")
    n = int(value.strip())
    if n < minimum:
        raise ConfigError(f"{key}: {n} is below the minimum {minimum}")
    return n


def _port(key: str, value: str) -> int:
    n = _int(key, value, 0)
    if n > 65535:
        raise ConfigError(f"{key}: port {n} out of range (0-65535)")
    return n


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


def _peer_type(key: str, value: str) -> LearnerType:
    try:
        return LearnerType(value.strip().lower())
    except ValueError:
        raise ConfigError(f"{key}: Unrecognised peertype: {value.strip()}") from None


def _election_alg(key: str, value: str) -> int:
    n = _int(key, value, minimum=-(2**31))
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
    "tickTime": ("tick_time_ms", lambda k, v: _int(k, v, 1)),
    "dataDir": ("data_dir", lambda k, v: Path(v.strip())),
    "clientPort": ("client_port", _port),
    "clientPortAddress": ("client_port_address", lambda k, v: v.strip()),
    "maxClientCnxns": ("max_client_cnxns", lambda k, v: _int(k, v, 0)),
    "minSessionTimeout": ("min_session_timeout_ms", lambda k, v: _int(k, v, -1)),
    "maxSessionTimeout": ("max_session_timeout_ms", lambda k, v: _int(k, v, -1)),
    "4lw.commands.whitelist": ("four_letter_words", _whitelist),
    "jute.maxbuffer": ("jute_maxbuffer", lambda k, v: _int(k, v, 1)),
    "superDigest": ("super_digest", lambda k, v: v.strip()),
    # ZooKeeper turns unknown zoo.cfg keys into "zookeeper."-prefixed system properties,
    # so users set the super digest either way.
    "DigestAuthenticationProvider.superDigest": ("super_digest", lambda k, v: v.strip()),
    "zookeeper.DigestAuthenticationProvider.superDigest": ("super_digest", lambda k, v: v.strip()),
    "dataLogDir": ("data_log_dir", lambda k, v: Path(v.strip())),
    "forceSync": ("force_sync", _force_sync),
    "zookeeper.forceSync": ("force_sync", _force_sync),
    "snapCount": ("snap_count", lambda k, v: _int(k, v, 2)),
    "zookeeper.snapCount": ("snap_count", lambda k, v: _int(k, v, 2)),
    # ZooKeeper raises a retain count below 3 to 3 (DatadirCleanupManager).
    "autopurge.snapRetainCount": ("snap_retain_count", lambda k, v: max(3, _int(k, v, 1))),
    "autopurge.purgeInterval": ("purge_interval_hours", lambda k, v: _int(k, v, 0)),
    "extendedTypesEnabled": ("extended_types_enabled", _java_boolean),
    "zookeeper.extendedTypesEnabled": ("extended_types_enabled", _java_boolean),
    "enforceQuota": ("enforce_quota", _java_boolean),
    "zookeeper.enforceQuota": ("enforce_quota", _java_boolean),
    "znode.container.checkIntervalMs": ("container_check_interval_ms", lambda k, v: _int(k, v, 1)),
    "znode.container.maxPerMinute": ("container_max_per_minute", lambda k, v: _int(k, v, 1)),
    "znode.container.maxNeverUsedIntervalMs": (
        "container_max_never_used_ms", lambda k, v: _int(k, v, 0)),
    "initLimit": ("init_limit", lambda k, v: _int(k, v, 0)),
    "syncLimit": ("sync_limit", lambda k, v: _int(k, v, 0)),
    "standaloneEnabled": ("standalone_enabled", _quorum_boolean),
    "peerType": ("peer_type", _peer_type),
    "electionAlg": ("election_alg", _election_alg),
    "quorumListenOnAllIPs": ("quorum_listen_on_all_ips", _quorum_boolean),
    "syncEnabled": ("sync_enabled", _quorum_boolean),
    "quorumSync": ("quorum_sync", _quorum_boolean),
    # The rest are system properties in ZooKeeper, which zoo.cfg sets with or without the
    # "zookeeper." prefix (unknown keys become zookeeper.KEY). readonlymode.enabled is the
    # exception, see READONLY_PROPERTY: zoo.cfg cannot set it in ZooKeeper, here it can.
    "digest.enabled": ("digest_enabled", _java_boolean),
    "zookeeper.digest.enabled": ("digest_enabled", _java_boolean),
    "leaderServes": ("leader_serves", _force_sync),
    "zookeeper.leaderServes": ("leader_serves", _force_sync),
    "cnxTimeout": ("cnx_timeout_ms", lambda k, v: _int(k, v, 0)),
    "zookeeper.cnxTimeout": ("cnx_timeout_ms", lambda k, v: _int(k, v, 0)),
    "electionPortBindRetry": ("election_port_bind_retry", lambda k, v: _int(k, v, 0)),
    "zookeeper.electionPortBindRetry": ("election_port_bind_retry", lambda k, v: _int(k, v, 0)),
    "readonlymode.enabled": ("readonly_mode_enabled", _java_boolean),
    "metricsProvider.className": ("metrics_enabled", _metrics_provider),
    "metricsProvider.httpHost": ("metrics_http_host", lambda k, v: v.strip()),
    "metricsProvider.httpPort": ("metrics_http_port", _port),
    "metricsProvider.exportJvmInfo": ("metrics_export_jvm_info", _java_boolean),
}
# The AdminServer's settings are system properties (zookeeper.admin.*) in ZooKeeper, which
# zoo.cfg sets with or without the prefix.
for _key, _field in (("enableServer", ("admin_enable_server", _admin_enabled)),
                     ("serverAddress", ("admin_server_address", lambda k, v: v.strip())),
                     ("serverPort", ("admin_server_port", _port)),
                     ("commandURL", ("admin_command_url", _command_url))):
    _KEYS[f"admin.{_key}"] = _KEYS[f"zookeeper.admin.{_key}"] = _field
# Keys of features zkcompat does not have, whose absence would silently change the quorum.
_REFUSED = {
    "dynamicConfigFile": "a separate dynamic config file is not supported: put the server.N "
                         "lines in zoo.cfg",
    "group": "hierarchical quorums (group.N, weight.N) are not supported",
    "weight": "hierarchical quorums (group.N, weight.N) are not supported",
}


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str):
    """java.util.Properties: a line ending in an odd number of backslashes continues on the
    next one, whose leading whitespace is dropped; comment lines start with # or !."""
    pending = None
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f") if pending is not None else raw
        if pending is None:
            stripped = line.lstrip(" \t\f")
            if not stripped or stripped[0] in "#!":
                continue
            line = stripped
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = (pending or "") + line[:-1]
            continue
        yield (pending or "") + line
        pending = None
    if pending is not None:
        yield pending


def _unescape(s: str) -> str:
    out = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\" or i + 1 == len(s):
            out.append(c)
            i += 1
            continue
        nxt = s[i + 1]
        if nxt == "u":
            digits = s[i + 2 : i + 6]
            try:
                out.append(chr(int(digits, 16)))
            except ValueError:
                raise ConfigError(f"malformed \\uxxxx escape in {s!r}") from None
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """java.util.Properties.load: key and value split at the first unescaped '=', ':' or
    whitespace; escapes and continuation lines as Java reads them. ZooKeeper then trims
    both (QuorumPeerConfig.parseProperties)."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        i, n = 0, len(line)
        while i < n and line[i] not in "=: \t\f":
            i += 2 if line[i] == "\\" else 1
        key = line[:i]
        while i < n and line[i] in " \t\f":
            i += 1
        if i < n and line[i] in "=:":
            i += 1
        while i < n and line[i] in " \t\f":
            i += 1
        props[_unescape(key).strip()] = _unescape(line[i:]).strip()
    return props


# -- server.N lines (QuorumPeer.QuorumServer, flexible.QuorumMaj) ---------------------------

_SERVER_FORMAT = (" does not have the form server_config or server_config;client_config where "
                  "server_config is host:port:port or host:port:port:type and client_config "
                  "is port or host:port")  # QuorumServer.wrongFormat, less the "|" list


def _java_split(s: str, sep: str) -> list[str]:
    """String.split: trailing empty strings are dropped ("a:b:" is two parts)."""
    parts = s.split(sep)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def _address_port(key: str, host: str, value: str) -> int:
    if not _JAVA_INT.fullmatch(value):
        raise ConfigError(f"{key}: Address unresolved: {host}:{value}")
    return _port(key, value)


def _host(key: str, host: str) -> str:
    if not host or host.startswith("["):
        raise ConfigError(f"{key}: {host!r} is not a host name or IPv4 address "
                          "(IPv6 addresses are not supported)")
    return host


def _client_part(key: str, value: str, part: str) -> tuple[str, int]:
    pieces = _java_split(part, ":")
    if len(pieces) > 2:
        raise ConfigError(f"{key}: {value}{_SERVER_FORMAT}")
    host = _host(key, pieces[0]) if len(pieces) == 2 else WILDCARD_ADDRESS
    return host, _address_port(key, host, pieces[-1])


def _server_id(key: str, text: str) -> int:
    if not _JAVA_INT.fullmatch(text):
        raise ConfigError(f"{key}: server id {text!r} is not a number")
    sid = int(text)
    if not SERVER_ID_MIN <= sid <= SERVER_ID_MAX:
        raise ConfigError(f"{key}: server id {sid} is not between {SERVER_ID_MIN} and "
                          f"{SERVER_ID_MAX}")
    return sid


def parse_server(key: str, value: str) -> QuorumServer:
    """One server.N=host:quorumPort:electionPort[:participant|:observer][;[host:]port]."""
    sid = _server_id(key, key[len("server."):])
    server_client = _java_split(value, ";")
    if len(server_client) > 2:
        raise ConfigError(f"{key}: {value}{_SERVER_FORMAT}")
    if "|" in server_client[0]:
        raise ConfigError(f"{key}: multiple addresses per server (multiAddress.enabled) are "
                          "not supported")
    parts = _java_split(server_client[0], ":")
    host = _host(key, server_client[0].split(":", 1)[0])
    if not 3 <= len(parts) <= 4:
        raise ConfigError(f"{key}: {value}{_SERVER_FORMAT}")
    quorum_port = _address_port(key, host, parts[1])
    election_port = _address_port(key, host, parts[2])
    if quorum_port == election_port:
        # ZooKeeper's words misname the quorum port: "Client and election port must be
        # different! Please update the configuration file on server.N".
        raise ConfigError(f"{key}: quorum and election port must be different, both are "
                          f"{quorum_port}")
    role = _peer_type(key, parts[3]) if len(parts) == 4 else LearnerType.PARTICIPANT
    client_host = client_port = None
    if len(server_client) == 2:
        client_host, client_port = _client_part(key, value, server_client[1])
    return QuorumServer(sid, host, quorum_port, election_port, role, client_host, client_port)


def _servers(props: Mapping[str, str]) -> dict[int, QuorumServer]:
    servers: dict[int, QuorumServer] = {}
    names: dict[int, str] = {}
    for key, value in props.items():
        if not key.startswith("server."):
            continue
        server = parse_server(key, value)
        if server.sid in servers:
            raise ConfigError(f"{key}: server id {server.sid} is also {names[server.sid]}")
        servers[server.sid] = server
        names[server.sid] = key
    return dict(sorted(servers.items()))


def _check_members(cfg: Config) -> None:
    """QuorumPeerConfig.parseDynamicConfig's rules on how many participants there are."""
    voters, observers = len(cfg.voters), len(cfg.observers)
    first_observer = f"server.{min(cfg.observers)}" if observers else ""
    if voters == 0:
        if not cfg.standalone_enabled:
            raise ConfigError("standaloneEnabled: standaloneEnabled = false then number of "
                              "participants should be >0")
        if observers:
            raise ConfigError(f"{first_observer}: Observers w/o participants is an invalid "
                              "configuration")
    elif voters == 1 and cfg.standalone_enabled:
        # ZooKeeper: "Invalid configuration, only one server specified (ignoring)"; it runs
        # standalone, as HBase's single server.N line expects.
        log.warning("event=config_single_server action=run_standalone detail=%r",
                    "one server.N line and standaloneEnabled=true")
        if observers:
            raise ConfigError(f"{first_observer}: Observers w/o quorum is an invalid "
                              "configuration")
    elif voters <= 2:
        log.warning("event=config_no_fault_tolerance participants=%d detail=%r", voters,
                    "No server failure will be tolerated. You need at least 3 servers.")
    elif voters % 2 == 0:
        log.warning("event=config_even_participants participants=%d detail=%r", voters,
                    "Non-optimal configuration, consider an odd number of servers.")


# -- myid, client port, peer type (QuorumPeerConfig.setupMyId ... checkValidity) ---------------


def read_myid(data_dir: Path) -> int | None:
    """dataDir/myid as setupMyId reads it: its first line, exactly (Long.parseLong: no
    surrounding spaces), or None when there is no such file."""
    path = Path(data_dir) / "myid"
    if not path.is_file():
        return None
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        raise ConfigError(f"myid: cannot read {path}: {e}") from None
    # BufferedReader.readLine: null for an empty file, else up to \n, \r or \r\n.
    line = re.split(r"\r\n|\n|\r", text, maxsplit=1)[0] if text else "null"
    if not _JAVA_INT.fullmatch(line):
        raise ConfigError(f"myid: serverid {line} is not a number (first line of {path})")
    sid = int(line)
    if not SERVER_ID_MIN <= sid <= SERVER_ID_MAX:
        raise ConfigError(f"myid: serverid {sid} in {path} is not between {SERVER_ID_MIN} and "
                          f"{SERVER_ID_MAX}")
    return sid


def _setup_client_port(cfg: Config, client_port_given: bool) -> None:
    """This server's client address comes from its server.N line's ";[host:]port" when
    there is one, which must agree with clientPort/clientPortAddress if those are set."""
    me = cfg.servers.get(cfg.server_id)
    if me is None or me.client_port is None:
        return
    if client_port_given:
        given = (cfg.client_port_address, cfg.client_port)
        if cfg.client_port_address == WILDCARD_ADDRESS:
            agrees = cfg.client_port == me.client_port
        else:
            agrees = given == (me.client_host, me.client_port)
        if not agrees:
            raise ConfigError(
                f"clientPort: client address for this server (id = {cfg.server_id}) "
                f"{given[0]}:{given[1]} is different from the one of server.{cfg.server_id}: "
                f"{me.client_host}:{me.client_port}")
    cfg.client_port_address, cfg.client_port = me.client_host, me.client_port


def _setup_peer_type(cfg: Config) -> None:
    """The server.N line decides; a peerType that disagrees is logged and overruled, as
    QuorumPeerConfig.setupPeerType does."""
    by_list = (LearnerType.OBSERVER if cfg.server_id in cfg.observers
               else LearnerType.PARTICIPANT)
    if by_list != cfg.peer_type:
        log.warning("event=config_peer_type_mismatch peer_type=%s server_list=%s "
                    "action=use_server_list", cfg.peer_type, by_list)
        cfg.peer_type = by_list


def _check_validity(cfg: Config) -> None:
    """QuorumPeerConfig.checkValidity, and QuorumPeer.start's "My id N not in the peer list"."""
    if not cfg.is_ensemble:
        return
    if cfg.init_limit == 0:
        raise ConfigError("initLimit: initLimit is not set (an ensemble needs it)")
    if cfg.sync_limit == 0:
        raise ConfigError("syncLimit: syncLimit is not set (an ensemble needs it)")
    if cfg.server_id == 0:
        raise ConfigError(f"myid: myid file is missing: {cfg.data_dir / 'myid'} (its "
                          "server.N lines make this server part of an ensemble)")
    if cfg.server_id not in cfg.servers:
        raise ConfigError(f"myid: My id {cfg.server_id} not in the peer list "
                          f"(server.{', server.'.join(map(str, cfg.servers))})")
    if cfg.extended_types_enabled and cfg.server_id > MAX_EXTENDED_SERVER_ID:
        raise ConfigError(f"myid: extendedTypesEnabled is true but Server ID is too large. "
                          f"Cannot be larger than {MAX_EXTENDED_SERVER_ID}")


def _readonly_from_environment(environ: Mapping[str, str]) -> bool | None:
    """-Dreadonlymode.enabled=... in SERVER_JVMFLAGS or JVMFLAGS (Boolean.getBoolean)."""
    found = None
    for name in JVM_FLAGS_ENV[::-1]:  # SERVER_JVMFLAGS comes last on java's command line
        try:
            words = shlex.split(environ.get(name, ""))
        except ValueError:
            continue
        for word in words:
            if word.startswith(f"-D{READONLY_PROPERTY}="):
                found = word.split("=", 1)[1].lower() == "true"
    return found


def _setup_quorum(cfg: Config, props: Mapping[str, str], client_port_given: bool,
                  environ: Mapping[str, str]) -> None:
    """QuorumPeerConfig.setupQuorumPeerConfig's steps, in its order."""
    cfg.servers = _servers(props)
    _check_members(cfg)
    myid = read_myid(cfg.data_dir)
    if myid is not None:
        cfg.server_id = myid
    _setup_client_port(cfg, client_port_given)
    _setup_peer_type(cfg)
    _check_validity(cfg)
    if READONLY_PROPERTY not in props:
        from_env = _readonly_from_environment(environ)
        if from_env is not None:
            cfg.readonly_mode_enabled = from_env


def load(path: Path | None = None, overrides: dict[str, str] | None = None,
         environ: Mapping[str, str] | None = None) -> Config:
    """zoo.cfg (overrides win), dataDir/myid, and readonlymode.enabled from the JVM flags
    in `environ` (os.environ by default) unless zoo.cfg sets it."""
    props = parse_properties(Path(path).read_text()) if path is not None else {}
    props.update(overrides or {})
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
              and not _security_key(key) and client_limits.limit_key(key) is None):
            log.warning("event=config_unknown_key key=%s", key)
        if config_status.not_implemented(key, value):
            not_implemented.append(key)
    if not_implemented:
        # One line an operator can read at start-up: everything ZooKeeper would obey here
        # and zkcompat will not (README, "zoo.cfg settings", says why for each).
        log.warning("event=config_not_implemented keys=%s", ",".join(sorted(not_implemented)))
    cfg = Config(**values, limits=_limits(props), source=path, raw=props)
    _setup_quorum(cfg, props, "clientPort" in props, os.environ if environ is None else environ)
    _setup_security(cfg, props, os.environ if environ is None else environ)
    return cfg


def _limits(props: Mapping[str, str]) -> client_limits.LimitSettings:
    """globalOutstandingLimit, maxCnxns and the throttles (server/limits.py reads them)."""
    try:
        return client_limits.settings(props)
    except client_limits.SettingError as e:
        raise ConfigError(str(e)) from None


def _security_key(key: str) -> bool:
    """secureClientPort[Address], ssl.*, authProvider.N, serverCnxnFactory and the x509
    superUser: read by _setup_security."""
    bare = key.removeprefix(security.PROPERTY_PREFIX)
    return (security.ssl_key(key) is not None or bare.startswith(security.AUTH_PROVIDER_PREFIX)
            or bare.startswith(security.QUORUM_SSL_PREFIX) and bare not in config_status.BY_KEY
            or key in _SECURITY_KEYS or bare in _SECURITY_PROPERTIES)


PORT_UNIFICATION_KEY = "client.portUnification"
CERT_RELOAD_KEY = "client.certReload"
_SECURITY_KEYS = ("secureClientPort", "secureClientPortAddress", "serverCnxnFactory",
                  "sslQuorum", "portUnification", "sslQuorumReloadCertFiles",
                  "quorum.auth.enableSasl",
                  "quorum.auth.learnerRequireSasl", "quorum.auth.serverRequireSasl",
                  "quorum.auth.learner.saslLoginContext", "quorum.auth.server.saslLoginContext",
                  "quorum.auth.kerberos.servicePrincipal")
# System properties zoo.cfg may set (with or without "zookeeper."), read by _setup_security.
_SECURITY_PROPERTIES = (security.X509_SUPER_USER, "java.security.auth.login.config",
                        "sasl.serverconfig", "superUser", "enforce.auth.enabled",
                        "enforce.auth.schemes", "sessionRequireClientSASLAuth",
                        PORT_UNIFICATION_KEY, CERT_RELOAD_KEY,
                        "allowSaslFailedClients", "kerberos.removeHostFromPrincipal",
                        "kerberos.removeRealmFromPrincipal", "kerberos.canonicalizeHostNames")


def _setup_security(cfg: Config, props: Mapping[str, str], environ: Mapping[str, str]) -> None:
    """secureClientPort's TLS settings and the auth providers (QuorumPeerConfig.parse,
    configureSSLAuth). Without clientPort (in zoo.cfg or the server.N line) only the secure
    port listens, as in ZooKeeper."""
    if "secureClientPort" in props:
        cfg.secure_client_port = _port("secureClientPort", props["secureClientPort"])
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
    from zkcompat.security import enforce, quorum_sasl, sasl  # noqa: PLC0415 - as tls below

    try:
        cfg.sasl = sasl.sasl_settings(props, environ)
        quorum_auth = quorum_sasl.quorum_sasl_settings(props, environ)
        cfg.quorum_sasl = quorum_auth if quorum_auth.enable_sasl else None
        cfg.auth_enforcement = enforce.auth_enforcement(props, cfg.auth_schemes)
    except (sasl.SaslSetupError, enforce.EnforceSetupError,
            quorum_sasl.QuorumSaslSetupError) as e:
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
