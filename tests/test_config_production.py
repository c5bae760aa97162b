"""A production zoo.cfg (tests/data/zoo-production.cfg, the file a Kafka ensemble's operators
keep) runs zkcompat: its start-up warning names exactly the settings zkcompat does not obey,
and the ensemble it describes answers kazoo, its four-letter words, AdminServer and /metrics.

The file is used as it is, except for what one test machine must change: its hosts become
127.0.0.1-3, its ports free ones, its directories temporary ones, and what binds every
interface (0.0.0.0, quorumListenOnAllIPs) binds the server's own loopback address.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from conformance_tests.servers import free_port, log_tail
from tests.conftest import zkcompat_command, zkcompat_env
from zkcompat import config
from zkcompat.config import parse_properties

pytestmark = pytest.mark.timeout(120)

PRODUCTION_CFG = Path(__file__).resolve().parent / "data" / "zoo-production.cfg"
SERVERS = (1, 2, 3)
START_TIMEOUT_S = 40.0

# What the file sets that ZooKeeper would obey and zkcompat does not (docs/configuration.md, "zoo.cfg settings").
NOT_IMPLEMENTED = {
    "preAllocSize", "fsync.warningthresholdms", "electionPortBindRetry", "admin.idleTimeout",
    "jvm.pause.monitor", "jvm.pause.warn-threshold.ms",
}
# The TLS settings belong to the security work (read by config since it landed; an older
# config logged them as unknown keys): never in the not-implemented line.
TLS_KEYS = {"serverCnxnFactory", "ssl.protocol", "ssl.enabledProtocols", "ssl.clientAuth",
            "ssl.hostnameVerification"}
# Set to what zkcompat always does, so obeyed and not warned about.
OBEYED_AS_ALWAYS = {"skipACL", "leaderServes", "syncEnabled", "cnxTimeout",
                    "multiAddress.enabled", "sslQuorum", "portUnification"}
PORTS = ("2181", "2888", "3888", "8080", "7000")


def localize(text: str, sid: int, ports: dict[str, int], base: Path) -> str:
    text = text.replace("/var/lib/zookeeper", str(base / f"zk{sid}"))
    text = re.sub(r"zk(\d)\.kafka-prod\.example\.com", r"127.0.0.\1", text)
    text = text.replace("0.0.0.0", f"127.0.0.{sid}")
    text = text.replace("quorumListenOnAllIPs=true", "quorumListenOnAllIPs=false")
    for old in PORTS:
        text = re.sub(rf"(?<![0-9]){old}(?![0-9])", str(ports[old]), text)
    return text


def _warnings(messages: list[str]) -> tuple[set[str], set[str]]:
    lines = [m for m in messages if "event=config_not_implemented " in m]
    assert len(lines) == 1, f"expected one config_not_implemented line, got {lines}"
    named = set(lines[0].split("keys=", 1)[1].split()[0].split(","))
    unknown = {m.split("key=", 1)[1].split()[0] for m in messages
               if "event=config_unknown_key " in m}
    return named, unknown


def test_the_file_is_only_localized(tmp_path):
    ports = {p: 40000 + i for i, p in enumerate(PORTS)}
    original = parse_properties(PRODUCTION_CFG.read_text())
    local = parse_properties(localize(PRODUCTION_CFG.read_text(), 2, ports, tmp_path))
    assert set(local) == set(original)
    changed = {k for k in original if original[k] != local[k]}
    assert changed == {"dataDir", "dataLogDir", "clientPort", "clientPortAddress",
                       "quorumListenOnAllIPs", "server.1", "server.2", "server.3",
                       "admin.serverAddress", "admin.serverPort", "metricsProvider.httpHost",
                       "metricsProvider.httpPort"}


def test_load_reads_the_file_and_names_what_it_does_not_obey(tmp_path, caplog):
    ports = {p: 40000 + i for i, p in enumerate(PORTS)}
    path = tmp_path / "zoo.cfg"
    path.write_text(localize(PRODUCTION_CFG.read_text(), 1, ports, tmp_path))
    (tmp_path / "zk1" / "data").mkdir(parents=True)
    (tmp_path / "zk1" / "data" / "myid").write_text("1\n")
    with caplog.at_level(logging.INFO, logger="zkcompat.config"):
        cfg = config.load(path)
    named, unknown = _warnings([r.getMessage() for r in caplog.records])
    assert named == NOT_IMPLEMENTED
    assert unknown <= TLS_KEYS
    assert not named & OBEYED_AS_ALWAYS
    assert cfg.is_ensemble and cfg.server_id == 1 and len(cfg.voters) == 3
    assert (cfg.tick_time_ms, cfg.init_limit, cfg.sync_limit) == (2000, 10, 5)
    assert (cfg.min_session_timeout_ms, cfg.max_session_timeout_ms) == (6000, 60000)
    assert cfg.data_log_dir == tmp_path / "zk1" / "txnlog"
    assert (cfg.snap_retain_count, cfg.purge_interval_hours) == (5, 24)
    assert cfg.max_client_cnxns == 120 and cfg.jute_maxbuffer == 4194304
    assert (cfg.limits.max_cnxns, cfg.limits.global_outstanding_limit) == (4000, 2000)
    assert cfg.four_letter_words == {"ruok", "srvr", "stat", "mntr", "conf", "isro", "wchs",
                                     "cons"}
    assert cfg.metrics_enabled and cfg.admin_enable_server


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def _four_letter_word(host: str, port: int, word: str) -> str:
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(word.encode())
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode()


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 (loopback only)
        return response.status, response.read().decode()


@pytest.fixture
def production_ensemble(tmp_path):
    """The three servers of the file, each started with `zkcompat serve --config`."""
    ports = {p: free_port() for p in PORTS}
    text = PRODUCTION_CFG.read_text()
    procs: dict[int, tuple[subprocess.Popen, Path]] = {}
    try:
        for sid in SERVERS:
            data = tmp_path / f"zk{sid}" / "data"
            data.mkdir(parents=True)
            (data / "myid").write_text(f"{sid}\n")
            cfg_path = tmp_path / f"zoo{sid}.cfg"
            cfg_path.write_text(localize(text, sid, ports, tmp_path))
            log_path = tmp_path / f"zk{sid}.log"
            with open(log_path, "wb") as out:
                procs[sid] = (subprocess.Popen(zkcompat_command(cfg_path), cwd=tmp_path,
                                               env=zkcompat_env(), stdin=subprocess.DEVNULL,
                                               stdout=out, stderr=subprocess.STDOUT,
                                               start_new_session=True), log_path)
        deadline = time.monotonic() + START_TIMEOUT_S
        for sid, (popen, log_path) in procs.items():
            while not _accepts(f"127.0.0.{sid}", ports["2181"]):
                if popen.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"server {sid} did not start (rc {popen.poll()}):\n"
                                f"{log_tail(log_path)}")
                time.sleep(0.1)
        yield ports, procs
    finally:
        for popen, _ in procs.values():
            if popen.poll() is None:
                popen.terminate()
        for popen, _ in procs.values():
            try:
                popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait(timeout=10)


def test_production_file_runs_an_ensemble_that_answers_kazoo(production_ensemble):
    ports, procs = production_ensemble
    client_port = ports["2181"]
    hosts = ",".join(f"127.0.0.{sid}:{client_port}" for sid in SERVERS)
    client = KazooClient(hosts=hosts, timeout=10)
    client.start(timeout=30)
    try:
        client.create("/kafka/brokers/ids/0", b'{"host":"broker0"}', ephemeral=True,
                      makepath=True)
        for sid in SERVERS:
            reader = KazooClient(hosts=f"127.0.0.{sid}:{client_port}", timeout=10)
            reader.start(timeout=30)
            try:
                reader.sync("/kafka")
                assert reader.get("/kafka/brokers/ids/0")[0] == b'{"host":"broker0"}'
            finally:
                reader.stop()
                reader.close()
    finally:
        client.stop()
        client.close()

    modes = []
    for sid in SERVERS:
        host = f"127.0.0.{sid}"
        assert _four_letter_word(host, client_port, "ruok") == "imok"
        srvr = _four_letter_word(host, client_port, "srvr")
        modes.append(re.search(r"Mode: (\w+)", srvr).group(1))
        assert "is not executed because it is not in the whitelist" in _four_letter_word(
            host, client_port, "dump")
        status, body = _get(f"http://{host}:{ports['8080']}/commands/ruok")
        assert status == 200 and json.loads(body)["error"] is None
        status, body = _get(f"http://{host}:{ports['7000']}/metrics")
        assert status == 200 and "znode_count" in body
    assert sorted(modes) == ["follower", "follower", "leader"]

    for sid, (_, log_path) in procs.items():
        named, unknown = _warnings(log_path.read_text(errors="replace").splitlines())
        assert named == NOT_IMPLEMENTED, f"server {sid}"
        assert unknown <= TLS_KEYS, f"server {sid}"
