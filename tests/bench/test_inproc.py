"""The in-process harness drives the real pipeline: every request is answered, none fails."""

import pytest

from zkcompat.bench.inproc import measure


@pytest.mark.parametrize("kind", ["get", "set", "ephemeral"])
def test_every_request_is_answered_without_error(kind):
    res = measure(kind, requests=640, rounds=2)
    assert res.requests == 640
    assert res.replies == 2 * 640
    assert res.errors == 0
    assert res.best_us > 0
