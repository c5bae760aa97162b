"""Fixtures the bench tests share."""

import pytest

from bench.servers import ManagedServer


@pytest.fixture(scope="module")
def zkcompat_server(tmp_path_factory):
    """A standalone zkcompat server process for one test module."""
    server = ManagedServer("zkcompat", tmp_path_factory.mktemp("bench-server"))
    server.start("/")
    yield server
    server.stop()
