"""The CI set of seeds: 300 three-server runs and 60 five-server runs with every fault
kind, each checked (linearizability, agreement, one leader per epoch, acknowledged writes
kept, session order). A failure names its seed; `zkcompat sim --seed S --servers N
--trace` replays it exactly."""

import pytest

from zkcompat.sim.cluster import run_seed

SEEDS_PER_TEST = 25
CI_SEEDS = {3: 300, 5: 60}


def ci_batches() -> list[tuple[int, int, int]]:
    """(servers, first seed, last seed) per test: CI_SEEDS[n] seeds from 1, in batches."""
    return [(servers, first, min(first + SEEDS_PER_TEST, count + 1) - 1)
            for servers, count in CI_SEEDS.items()
            for first in range(1, count + 1, SEEDS_PER_TEST)]


def test_the_batches_run_exactly_the_ci_seeds():
    for servers, count in CI_SEEDS.items():
        seeds = [s for n, first, last in ci_batches() if n == servers
                 for s in range(first, last + 1)]
        assert seeds == list(range(1, count + 1)), servers


@pytest.mark.parametrize(("servers", "first", "last"), ci_batches())
def test_ci_seeds(servers, first, last):
    failed = []
    for seed in range(first, last + 1):
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
