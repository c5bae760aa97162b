"""No herd: with 100 waiters on one FencedLock, each release wakes exactly one waiter."""

# Notifications are counted where they enter each client (every watch event the server
# sends that session), not by the recipe itself, so a recipe that watched the lock's
# children would show up here as ~100 notifications per release.

from __future__ import annotations

import threading

import pytest
from kazoo.client import KazooClient
from recipes_util import WAIT_S, wait_for

from zkcompat.recipes import FencedLock

WAITERS = 100


def count_notifications(client: KazooClient, counts: list[int], index: int) -> None:
    """Count every watch event the server sends to this client's session."""
    connection = client._connection  # kazoo's ConnectionHandler: one per client
    original = connection._read_watch_event

    def counting(buffer, offset):
        counts[index] += 1
        return original(buffer, offset)

    connection._read_watch_event = counting


@pytest.mark.timeout(240)
def test_each_release_wakes_exactly_one_waiter(zk, make_client, base):
    path = f"{base}/lock"
    holder = FencedLock(zk, path, "holder")
    holder.acquire(timeout=WAIT_S)

    counts = [0] * WAITERS
    at_acquire: list[int | None] = [None] * WAITERS  # own notifications when it got the lock
    acquired = [threading.Event() for _ in range(WAITERS)]
    release = [threading.Event() for _ in range(WAITERS)]
    errors: list[BaseException] = []
    clients = []
    for i in range(WAITERS):
        client = make_client()
        count_notifications(client, counts, i)
        clients.append(client)

    def waiter(i: int) -> None:
        try:
            lock = FencedLock(clients[i], path, f"w{i}")
            lock.acquire(timeout=WAIT_S * 6)
            at_acquire[i] = counts[i]
            acquired[i].set()
            release[i].wait(WAIT_S * 6)
            lock.release()
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)
            acquired[i].set()

    threads = []
    for i in range(WAITERS):
        t = threading.Thread(target=waiter, args=(i,), daemon=True)
        t.start()
        threads.append(t)
        # Queue in a known order, so waiter i's predecessor is waiter i-1.
        wait_for(lambda i=i: len(zk.get_children(path)) == i + 2, what=f"waiter {i} queued")
    assert sum(counts) == 0

    holder.release()
    for i in range(WAITERS):
        assert acquired[i].wait(WAIT_S), f"waiter {i} never got the lock"
        assert not errors, errors
        # The release that let waiter i in notified waiter i once, and nobody still waiting.
        assert at_acquire[i] == 1, (i, at_acquire[i])
        assert all(counts[j] == 0 for j in range(i + 1, WAITERS)), (i, counts)
        release[i].set()
    for t in threads:
        t.join(WAIT_S)
    # Every waiter was woken exactly once while it waited: WAITERS releases, WAITERS wakes.
    assert at_acquire == [1] * WAITERS
