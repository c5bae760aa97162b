"""The `start` fixture of the tests that run one scenario on ZooKeeper 3.8 and on zkcompat:
start(kind, cfg) launches a server of that kind with those zoo.cfg lines (tickTime 2000
unless given); every one started is stopped at the end."""

from __future__ import annotations

import pytest

from conformance_tests.servers import start_zookeeper

TICK_TIME_MS = 2000


@pytest.fixture
def start(tmp_path, zkcompat_launcher):
    started = []

    def start(kind: str, cfg: dict):
        if kind == "zookeeper":
            server = start_zookeeper(tmp_path / f"zk{len(started)}", TICK_TIME_MS, cfg)
        else:
            server = zkcompat_launcher.start({"tickTime": TICK_TIME_MS, **cfg})
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
