"""-D system properties in SERVER_JVMFLAGS, JVMFLAGS and java.env, read as ZooKeeper 3.9's
start scripts hand them to java (config/sysprops.py), under zoo.cfg:

- zkServer.sh runs `java ... $JVMFLAGS` with JVMFLAGS="$SERVER_JVMFLAGS $JVMFLAGS", and
  java keeps the last -D of a name: JVMFLAGS wins, then the later flag;
- zkEnv.sh sources $ZOOCFGDIR/zookeeper-env.sh, then $ZOOCFGDIR/java.env;
- QuorumPeerConfig.parseProperties sets an unknown zoo.cfg key K as zookeeper.K, over the -D:
  zoo.cfg wins; its own keys (tickTime, ...) are never properties.

The last test runs real servers: a super digest given only as a -D flag lets
`addauth digest super:...` read what no one else may, on ZooKeeper and on zkcompat.
"""

from __future__ import annotations

import datetime
import logging

import pytest

from zkcompat.config import ConfigError, load, sysprops

pytestmark = pytest.mark.timeout(120)

SUPER_PASSWORD = "secret"
SUPER = "super:D/InIHSb7yEEbrWz8b9l71RjZJU="
OTHER_SUPER = "super:otherdigestotherdigestotherdig="
DIGEST_PROPERTY = "zookeeper.DigestAuthenticationProvider.superDigest"


def _load(tmp_path, environ, **settings):
    return load(None, {"dataDir": str(tmp_path), **settings}, environ=environ)


# -- which value counts -------------------------------------------------------------------

# (environ, zoo.cfg settings, Config field, expected)
PRECEDENCE_CASES = {
    "SERVER_JVMFLAGS": ({"SERVER_JVMFLAGS": f"-Xmx1g -D{DIGEST_PROPERTY}={SUPER}"}, {},
                        "super_digest", SUPER),
    "JVMFLAGS": ({"JVMFLAGS": f"-D{DIGEST_PROPERTY}={SUPER}"}, {}, "super_digest", SUPER),
    "JVMFLAGS comes later on java's line": (
        {"SERVER_JVMFLAGS": f"-D{DIGEST_PROPERTY}={OTHER_SUPER}",
         "JVMFLAGS": f"-D{DIGEST_PROPERTY}={SUPER}"}, {}, "super_digest", SUPER),
    "the later flag wins": ({"SERVER_JVMFLAGS": f"-D{DIGEST_PROPERTY}={OTHER_SUPER} "
                                                f"-D{DIGEST_PROPERTY}={SUPER}"}, {},
                            "super_digest", SUPER),
    "zoo.cfg's key wins": ({"JVMFLAGS": f"-D{DIGEST_PROPERTY}={OTHER_SUPER}"},
                           {"DigestAuthenticationProvider.superDigest": SUPER},
                           "super_digest", SUPER),
    "zoo.cfg's other name for it wins": ({"JVMFLAGS": f"-D{DIGEST_PROPERTY}={OTHER_SUPER}"},
                                         {"superDigest": SUPER}, "super_digest", SUPER),
    # zkcompat's short zoo.cfg name is no property in ZooKeeper: no super user from it.
    "-Dzookeeper.superDigest is nothing": ({"JVMFLAGS": f"-Dzookeeper.superDigest={SUPER}"},
                                           {}, "super_digest", None),
    "jute.maxbuffer": ({"SERVER_JVMFLAGS": "-Djute.maxbuffer=4096"}, {}, "jute_maxbuffer",
                       4096),
    "zoo.cfg's jute.maxbuffer wins": ({"SERVER_JVMFLAGS": "-Djute.maxbuffer=4096"},
                                      {"jute.maxbuffer": "8192"}, "jute_maxbuffer", 8192),
    # zoo.cfg's zookeeper.jute.maxbuffer is nothing (here as in ZooKeeper): the -D counts.
    "zoo.cfg's zookeeper.jute.maxbuffer does not": (
        {"SERVER_JVMFLAGS": "-Djute.maxbuffer=4096"}, {"zookeeper.jute.maxbuffer": "8192"},
        "jute_maxbuffer", 4096),
    # BinaryInputArchive reads jute.maxbuffer, never zookeeper.jute.maxbuffer.
    "-Dzookeeper.jute.maxbuffer is nothing": (
        {"SERVER_JVMFLAGS": "-Dzookeeper.jute.maxbuffer=4096"}, {}, "jute_maxbuffer", 0xFFFFF),
    "extendedTypesEnabled": ({"SERVER_JVMFLAGS": "-Dzookeeper.extendedTypesEnabled=true"}, {},
                             "extended_types_enabled", True),
    "znode.container.checkIntervalMs": (
        {"SERVER_JVMFLAGS": "-Dznode.container.checkIntervalMs=250"}, {},
        "container_check_interval_ms", 250),
    "-Dzookeeper.znode.container.checkIntervalMs is nothing": (
        {"SERVER_JVMFLAGS": "-Dzookeeper.znode.container.checkIntervalMs=250"}, {},
        "container_check_interval_ms", 60_000),
    "admin.serverPort": ({"SERVER_JVMFLAGS": "-Dzookeeper.admin.serverPort=9181"}, {},
                         "admin_server_port", 9181),
    "admin.enableServer": ({"SERVER_JVMFLAGS": "-Dzookeeper.admin.enableServer=false"}, {},
                           "admin_enable_server", False),
    "zoo.cfg's admin.serverPort wins": ({"SERVER_JVMFLAGS": "-Dzookeeper.admin.serverPort=9181"},
                                        {"admin.serverPort": "9182"}, "admin_server_port", 9182),
    "zoo.cfg's zookeeper.admin.serverPort wins": (
        {"SERVER_JVMFLAGS": "-Dzookeeper.admin.serverPort=9181"},
        {"zookeeper.admin.serverPort": "9182"}, "admin_server_port", 9182),
    "4lw.commands.whitelist": ({"JVMFLAGS": "-Dzookeeper.4lw.commands.whitelist=ruok,mntr"}, {},
                               "four_letter_words", frozenset({"ruok", "mntr", "srvr"})),
    "snapCount": ({"JVMFLAGS": "-Dzookeeper.snapCount=500"}, {}, "snap_count", 500),
    "forceSync": ({"JVMFLAGS": "-Dzookeeper.forceSync=no"}, {}, "force_sync", False),
    "readonlymode.enabled": ({"JVMFLAGS": "-Dreadonlymode.enabled=true"}, {},
                             "readonly_mode_enabled", True),
    # QuorumPeerConfig's own keys are no system properties: -D cannot set them.
    "-Dzookeeper.tickTime is nothing": ({"JVMFLAGS": "-Dzookeeper.tickTime=100"}, {},
                                        "tick_time_ms", 2000),
    "-Dzookeeper.metricsProvider.httpPort is nothing": (
        {"JVMFLAGS": "-Dzookeeper.metricsProvider.httpPort=7001"}, {}, "metrics_http_port", 7000),
}


@pytest.mark.parametrize("environ, settings, field, expected", PRECEDENCE_CASES.values(),
                         ids=PRECEDENCE_CASES.keys())
def test_a_setting_from_the_jvm_flags(environ, settings, field, expected, tmp_path):
    assert getattr(_load(tmp_path, environ, **settings), field) == expected


def test_limits_from_the_jvm_flags(tmp_path):
    cfg = _load(tmp_path, {"SERVER_JVMFLAGS": "-Dzookeeper.maxCnxns=5 "
                                              "-Dzookeeper.globalOutstandingLimit=7"},
                globalOutstandingLimit="9")
    assert (cfg.limits.max_cnxns, cfg.limits.global_outstanding_limit) == (5, 9)


def test_the_jvm_flags_stay_out_of_zoo_cfgs_bytes(tmp_path):
    """The quorum's config bytes (and conf) are zoo.cfg's keys: a -D flag adds none."""
    cfg = _load(tmp_path, {"JVMFLAGS": "-Djute.maxbuffer=4096"}, tickTime="2000")
    assert cfg.jute_maxbuffer == 4096 and set(cfg.raw) == {"dataDir", "tickTime"}


def test_a_bad_value_names_the_flag(tmp_path):
    with pytest.raises(ConfigError, match="^-Djute.maxbuffer: 'lots' is not an integer"):
        _load(tmp_path, {"JVMFLAGS": "-Djute.maxbuffer=lots"})


def test_a_flag_zoo_cfg_overrules_is_never_read(tmp_path, caplog):
    """ZooKeeper sets zoo.cfg's key over the -D before reading it: a bad or unobeyed value
    there is never seen."""
    environ = {"JVMFLAGS": "-Dzookeeper.snapCount=lots -Dzookeeper.leaderServes=no"}
    with caplog.at_level(logging.WARNING, logger="zkcompat.config"):
        cfg = _load(tmp_path, environ, **{"zookeeper.snapCount": "500", "leaderServes": "yes"})
    assert (cfg.snap_count, cfg.leader_serves) == (500, True)
    assert not caplog.records


def test_the_ssl_settings_from_the_jvm_flags(tmp_path):
    key_store, trust_store = _pem_stores(tmp_path)
    flags = (f"-Dzookeeper.ssl.keyStore.location={key_store} "
             f"-Dzookeeper.ssl.trustStore.location={trust_store} -Dzookeeper.ssl.clientAuth=want "
             "-Dzookeeper.ssl.protocol=TLSv1.2")
    cfg = _load(tmp_path, {"SERVER_JVMFLAGS": flags}, secureClientPort="0",
                **{"ssl.protocol": "TLSv1.3"})
    assert cfg.tls.key_store.location == key_store and cfg.tls.trust_store.location == trust_store
    assert cfg.tls.client_auth == "want"
    assert cfg.tls.protocol == "TLSv1.3"  # zoo.cfg wins
    assert "x509" in cfg.auth_schemes


def _pem_stores(tmp_path):
    """A self-signed server certificate: its key and certificate, and a trust store of it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_store, trust_store = tmp_path / "server.pem", tmp_path / "trust.pem"
    key_store.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                            serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()) + cert_pem)
    trust_store.write_bytes(cert_pem)
    return key_store, trust_store


# -- the words, as the shell splits the unquoted $JVMFLAGS ----------------------------------

def test_words_split_at_blanks_and_quotes_stay():
    environ = {"SERVER_JVMFLAGS": ' -Da=1\t-Db="x y" -Dempty -D=v -D ',
               "JVMFLAGS": "-Da=2 -Dc=u=v"}
    assert sysprops.properties(sysprops.jvm_flags(environ)) == {
        "b": '"x', "empty": "", "a": "2", "c": "u=v"}


# -- java.env and zookeeper-env.sh --------------------------------------------------------

def _cfg_file(tmp_path, java_env: str | None = None, zookeeper_env: str | None = None):
    """conf/zoo.cfg, with conf/java.env and conf/zookeeper-env.sh when given."""
    conf = tmp_path / "conf"
    conf.mkdir(exist_ok=True)
    for name, text in (("java.env", java_env), ("zookeeper-env.sh", zookeeper_env)):
        if text is not None:
            (conf / name).write_text(text)
    path = conf / "zoo.cfg"
    path.write_text(f"dataDir={tmp_path / 'data'}\n")
    return path


def test_java_env_beside_zoo_cfg_is_sourced(tmp_path):
    path = _cfg_file(tmp_path, java_env=f'SERVER_JVMFLAGS="-D{DIGEST_PROPERTY}={SUPER}"\n')
    assert load(path, environ={}).super_digest == SUPER


def test_java_env_assigns_over_the_environment_or_appends_to_it(tmp_path):
    path = _cfg_file(tmp_path, java_env='SERVER_JVMFLAGS="-Dzookeeper.snapCount=500"\n'
                                        'export JVMFLAGS="$JVMFLAGS -Djute.maxbuffer=4096"\n')
    cfg = load(path, environ={"SERVER_JVMFLAGS": "-Dzookeeper.extendedTypesEnabled=true",
                              "JVMFLAGS": "-Dznode.container.maxPerMinute=7"})
    assert (cfg.snap_count, cfg.jute_maxbuffer, cfg.container_max_per_minute) == (500, 4096, 7)
    assert cfg.extended_types_enabled is False  # java.env replaced SERVER_JVMFLAGS


def test_zookeeper_env_sh_is_sourced_before_java_env(tmp_path):
    path = _cfg_file(tmp_path,
                     zookeeper_env='JVMFLAGS="-Djute.maxbuffer=1000 -Dzookeeper.snapCount=9"\n',
                     java_env='JVMFLAGS="$JVMFLAGS -Djute.maxbuffer=2000"\n')
    cfg = load(path, environ={})
    assert (cfg.jute_maxbuffer, cfg.snap_count) == (2000, 9)


def test_zoocfgdir_names_the_directory_of_java_env(tmp_path):
    path = _cfg_file(tmp_path, java_env='JVMFLAGS="-Djute.maxbuffer=1000"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "java.env").write_text('JVMFLAGS="-Djute.maxbuffer=3000"\n')
    assert load(path, environ={"ZOOCFGDIR": str(elsewhere)}).jute_maxbuffer == 3000
    assert load(None, {"dataDir": str(tmp_path)},
                environ={"ZOOCFGDIR": str(elsewhere)}).jute_maxbuffer == 3000


def test_java_env_that_exits_stops_start_up(tmp_path):
    path = _cfg_file(tmp_path, java_env='echo "no java here" >&2\nexit 3\n')
    with pytest.raises(ConfigError, match=r"java.env: .*status 3.*no java here"):
        load(path, environ={})


def test_java_env_output_is_logged_not_read(tmp_path, caplog):
    path = _cfg_file(tmp_path, java_env='echo hello\nJVMFLAGS="-Djute.maxbuffer=4096"\n')
    with caplog.at_level(logging.WARNING, logger="zkcompat.config"):
        assert load(path, environ={}).jute_maxbuffer == 4096
    assert any("event=config_env_script_output" in r.getMessage() and "hello" in r.getMessage()
               for r in caplog.records)


# -- what zkcompat does not read is named ---------------------------------------------------

def test_flags_zkcompat_does_not_obey_are_named(tmp_path, caplog):
    flags = ("-Xmx2g -XX:+UseG1GC -Dzookeeper.preAllocSize=1024 "
             "-Dzookeeper.fsync.warningthresholdms=1000 -Dzookeeper.leaderServes=no "
             "-Dcom.sun.management.jmxremote -Dzookeeper.log.dir=/var/log/zk "
             "-javaagent:/opt/jmx_exporter.jar=7070:exporter.yaml "
             "-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty "
             "-Dzookeeper.tickTme=100 -Dzookeeper.tickTime=100 -Dzookeeper.jute.maxbuffer=1")
    with caplog.at_level(logging.INFO, logger="zkcompat.config"):
        cfg = _load(tmp_path, {"SERVER_JVMFLAGS": flags}, clientPortListenBacklog="50")
    assert cfg.leader_serves is False
    lines = [r.getMessage() for r in caplog.records]
    not_implemented = [m for m in lines if "event=config_not_implemented" in m]
    assert len(not_implemented) == 1
    assert set(not_implemented[0].split("keys=", 1)[1].split(",")) == {
        "clientPortListenBacklog", "-Dzookeeper.preAllocSize", "-Dzookeeper.leaderServes",
        "-Dcom.sun.management.jmxremote", "-Dzookeeper.log.dir", "-javaagent:/opt/jmx_exporter.jar"}
    assert [m for m in lines if "event=config_unknown_key" in m] == [
        "event=config_unknown_key key=-Dzookeeper.tickTme",
        "event=config_unknown_key key=-Dzookeeper.tickTime "
        "detail='tickTime is read from zoo.cfg only'",
        "event=config_unknown_key key=-Dzookeeper.jute.maxbuffer "
        "detail='ZooKeeper reads -Djute.maxbuffer, without zookeeper.'"]


def test_no_flags_no_warning(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="zkcompat.config"):
        _load(tmp_path, {"SERVER_JVMFLAGS": "-Xmx1g", "JVMFLAGS": ""})
    assert not caplog.records


# -- real servers: addauth digest super:... -------------------------------------------------

@pytest.mark.parametrize("how", ["zookeeper -D", "zkcompat SERVER_JVMFLAGS", "zkcompat java.env"])
def test_super_digest_from_the_jvm_flags_makes_a_super_user(how, tmp_path, monkeypatch):
    from kazoo.security import make_digest_acl, make_digest_acl_credential

    from conformance_tests.servers import start_zkcompat, start_zookeeper

    flag = f"-D{DIGEST_PROPERTY}={make_digest_acl_credential('super', SUPER_PASSWORD)}"
    monkeypatch.delenv("JVMFLAGS", raising=False)
    monkeypatch.delenv("ZOOCFGDIR", raising=False)
    if how == "zookeeper -D":
        server = start_zookeeper(tmp_path, 2000, jvm_flags=(flag,))
    elif how == "zkcompat SERVER_JVMFLAGS":
        monkeypatch.setenv("SERVER_JVMFLAGS", f"-Xmx1g {flag}")
        server = start_zkcompat(tmp_path, 2000)
    else:
        monkeypatch.delenv("SERVER_JVMFLAGS", raising=False)
        (tmp_path / "java.env").write_text(f'SERVER_JVMFLAGS="$SERVER_JVMFLAGS {flag}"\n')
        server = start_zkcompat(tmp_path, 2000)
    clients = []
    try:
        owner = _client(server, clients, ("digest", "bob:bobsecret"))
        owner.create("/secret", b"only bob", acl=[make_digest_acl("bob", "bobsecret", all=True)])
        from kazoo.exceptions import NoAuthError

        with pytest.raises(NoAuthError):
            _client(server, clients).get("/secret")
        with pytest.raises(NoAuthError):
            _client(server, clients, ("digest", "super:wrong")).get("/secret")
        assert _client(server, clients, ("digest", f"super:{SUPER_PASSWORD}")).get(
            "/secret")[0] == b"only bob"
    finally:
        for client in clients:
            client.stop()
            client.close()
        server.stop()


def _client(server, clients, auth=None):
    from kazoo.client import KazooClient

    client = KazooClient(hosts=server.connect_string, timeout=10)
    clients.append(client)
    client.start(timeout=20)
    if auth is not None:
        client.add_auth(*auth)
    return client
