"""Real servers as session-scoped fixtures, shared by tests/ and conformance_tests/ (the
root conftest.py loads this module once, so one pytest run starts one pair of servers).

Fixtures: `zookeeper` (real ZooKeeper 3.8), `zkcompat` (this checkout), `zk_servers`
(both, as a ServerPair), `conformance_pair` (reference, candidate) for the differential
harness. CONFORMANCE_SELFTEST=1 makes the candidate a second real ZooKeeper, which proves
the scenarios and the normalisation are deterministic.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NamedTuple

import pytest

from conformance_tests.harness import close_admin_clients
from conformance_tests.servers import (
    ServerProcess,
    start_zkcompat,
    start_zkcompat_ensemble,
    start_zookeeper,
    zkcompat_available,
)

TICK_TIME_MS = 200
SELFTEST = os.environ.get("CONFORMANCE_SELFTEST", "") not in ("", "0")
# CONFORMANCE_CANDIDATE=ensemble: the candidate is a 3-server zkcompat ensemble, reached
# through a connect string that names all three (scripts/test runs the suite both ways).
ENSEMBLE = os.environ.get("CONFORMANCE_CANDIDATE", "") == "ensemble"


class ServerPair(NamedTuple):
    zookeeper: ServerProcess
    zkcompat: ServerProcess


def _serve(server: ServerProcess) -> Iterator[ServerProcess]:
    try:
        yield server
    finally:
        close_admin_clients()
        server.stop()


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory) -> Iterator[ServerProcess]:
    yield from _serve(start_zookeeper(tmp_path_factory.mktemp("zookeeper"), TICK_TIME_MS))


@pytest.fixture(scope="session")
def zookeeper_b(tmp_path_factory) -> Iterator[ServerProcess]:
    """A second real ZooKeeper: the candidate in CONFORMANCE_SELFTEST mode."""
    yield from _serve(start_zookeeper(tmp_path_factory.mktemp("zookeeper_b"), TICK_TIME_MS))


@pytest.fixture(scope="session")
def zkcompat(tmp_path_factory) -> Iterator[ServerProcess]:
    if not zkcompat_available():
        pytest.fail("zkcompat/__main__.py is missing: `python -m zkcompat serve` cannot run")
    yield from _serve(start_zkcompat(tmp_path_factory.mktemp("zkcompat"), TICK_TIME_MS))


@pytest.fixture(scope="session")
def zkcompat_ensemble(tmp_path_factory):
    yield from _serve(start_zkcompat_ensemble(tmp_path_factory.mktemp("ensemble"), TICK_TIME_MS))


@pytest.fixture(scope="session")
def zk_servers(zookeeper, zkcompat) -> ServerPair:
    return ServerPair(zookeeper, zkcompat)


@pytest.fixture(scope="session")
def conformance_pair(request) -> tuple[ServerProcess, ServerProcess]:
    reference = request.getfixturevalue("zookeeper")
    name = "zookeeper_b" if SELFTEST else "zkcompat_ensemble" if ENSEMBLE else "zkcompat"
    candidate = request.getfixturevalue(name)
    return reference, candidate
