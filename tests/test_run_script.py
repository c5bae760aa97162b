"""scripts/run side by side: two servers started with only --port and --data-dir each get
an AdminServer and a /metrics port of their own (moved with --port), and both serve
kazoo and HTTP; --admin-port and --metrics-port choose them, 0 turns either off.

The servers run from a scratch checkout (tests/test_readme.py's: scripts/ and a .venv of
this interpreter, so nothing is installed) on ports that were free, with the ports that
follow from them, a moment before."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tests.test_readme import block_env, make_checkout
from zkcompat import config as zkconfig
from zkcompat.cli import serve as serve_cmd

HOST = "127.0.0.1"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0
CLIENT_TIMEOUT_S = 10.0
HTTP_TIMEOUT_S = 5.0
PROBE_INTERVAL_S = 0.1
# scripts/run's defaults: clientPort, the AdminServer, Prometheus.
DEFAULT_PORTS = (2181, 8080, 7000)

pytestmark = pytest.mark.timeout(120)


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def _client_port_with_free_followers(taken: set[int]) -> int:
    """A free client port P whose AdminServer and metrics ports (P + 5899, P + 4819, as
    8080 and 7000 follow 2181) are free too, and none of them in `taken`."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind((HOST, 0))
            port = s.getsockname()[1]
        ports = {port + 8080 - 2181, port + 7000 - 2181, port}
        if max(ports) < 65536 and not ports & taken and all(map(_free, ports)):
            return port
    raise AssertionError("no free client port with free AdminServer and metrics ports")


def _http(port: int, path: str) -> tuple[int, str]:
    with urllib.request.urlopen(f"http://{HOST}:{port}{path}", timeout=HTTP_TIMEOUT_S) as r:
        return r.status, r.read().decode()


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1.0):
            return True
    except OSError:
        return False


class Run:
    """One `scripts/run ARGS` in its own process group, ended by its PID."""

    def __init__(self, root: Path, env: dict[str, str], cwd: Path, *args: str):
        self.log = cwd / f"run-{'-'.join(args).replace('/', '_')}.log"
        with open(self.log, "w") as out:
            self.process = subprocess.Popen([str(root / "scripts" / "run"), *args], cwd=cwd,
                                            env=env, stdin=subprocess.DEVNULL, stdout=out,
                                            stderr=subprocess.STDOUT, start_new_session=True)

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def wait_accepting(self, port: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _accepts(port):
            assert self.process.poll() is None, f"exited {self.process.returncode}:\n{self.output()}"
            assert time.monotonic() < deadline, f"{port} never accepted:\n{self.output()}"
            time.sleep(PROBE_INTERVAL_S)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
        try:
            self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=STOP_TIMEOUT_S)


def _round_trip(port: int, path: str) -> None:
    zk = KazooClient(hosts=f"{HOST}:{port}", timeout=CLIENT_TIMEOUT_S)
    zk.start(timeout=CLIENT_TIMEOUT_S)
    try:
        zk.create(path, str(port).encode())
        assert zk.get(path)[0] == str(port).encode()
    finally:
        zk.stop()
        zk.close()


def test_two_scripts_run_servers_side_by_side(tmp_path):
    root = make_checkout(tmp_path)
    env = block_env(tmp_path)
    a = _client_port_with_free_followers(set(DEFAULT_PORTS))
    b = _client_port_with_free_followers({a, a + 5899, a + 4819, *DEFAULT_PORTS})
    runs = [Run(root, env, tmp_path, "--port", str(a), "--data-dir", "data-a"),
            Run(root, env, tmp_path, "--port", str(b), "--data-dir", "data-b")]
    try:
        for run, port in zip(runs, (a, b), strict=True):
            run.wait_accepting(port)
        for port in (a, b):
            _round_trip(port, f"/from-{port}")
            status, body = _http(port + 5899, "/commands/ruok")
            assert status == 200 and json.loads(body)["error"] is None, body
            status, body = _http(port + 5899, "/commands/conf")
            assert json.loads(body)["client_port"] == port, body
            status, body = _http(port + 4819, "/metrics")
            assert status == 200 and "znode_count" in body
        for run in runs:
            assert "http_not_started" not in run.output(), run.output()
            assert "Traceback" not in run.output(), run.output()
    finally:
        for run in runs:
            run.stop()
    for run in runs:
        assert run.process.returncode in (0, 130, -signal.SIGINT), run.output()


def _ports(*args: str, cfg: str | None = None, tmp_path: Path | None = None):
    """The AdminServer and metrics settings `zkcompat serve ARGS` would run with."""
    path = None
    if cfg is not None:
        path = tmp_path / "zoo.cfg"
        path.write_text(cfg)
    port, admin, metrics = None, None, None
    it = iter(args)
    for flag in it:
        value = int(next(it))
        if flag == "--port":
            port = value
        elif flag == "--admin-port":
            admin = value
        else:
            metrics = value
    overrides = {"clientPortAddress": HOST, "dataDir": "data"} if path is None else {}
    if port is not None:
        overrides["clientPort"] = str(port)
    overrides.update(serve_cmd.http_overrides(admin, metrics))
    cfg_ = zkconfig.load(path, overrides, environ={})
    serve_cmd.move_http_ports(cfg_, port)
    return ((cfg_.admin_server_port if cfg_.admin_enable_server else None),
            (cfg_.metrics_http_port if cfg_.metrics_enabled else None))


@pytest.mark.parametrize("args, cfg, want", [
    # ZooKeeper's defaults: the AdminServer on 8080, the Prometheus provider off.
    ((), None, (8080, None)),
    (("--port", "2181"), None, (8080, None)),
    (("--port", "2182"), None, (8081, None)),
    (("--port", "12181"), "metricsProvider.className=org.apache.zookeeper.metrics."
     "prometheus.PrometheusMetricsProvider\n", (18080, 17000)),
    # zoo.cfg's own ports stay where it puts them.
    (("--port", "2182"), "clientPort=2181\nadmin.serverPort=9090\n", (9090, None)),
    (("--port", "2182"), "zookeeper.admin.serverPort=9090\n", (9090, None)),
    (("--port", "2182"), "admin.enableServer=false\n", (None, None)),
    # The flags win, and 0 is off.
    (("--port", "2182", "--admin-port", "9999", "--metrics-port", "9998"), None, (9999, 9998)),
    (("--port", "2182", "--admin-port", "0", "--metrics-port", "0"),
     "metricsProvider.className=org.apache.zookeeper.metrics.prometheus."
     "PrometheusMetricsProvider\n", (None, None)),
    (("--admin-port", "9999"), "admin.enableServer=false\n", (9999, None)),
])
def test_admin_and_metrics_ports(tmp_path, args, cfg, want):
    assert _ports(*args, cfg=cfg, tmp_path=tmp_path) == want


def test_a_client_port_whose_admin_port_would_not_exist_is_refused(tmp_path):
    with pytest.raises(Exception, match=r"--admin-port") as e:
        _ports("--port", "60000", tmp_path=tmp_path)
    assert "65899" in str(e.value)
