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
    """ZooKeeper syncs unless zookeeper.forceSync is exactly "no" (FileTxnLog)."""
    return _boolean_word(key, value) != "no"


FOUR_LETTER_WORDS = frozenset(
    "ruok srvr stat conf envi mntr cons wchs wchc wchp dump reqs crst srst dirs isro gtmk stmk"
    .split()
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
}
# Keys ZooKeeper users commonly have that later issues give meaning to: accepted quietly.
_LATER = {
    "initLimit", "syncLimit", "admin.enableServer", "admin.serverPort", "standaloneEnabled",
    "reconfigEnabled", "preAllocSize", "globalOutstandingLimit",
    "metricsProvider.className", "metricsProvider.httpPort",
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
