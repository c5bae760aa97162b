"""zkcompat.cli.container on the host: the zoo.cfg and myid it writes from the official ZooKeeper
image's ZOO_* variables are the ones that image's docker-entrypoint.sh writes (the expected
files below follow that script line by line), it never overwrites either, and what it
writes is a config zkcompat serves (standalone, and as one of three)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conformance_tests.servers import HOST, free_port
from zkcompat import config
from zkcompat.cli import container
from zkcompat.server.admin import NOT_SERVING

pytestmark = pytest.mark.timeout(60)

# What the official image writes with none of its variables changed (its Dockerfile ENV).
OFFICIAL_DEFAULT = """\
dataDir=/data
dataLogDir=/datalog
tickTime=2000
initLimit=5
syncLimit=2
autopurge.snapRetainCount=3
autopurge.purgeInterval=0
maxClientCnxns=60
standaloneEnabled=true
admin.enableServer=true
server.1=localhost:2888:3888;2181
"""

ENSEMBLE_ENV = {
    "ZOO_MY_ID": "2",
    "ZOO_SERVERS": "server.1=zoo1:2888:3888;2181 server.2=zoo2:2888:3888;2181\n"
                   "\tserver.3=zoo3:2888:3888;2181",
    "ZOO_TICK_TIME": "1000",
    "ZOO_INIT_LIMIT": "10",
    "ZOO_SYNC_LIMIT": "4",
    "ZOO_4LW_COMMANDS_WHITELIST": "ruok,srvr,mntr",
    "ZOO_CFG_EXTRA": "metricsProvider.className=org.apache.zookeeper.metrics.prometheus."
                     "PrometheusMetricsProvider  metricsProvider.httpPort=7000",
    "ZOO_STANDALONE_ENABLED": "false",
    "ZOO_ADMINSERVER_ENABLED": "false",
    "ZOO_AUTOPURGE_PURGEINTERVAL": "12",
    "ZOO_AUTOPURGE_SNAPRETAINCOUNT": "10",
}
OFFICIAL_ENSEMBLE = """\
dataDir=/data
dataLogDir=/datalog
tickTime=1000
initLimit=10
syncLimit=4
autopurge.snapRetainCount=10
autopurge.purgeInterval=12
maxClientCnxns=60
standaloneEnabled=false
admin.enableServer=false
server.1=zoo1:2888:3888;2181
server.2=zoo2:2888:3888;2181
server.3=zoo3:2888:3888;2181
4lw.commands.whitelist=ruok,srvr,mntr
metricsProvider.className=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider
metricsProvider.httpPort=7000
"""


def test_defaults_are_the_official_images():
    assert container.IMAGE_DEFAULTS["ZOO_INIT_LIMIT"] == "5"
    assert container.zoo_cfg({}) == OFFICIAL_DEFAULT
    assert container.my_id({}) == "1"


def test_every_variable_lands_where_the_official_entrypoint_puts_it():
    assert container.zoo_cfg(ENSEMBLE_ENV) == OFFICIAL_ENSEMBLE
    assert container.my_id(ENSEMBLE_ENV) == "2"


def test_empty_variables_behave_as_in_the_shell():
    # ${ZOO_MY_ID:-1} and [[ -z $ZOO_SERVERS ]] treat empty as unset; the other variables
    # are written as they are, empty too; an empty whitelist writes no line.
    env = {"ZOO_MY_ID": "", "ZOO_SERVERS": "  ", "ZOO_TICK_TIME": "",
           "ZOO_4LW_COMMANDS_WHITELIST": ""}
    text = container.zoo_cfg(env)
    assert "tickTime=\n" in text
    assert "server.1=localhost:2888:3888;2181\n" in text
    assert "4lw.commands.whitelist" not in text
    assert container.my_id(env) == "1"


def test_directories_come_from_the_variables(tmp_path):
    env = {"ZOO_CONF_DIR": str(tmp_path / "conf"), "ZOO_DATA_DIR": str(tmp_path / "data"),
           "ZOO_DATA_LOG_DIR": str(tmp_path / "datalog"), "ZOO_MY_ID": "3"}
    cfg_path, myid_path = container.prepare(env)
    assert cfg_path == tmp_path / "conf" / "zoo.cfg"
    assert cfg_path.read_text().startswith(f"dataDir={tmp_path / 'data'}\n"
                                           f"dataLogDir={tmp_path / 'datalog'}\n")
    assert myid_path.read_text() == "3\n"


def test_existing_zoo_cfg_and_myid_are_kept(tmp_path):
    (tmp_path / "conf").mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "conf" / "zoo.cfg").write_text("tickTime=3000\n")
    (tmp_path / "data" / "myid").write_text("7\n")
    env = {"ZOO_CONF_DIR": str(tmp_path / "conf"), "ZOO_DATA_DIR": str(tmp_path / "data"),
           "ZOO_MY_ID": "1", "ZOO_TICK_TIME": "1000"}
    container.prepare(env)
    assert (tmp_path / "conf" / "zoo.cfg").read_text() == "tickTime=3000\n"
    assert (tmp_path / "data" / "myid").read_text() == "7\n"


@pytest.mark.parametrize("hostname, myid", [("zk-0", "1"), ("zk-2.zk-hs.default.svc", "3"),
                                            ("zookeeper-server-10", "11")])
def test_my_id_from_the_statefulset_ordinal(hostname, myid):
    env = {container.MY_ID_FROM_HOSTNAME: "true"}
    assert container.my_id(env, hostname) == myid
    assert container.my_id({**env, "ZOO_MY_ID": "5"}, hostname) == "5"


def test_my_id_from_a_host_name_without_ordinal_stops():
    with pytest.raises(SystemExit, match="no -N ordinal"):
        container.my_id({container.MY_ID_FROM_HOSTNAME: "true"}, "zookeeper")


def _dirs(tmp_path, sid: int) -> dict[str, str]:
    return {"ZOO_CONF_DIR": str(tmp_path / f"conf{sid}"),
            "ZOO_DATA_DIR": str(tmp_path / f"data{sid}"),
            "ZOO_DATA_LOG_DIR": str(tmp_path / f"datalog{sid}")}


def test_what_it_writes_is_a_config_zkcompat_reads(tmp_path):
    cfg_path, _ = container.prepare(_dirs(tmp_path, 1))
    cfg = config.load(cfg_path)
    assert not cfg.is_ensemble and (cfg.client_port_address, cfg.client_port) == ("0.0.0.0",
                                                                                  2181)
    for sid in (1, 2, 3):
        env = {**ENSEMBLE_ENV, **_dirs(tmp_path / "ens", sid), "ZOO_MY_ID": str(sid)}
        cfg = config.load(container.prepare(env)[0])
        assert cfg.is_ensemble and cfg.server_id == sid and len(cfg.voters) == 3
        assert (cfg.tick_time_ms, cfg.init_limit, cfg.sync_limit) == (1000, 10, 4)
        assert cfg.metrics_enabled and not cfg.admin_enable_server


def test_entrypoint_execs_the_command_after_writing(tmp_path):
    env = {**os.environ, **_dirs(tmp_path, 1), "ZOO_MY_ID": "4"}
    done = subprocess.run([sys.executable, "-m", "zkcompat.cli.container", "entrypoint",
                           sys.executable, "-c", "import os; print(os.getpid())"],
                          env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "conf1" / "zoo.cfg").read_text() == container.zoo_cfg(env)
    assert (tmp_path / "data1" / "myid").read_text() == "4\n"


def test_ruok_health_check(tmp_path, zkcompat_launcher):
    env = _dirs(tmp_path, 1)
    assert container.ruok({**env}) == 1  # no zoo.cfg yet: unhealthy, not a crash
    server = zkcompat_launcher.start()
    (tmp_path / "conf1").mkdir()
    (tmp_path / "conf1" / "zoo.cfg").write_text(server.config_path.read_text())
    assert container.ruok(env) == 0  # ruok is not whitelisted: srvr answers for it
    server.stop()
    assert container.ruok(env) == 1
    whitelisted = zkcompat_launcher.start({"4lw.commands.whitelist": "ruok"})
    (tmp_path / "conf1" / "zoo.cfg").write_text(whitelisted.config_path.read_text())
    assert container.ruok(env) == 0


@pytest.mark.parametrize("whitelist", ["ruok", "srvr"])  # srvr alone: the official default
def test_ruok_health_check_passes_on_a_member_without_a_quorum(whitelist, tmp_path,
                                                               zkcompat_launcher):
    """Like ZooKeeper's ruok, the health check says the server runs, not that it serves:
    server 1 of three, alone (the first pod of an OrderedReady StatefulSet, which must be
    ready before the second is created), is healthy while it waits for a quorum."""
    data = tmp_path / "lone"
    data.mkdir()
    (data / "myid").write_text("1\n")
    peers = {f"server.{sid}": f"{HOST}:{free_port()}:{free_port()}" for sid in (1, 2, 3)}
    server = zkcompat_launcher.start({"dataDir": data, "4lw.commands.whitelist": whitelist,
                                      "tickTime": 500, "initLimit": 10, "syncLimit": 4,
                                      **peers})
    try:
        assert server.four_letter_word("srvr") == NOT_SERVING + "\n"
        env = _dirs(tmp_path, 1)
        (tmp_path / "conf1").mkdir()
        (tmp_path / "conf1" / "zoo.cfg").write_text(server.config_path.read_text())
        assert container.ruok(env) == 0
    finally:
        server.stop()
