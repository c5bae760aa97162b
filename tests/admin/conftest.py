"""Servers for the AdminServer and metrics tests: a real ZooKeeper 3.8 with its Jetty
AdminServer on, and a zkcompat with its AdminServer and Prometheus port on, both standalone,
each on free loopback ports, both given the same client traffic (`scenario`).

Debian's zookeeper.jar names Jetty in its manifest Class-Path but not the servlet API,
so without /usr/share/java/servlet-api.jar ZooKeeper logs "Unable to load jetty, not
starting JettyAdminServer" (NoClassDefFoundError: javax/servlet/Servlet). The fixture
adds that jar. Debian ships no Prometheus provider (no io.prometheus simpleclient jars, no
org.apache.zookeeper.metrics.prometheus classes), so metrics are compared with the names
in ZooKeeper's source instead (test_metrics.py).
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from unittest import mock

import pytest
from kazoo.client import KazooClient

from conformance_tests import servers
from conformance_tests.servers import HOST, ServerProcess, free_port

TICK_TIME_MS = 200
HTTP_TIMEOUT_S = 10.0
CLIENT_TIMEOUT_S = 15.0
SERVLET_API_JAR = "servlet-api.jar"  # /usr/share/java, Debian's libservlet-api-java
PROMETHEUS_PROVIDER = "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider"


@dataclass
class AdminServer:
    """A server process and its AdminServer (and /metrics) port."""

    server: ServerProcess
    admin_port: int
    metrics_port: int | None = None

    @property
    def kind(self) -> str:
        return self.server.kind

    def get(self, command: str, query: str = "") -> dict:
        return json.loads(http_get(self.admin_port, f"/commands/{command}{query}"))

    def links(self) -> str:
        return http_get(self.admin_port, "/commands")

    def metrics(self) -> str:
        assert self.metrics_port is not None
        return http_get(self.metrics_port, "/metrics")


def http_get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://{HOST}:{port}{path}", timeout=HTTP_TIMEOUT_S) as r:
        assert r.status == 200, (port, path, r.status)
        return r.read().decode()


def admin_cfg(admin_port: int) -> dict:
    return {"admin.enableServer": "true", "admin.serverAddress": HOST,
            "admin.serverPort": admin_port}


@pytest.fixture(scope="package")
def zookeeper_admin(tmp_path_factory) -> Iterator[AdminServer]:
    port = free_port()
    with mock.patch.object(servers, "ZOOKEEPER_LOGGING_JARS",
                           (*servers.ZOOKEEPER_LOGGING_JARS, SERVLET_API_JAR)):
        server = servers.start_zookeeper(tmp_path_factory.mktemp("zookeeper_admin"),
                                         TICK_TIME_MS, admin_cfg(port))
    try:
        yield AdminServer(server, port)
    finally:
        server.stop()


@pytest.fixture(scope="package")
def zkcompat_admin(tmp_path_factory) -> Iterator[AdminServer]:
    port, metrics_port = free_port(), free_port()
    cfg = {**admin_cfg(port), "metricsProvider.className": PROMETHEUS_PROVIDER,
           "metricsProvider.httpHost": HOST, "metricsProvider.httpPort": metrics_port}
    server = servers.start_zkcompat(tmp_path_factory.mktemp("zkcompat_admin"), TICK_TIME_MS, cfg)
    try:
        yield AdminServer(server, port, metrics_port)
    finally:
        server.stop()


@dataclass
class Scenario:
    """What `scenario` did on one server, and the client that still holds its session."""

    client: KazooClient
    session_id: int


def run_scenario(server: ServerProcess) -> Scenario:
    """The same traffic on either server: a znode with data, an ephemeral child, a data
    watch and a child watch on the first, an exists watch on a missing path."""
    client = KazooClient(server.connect_string, timeout=CLIENT_TIMEOUT_S)
    client.start(timeout=CLIENT_TIMEOUT_S)
    client.create("/admin-a", b"hello")
    client.create("/admin-a/b", b"x", ephemeral=True)
    client.get("/admin-a", watch=lambda e: None)
    client.get_children("/admin-a", watch=lambda e: None)
    client.exists("/admin-nope", watch=lambda e: None)
    return Scenario(client, client.client_id[0])


@pytest.fixture(scope="package")
def scenario(zookeeper_admin, zkcompat_admin) -> Iterator[dict[str, Scenario]]:
    done = {s.kind: run_scenario(s.server) for s in (zookeeper_admin, zkcompat_admin)}
    try:
        yield done
    finally:
        for s in done.values():
            s.client.stop()
            s.client.close()


@pytest.fixture(scope="package")
def pair(zookeeper_admin, zkcompat_admin, scenario) -> tuple[AdminServer, AdminServer]:
    return zookeeper_admin, zkcompat_admin
