"""The oracle: our Elector in one ensemble with real Apache ZooKeeper 3.8 servers (Debian's
package) on loopback. They must elect the same leader, read our connection headers and
notifications without complaint, and send us exactly the config bytes we would send.

ZooKeeper servers are ManagedServers of bench/servers.py (its classpath and zoo.cfg come
from zkcompat.cli.launch) and are stopped by their PIDs. Our server cannot follow or lead
yet, so only the election is checked.
"""

from __future__ import annotations

import asyncio
import random
import re
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bench.servers import ENSEMBLE_CFG, HOST, ManagedServer, free_port
from zkcompat.cli.launch import ZOOKEEPER_HOME
from zkcompat.jute.election import Notification, ServerState
from zkcompat.peer.elector import Elector
from zkcompat.zab.election import Vote
from zkcompat.zab.membership import QuorumServer, quorum_config_bytes

ELECT_TIMEOUT_S = 90.0  # two JVMs starting on a busy 2-core machine
FORMED_TIMEOUT_S = 90.0
LOG_WAIT_S = 30.0
STOP_GRACE_S = 10.0
LEADING_LINE = "Peer state changed: leading"  # QuorumPeer.setPeerState
LOOKING_LINE = "] LOOKING\n"  # QuorumPeer.run entering lookForLeader
FOLLOWING_LINE = "Peer state changed: following"
# What ZooKeeper logs when it refuses or fails to parse what a peer sent.
PROTOCOL_COMPLAINTS = (
    "Initial message parsing error",
    "Skipping the processing of a partial / malformed response",
    "Got a short response from server",
    "Invalid configLength",
    "Something went wrong while processing config received",
    "Exception while reading",
    "Unexpected error",
    "Notification state unrecognized",
)

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not (ZOOKEEPER_HOME / "bin" / "zkServer.sh").exists()
                       or shutil.which("java") is None,
                       reason="Apache ZooKeeper 3.8 is not installed (scripts/install-zookeeper)"),
]


def _servers(sids: tuple[int, ...]) -> list[QuorumServer]:
    return [QuorumServer(sid, HOST, free_port(), free_port()) for sid in sids]


def _cfg(servers: list[QuorumServer]) -> dict[str, str]:
    return {**ENSEMBLE_CFG, **{f"server.{s.sid}": f"{s.host}:{s.quorum_port}:{s.election_port}"
                               for s in servers}}


@contextmanager
def zookeepers(tmp_path: Path, servers: list[QuorumServer], sids: tuple[int, ...]
               ) -> Iterator[dict[int, ManagedServer]]:
    """Spawn ZooKeeper for these sids (without waiting); stop each by its PID at the end."""
    zk = {sid: ManagedServer("zookeeper", tmp_path / f"zk{sid}", extra_cfg=_cfg(servers),
                             port=free_port(), myid=sid) for sid in sids}
    try:
        for server in zk.values():
            server.spawn()
        yield zk
    finally:
        for server in zk.values():
            server.stop(STOP_GRACE_S)


def zk_log(server: ManagedServer) -> str:
    path = server.workdir / "zookeeper.log"
    return path.read_text(errors="replace") if path.exists() else ""


def wait_for_log(server: ManagedServer, text: str, timeout_s: float = FORMED_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in zk_log(server):
        assert server.alive(), f"server.{server.myid} exited; see {server.workdir}"
        assert time.monotonic() < deadline, f"server.{server.myid} never logged {text!r}"
        time.sleep(0.05)


def cfg_keys(server: ManagedServer) -> list[str]:
    """The keys of the zoo.cfg ManagedServer wrote, in file order."""
    text = (server.workdir / "zoo.cfg").read_text()
    return [line.split("=", 1)[0] for line in text.splitlines() if "=" in line]


def run_elector(my_sid: int, servers: list[QuorumServer],
                after: Callable[[], bool] | None = None, keys: list[str] | None = None,
                ) -> tuple[Vote, list[tuple[int, Notification]]]:
    """One election of ours to its decision; then, still answering as the decided server,
    wait (bounded) until `after()` holds. Returns the vote and what we received."""

    async def main() -> tuple[Vote, list[tuple[int, Notification]]]:
        elector = Elector(my_sid, servers, cfg_keys=keys, rng=random.Random(my_sid))
        try:
            vote = await asyncio.wait_for(elector.elect(0, 0), ELECT_TIMEOUT_S)
            deadline = time.monotonic() + LOG_WAIT_S
            while after is not None and not after() and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            return vote, list(elector.received)
        finally:
            await elector.close()

    return asyncio.run(main())


def assert_no_complaints(server: ManagedServer) -> None:
    text = zk_log(server)
    for complaint in PROTOCOL_COMPLAINTS:
        assert complaint not in text, f"server.{server.myid}: {complaint!r}; see {server.workdir}"


def notifications_from(log_text: str, sid: int) -> list[str]:
    """ZooKeeper's "Notification: ..." lines (WorkerReceiver parsed them) for sender sid."""
    return re.findall(rf"Notification: my state:\w+; n\.sid:{sid}, .*", log_text)


def assert_zookeeper_config(received: list[tuple[int, Notification]],
                            servers: list[QuorumServer], zk_sids: tuple[int, ...],
                            keys: list[str] | None = None) -> None:
    configs = {(sid, n.config) for sid, n in received}
    assert {sid for sid, _ in configs} == set(zk_sids)
    expected = quorum_config_bytes(servers, keys)
    for sid, config in configs:
        assert config == expected, f"server.{sid} sent {config!r}"
    assert all(n.version == 2 for _, n in received)


def test_ours_starting_with_two_zookeepers_follows_leader_3(tmp_path: Path) -> None:
    servers = _servers((1, 2, 3))
    with zookeepers(tmp_path, servers, (2, 3)) as zk:
        # Ours joins once both look: were 3's JVM slower, 2 and ours would rightly elect 2.
        for server in zk.values():
            wait_for_log(server, LOOKING_LINE)

        def they_decided_too() -> bool:
            return (all(notifications_from(zk_log(z), 1) for z in zk.values())
                    and LEADING_LINE in zk_log(zk[3]) and FOLLOWING_LINE in zk_log(zk[2]))

        vote, received = run_elector(1, servers, after=they_decided_too)
        assert (vote.leader, vote.state) == (3, ServerState.FOLLOWING)
        assert vote.zxid == 0
        assert vote.peer_epoch in (0, 1)  # 1 if they established the epoch before we joined
        assert_zookeeper_config(received, servers, (2, 3))
        # we took part in their round: they told us their LOOKING votes
        assert any(n.state == ServerState.LOOKING for _, n in received)
        for server in zk.values():
            assert notifications_from(zk_log(server), 1), f"server.{server.myid} never parsed ours"
            assert_no_complaints(server)
        assert they_decided_too()


def test_ours_starting_late_learns_the_leader_of_a_formed_quorum(tmp_path: Path) -> None:
    servers = _servers((1, 2, 3))
    with zookeepers(tmp_path, servers, (2, 3)) as zk:
        for server in zk.values():  # 2 and 3 form a quorum: both serve clients
            server.wait_serving(timeout_s=FORMED_TIMEOUT_S)
        vote, received = run_elector(
            1, servers, after=lambda: all(notifications_from(zk_log(z), 1) for z in zk.values()))
        assert (vote.leader, vote.state) == (3, ServerState.FOLLOWING)
        assert vote.peer_epoch == 1  # the epoch 3 established (updateElectionVote)
        # they answered from outside the election: 2 FOLLOWING and 3 LEADING, leader 3
        answers = {(sid, n.state, n.leader) for sid, n in received}
        assert (2, ServerState.FOLLOWING, 3) in answers
        assert (3, ServerState.LEADING, 3) in answers
        # (a LOOKING one may come first: the vote each queued for us while we were down,
        # which SendWorker sends as soon as we connect)
        assert all((n.leader, n.peer_epoch) == (3, 1) for _, n in received
                   if n.state != ServerState.LOOKING)
        assert_zookeeper_config(received, servers, (2, 3))
        for server in zk.values():
            assert notifications_from(zk_log(server), 1)
            assert_no_complaints(server)


def test_ours_as_sid_3_and_one_zookeeper_elect_ours(tmp_path: Path) -> None:
    servers = _servers((1, 2, 3))  # 2 never starts: 1 and 3 are a quorum of 3
    with zookeepers(tmp_path, servers, (1,)) as zk:
        z1 = zk[1]
        vote, received = run_elector(3, servers,
                                     after=lambda: FOLLOWING_LINE in zk_log(z1))
        assert (vote.leader, vote.state) == (3, ServerState.LEADING)
        # ZooKeeper adopted our vote in the same round before we decided
        assert any(sid == 1 and n.state == ServerState.LOOKING and n.leader == 3
                   and n.election_epoch == vote.election_epoch for sid, n in received)
        assert_zookeeper_config(received, servers, (1,))
        text = zk_log(z1)
        lines = notifications_from(text, 3)
        assert lines and "n.leader:3" in lines[0] and "message format version:0x2" in lines[0]
        # it decided to follow us (and, since we cannot lead yet, will look again later)
        assert FOLLOWING_LINE in text
        # ZooKeeper keeps only connections a larger sid opened: the one that carried our
        # notifications is ours, accepted after our header.
        assert "Received connection request from" in text
        assert_no_complaints(z1)


def test_config_bytes_with_client_addresses_observers_and_sid_17_match_zookeeper(
        tmp_path: Path) -> None:
    # 17 shares HashMap slot 1 with 1: ZooKeeper's order then follows its Properties table.
    client = {2: free_port(), 3: free_port()}
    servers = [QuorumServer(1, HOST, free_port(), free_port(), "participant", None, free_port()),
               QuorumServer(2, HOST, free_port(), free_port(), "participant", HOST, client[2]),
               QuorumServer(3, HOST, free_port(), free_port(), "participant", HOST, client[3]),
               QuorumServer(17, HOST, free_port(), free_port(), "observer"),
               QuorumServer(4, HOST, free_port(), free_port(), "observer")]
    lines = {}
    for s in servers:
        value = f"{s.host}:{s.quorum_port}:{s.election_port}:{s.role}"
        if s.client_port is not None:  # ";host:port", or ";port" for 0.0.0.0
            value += f";{s.client_host}:{s.client_port}" if s.client_host else f";{s.client_port}"
        lines[f"server.{s.sid}"] = value
    zk = {sid: ManagedServer("zookeeper", tmp_path / f"zk{sid}",
                             extra_cfg={**ENSEMBLE_CFG, **lines}, port=client[sid], myid=sid)
          for sid in (2, 3)}
    try:
        for server in zk.values():
            server.spawn()
        keys = cfg_keys(zk[2])
        assert keys == cfg_keys(zk[3])
        for server in zk.values():
            wait_for_log(server, LOOKING_LINE)
        vote, received = run_elector(1, servers, keys=keys)
        for server in zk.values():
            assert notifications_from(zk_log(server), 1)
            assert_no_complaints(server)
    finally:
        for server in zk.values():
            server.stop(STOP_GRACE_S)
    assert (vote.leader, vote.state) == (3, ServerState.FOLLOWING)
    assert_zookeeper_config(received, servers, (2, 3), keys)
    config = quorum_config_bytes(servers, keys)
    assert config.index(b"server.17=") < config.index(b"server.1=")
    assert b";0.0.0.0:" in config and b":observer\n" in config
