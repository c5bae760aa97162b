"""The in-process harness drives the real pipeline: every request is answered, none fails."""

import pytest

from bench.inproc import measure


@pytest.mark.parametrize("kind", ["get", "set", "ephemeral"])
def test_every_request_is_answered_without_error(kind):
    res = measure(kind, requests=640, rounds=2)
    assert res.requests == 640
    assert res.replies == 2 * 640
    assert res.errors == 0
    assert res.best_us > 0


@pytest.mark.parametrize("kind", ["set", "ephemeral"])
def test_one_at_a_time_answers_each_request_before_the_next(kind):
    res = measure(kind, requests=256, rounds=1, one_at_a_time=True)
    assert res.requests == 256
    assert res.replies == 256
    assert res.errors == 0
