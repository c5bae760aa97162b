"""zkcompat/config/: zoo.cfg read as ZooKeeper 3.8 reads it, and `serve` obeying it.

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

from zkcompat.config import (
    Config,
    ConfigError,
    LearnerType,
    QuorumServer,
    load,
    parse_properties,
    servers,
    zoocfg,
)
from zkcompat.config import status as config_status

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
        assert cfg.quorum_sync is False  # sync is ZooKeeper's unless asked for


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
    "dataDir": ("/srv/zookeeper/data", "data_dir", Path("/srv/zookeeper/data")),
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
    "initLimit": ("10", "init_limit", 10),
    "syncLimit": ("5", "sync_limit", 5),
    "standaloneEnabled": ("FALSE", "standalone_enabled", False),
    "reconfigEnabled": ("True", "reconfig_enabled", True),
    "dynamicConfigFile": ("zoo.cfg.dynamic.100000000", "config_version", 0x100000000),
    # Without a server.N line this server is no observer: setupPeerType overrules peerType.
    "peerType": ("Participant", "peer_type", "participant"),
    "electionAlg": ("3", "election_alg", 3),
    "quorumListenOnAllIPs": ("true", "quorum_listen_on_all_ips", True),
    "syncEnabled": ("false", "sync_enabled", False),
    "quorumSync": ("true", "quorum_sync", True),
    "digest.enabled": ("false", "digest_enabled", False),
    "zookeeper.digest.enabled": ("false", "digest_enabled", False),
    "leaderServes": ("no", "leader_serves", False),
    "zookeeper.leaderServes": ("no", "leader_serves", False),
    "cnxTimeout": ("2000", "cnx_timeout_ms", 2000),
    "zookeeper.cnxTimeout": ("2000", "cnx_timeout_ms", 2000),
    "electionPortBindRetry": ("0", "election_port_bind_retry", 0),
    "zookeeper.electionPortBindRetry": ("0", "election_port_bind_retry", 0),
    "readonlymode.enabled": ("true", "readonly_mode_enabled", True),
    # AdminServerFactory starts Jetty only when the property equals "true" exactly.
    "admin.enableServer": ("TRUE", "admin_enable_server", False),
    "zookeeper.admin.enableServer": ("false", "admin_enable_server", False),
    "admin.serverAddress": ("0.0.0.0", "admin_server_address", "0.0.0.0"),
    "zookeeper.admin.serverAddress": ("127.0.0.2", "admin_server_address", "127.0.0.2"),
    "admin.serverPort": ("9090", "admin_server_port", 9090),
    "zookeeper.admin.serverPort": ("9091", "admin_server_port", 9091),
    "admin.commandURL": ("/zk/", "admin_command_url", "/zk"),
    "zookeeper.admin.commandURL": ("/cmds", "admin_command_url", "/cmds"),
    "metricsProvider.className": (zoocfg.PROMETHEUS_PROVIDER, "metrics_enabled", True),
    "metricsProvider.httpHost": ("0.0.0.0", "metrics_http_host", "0.0.0.0"),
    "metricsProvider.httpPort": ("7001", "metrics_http_port", 7001),
    "metricsProvider.exportJvmInfo": ("false", "metrics_export_jvm_info", False),
}
# standaloneEnabled=false needs a participant (parseDynamicConfig), so its file gets one.
KEY_CASE_NEEDS = {"standaloneEnabled": {"server.1": "127.0.0.1:2888:3888", "initLimit": "5",
                                        "syncLimit": "2"},
                  "dynamicConfigFile": {"initLimit": "5", "syncLimit": "2"}}
# The dynamic file each case's dynamicConfigFile names, beside its zoo.cfg.
DYNAMIC_FILES = {"dynamicConfigFile": "server.1=127.0.0.1:2888:3888:participant;2181\n"
                                      "server.2=127.0.0.1:2889:3889:participant;2182\n"}


def test_every_key_of_the_module_has_a_case():
    """A key added to zoocfg._KEYS needs a line in KEY_CASES (and BAD_VALUES)."""
    assert set(zoocfg._KEYS) == set(KEY_CASES), (
        f"untested keys {sorted(set(zoocfg._KEYS) - set(KEY_CASES))}, "
        f"stale cases {sorted(set(KEY_CASES) - set(zoocfg._KEYS))}"
    )


@pytest.mark.parametrize("key", sorted(KEY_CASES))
def test_key_sets_its_field(key, tmp_path):
    value, field, expected = KEY_CASES[key]
    needs = KEY_CASE_NEEDS.get(key, {})
    if needs:
        (tmp_path / "myid").write_text("1\n")
        needs = {**needs, "dataDir": str(tmp_path)}
    path = tmp_path / "zoo.cfg"
    if key in DYNAMIC_FILES:
        value = str(tmp_path / value)
        (tmp_path / value).write_text(DYNAMIC_FILES[key])
    path.write_text(f"{key}={value}\n" + "".join(f"{k}={v}\n" for k, v in needs.items()))
    cfg = load(path, environ={})
    assert getattr(cfg, field) == expected
    assert cfg.raw == {key: value.strip(), **needs}


@pytest.mark.parametrize("key", ["tickTime", "clientPort", "maxSessionTimeout"])
def test_overrides_win_over_the_file(key, tmp_path):
    _, field, _ = KEY_CASES[key]
    path = tmp_path / "zoo.cfg"
    path.write_text(f"{key}=50000\n")
    assert getattr(load(path, {key: "60000"}), field) == 60000


# -- values ZooKeeper refuses, and values it takes ----------------------------------------

BAD_VALUES = [
    ("admin.serverPort", "eighty"),
    ("metricsProvider.httpPort", "70000"),
    ("metricsProvider.className", "com.example.OtherProvider"),  # "Cannot boot MetricsProvider"
    ("admin.commandURL", "commands"),
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
    ("tickTime", "2_000"),  # Integer.parseInt takes no underscores
    ("initLimit", "ten"),
    ("initLimit", "-1"),
    ("syncLimit", "5.5"),
    ("standaloneEnabled", "yes"),  # QuorumPeerConfig.parseBoolean: true or false only
    ("quorumListenOnAllIPs", "1"),
    ("syncEnabled", "on"),
    ("quorumSync", "yes"),
    ("peerType", "leader"),  # "Unrecognised peertype: leader"
    ("electionAlg", "0"),  # "Invalid electionAlg value. Only 3 is supported."
    ("electionAlg", "1"),
    ("electionAlg", "x"),
    ("digest.enabled", "maybe"),
    ("leaderServes", "maybe"),
    ("cnxTimeout", "soon"),
    ("electionPortBindRetry", "-1"),
    ("readonlymode.enabled", "maybe"),
    ("dynamicConfigFile", "/nonexistent/zoo.cfg.dynamic.100000000"),
    ("group.1", "1:2:3"),
    ("weight.1", "1"),
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
        ("4lw.commands.whitelist", "*", "four_letter_words", zoocfg.FOUR_LETTER_WORDS),
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


def _not_implemented_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.getMessage().startswith("event=config_not_implemented ")]


def _not_implemented_keys(caplog) -> set[str]:
    """The keys of the one config_not_implemented warning (the test fails on two)."""
    lines = _not_implemented_lines(caplog)
    assert len(lines) <= 1, lines
    return set(lines[0].split("keys=", 1)[1].split(",")) if lines else set()


@pytest.mark.parametrize("key, value", [("preAllocSize", "65536"),
                                        ("maxResponseCacheSize", "1000"),
                                        ("zookeeper.commitLogCount", "1000"),
                                        ("leaderServes", "no"),
                                        ("admin.idleTimeout", "1000")])
def test_not_implemented_key_is_named_in_the_warning(key, value, caplog):
    with caplog.at_level(logging.INFO, logger="zkcompat.config"):
        cfg = load(None, {key: value, "tickTime": "2500"})
    assert cfg.tick_time_ms == 2500
    assert _not_implemented_keys(caplog) == {key}
    assert not [r for r in caplog.records if "config_unknown_key" in r.getMessage()]


@pytest.mark.parametrize("key, value", [("syncEnabled", "TRUE"),
                                        ("leaderServes", "yes"), ("cnxTimeout", "5000"),
                                        ("sslQuorum", "false"), ("skipACL", "no"),
                                        ("multiAddress.enabled", "false"),
                                        ("localSessionsEnabled", "false"),
                                        ("DigestAuthenticationProvider.enabled", "true")])
def test_setting_what_zkcompat_always_does_is_no_warning(key, value, caplog):
    with caplog.at_level(logging.INFO, logger="zkcompat.config"):
        load(None, {key: value})
    assert _not_implemented_keys(caplog) == set()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_all_not_implemented_keys_share_one_warning_line(caplog):
    settings = {"preAllocSize": "131072", "clientPortListenBacklog": "100",
                "jvm.pause.monitor": "true", "tickTime": "2000", "noSuchSetting": "1"}
    with caplog.at_level(logging.INFO, logger="zkcompat.config"):
        load(None, settings)
    assert len(_not_implemented_lines(caplog)) == 1
    assert _not_implemented_keys(caplog) == {"preAllocSize", "clientPortListenBacklog",
                                             "jvm.pause.monitor"}
    unknown = [r.getMessage() for r in caplog.records if "config_unknown_key" in r.getMessage()]
    assert unknown == ["event=config_unknown_key key=noSuchSetting"]


def test_read_keys_and_not_implemented_keys_are_apart():
    """A key config reads must leave the not-implemented table (and the other way round)."""
    both = {k for k in zoocfg._KEYS if config_status.lookup(k) is not None
            and config_status.lookup(k).obeyed is None}
    # electionPortBindRetry's value is checked as ZooKeeper checks it, but no bind is retried.
    assert both == {"electionPortBindRetry", "zookeeper.electionPortBindRetry"}, (
        f"read, yet listed as never obeyed: {sorted(both)}")


def test_every_setting_is_in_the_docs_table():
    doc = (Path(__file__).resolve().parent.parent / "docs" / "configuration.md").read_text()
    table = doc.split("## zoo.cfg settings", 1)[1].split("\n## ", 1)[0]
    first_cells = re.findall(r"^\| ([^|]+) \|", table, re.M)
    listed = {name for cell in first_cells for name in re.findall(r"`([^`]+)`", cell)}
    wanted = ({k for k in zoocfg._KEYS if not k.startswith("zookeeper.")}
              | set(config_status.BY_KEY) | set(zoocfg._REFUSED) | {"server.N"})
    wanted -= {"group", "weight"}
    wanted |= {"group.N", "weight.N"}
    assert wanted - listed == set(), f"missing from docs/configuration.md: {sorted(wanted - listed)}"


def test_ensemble_keys_are_read():
    for key in ("initLimit", "syncLimit", "standaloneEnabled", "admin.enableServer",
                "admin.serverPort", "metricsProvider.className", "metricsProvider.httpPort"):
        assert key in zoocfg._KEYS


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


# -- ensembles: server.N lines, myid, and when ZooKeeper runs replicated ------------------
# Every rule below was checked against ZooKeeper 3.8's QuorumPeerConfig.parse (OpenJDK 17)
# on the same files; the messages keep ZooKeeper's words after the key they name.

THREE = {"server.1": "127.0.0.1:2888:3888", "server.2": "127.0.0.1:2889:3889",
         "server.3": "127.0.0.1:2890:3890", "initLimit": "10", "syncLimit": "5"}


def _ensemble(tmp_path, settings: dict[str, str], myid: str | None = "1\n", **kw) -> Config:
    if myid is not None:
        (tmp_path / "myid").write_text(myid)
    return load(None, {"dataDir": str(tmp_path), **settings}, environ=kw.get("environ", {}))


def test_three_servers_are_an_ensemble(tmp_path):
    cfg = _ensemble(tmp_path, THREE, "2\n")
    assert cfg.is_ensemble
    assert cfg.server_id == 2
    assert cfg.servers[2] == QuorumServer(2, "127.0.0.1", 2889, 3889, LearnerType.PARTICIPANT)
    assert list(cfg.servers) == [1, 2, 3]
    assert cfg.voters == frozenset({1, 2, 3}) and cfg.observers == frozenset()
    assert cfg.quorum_size == 2
    assert (cfg.init_limit, cfg.sync_limit) == (10, 5)
    assert cfg.peer_type == LearnerType.PARTICIPANT


def test_quorum_server_is_frozen_and_slotted():
    server = QuorumServer(1, "127.0.0.1", 2888, 3888)
    with pytest.raises(AttributeError):
        server.host = "elsewhere"  # type: ignore[misc]
    assert not hasattr(server, "__dict__")
    assert (server.role, server.client_host, server.client_port) == ("participant", None, None)


@pytest.mark.parametrize("voters, observers, quorum", [(3, 0, 2), (3, 2, 2), (5, 0, 3),
                                                      (7, 1, 4), (4, 0, 3), (2, 0, 2)])
def test_quorum_is_a_majority_of_the_participants(tmp_path, voters, observers, quorum):
    lines = {f"server.{i}": f"127.0.0.1:{3000 + i}:{4000 + i}" for i in range(1, voters + 1)}
    lines |= {f"server.{i}": f"127.0.0.1:{3000 + i}:{4000 + i}:observer"
              for i in range(voters + 1, voters + observers + 1)}
    cfg = _ensemble(tmp_path, {**lines, "initLimit": "5", "syncLimit": "2"})
    assert len(cfg.voters) == voters and len(cfg.observers) == observers
    assert cfg.quorum_size == quorum  # QuorumMaj: more than half the voters


@pytest.mark.parametrize(
    "value, expected",
    [
        ("10.0.0.1:2888:3888", QuorumServer(1, "10.0.0.1", 2888, 3888)),
        ("zoo1:2888:3888:participant", QuorumServer(1, "zoo1", 2888, 3888)),
        ("zoo1:2888:3888:Observer", QuorumServer(1, "zoo1", 2888, 3888, LearnerType.OBSERVER)),
        ("zoo1:2888:3888;2181", QuorumServer(1, "zoo1", 2888, 3888, client_host="0.0.0.0",
                                             client_port=2181)),
        ("zoo1:2888:3888:observer;127.0.0.1:2181",
         QuorumServer(1, "zoo1", 2888, 3888, LearnerType.OBSERVER, "127.0.0.1", 2181)),
        ("zoo1:2888:3888;", QuorumServer(1, "zoo1", 2888, 3888)),  # String.split drops it
        ("zoo1:+2888:3888", QuorumServer(1, "zoo1", 2888, 3888)),  # Integer.parseInt
    ],
)
def test_server_line_forms(value, expected):
    assert servers.parse_server("server.1", value) == expected


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("server.1", "127.0.0.1:2888", "does not have the form server_config"),
        ("server.1", "127.0.0.1:2888:3888:observer:x", "does not have the form"),
        ("server.1", "127.0.0.1:2888:3888;h:2181:x", "does not have the form"),
        ("server.1", "a:1:2;2181;3", "does not have the form"),
        ("server.1", "127.0.0.1:2888:3888:boss", "Unrecognised peertype: boss"),
        ("server.1", "127.0.0.1:x:3888", "Address unresolved: 127.0.0.1:x"),
        ("server.1", "127.0.0.1:2888:y", "Address unresolved: 127.0.0.1:y"),
        ("server.1", "127.0.0.1:2888:3888;z", "Address unresolved"),
        ("server.1", "127.0.0.1:2888:70000", "out of range"),
        ("server.1", "127.0.0.1:2888:2888", "quorum and election port must be different"),
        ("server.1", "[::1]:2888:3888", "IPv6"),
        ("server.1", "a:1:2|b:3:4", "multiple addresses"),
        ("server.one", "127.0.0.1:2888:3888", "server id 'one' is not a number"),
        ("server.0", "127.0.0.1:2888:3888", "between 1 and 255"),
        ("server.256", "127.0.0.1:2888:3888", "between 1 and 255"),
    ],
)
def test_bad_server_line_names_the_key(key, value, message):
    with pytest.raises(ConfigError) as e:
        load(None, {key: value}, environ={})
    assert str(e.value).startswith(f"{key}: ") and message in str(e.value)


def test_one_server_id_twice_is_refused():
    with pytest.raises(ConfigError, match="server id 1 is also"):
        load(None, {"server.1": "a:1:2", "server.01": "a:3:4"}, environ={})


def test_single_server_with_standalone_enabled_runs_standalone(tmp_path, caplog):
    """HBase's one server.N line: ZooKeeper logs "only one server specified (ignoring)"
    and runs standalone, myid or not, initLimit or not."""
    with caplog.at_level(logging.WARNING, logger="zkcompat.config"):
        cfg = _ensemble(tmp_path, {"server.1": "127.0.0.1:2888:3888"}, myid=None)
    assert not cfg.is_ensemble and cfg.standalone_enabled
    assert cfg.quorum_size == 1 and cfg.voters == frozenset({1})
    assert any("config_single_server" in r.getMessage() for r in caplog.records)


def test_single_server_with_standalone_disabled_is_a_one_member_quorum(tmp_path):
    cfg = _ensemble(tmp_path, {"server.1": "127.0.0.1:2888:3888", "standaloneEnabled": "false",
                               "initLimit": "5", "syncLimit": "2"})
    assert cfg.is_ensemble and cfg.quorum_size == 1 and cfg.server_id == 1


def test_no_server_lines_is_standalone():
    cfg = load(None, {}, environ={})
    assert not cfg.is_ensemble and cfg.servers == {} and cfg.quorum_size == 1
    assert cfg.voters == frozenset() and cfg.observers == frozenset()


@pytest.mark.parametrize(
    "settings, key, message",
    [
        ({"standaloneEnabled": "false"}, "standaloneEnabled",
         "standaloneEnabled = false then number of participants should be >0"),
        ({"server.1": "a:1:2:observer"}, "server.1",
         "Observers w/o participants is an invalid configuration"),
        ({"server.1": "a:1:2", "server.2": "a:3:4:observer"}, "server.2",
         "Observers w/o quorum is an invalid configuration"),
        ({**THREE, "initLimit": "0"}, "initLimit", "initLimit is not set"),
        ({k: v for k, v in THREE.items() if k != "initLimit"}, "initLimit",
         "initLimit is not set"),
        ({k: v for k, v in THREE.items() if k != "syncLimit"}, "syncLimit",
         "syncLimit is not set"),
        ({"server.1": "a:1:2", "standaloneEnabled": "false"}, "initLimit",
         "initLimit is not set"),
    ],
)
def test_bad_ensembles_name_the_key(tmp_path, settings, key, message):
    with pytest.raises(ConfigError) as e:
        _ensemble(tmp_path, settings)
    assert str(e.value).startswith(f"{key}: ") and message in str(e.value)


def test_limits_are_not_needed_standalone():
    assert load(None, {"initLimit": "0"}, environ={}).init_limit == 0


def test_ensemble_without_myid_names_the_file(tmp_path):
    with pytest.raises(ConfigError) as e:
        _ensemble(tmp_path, THREE, myid=None)
    assert "myid file is missing" in str(e.value)
    assert str(tmp_path / "myid") in str(e.value)


def test_myid_not_among_the_servers_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="My id 7 not in the peer list"):
        _ensemble(tmp_path, THREE, "7\n")


@pytest.mark.parametrize("text, sid", [("1\n", 1), ("2", 2), ("3\r\n", 3), ("+1\n", 1),
                                       ("2\nignored\n", 2)])
def test_myid_is_its_first_line(tmp_path, text, sid):
    assert _ensemble(tmp_path, THREE, text).server_id == sid


# setupMyId: Long.parseLong(readLine()), so ZooKeeper 3.8 refuses a myid with a space
# before or after the number ("serverid 1  is not a number"), and an empty file
# ("serverid null is not a number").
@pytest.mark.parametrize("text, shown", [("1 \n", "1 "), (" 1\n", " 1"), ("", "null"),
                                         ("\n1\n", ""), ("one\n", "one"), ("1.0\n", "1.0")])
def test_bad_myid_is_refused_as_zookeeper_refuses_it(tmp_path, text, shown):
    with pytest.raises(ConfigError) as e:
        _ensemble(tmp_path, THREE, text)
    message = str(e.value)
    assert message.startswith("myid: ") and f"serverid {shown} is not a number" in message
    assert str(tmp_path / "myid") in message


def test_bad_myid_stops_a_standalone_server_too(tmp_path):
    with pytest.raises(ConfigError, match="serverid x is not a number"):
        _ensemble(tmp_path, {}, "x\n")


def test_myid_is_read_standalone(tmp_path):
    assert _ensemble(tmp_path, {}, "5\n").server_id == 5


def test_myid_out_of_range_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="between 1 and 255"):
        _ensemble(tmp_path, {}, "300\n")


def test_extended_types_need_a_server_id_below_255(tmp_path):
    lines = {**THREE, "server.255": "127.0.0.1:2999:3999", "extendedTypesEnabled": "true"}
    with pytest.raises(ConfigError, match="Cannot be larger than 254"):
        _ensemble(tmp_path, lines, "255\n")


CLIENT_LINES = {**THREE, "server.1": "127.0.0.1:2888:3888;127.0.0.1:2181",
                "server.2": "127.0.0.1:2889:3889;2182"}


def test_client_port_comes_from_the_server_line(tmp_path):
    cfg = _ensemble(tmp_path, CLIENT_LINES, "2\n")
    assert (cfg.client_port_address, cfg.client_port) == ("0.0.0.0", 2182)
    cfg = _ensemble(tmp_path, CLIENT_LINES, "1\n")
    assert (cfg.client_port_address, cfg.client_port) == ("127.0.0.1", 2181)


def test_client_port_without_a_client_part_is_clientport(tmp_path):
    cfg = _ensemble(tmp_path, {**CLIENT_LINES, "clientPort": "2400"}, "3\n")
    assert cfg.client_port == 2400


@pytest.mark.parametrize("settings, ok", [
    ({"clientPort": "2182"}, True),  # the wildcard agrees with any host of the same port
    ({"clientPort": "2199"}, False),
    ({"clientPort": "2182", "clientPortAddress": "127.0.0.1"}, False),  # 0.0.0.0 on the line
])
def test_client_port_must_agree_with_the_server_line(tmp_path, settings, ok):
    """setupClientPort: "client address for this server (id = 2) in static config file is
    ... is different from client address found in dynamic file"."""
    if ok:
        assert _ensemble(tmp_path, {**CLIENT_LINES, **settings}, "2\n").client_port == 2182
        return
    with pytest.raises(ConfigError) as e:
        _ensemble(tmp_path, {**CLIENT_LINES, **settings}, "2\n")
    assert str(e.value).startswith("clientPort: ") and "is different from" in str(e.value)


def test_observer_line_makes_this_server_an_observer(tmp_path):
    lines = {**THREE, "server.4": "127.0.0.1:2891:3891:observer", "peerType": "observer"}
    cfg = _ensemble(tmp_path, lines, "4\n")
    assert cfg.peer_type == LearnerType.OBSERVER and cfg.observers == frozenset({4})
    assert cfg.voters == frozenset({1, 2, 3}) and cfg.quorum_size == 2


@pytest.mark.parametrize("myid, peer_type, expected", [
    ("1\n", "observer", LearnerType.PARTICIPANT), ("4\n", "participant", LearnerType.OBSERVER),
    ("4\n", None, LearnerType.OBSERVER)])
def test_peer_type_disagreeing_with_the_server_line_is_overruled(tmp_path, caplog, myid,
                                                                 peer_type, expected):
    """setupPeerType: "Peer type from servers list (...) doesn't match peerType (...).
    Defaulting to servers list." A warning, not an error, in 3.8 and 3.9."""
    lines = {**THREE, "server.4": "127.0.0.1:2891:3891:observer"}
    if peer_type is not None:
        lines["peerType"] = peer_type
    with caplog.at_level(logging.WARNING, logger="zkcompat.config"):
        cfg = _ensemble(tmp_path, lines, myid)
    assert cfg.peer_type == expected
    assert any("config_peer_type_mismatch" in r.getMessage() for r in caplog.records)


def test_ensemble_defaults_are_zookeepers():
    cfg = Config()
    assert (cfg.init_limit, cfg.sync_limit, cfg.standalone_enabled) == (0, 0, True)
    assert (cfg.digest_enabled, cfg.readonly_mode_enabled, cfg.leader_serves) == (True, False,
                                                                                  True)
    assert (cfg.election_alg, cfg.quorum_listen_on_all_ips, cfg.sync_enabled) == (3, False, True)
    assert (cfg.cnx_timeout_ms, cfg.election_port_bind_retry) == (5000, 3)
    assert cfg.peer_type == LearnerType.PARTICIPANT and cfg.server_id == 0


@pytest.mark.parametrize("key, value, expected", [
    ("leaderServes", "yes", True), ("leaderServes", "false", True),  # only "no" turns it off
    ("digest.enabled", "yes", False),  # Boolean.parseBoolean: only "true" is true
    ("digest.enabled", "TRUE", True)])
def test_ensemble_booleans_read_as_zookeeper_reads_them(key, value, expected):
    _, field, _ = KEY_CASES[key]
    assert getattr(load(None, {key: value}, environ={}), field) is expected


# readonlymode.enabled is a Java system property in ZooKeeper (Boolean.getBoolean in
# QuorumPeer.run): zoo.cfg cannot set it there, -Dreadonlymode.enabled=true can.
@pytest.mark.parametrize("environ, settings, expected", [
    ({}, {}, False),
    ({"SERVER_JVMFLAGS": "-Xmx1g -Dreadonlymode.enabled=true"}, {}, True),
    ({"JVMFLAGS": "-Dreadonlymode.enabled=TRUE"}, {}, True),
    ({"JVMFLAGS": "-Dreadonlymode.enabled=yes"}, {}, False),
    # zkServer.sh runs java with JVMFLAGS="$SERVER_JVMFLAGS $JVMFLAGS": JVMFLAGS comes later
    # on java's line, and the last -D of a name wins.
    ({"JVMFLAGS": "-Dreadonlymode.enabled=true",
      "SERVER_JVMFLAGS": "-Dreadonlymode.enabled=false"}, {}, True),
    ({}, {"readonlymode.enabled": "true"}, True),
    ({"SERVER_JVMFLAGS": "-Dreadonlymode.enabled=true"}, {"readonlymode.enabled": "false"},
     False),  # zoo.cfg wins
])
def test_readonly_mode_from_zoo_cfg_or_the_jvm_flags(environ, settings, expected):
    assert load(None, settings, environ=environ).readonly_mode_enabled is expected


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
