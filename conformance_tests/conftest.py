"""One test per @scenario; the server fixtures live in fixtures.py (loaded by the root
conftest.py, so tests/ and conformance_tests/ share one pair of servers)."""

from __future__ import annotations

import pytest

from .harness import run_differential


def _scenario_test(sc):
    def test(conformance_pair) -> None:
        __tracebackhide__ = True
        run_differential(sc, *conformance_pair)

    test.__name__ = sc.name
    test.__doc__ = sc.doc
    test.pytestmark = [pytest.mark.timeout(sc.timeout_s), pytest.mark.conformance]
    return test


def pytest_pycollect_makeitem(collector, name, obj):
    """Collect every @scenario function, whatever its name, as one test."""
    sc = getattr(obj, "__conformance_scenario__", None)
    if sc is None or not isinstance(collector, pytest.Module):
        return None
    return pytest.Function.from_parent(collector, name=name, callobj=_scenario_test(sc))


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", "conformance: a differential scenario, ZooKeeper vs zkcompat"
    )
