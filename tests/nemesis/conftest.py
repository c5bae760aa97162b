"""The `nemesis` fixture: a fresh 3-server ensemble on 127.0.0.1-3 (a mixed one for a test
that names a `mix`) with its own nft table (and the case's disk, when it has one) for the
test's `case`; the table, the servers (by PID) and the mount are removed at the end,
whatever happened, and the servers' log tails are printed when the test failed."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.nemesis import net
from tests.nemesis.runner import Rig, spread_ensemble


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.nemesis_failed = report.failed


@pytest.fixture
def nemesis(request, tmp_path, case, seed) -> Iterator[Rig]:
    """A test that also names a `mix` (mixed.MIXES) gets a mixed ensemble."""
    if shutil.which("nft") is None:
        pytest.fail(net.NFT_MISSING)
    mix = request.getfixturevalue("mix") if "mix" in request.fixturenames else None
    with spread_ensemble(tmp_path / "ensemble", case, seed, mix=mix) as rig:
        try:
            yield rig
        finally:
            if getattr(request.node, "nemesis_failed", False):
                print(rig.ens.log_tails(60))
