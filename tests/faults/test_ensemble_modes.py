"""Observers, read-only mode and moving sessions in a zkcompat ensemble, with real
processes and kazoo.

An observer serves clients and learns every commit but does not vote: two voters down
stop writes even with it up. A member that finds no quorum with readonlymode.enabled
serves read-only sessions (kazoo read_only=True) after its grace period, refuses writes
with NOTREADONLY and read-write clients outright, and rejoins once a quorum is back.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NotReadOnlyCallError
from kazoo.handlers.threading import KazooTimeoutError

from bench.failover import server_mode

REPO = Path(__file__).resolve().parents[2]
ENSEMBLE_START_TIMEOUT_S = 120
TICK_MS = 500


def cli(directory: Path, *args: str, timeout_s: float = ENSEMBLE_START_TIMEOUT_S) -> str:
    done = subprocess.run([sys.executable, "-m", "zkcompat", "ensemble", *args, "--dir",
                           str(directory)], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout_s)
    assert done.returncode == 0, f"ensemble {' '.join(args)}: {done.stdout}{done.stderr}"
    return done.stdout


@pytest.fixture
def ensemble(tmp_path):
    started = []

    def start(*args: str) -> dict[int, int]:
        out = cli(tmp_path, "start", "3", "--set", f"tickTime={TICK_MS}", *args)
        assert out.strip().splitlines()[-1].startswith("connect: ")
        started.append(True)
        state = json.loads((tmp_path / "ensemble.json").read_text())
        return {int(k): m["client_port"] for k, m in state["members"].items()}

    yield start, tmp_path
    if started:
        cli(tmp_path, "stop")


def client(ports, read_only: bool = False, timeout_s: float = 10.0, **kw) -> KazooClient:
    hosts = ",".join(f"127.0.0.1:{p}" for p in ports)
    zk = KazooClient(hosts=hosts, timeout=5.0, read_only=read_only, **kw)
    zk.start(timeout=timeout_s)
    return zk


def wait_mode(port: int, modes: set[str], limit_s: float = 30.0) -> str:
    deadline = time.monotonic() + limit_s
    mode = None
    while time.monotonic() < deadline:
        mode = server_mode(port)
        if mode in modes:
            return mode
        time.sleep(0.1)
    raise AssertionError(f"port {port} is {mode}, not one of {modes}, after {limit_s} s")


def test_an_observer_serves_learns_every_commit_and_does_not_vote(ensemble):
    start, directory = ensemble
    ports = start("--observers", "1")
    assert server_mode(ports[4]) == "observer"
    zk = client([ports[1]])
    zk.create("/o", b"v0")
    for i in range(20):
        zk.create("/o/n-", b"%d" % i, sequence=True)
    obs = client([ports[4]])
    obs.sync("/o")
    assert len(obs.get_children("/o")) == 20
    obs.create("/o/via-observer", b"w")  # an observer forwards writes to the leader
    zk.sync("/o")
    assert zk.get("/o/via-observer")[0] == b"w"
    zk.stop()
    zk.close()
    leader = next(k for k in (1, 2, 3) if server_mode(ports[k]) == "leader")
    for k in [k for k in (1, 2, 3) if k != leader][:1] + [leader]:
        cli(directory, "kill", str(k))
    # One voter and the observer are no quorum: no write may be acknowledged.
    with pytest.raises(Exception):  # noqa: B017 - kazoo's ConnectionLoss or a timeout
        obs.set_async("/o", b"lost").get(timeout=3 * TICK_MS / 1000 * 5)
    obs.stop()
    obs.close()
    assert server_mode(ports[4]) != "observer"  # it stopped serving with its leader gone


def test_read_only_mode_without_a_quorum_and_back(ensemble):
    start, directory = ensemble
    ports = start("--set", "readonlymode.enabled=true")
    zk = client(ports.values())
    zk.create("/ro", b"before")
    zk.stop()
    zk.close()
    leader = next(k for k in (1, 2, 3) if server_mode(ports[k]) == "leader")
    survivor = next(k for k in (1, 2, 3) if k != leader)
    for k in (1, 2, 3):
        if k != survivor:
            cli(directory, "kill", str(k))
    wait_mode(ports[survivor], {"read-only"})

    ro = client([ports[survivor]], read_only=True)
    assert ro.client_state == "CONNECTED_RO"
    assert ro.get("/ro")[0] == b"before"
    with pytest.raises(NotReadOnlyCallError):
        ro.set("/ro", b"refused")
    with pytest.raises(NotReadOnlyCallError):
        ro.sync("/ro")
    with pytest.raises(KazooTimeoutError):  # a read-write client is refused outright
        client([ports[survivor]], timeout_s=3.0)
    ro.stop()
    ro.close()

    back = next(k for k in (1, 2, 3) if k not in (survivor, leader))
    cli(directory, "start-server", str(back))
    wait_mode(ports[survivor], {"leader", "follower"})
    zk = client([ports[survivor]])
    zk.set("/ro", b"after")
    assert zk.get("/ro")[0] == b"after"
    zk.stop()
    zk.close()


def test_a_session_resumed_on_another_server_moves_there(ensemble):
    """REVALIDATE makes the new server the session's owner; a write through the old
    connection is then SESSIONMOVED, which closes that connection (ZOOKEEPER-710)."""
    from kazoo.exceptions import ConnectionLoss

    start, _ = ensemble
    ports = start()
    a = client([ports[1]])
    a.create("/mv", b"a")
    b = client([ports[2]], client_id=a.client_id)
    assert b.client_id[0] == a.client_id[0]
    b.set("/mv", b"b")
    with pytest.raises(ConnectionLoss):
        a.set_async("/mv", b"through the old connection").get(timeout=10)
    assert b.get("/mv")[0] == b"b"
    for zk in (a, b):
        zk.stop()
        zk.close()
