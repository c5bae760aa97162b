"""A few nemesis cases on mixed 3-server ensembles, Apache ZooKeeper 3.8 beside zkcompat
(mixed.py): with two ZooKeepers a follower cut off, the leader cut off and the leader
killed; with one, a server killed. The same checks as test_cases.py, with what is
ZooKeeper's own known behaviour (a stale sync-then-read its leader answered without a
quorum) kept apart and printed, not counted. A ZooKeeper member must feel a partition (its
peer links leave from its own address through the LD_PRELOAD shim, or the nft rules would
not cut them): lone-leader cuts off a ZooKeeper leader, whose log must show it went back
to LOOKING, and its followers, a zkcompat and a ZooKeeper, elect another."""

from __future__ import annotations

import re

import pytest

from tests.nemesis.net import table_names
from tests.nemesis.runner import run_round

FAULT_S = 5.0
ROUND_TIMEOUT_S = 180  # JVMs start slower than zkcompat: ~20 s a round on a quiet box
OPS_MIN = 100

# (mix, case, seed): the seed chooses which servers are ZooKeeper (mixed.kinds: seed % 3 is
# 1 for servers 2 and 3, so the first leader, the highest sid of the first election, is a
# ZooKeeper) and what the case does.
ROUNDS = [("zk2", "minority", 1), ("zk2", "lone-leader", 4), ("zk2", "kill-leader", 3),
          ("zk1", "kill", 5)]
CUT_LEADER = re.compile(r"cut leader server\.(\d) alone")


@pytest.fixture
def mix(request) -> str:
    return request.param


@pytest.fixture
def case(request) -> str:
    return request.param


@pytest.fixture
def seed(request) -> int:
    return request.param


@pytest.mark.timeout(ROUND_TIMEOUT_S)
@pytest.mark.parametrize(("mix", "case", "seed"), ROUNDS, indirect=True,
                         ids=[f"{m}-{c}" for m, c, _ in ROUNDS])
def test_mixed_case(nemesis, mix, case, seed):
    zookeeper = nemesis.zookeeper
    assert len(zookeeper) == {"zk1": 1, "zk2": 2}[mix], nemesis.ens.members()
    outcome = run_round(nemesis, case, seed, fault_s=FAULT_S)
    print(outcome.line())
    for anomaly in outcome.zookeeper_anomalies:
        print(f"  {anomaly}")
    assert not outcome.failures, outcome.report()
    assert outcome.counts.get("ok", 0) >= OPS_MIN, outcome.report()
    if case == "lone-leader":  # the round checked that it went back to LOOKING
        cut = [int(m.group(1)) for line in outcome.schedule if (m := CUT_LEADER.search(line))]
        assert cut and cut[0] in zookeeper, f"a zkcompat server led: {outcome.schedule}"
    assert nemesis.firewall.cut_now == frozenset()
    assert nemesis.firewall.name in table_names()
