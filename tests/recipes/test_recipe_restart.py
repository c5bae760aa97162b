"""Tokens keep growing across a server restart: fencing relies on zxids never going back,
which holds only if the server's log is durable."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kazoo.client import KazooClient

from conformance_tests.servers import ServerProcess, start_zkcompat, start_zookeeper
from zkcompat.recipes import FencedLock

TICK_TIME_MS = 200


def _start(kind: str) -> Callable[..., ServerProcess]:
    return {"zkcompat": start_zkcompat, "zookeeper": start_zookeeper}[kind]


def _token(hosts: str) -> int:
    client = KazooClient(hosts=hosts, timeout=4.0)
    client.start(timeout=15)
    try:
        lock = FencedLock(client, "/restart-test/lock")
        token = lock.acquire(timeout=20).token
        lock.release()
        return token
    finally:
        client.stop()
        client.close()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("crash", [False, True], ids=["stop", "kill"])
def test_tokens_grow_across_restart(target, tmp_path, crash):
    if target.kind == "external":
        pytest.skip("needs a server this test can restart")
    start = _start(target.kind)
    server = start(tmp_path, TICK_TIME_MS)
    cfg = {"clientPort": server.port}
    try:
        before = [_token(server.connect_string) for _ in range(3)]
        server.kill() if crash else server.stop()
        server = start(tmp_path, TICK_TIME_MS, cfg)
        after = _token(server.connect_string)
    finally:
        server.stop()
    assert before == sorted(before)
    assert after > before[-1], (before, after)
