"""zoo.cfg, read as ZooKeeper reads it (Java properties), into one typed Config.

Unknown keys are logged and ignored; a bad value stops start-up with a message that
names the key. Defaults are ZooKeeper's, except where a standalone zkcompat needs one
ZooKeeper leaves unset (dataDir: ./data).
"""

import logging
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

TICK_TIME_DEFAULT_MS = 2000  # ZooKeeperServer.DEFAULT_TICK_TIME
JUTE_MAXBUFFER_DEFAULT_BYTES = 0xFFFFF  # jute.maxbuffer
MAX_CLIENT_CNXNS_DEFAULT = 60  # per client address
OUTSTANDING_REQUESTS_MAX = 1000  # zookeeper.globalOutstandingLimit, per session here


class ConfigError(Exception):
    pass


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
    server_id: int = 0
    data_log_dir: Path | None = None
    force_sync: bool = True
    snap_count: int = 100_000
    snap_retain_count: int = 3
    purge_interval_hours: int = 0
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


def _int(key: str, value: str, minimum: int = 0) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        raise ConfigError(f"{key}: {value!r} is not an integer") from None
    if n < minimum:
        raise ConfigError(f"{key}: {n} is below the minimum {minimum}")
    return n


def _bool(key: str, value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "yes"):
        return True
    if v in ("false", "no"):
        return False
    raise ConfigError(f"{key}: {value!r} is not a boolean (true/false)")


FOUR_LETTER_WORDS = frozenset(
    "ruok srvr stat conf envi mntr cons wchs wchc wchp dump reqs crst srst dirs isro gtmk stmk"
    .split()
)


def _whitelist(key: str, value: str) -> frozenset[str]:
    words = {w.strip() for w in value.split(",") if w.strip()}
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
    "clientPort": ("client_port", lambda k, v: _int(k, v, 0)),
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
    "forceSync": ("force_sync", _bool),
    "zookeeper.forceSync": ("force_sync", _bool),
    "snapCount": ("snap_count", lambda k, v: _int(k, v, 2)),
    "zookeeper.snapCount": ("snap_count", lambda k, v: _int(k, v, 2)),
    # ZooKeeper raises a retain count below 3 to 3 (DatadirCleanupManager).
    "autopurge.snapRetainCount": ("snap_retain_count", lambda k, v: max(3, _int(k, v, 1))),
    "autopurge.purgeInterval": ("purge_interval_hours", lambda k, v: _int(k, v, 0)),
    "extendedTypesEnabled": ("extended_types_enabled", _bool),
    "zookeeper.extendedTypesEnabled": ("extended_types_enabled", _bool),
    "enforceQuota": ("enforce_quota", _bool),
    "zookeeper.enforceQuota": ("enforce_quota", _bool),
    "znode.container.checkIntervalMs": ("container_check_interval_ms", lambda k, v: _int(k, v, 1)),
    "znode.container.maxPerMinute": ("container_max_per_minute", lambda k, v: _int(k, v, 1)),
    "znode.container.maxNeverUsedIntervalMs": (
        "container_max_never_used_ms", lambda k, v: _int(k, v, 0)),
}
# Keys ZooKeeper users commonly have that later issues give meaning to: accepted quietly.
_LATER = {
    "initLimit", "syncLimit", "admin.enableServer", "admin.serverPort", "standaloneEnabled",
    "reconfigEnabled", "preAllocSize", "globalOutstandingLimit",
    "metricsProvider.className", "metricsProvider.httpPort",
}


def parse_properties(text: str) -> dict[str, str]:
    """The subset of java.util.Properties that zoo.cfg files use: key=value or key: value."""
    props: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        i = min((p for p in (line.find("="), line.find(":")) if p >= 0), default=-1)
        if i < 0:
            props[line] = ""
            continue
        props[line[:i].strip()] = line[i + 1 :].strip()
    return props


def load(path: Path | None = None, overrides: dict[str, str] | None = None) -> Config:
    props = parse_properties(Path(path).read_text()) if path is not None else {}
    props.update(overrides or {})
    values: dict = {}
    for key, value in props.items():
        if key in _KEYS:
            name, conv = _KEYS[key]
            values[name] = conv(key, value)
        elif key.startswith("server.") or key in _LATER:
            log.info("event=config_key_not_used_yet key=%s", key)
        else:
            log.warning("event=config_unknown_key key=%s", key)
    return Config(**values, source=path, raw=props)
