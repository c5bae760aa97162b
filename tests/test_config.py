"""zkcompat/config.py: zoo.cfg read as ZooKeeper 3.8 reads it, and `serve` obeying it.

Unit tests of load()/Config/parse_properties, then end-to-end runs of
`python -m zkcompat serve --config zoo.cfg`: a bad file stops it with the key named on
stderr, a good one's clientPort, tickTime and session timeout bounds take effect (seen
in the timeout a client negotiates).
"""

from __future__ import annotations

import logging
import re
import socket
import struct
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from zkcompat import config
from zkcompat.config import Config, ConfigError, load, parse_properties

pytestmark = pytest.mark.timeout(60)

SUPER_DIGEST = "super:D/InIHSb7yEEbrWz8b9l71RjZJU="


# -- defaults -----------------------------------------------------------------------------


def test_defaults_are_zookeepers():
    for cfg in (Config(), load(None), load(None, {})):
        assert cfg.tick_time_ms == 2000  # ZooKeeperServer.DEFAULT_TICK_TIME
        assert cfg.min_session_timeout_ms == 4000  # 2 x tickTime
        assert cfg.max_session_timeout_ms == 40000  # 20 x tickTime
        assert cfg.four_letter_words == frozenset({"srvr"})
        assert cfg.client_port == 2181
        assert cfg.max_client_cnxns == 60
        assert cfg.jute_maxbuffer == 0xFFFFF
        assert cfg.super_digest is None
        assert cfg.extended_types_enabled is False


def test_empty_file_gives_the_defaults(tmp_path):
    path = tmp_path / "zoo.cfg"
    path.write_text("# nothing but a comment\n\n")
    cfg = load(path)
    assert cfg.tick_time_ms == 2000
    assert (cfg.min_session_timeout_ms, cfg.max_session_timeout_ms) == (4000, 40000)
    assert cfg.source == path
    assert cfg.raw == {}


@pytest.mark.parametrize(
    "settings, expected",
    [
        ({"tickTime": "100"}, (200, 2000)),
        ({"tickTime": "3000"}, (6000, 60000)),
        ({"tickTime": "100", "minSessionTimeout": "1000"}, (1000, 2000)),
        ({"tickTime": "100", "maxSessionTimeout": "9000"}, (200, 9000)),
        ({"tickTime": "100", "minSessionTimeout": "-1", "maxSessionTimeout": "-1"}, (200, 2000)),
        ({"minSessionTimeout": "5000", "maxSessionTimeout": "5000"}, (5000, 5000)),
    ],
)
def test_session_timeout_bounds_follow_tick_time(settings, expected):
    cfg = load(None, settings)
    assert (cfg.min_session_timeout_ms, cfg.max_session_timeout_ms) == expected


def test_config_constructor_derives_bounds_too():
    cfg = Config(tick_time_ms=500)
    assert (cfg.min_session_timeout_ms, cfg.max_session_timeout_ms) == (1000, 10000)
    cfg = Config(tick_time_ms=500, max_session_timeout_ms=3000)
    assert (cfg.min_session_timeout_ms, cfg.max_session_timeout_ms) == (1000, 3000)


# -- every key ----------------------------------------------------------------------------

# key -> (value in zoo.cfg, Config field, expected value of the field)
KEY_CASES = {
    "tickTime": ("3000", "tick_time_ms", 3000),
    "dataDir": ("/var/lib/zookeeper", "data_dir", Path("/var/lib/zookeeper")),
    "clientPort": ("2281", "client_port", 2281),
    "clientPortAddress": ("127.0.0.2", "client_port_address", "127.0.0.2"),
    "maxClientCnxns": ("10", "max_client_cnxns", 10),
    "minSessionTimeout": ("5000", "min_session_timeout_ms", 5000),
    "maxSessionTimeout": ("90000", "max_session_timeout_ms", 90000),
    "4lw.commands.whitelist": ("ruok, srvr ,stat", "four_letter_words",
                               frozenset({"ruok", "srvr", "stat"})),
    "jute.maxbuffer": ("4194304", "jute_maxbuffer", 4194304),
    "superDigest": (SUPER_DIGEST, "super_digest", SUPER_DIGEST),
    "DigestAuthenticationProvider.superDigest": (SUPER_DIGEST, "super_digest", SUPER_DIGEST),
    "zookeeper.DigestAuthenticationProvider.superDigest": (SUPER_DIGEST, "super_digest",
                                                           SUPER_DIGEST),
    "dataLogDir": ("/var/log/zookeeper", "data_log_dir", Path("/var/log/zookeeper")),
    "forceSync": ("no", "force_sync", False),
    "zookeeper.forceSync": ("no", "force_sync", False),
    "snapCount": ("5000", "snap_count", 5000),
    "zookeeper.snapCount": ("5000", "snap_count", 5000),
    "autopurge.snapRetainCount": ("5", "snap_retain_count", 5),
    "autopurge.purgeInterval": ("24", "purge_interval_hours", 24),
    "extendedTypesEnabled": ("true", "extended_types_enabled", True),
    "zookeeper.extendedTypesEnabled": ("true", "extended_types_enabled", True),
    "enforceQuota": ("true", "enforce_quota", True),
    "zookeeper.enforceQuota": ("true", "enforce_quota", True),
    "znode.container.checkIntervalMs": ("1000", "container_check_interval_ms", 1000),
    "znode.container.maxPerMinute": ("50", "container_max_per_minute", 50),
    "znode.container.maxNeverUsedIntervalMs": ("1000", "container_max_never_used_ms", 1000),
}


def test_every_key_of_the_module_has_a_case():
    """A key added to config._KEYS needs a line in KEY_CASES (and BAD_VALUES)."""
    assert set(config._KEYS) == set(KEY_CASES), (
        f"untested keys {sorted(set(config._KEYS) - set(KEY_CASES))}, "
        f"stale cases {sorted(set(KEY_CASES) - set(config._KEYS))}"
    )


@pytest.mark.parametrize("key", sorted(KEY_CASES))
def test_key_sets_its_field(key, tmp_path):
    value, field, expected = KEY_CASES[key]
    path = tmp_path / "zoo.cfg"
    path.write_text(f"{key}={value}\n")
    cfg = load(path)
    assert getattr(cfg, field) == expected
    assert cfg.raw == {key: value.strip()}


@pytest.mark.parametrize("key", ["tickTime", "clientPort", "maxSessionTimeout"])
def test_overrides_win_over_the_file(key, tmp_path):
    _, field, _ = KEY_CASES[key]
    path = tmp_path / "zoo.cfg"
    path.write_text(f"{key}=50000\n")
    assert getattr(load(path, {key: "60000"}), field) == 60000


# -- values ZooKeeper refuses, and values it takes ----------------------------------------

BAD_VALUES = [
    ("tickTime", "abc"),
    ("tickTime", "0"),
    ("tickTime", "2.5"),
    ("tickTime", ""),
    ("clientPort", "x"),
    ("clientPort", "-1"),
    ("clientPort", "70000"),  # InetSocketAddress: port out of range
    ("maxClientCnxns", "many"),
    ("maxClientCnxns", "-1"),
    ("minSessionTimeout", "soon"),
    ("maxSessionTimeout", "later"),
    ("jute.maxbuffer", "big"),
    ("jute.maxbuffer", "0"),
    ("snapCount", "often"),
    ("autopurge.snapRetainCount", "x"),
    ("autopurge.purgeInterval", "x"),
    ("forceSync", "maybe"),
    ("extendedTypesEnabled", "maybe"),
    ("enforceQuota", "maybe"),
    ("znode.container.checkIntervalMs", "x"),
    ("znode.container.maxPerMinute", "x"),
    ("znode.container.maxNeverUsedIntervalMs", "x"),
]


@pytest.mark.parametrize("key, value", BAD_VALUES)
def test_bad_value_names_the_key(key, value):
    with pytest.raises(ConfigError) as e:
        load(None, {key: value})
    assert key in str(e.value)


def test_bad_value_in_a_file_names_the_key(tmp_path):
    path = tmp_path / "zoo.cfg"
    path.write_text("tickTime=2000\nmaxSessionTimeout=forever\nclientPort=2181\n")
    with pytest.raises(ConfigError, match="maxSessionTimeout"):
        load(path)


def test_min_session_timeout_above_max_is_refused():
    # ServerConfig/QuorumPeerConfig: "minSessionTimeout must not be larger than
    # maxSessionTimeout".
    with pytest.raises(ConfigError) as e:
        load(None, {"minSessionTimeout": "9000", "maxSessionTimeout": "8000"})
    assert "minSessionTimeout" in str(e.value) and "maxSessionTimeout" in str(e.value)
    with pytest.raises(ConfigError, match="minSessionTimeout"):
        load(None, {"tickTime": "1000", "maxSessionTimeout": "1500"})  # default min 2000


@pytest.mark.parametrize(
    "key, value, field, expected",
    [
        ("maxClientCnxns", "0", "max_client_cnxns", 0),  # 0: no limit
        ("minSessionTimeout", "-1", "min_session_timeout_ms", 4000),
        ("maxSessionTimeout", "-1", "max_session_timeout_ms", 40000),
        ("autopurge.purgeInterval", "0", "purge_interval_hours", 0),
        ("autopurge.snapRetainCount", "1", "snap_retain_count", 3),  # raised to 3
        ("tickTime", " 3000 ", "tick_time_ms", 3000),  # QuorumPeerConfig trims
        ("4lw.commands.whitelist", "*", "four_letter_words", config.FOUR_LETTER_WORDS),
    ],
)
def test_values_zookeeper_accepts(key, value, field, expected):
    assert getattr(load(None, {key: value}), field) == expected


# How ZooKeeper reads each boolean that is not parsed by QuorumPeerConfig: only "no"
# turns forceSync off (FileTxnLog); extendedTypesEnabled is Boolean.getBoolean and
# enforceQuota Boolean.parseBoolean, so anything but "true" leaves them off.
ZOOKEEPER_BOOLEANS = [
    ("forceSync", "no", False),
    ("forceSync", "yes", True),
    ("forceSync", "false", True),
    ("forceSync", "true", True),
    ("extendedTypesEnabled", "TRUE", True),
    ("extendedTypesEnabled", "false", False),
    ("extendedTypesEnabled", "yes", False),
    ("enforceQuota", "True", True),
    ("enforceQuota", "yes", False),
]


@pytest.mark.parametrize("key, value, zookeeper_reads", ZOOKEEPER_BOOLEANS)
def test_booleans_never_mean_the_opposite_of_zookeeper(key, value, zookeeper_reads):
    """A value may be refused, but never read as the opposite of what ZooKeeper reads:
    forceSync=false must not switch fsync off, extendedTypesEnabled=yes must not turn TTL
    nodes on."""
    _, field, _ = KEY_CASES[key]
    try:
        cfg = load(None, {key: value})
    except ConfigError as e:
        assert key in str(e)
        return
    assert getattr(cfg, field) is zookeeper_reads


# -- the 4lw whitelist ----------------------------------------------------------------------


@pytest.mark.parametrize("value", ["ruok", "ruok,stat", "", " , "])
def test_srvr_is_always_whitelisted(value):
    """FourLetterCommands.isEnabled adds srvr to any whitelist (zkServer.sh needs it)."""
    words = load(None, {"4lw.commands.whitelist": value}).four_letter_words
    assert "srvr" in words
    assert {w.strip() for w in value.split(",") if w.strip()} <= words


def test_unknown_four_letter_word_is_logged(caplog):
    with caplog.at_level(logging.WARNING, logger="zkcompat.config"):
        cfg = load(None, {"4lw.commands.whitelist": "ruok,bogus"})
    assert "ruok" in cfg.four_letter_words and "bogus" not in cfg.four_letter_words
    assert any("bogus" in r.getMessage() for r in caplog.records)


# -- keys this server does not use ----------------------------------------------------------


def test_unknown_key_is_logged_not_fatal(tmp_path, caplog):
    path = tmp_path / "zoo.cfg"
    path.write_text("tickTime=2500\nnoSuchSetting=42\nclientPort=2999\n")
    with caplog.at_level(logging.INFO, logger="zkcompat.config"):
        cfg = load(path)
    assert (cfg.tick_time_ms, cfg.client_port) == (2500, 2999)
    unknown = [r for r in caplog.records if "noSuchSetting" in r.getMessage()]
    assert unknown and all(r.levelno == logging.WARNING for r in unknown)


@pytest.mark.parametrize("key", ["initLimit", "syncLimit", "server.1", "admin.enableServer",
                                 "metricsProvider.className"])
def test_ensemble_and_later_keys_are_logged_not_fatal(key, caplog):
    with caplog.at_level(logging.INFO, logger="zkcompat.config"):
        cfg = load(None, {key: "localhost:2888:3888" if key == "server.1" else "5"})
    assert cfg.tick_time_ms == 2000
    assert any(key in r.getMessage() for r in caplog.records)


# -- java.util.Properties ---------------------------------------------------------------------

# zoo.cfg text -> what java.util.Properties.load gives (checked with OpenJDK 17), after
# QuorumPeerConfig's trim of keys and values.
JAVA_PROPERTIES_CASES = [
    ("tickTime=2000\n", {"tickTime": "2000"}),
    ("tickTime = 2000 \n", {"tickTime": "2000"}),
    ("tickTime:2000\n", {"tickTime": "2000"}),
    ("  clientPort=2181\n", {"clientPort": "2181"}),
    ("# comment\n! also a comment\n\ninitLimit=5\n", {"initLimit": "5"}),
    ("server.1=zoo1:2888:3888\n", {"server.1": "zoo1:2888:3888"}),
    ("k:v=w\n", {"k": "v=w"}),
    ("a=b=c\n", {"a": "b=c"}),
    ("onlykey\n", {"onlykey": ""}),
    ("emptyval=\n", {"emptyval": ""}),
    ("tickTime=1000\ntickTime=3000\n", {"tickTime": "3000"}),  # the last one wins
    ("tickTime 2000\n", {"tickTime": "2000"}),  # whitespace separates too
    ("initLimit\t10\n", {"initLimit": "10"}),
    ("dataDir=C:\\\\zk\\\\data\n", {"dataDir": "C:\\zk\\data"}),  # backslash escapes
    ("4lw.commands.whitelist=ruok,\\\n    srvr,stat\n",
     {"4lw.commands.whitelist": "ruok,srvr,stat"}),  # a continued line
    ("u=\\u0041x\n", {"u": "Ax"}),
    ("tickTime=2000\r\nclientPort=2181\r\n", {"tickTime": "2000", "clientPort": "2181"}),
]


@pytest.mark.parametrize("text, expected", JAVA_PROPERTIES_CASES,
                         ids=[repr(t)[:40] for t, _ in JAVA_PROPERTIES_CASES])
def test_parse_properties_reads_as_java_does(text, expected):
    assert parse_properties(text) == expected


# -- end to end: python -m zkcompat serve --config ... -----------------------------------

BAD_FILES = {
    "tickTime": "tickTime=abc\n",
    "maxSessionTimeout": "tickTime=2000\nmaxSessionTimeout=forever\n",
    "minSessionTimeout": "minSessionTimeout=9000\nmaxSessionTimeout=8000\n",
    "forceSync": "forceSync=maybe\n",
    "clientPort": "clientPort=70000\n",
}


@pytest.mark.parametrize("key", sorted(BAD_FILES))
def test_serve_refuses_a_bad_config(key, zkcompat_launcher, tmp_path):
    text = BAD_FILES[key] + f"dataDir={tmp_path / 'data'}\nclientPortAddress=127.0.0.1\n"
    done = zkcompat_launcher.run_to_exit(text, timeout_s=10)
    assert done.returncode not in (0, -9), (
        f"serve did not stop on a bad {key} (rc {done.returncode}):\n{done.stderr[-2000:]}"
    )
    assert key in done.stderr, done.stderr[-2000:]


def _negotiate(port: int, requested_ms: int) -> int:
    """The session timeout a raw ConnectRequest asking for requested_ms gets."""
    request = (struct.pack(">iqiq", 0, 0, requested_ms, 0) + struct.pack(">i", 16)
               + b"\0" * 16 + b"\0")
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(struct.pack(">i", len(request)) + request)
        data = b""
        while len(data) < 12:
            chunk = s.recv(64)
            assert chunk, "closed before the ConnectResponse"
            data += chunk
    length, _protocol, timeout_ms = struct.unpack_from(">iii", data, 0)
    assert length in (36, 37)
    return timeout_ms


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=1)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _kazoo_negotiates(server, timeout_s: float) -> int:
    """The session timeout kazoo is given: kazoo keeps it only in a log line of its own
    (KazooClient._session_timeout stays the requested value)."""
    records = _Records()
    logger = logging.getLogger(f"test_config.kazoo.{server.port}")
    logger.setLevel(1)
    logger.propagate = False
    logger.addHandler(records)
    client = KazooClient(hosts=server.connect_string, timeout=timeout_s, logger=logger)
    try:
        client.start(timeout=10)
    finally:
        client.stop()
        client.close()
        logger.removeHandler(records)
    found = [re.search(r"negotiated session timeout: (\d+)", m) for m in records.messages]
    values = [int(m.group(1)) for m in found if m]
    assert values, "kazoo logged no negotiated session timeout"
    return values[0]


def test_serve_obeys_port_tick_time_and_session_bounds(zkcompat_launcher):
    server = zkcompat_launcher.start({"tickTime": 300, "minSessionTimeout": 1000,
                                      "maxSessionTimeout": 5000,
                                      "4lw.commands.whitelist": "conf"})
    # ZooKeeperServer.processConnectRequest clamps the request into [min, max].
    assert _negotiate(server.port, 10) == 1000
    assert _negotiate(server.port, 3000) == 3000
    assert _negotiate(server.port, 600_000) == 5000
    assert _kazoo_negotiates(server, 30.0) == 5000
    assert _kazoo_negotiates(server, 2.0) == 2000
    conf = dict(line.split("=", 1) for line in server.four_letter_word("conf").splitlines())
    assert (conf["clientPort"], conf["tickTime"]) == (str(server.port), "300")
    assert (conf["minSessionTimeout"], conf["maxSessionTimeout"]) == ("1000", "5000")


def test_serve_derives_session_bounds_from_tick_time(zkcompat_launcher):
    server = zkcompat_launcher.start({"tickTime": 250})
    assert _negotiate(server.port, 1) == 500  # 2 x tickTime
    assert _negotiate(server.port, 1_000_000) == 5000  # 20 x tickTime
