"""LeaderElection: one leader at a time, epochs that grow, and a follower that wakes alone."""

from __future__ import annotations

import threading

import pytest
from recipes_util import WAIT_S, wait_for

from zkcompat.recipes import FencedResource, LeaderElection, LockState, StaleTokenError


def test_leaders_in_turn_with_growing_epochs(make_client, base):
    path = f"{base}/election"
    elections = [LeaderElection(make_client(), path, f"node-{i}") for i in range(3)]
    leader = elections[0]
    first = leader.campaign(timeout=WAIT_S)
    assert leader.is_leader and leader.epoch == first.token
    results: dict[str, int] = {}
    threads = []
    for e in elections[1:]:
        t = threading.Thread(target=lambda e=e: results.setdefault(e.identifier,
                                                                  e.campaign(WAIT_S).token))
        t.start()
        threads.append(t)
        wait_for(lambda e=e: e.identifier in leader.contenders(), what="follower in line")
    assert leader.leader() == "node-0"
    assert leader.contenders() == ["node-0", "node-1", "node-2"]
    leader.resign()
    wait_for(lambda: "node-1" in results, what="node-1 leads")
    assert "node-2" not in results  # only the direct successor took over
    assert elections[1].leader() == "node-1"
    assert results["node-1"] > first.token
    elections[1].resign()
    for t in threads:
        t.join(WAIT_S)
    assert results["node-2"] > results["node-1"]
    elections[2].resign()


def test_deposed_leader_is_fenced_by_epoch(zk, make_client, base):
    path = f"{base}/election"
    resource = FencedResource(lock_path=path)
    doomed_client = make_client()
    old = LeaderElection(doomed_client, path, "old")
    old_epoch = old.campaign(timeout=WAIT_S)
    resource.check("config", old_epoch)
    new = LeaderElection(zk, path, "new")
    got = []
    t = threading.Thread(target=lambda: got.append(new.campaign(WAIT_S)))
    t.start()
    wait_for(lambda: len(new.contenders()) == 2, what="follower in line")
    doomed_client.stop()  # the old leader's session ends (as in a crash)
    t.join(WAIT_S)
    resource.check("config", got[0])
    with pytest.raises(StaleTokenError):
        resource.check("config", old_epoch)


def test_run_resigns_after_the_function(zk, base):
    election = LeaderElection(zk, f"{base}/election", "me")
    seen = election.run(lambda sequencer: (election.is_leader, sequencer.token))
    assert seen[0] is True and seen[1] > 0
    assert election.state is LockState.UNLOCKED
    assert election.contenders() == []
