"""Each partition case once on a real 3-server ensemble, under 3 recording clients (one per
server, failing over to the others), then healed and checked: the history is linearizable,
sessions see their znodes in order, sequential names are unique, no acknowledged write is
lost, and every replica holds the same tree and digests."""

from __future__ import annotations

import pytest

from tests.nemesis.net import table_names
from tests.nemesis.runner import CASES, run_round

FAULT_S = 5.0  # several syncLimits (1 s) and session timeouts (5 s) of the partition
ROUND_TIMEOUT_S = 120  # start, load, fault, heal, recover, check: ~20 s on a quiet box
OPS_MIN = 100  # a round that did less than this proved nothing


@pytest.mark.timeout(ROUND_TIMEOUT_S)
@pytest.mark.parametrize("case", list(CASES))
def test_partition(nemesis, case):
    ens, firewall = nemesis
    seed = sum(map(ord, case))  # fixed per case: the replay command names it
    outcome = run_round(ens, firewall, case, seed, fault_s=FAULT_S)
    print(outcome.line())
    assert not outcome.failures, outcome.report()
    assert outcome.counts.get("ok", 0) >= OPS_MIN, outcome.report()
    assert firewall.cut_now == frozenset() and firewall.name in table_names()
