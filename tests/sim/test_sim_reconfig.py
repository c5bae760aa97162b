"""Reconfig under the simulator's nemesis (profile "reconfig"): membership changes, the
leader's removal and changes that cannot reach their new quorum, among crashes,
partitions, pauses and power failures, on 3 and 5 servers. Every seed must pass every
check, and every live server must end with the same committed config (ZOOKEEPER-2865)."""

from __future__ import annotations

import pytest

from zkcompat.sim.cluster import run_seed

SEEDS_3 = range(1, 21)
SEEDS_5 = range(1, 9)


def _outcomes(result) -> list[str]:
    return [line.split("reconfig outcome: ", 1)[1] for line in result.trace
            if "reconfig outcome: " in line]


@pytest.mark.parametrize("servers, seeds", [(3, SEEDS_3), (5, SEEDS_5)])
def test_reconfig_under_the_nemesis_passes_every_check(servers, seeds):
    outcomes = []
    for seed in seeds:
        result = run_seed(seed, servers, profile="reconfig")
        assert result.ok, (f"zkcompat sim --servers {servers} --faults reconfig --seed {seed}",
                           result.failures)
        outcomes += _outcomes(result)
    # Not vacuous: most reconfigs committed, and some met a fault on their way.
    assert outcomes.count("committed") >= len(seeds), outcomes
    assert any(o != "committed" for o in outcomes), outcomes


def test_the_leader_is_removed_and_a_change_is_refused_in_these_seeds():
    """The seeds above include the cases the issue names: a reconfig that removes the
    serving leader, and one refused for want of a synced quorum of its new config."""
    removed_leader = refused = False
    for seed in SEEDS_3:
        result = run_seed(seed, 3, profile="reconfig")
        for line in result.trace:
            if "nemesis reconfig via s" in line:
                via = line.split("via ", 1)[1].split(":", 1)[0]
                if f"leaving={via[1:]} " in line:
                    removed_leader = True
            if "refused NEWCONFIGNOQUORUM" in line:
                refused = True
    assert removed_leader and refused


@pytest.mark.parametrize("bug, servers, message", [
    ("reconfig_old_quorum_only", 5, "committed config"),
    ("config_activated_before_commit", 3, "before applying its txn"),
])
def test_the_injected_reconfig_bugs_are_caught(bug, servers, message):
    """A reconfig committed once the old config's quorum has it (not the new one's too),
    and a config a learner takes on at the reconfig's PROPOSAL rather than its commit: the
    checks report each within the first seeds, and the same seeds pass with the bug off,
    so it is the bug they see."""
    seeds = range(1, 13)
    caught = next((s for s in seeds if any(message in f for f in run_seed(
        s, servers, profile="reconfig", bug=bug).failures)), None)
    assert caught is not None, f"seeds {list(seeds)} with {bug} and nothing caught"
    control = run_seed(caught, servers, profile="reconfig")
    assert control.ok, control.failures
