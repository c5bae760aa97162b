"""The `ensemble` fixture: an ensemble directory in tmp_path whose servers are always
stopped (by PID) at the end, and whose log tails are printed when the test failed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .harness import Ensemble


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.ensemble_failed = report.failed


@pytest.fixture
def ensemble(request, tmp_path) -> Iterator[Ensemble]:
    ens = Ensemble(tmp_path / "ensemble")
    try:
        yield ens
    finally:
        if getattr(request.node, "ensemble_failed", False) and ens.dir.exists():
            print(ens.log_tails(60))
        ens.close()
