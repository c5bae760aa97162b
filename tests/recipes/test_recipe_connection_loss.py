"""Writes whose reply is lost: the recipes neither duplicate them nor report them wrongly."""

# The loss is injected in the client (the request reaches the server, the caller sees
# ConnectionLoss), which is the case a retry must get right.

from __future__ import annotations

import pytest
from kazoo.exceptions import ConnectionLoss

from zkcompat.recipes import Counter, FencedLock, IndeterminateOutcome


def lose_reply_once(client, method: str, apply: bool) -> list[int]:
    """Make the next call of client.<method> raise ConnectionLoss, after (apply=True) or
    instead of (apply=False) sending it."""
    real = getattr(client, method)
    calls = [0]

    def flaky(*args, **kwargs):
        calls[0] += 1
        if calls[0] == 1:
            if apply:
                real(*args, **kwargs)
            raise ConnectionLoss()
        return real(*args, **kwargs)

    setattr(client, method, flaky)
    return calls


def test_lock_create_lost_reply_does_not_leave_a_second_node(zk, base):
    path = f"{base}/lock"
    zk.ensure_path(path)
    calls = lose_reply_once(zk, "create", apply=True)
    lock = FencedLock(zk, path)
    sequencer = lock.acquire(timeout=20)
    assert calls[0] == 1  # found by its unique prefix, not created again
    assert zk.get_children(path) == [sequencer.node]
    lock.release()
    assert zk.get_children(path) == []


def test_counter_cas_resends_a_write_that_never_landed(zk, base):
    counter = Counter(zk, f"{base}/counter")
    value, version = counter.get()
    lose_reply_once(zk, "set", apply=False)
    assert counter.compare_and_set(version, value + 1) is True
    assert counter.get() == (value + 1, version + 1)


def test_counter_cas_reports_a_write_that_may_have_landed(zk, base):
    counter = Counter(zk, f"{base}/counter")
    value, version = counter.get()
    lose_reply_once(zk, "set", apply=True)
    with pytest.raises(IndeterminateOutcome):
        counter.compare_and_set(version, value + 1)
    assert counter.get() == (value + 1, version + 1)  # applied once, never twice
