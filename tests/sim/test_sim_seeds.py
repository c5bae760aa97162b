"""The CI set of seeds: 300 three-server runs and 60 five-server runs with every fault
kind, each checked (linearizability, agreement, one leader per epoch, acknowledged writes
kept, session order). A failure names its seed; `zkcompat sim --seed S --servers N
--trace` replays it exactly."""

import pytest

from zkcompat.sim.cluster import run_seed

SEEDS_PER_TEST = 25
CI_SEEDS = {3: 300, 5: 60}


@pytest.mark.parametrize(("servers", "first"), [
    (servers, first) for servers, count in CI_SEEDS.items()
    for first in range(1, count + 1, SEEDS_PER_TEST)])
def test_ci_seeds(servers, first):
    failed = []
    for seed in range(first, first + SEEDS_PER_TEST):
        result = run_seed(seed, servers)
        if not result.ok:
            failed.append(f"seed {seed}: {result.failures[:3]} (replay: zkcompat sim --seed "
                          f"{seed} --servers {servers} --trace)")
    assert not failed, "\n".join(failed)


# Seeds that found a bug in the real code, kept whatever the CI range becomes:
# (seed, servers, fault profile, what it found).
REGRESSION_SEEDS = [
    (161, 3, "all", "quorum._lead: a learner accepted but not yet identified when the "
     "leader's term ended was left open, then synced and served by the ended term (its "
     "txns appended to the log the next term uses: 'log must grow in zxid order')"),
]


@pytest.mark.parametrize(("seed", "servers", "profile", "found"), REGRESSION_SEEDS)
def test_regression_seeds(seed, servers, profile, found):
    result = run_seed(seed, servers, profile=profile)
    assert result.ok, (found, result.failures[:3],
                       f"replay: zkcompat sim --seed {seed} --servers {servers} "
                       f"--faults {profile} --trace")
