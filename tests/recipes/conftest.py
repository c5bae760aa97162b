"""Servers and clients for the recipe tests: each test runs against zkcompat and against a
real ZooKeeper (so a failure on zkcompat alone is known to be the server's)."""

# ZKCOMPAT_RECIPES_SERVERS=zkcompat (or zookeeper) narrows the list; ZKCOMPAT_RECIPES_HOSTS=
# "h1:p1,h2:p2" runs every test against that connect string instead (an ensemble already up).

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from kazoo.client import KazooClient

from conformance_tests.servers import (
    ServerProcess,
    ServerStartError,
    start_zkcompat,
    start_zookeeper,
    zookeeper_classpath,
)

TICK_TIME_MS = 200  # session timeouts between 0.4 s and 4 s: fault tests stay short
# Our own pair of servers rather than the shared `zookeeper`/`zkcompat` fixtures: the herd
# test opens 100+ sessions from 127.0.0.1, past the default maxClientCnxns of 60.
SERVER_CFG = {"maxClientCnxns": 0}
CLIENT_START_TIMEOUT_S = 15.0
SESSION_TIMEOUT_S = 4.0  # the longest the servers allow (20 ticks): no spurious expiry

HOSTS_ENV = "ZKCOMPAT_RECIPES_HOSTS"
SERVERS_ENV = "ZKCOMPAT_RECIPES_SERVERS"


@dataclass
class Target:
    """What a test talks to: a server we started, or an ensemble given by connect string."""

    kind: str  # "zkcompat", "zookeeper" or "external"
    hosts: str
    process: ServerProcess | None = None

    def log_tail(self) -> str:
        return self.process.log_tail() if self.process else ""


def _kinds() -> list[str]:
    if os.environ.get(HOSTS_ENV):
        return ["external"]
    wanted = os.environ.get(SERVERS_ENV, "zkcompat,zookeeper")
    return [k.strip() for k in wanted.split(",") if k.strip()]


@pytest.fixture(scope="session", params=_kinds())
def target(request, tmp_path_factory) -> Iterator[Target]:
    kind = request.param
    if kind == "external":
        yield Target("external", os.environ[HOSTS_ENV])
        return
    if kind == "zookeeper":
        try:
            zookeeper_classpath()
        except ServerStartError as e:
            pytest.skip(f"no reference ZooKeeper here ({e})")
        process = start_zookeeper(tmp_path_factory.mktemp("recipes-zookeeper"), TICK_TIME_MS,
                                  SERVER_CFG)
    elif kind == "zkcompat":
        process = start_zkcompat(tmp_path_factory.mktemp("recipes-zkcompat"), TICK_TIME_MS,
                                 SERVER_CFG)
    else:
        raise ValueError(f"{SERVERS_ENV}: unknown server kind {kind!r}")
    try:
        yield Target(kind, process.connect_string, process)
    finally:
        process.stop()


@pytest.fixture
def hosts(target: Target) -> str:
    return target.hosts


@pytest.fixture
def make_client(hosts: str) -> Iterator[Callable[..., KazooClient]]:
    """make_client(timeout=SESSION_TIMEOUT_S, hosts=...) -> a started KazooClient, stopped after."""
    clients: list[KazooClient] = []

    def make(timeout: float = SESSION_TIMEOUT_S, hosts: str = hosts) -> KazooClient:
        client = KazooClient(hosts=hosts, timeout=timeout)
        client.start(timeout=CLIENT_START_TIMEOUT_S)
        clients.append(client)
        return client

    yield make
    for client in clients:
        try:
            client.stop()
            client.close()
        except Exception:  # noqa: BLE001 - teardown of a client a test already broke
            pass


@pytest.fixture
def zk(make_client) -> KazooClient:
    return make_client()


@pytest.fixture
def base(zk: KazooClient) -> str:
    """A fresh path for one test; the test writes only under it."""
    path = f"/recipes-test/{uuid.uuid4().hex[:12]}"
    zk.ensure_path(path)
    return path
