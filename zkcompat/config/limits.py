"""The limit settings of zoo.cfg, read as ZooKeeper reads them: globalOutstandingLimit,
maxCnxns, largeRequest*, the TLS handshake limit and the two throttles' settings
(zookeeper.connection_throttle_*, request_throttle_*). server/limits.py and
server/throttle.py enforce them; a value they could not use is a SettingError.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

log = logging.getLogger("zkcompat.config")  # as every module of config/

PROPERTY_PREFIX = "zookeeper."  # zoo.cfg keys ZooKeeper does not know become zookeeper.KEY
GLOBAL_OUTSTANDING_LIMIT_DEFAULT = 1000  # ZooKeeperServer.DEFAULT_GLOBAL_OUTSTANDING_LIMIT
LARGE_REQUEST_MAX_BYTES_DEFAULT = 100 * 1024 * 1024  # ZooKeeperServer.largeRequestMaxBytes
LARGE_REQUEST_THRESHOLD_OFF = -1  # ZooKeeperServer.largeRequestThreshold: -1 counts none
OUTSTANDING_HANDSHAKE_LIMIT_OFF = -1  # NettyServerCnxnFactory: 0 or less limits nothing


class SettingError(ValueError):
    """A limit setting zkcompat cannot use; the message starts with the key."""


@dataclass(frozen=True, slots=True)
class ConnectionThrottleSettings:
    """zookeeper.connection_throttle_*, as BlueThrottle's static initialiser resolves them:
    with weights on, tokens and fill_count are counted in global-session weights."""

    tokens: int = 0  # 0: no throttle
    fill_time_ms: int = 1
    fill_count: int = 1
    freeze_time_ms: int = -1  # -1: no random drops (BLUE off)
    drop_increase: float = 0.02
    drop_decrease: float = 0.002
    decrease_ratio: float = 0.0
    weight_enabled: bool = False
    global_session_weight: int = 3
    local_session_weight: int = 1
    renew_session_weight: int = 2


@dataclass(frozen=True, slots=True)
class RequestThrottleSettings:
    """zookeeper.request_throttle_* and the Request.isStale checks it applies."""

    max_requests: int = 0  # 0: no throttle
    stall_time_ms: int = 100
    drop_stale: bool = True
    stale_connection_check: bool = True  # zookeeper.request_stale_connection_check
    stale_latency_check: bool = False  # zookeeper.request_stale_latency_check
    # zookeeper.throttled_op_wait_time (ZooKeeperServer): a request that waited longer than
    # this is answered THROTTLEDOP instead of being carried out; 0: never.
    throttled_op_wait_time_ms: int = 0


@dataclass(frozen=True, slots=True)
class LimitSettings:
    """The limit settings of zoo.cfg (or their zookeeper.* system property names)."""

    global_outstanding_limit: int = GLOBAL_OUTSTANDING_LIMIT_DEFAULT
    max_cnxns: int = 0  # 0: no limit (ServerCnxnFactory.initMaxCnxns)
    large_request_max_bytes: int = LARGE_REQUEST_MAX_BYTES_DEFAULT
    large_request_threshold: int = LARGE_REQUEST_THRESHOLD_OFF
    outstanding_handshake_limit: int = OUTSTANDING_HANDSHAKE_LIMIT_OFF
    connection_throttle: ConnectionThrottleSettings = field(
        default_factory=ConnectionThrottleSettings)
    request_throttle: RequestThrottleSettings = field(default_factory=RequestThrottleSettings)


# -- reading them -------------------------------------------------------------------------

_JAVA_INT = re.compile(r"[+-]?[0-9]+")  # Integer.parseInt
# Double.parseDouble, less hexadecimal floats: digits, exponent, an f/d suffix, NaN, Infinity.
_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")


def _int(key: str, value: str) -> int:
    v = value.strip()
    if not _JAVA_INT.fullmatch(v) or not -(2**31) <= int(v) < 2**31:
        raise SettingError(f"{key}: {value!r} is not an integer")
    return int(v)


def _double(key: str, value: str) -> float:
    v = value.strip()
    if not _JAVA_DOUBLE.fullmatch(v):
        raise SettingError(f"{key}: {value!r} is not a number")
    return float(v.rstrip("fFdD").replace("Infinity", "inf"))


def _boolean(key: str, value: str) -> bool:
    """Boolean.parseBoolean reads anything but "true" (in any case) as false; zkcompat
    refuses what is neither true nor false rather than guess."""
    v = value.strip().lower()
    if v not in ("true", "false"):
        raise SettingError(f"{key}: {value!r} is neither true nor false")
    return v == "true"


# zoo.cfg key (without "zookeeper.") -> (group, field, parser)
_KEYS: dict[str, tuple[str, str, Callable[[str, str], object]]] = {
    "globalOutstandingLimit": ("", "global_outstanding_limit", _int),
    "maxCnxns": ("", "max_cnxns", _int),
    "largeRequestMaxBytes": ("", "large_request_max_bytes", _int),
    "largeRequestThreshold": ("", "large_request_threshold", _int),
    "netty.server.outstandingHandshake.limit": ("", "outstanding_handshake_limit", _int),
    "connection_throttle_tokens": ("connection", "tokens", _int),
    "connection_throttle_fill_time": ("connection", "fill_time_ms", _int),
    "connection_throttle_fill_count": ("connection", "fill_count", _int),
    "connection_throttle_freeze_time": ("connection", "freeze_time_ms", _int),
    "connection_throttle_drop_increase": ("connection", "drop_increase", _double),
    "connection_throttle_drop_decrease": ("connection", "drop_decrease", _double),
    "connection_throttle_decrease_ratio": ("connection", "decrease_ratio", _double),
    "connection_throttle_weight_enabled": ("connection", "weight_enabled", _boolean),
    "connection_throttle_global_session_weight": ("connection", "global_session_weight", _int),
    "connection_throttle_local_session_weight": ("connection", "local_session_weight", _int),
    "connection_throttle_renew_session_weight": ("connection", "renew_session_weight", _int),
    "request_throttle_max_requests": ("request", "max_requests", _int),
    "request_throttle_stall_time": ("request", "stall_time_ms", _int),
    "request_throttle_drop_stale": ("request", "drop_stale", _boolean),
    "request_stale_connection_check": ("request", "stale_connection_check", _boolean),
    "request_stale_latency_check": ("request", "stale_latency_check", _boolean),
    "throttled_op_wait_time": ("request", "throttled_op_wait_time_ms", _int),
}
KEYS = frozenset(_KEYS)


def limit_key(key: str) -> str | None:
    """The setting a zoo.cfg key names (with or without "zookeeper."), if it is one of these."""
    bare = key[len(PROPERTY_PREFIX):] if key.startswith(PROPERTY_PREFIX) else key
    return bare if bare in _KEYS else None


def settings(props: Mapping[str, str]) -> LimitSettings:
    """The limits zoo.cfg sets; the bare key wins over its zookeeper.-prefixed form."""
    groups: dict[str, dict[str, object]] = {"": {}, "connection": {}, "request": {}}
    for key in sorted(props, key=lambda k: not k.startswith(PROPERTY_PREFIX)):
        bare = limit_key(key)
        if bare is not None:
            group, name, parse = _KEYS[bare]
            groups[group][name] = parse(key, props[key])
    connection = _connection_throttle(ConnectionThrottleSettings(**groups["connection"]))
    request = RequestThrottleSettings(**groups["request"])
    top = groups[""]
    if top.get("max_cnxns", 0) < 0:  # ServerCnxnFactory.initMaxCnxns
        log.warning("event=config_max_cnxns_negative value=%d action=use_0", top["max_cnxns"])
        top["max_cnxns"] = 0
    _large_requests(top)
    if request.max_requests > 0 and request.stall_time_ms < 0:
        raise SettingError(f"request_throttle_stall_time: {request.stall_time_ms} is negative")
    return LimitSettings(**top, connection_throttle=connection, request_throttle=request)


def _large_requests(top: dict[str, object]) -> None:
    """ZooKeeperServer.setLargeRequestMaxBytes / setLargeRequestThreshold: a maximum of 0 or
    less keeps the default, a threshold of 0 or below -1 turns the count off (each with a
    warning)."""
    max_bytes = top.get("large_request_max_bytes", LARGE_REQUEST_MAX_BYTES_DEFAULT)
    if max_bytes <= 0:
        log.warning("event=config_large_request_max_bytes value=%d action=use_%d", max_bytes,
                    LARGE_REQUEST_MAX_BYTES_DEFAULT)
        top["large_request_max_bytes"] = LARGE_REQUEST_MAX_BYTES_DEFAULT
    threshold = top.get("large_request_threshold", LARGE_REQUEST_THRESHOLD_OFF)
    if threshold == 0 or threshold < -1:
        log.warning("event=config_large_request_threshold value=%d action=use_-1", threshold)
        top["large_request_threshold"] = LARGE_REQUEST_THRESHOLD_OFF


def _connection_throttle(s: ConnectionThrottleSettings) -> ConnectionThrottleSettings:
    """BlueThrottle's static initialiser: weights below 1 or below the local weight are
    replaced, as it replaces them (with a warning); with weights on, tokens and fill_count
    count global sessions. Values BlueThrottle would divide by zero with, or never refill
    from, stop start-up here."""
    global_w, local_w, renew_w = (s.global_session_weight, s.local_session_weight,
                                  s.renew_session_weight)
    if global_w <= 0:
        log.warning("event=config_throttle_weight key=global_session_weight value=%d use=3",
                    global_w)
        global_w = 3
    elif global_w < local_w:
        log.warning("event=config_throttle_weight key=global_session_weight value=%d use=%d",
                    global_w, local_w)
        global_w = local_w
    if local_w <= 0:
        log.warning("event=config_throttle_weight key=local_session_weight value=%d use=1",
                    local_w)
        local_w = 1
    if renew_w <= 0:
        log.warning("event=config_throttle_weight key=renew_session_weight value=%d use=2",
                    renew_w)
        renew_w = 2
    elif renew_w < local_w:
        log.warning("event=config_throttle_weight key=renew_session_weight value=%d use=%d",
                    renew_w, local_w)
        renew_w = local_w
    tokens, fill_count = s.tokens, s.fill_count
    if s.weight_enabled:
        tokens, fill_count = global_w * tokens, global_w * fill_count
    if tokens < 0:
        raise SettingError(f"connection_throttle_tokens: {s.tokens} is negative")
    if tokens and s.fill_time_ms < 1:
        raise SettingError(f"connection_throttle_fill_time: {s.fill_time_ms} ms: the bucket "
                           "would never refill (BlueThrottle divides by it)")
    return ConnectionThrottleSettings(
        tokens, s.fill_time_ms, fill_count, s.freeze_time_ms, s.drop_increase, s.drop_decrease,
        s.decrease_ratio, s.weight_enabled, global_w, local_w, renew_w)
