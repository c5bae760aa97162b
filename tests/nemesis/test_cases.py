"""Each nemesis case once on a real 3-server ensemble, under 3 recording clients (one per
server, failing over to the others), then healed and checked: the fault was felt, the
history is linearizable, sessions see their znodes in order, sequential names are unique,
no acknowledged write is lost, no server printed a traceback, and every replica holds the
same tree and digests."""

from __future__ import annotations

import os
import signal

import pytest

from tests.nemesis.net import table_names
from tests.nemesis.runner import CASES, run_round, spread_ensemble
from zkcompat.cli.ensemble_process import is_ours

FAULT_S = 5.0  # several syncLimits (1 s) and session timeouts (5 s) of the fault
ROUND_TIMEOUT_S = 150  # start, load, fault, heal, recover, check: ~25 s on a quiet box
OPS_MIN = 100  # a round that did less than this proved nothing


@pytest.fixture
def seed(case) -> int:
    return sum(map(ord, case))  # fixed per case: the replay command names it


@pytest.mark.timeout(ROUND_TIMEOUT_S)
@pytest.mark.parametrize("case", list(CASES))
def test_case(nemesis, case, seed):
    outcome = run_round(nemesis, case, seed, fault_s=FAULT_S)
    print(outcome.line())
    assert not outcome.failures, outcome.report()
    assert outcome.counts.get("ok", 0) >= OPS_MIN, outcome.report()
    assert nemesis.firewall.cut_now == frozenset()
    assert nemesis.firewall.name in table_names()
    if nemesis.disk is not None:
        assert os.path.ismount(nemesis.disk.mount.mountpoint)


@pytest.mark.timeout(ROUND_TIMEOUT_S)
def test_a_failure_inside_leaves_no_server_table_or_mount(tmp_path):
    with pytest.raises(RuntimeError, match="planted"), \
            spread_ensemble(tmp_path / "teardown", "disk-fail", 0) as rig:
        rig.disk.fault("delay fsync 100")
        rig.ens.signal(rig.ens.sids[0], signal.SIGSTOP)  # close() must still stop it
        members = list(rig.ens.members().values())
        mountpoint, table = rig.disk.mount.mountpoint, rig.firewall.name
        assert os.path.ismount(mountpoint) and table in table_names()
        raise RuntimeError("planted")
    assert not os.path.ismount(mountpoint)
    assert table not in table_names()
    assert not [m.sid for m in members if is_ours(m.pid, m.cfg)]  # a zombie is gone too
