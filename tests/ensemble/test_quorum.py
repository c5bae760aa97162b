"""Quorum arithmetic as a user meets it: a 3-server ensemble with 2 down acknowledges
nothing and serves again once one comes back, with everything it had; a 5-server one keeps
serving with 2 down, and those two catch up when they return."""

from __future__ import annotations

import time

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from .harness import (
    FAST,
    Load,
    check_acked_everywhere,
    check_trees_agree,
)

ACKS = 60
NO_QUORUM_ATTEMPTS = 5
NO_QUORUM_WRITE_TIMEOUT_S = 2.0


def test_lost_quorum_acknowledges_nothing_until_a_server_returns(ensemble):
    ensemble.start(3, settings=FAST)
    leader = ensemble.wait_one_leader()
    with Load(ensemble) as load:
        load.wait_acks(ACKS, 0, "with all three up")
    follower = next(s for s in ensemble.sids if s != leader)
    last = next(s for s in ensemble.sids if s not in (leader, follower))
    client = ensemble.client()

    ensemble.kill(follower)
    ensemble.kill(leader)
    ensemble.wait_modes(lambda m: m[last] not in ("leader", "follower"),
                        f"server.{last} alone stops serving")
    outcomes = []
    for i in range(NO_QUORUM_ATTEMPTS):
        try:
            outcomes.append(client.create_async(f"/load/no-quorum-{i}", b"x").get(
                timeout=NO_QUORUM_WRITE_TIMEOUT_S))
        except (KazooException, KazooTimeoutError) as e:
            outcomes.append(type(e).__name__)
    assert all(o in ("ConnectionLoss", "KazooTimeoutError", "ConnectionClosedError")
               for o in outcomes), f"a write without a quorum: {outcomes}"
    assert ensemble.mode(last) not in ("leader", "follower")

    ensemble.start_server(leader)
    ensemble.wait_one_leader([leader, last])
    resumed_at = time.monotonic()
    with Load(ensemble, [leader, last], root="/again") as again:
        again.wait_acks(ACKS, resumed_at, "once two of three are up")
    check_acked_everywhere(ensemble, load.acked, [leader, last])
    check_acked_everywhere(ensemble, again.acked, [leader, last])


def test_five_servers_serve_with_two_down_and_they_catch_up(ensemble):
    ensemble.start(5, settings=FAST)
    leader = ensemble.wait_one_leader()
    follower = next(s for s in ensemble.sids if s != leader)
    down = [leader, follower]
    up = [s for s in ensemble.sids if s not in down]
    with Load(ensemble) as load:
        load.wait_acks(ACKS, 0, "with all five up")
        killed_at = ensemble.kill(leader)
        ensemble.kill(follower)
        new_leader = ensemble.wait_one_leader(up)
        load.wait_acks(ACKS, killed_at, "with two of five down")
    assert new_leader in up
    check_acked_everywhere(ensemble, load.acked, up)

    ensemble.start_servers(*down)
    assert ensemble.wait_one_leader() == new_leader
    check_acked_everywhere(ensemble, load.acked, down)
    assert check_trees_agree(ensemble, "/load") > ACKS
