"""Semaphore: never more than N holders, a freed permit goes to a waiter, a dead holder's
permit comes back."""

from __future__ import annotations

import threading
import time

import pytest
from recipes_util import WAIT_S, wait_for

from zkcompat.recipes import LockTimeout, Semaphore


def test_at_most_n_holders(make_client, base):
    path = f"{base}/sem"
    permits, workers = 3, 8
    inside, peak, done = [0], [0], []
    mutex = threading.Lock()

    def work(i: int) -> None:
        with Semaphore(make_client(), path, permits, f"w{i}"):
            with mutex:
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
            time.sleep(0.05)
            with mutex:
                inside[0] -= 1
        done.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S * 2)
    assert sorted(done) == list(range(workers))
    assert peak[0] == permits  # reached, never exceeded


def test_timeout_and_dead_holder_frees_permit(zk, make_client, base):
    path = f"{base}/sem"
    dying_client = make_client()
    held = Semaphore(dying_client, path, 1, "dying")
    assert held.acquire(timeout=WAIT_S)
    assert held.holders() == ["dying"]
    waiter = Semaphore(zk, path, 1, "waiter")
    assert waiter.acquire(blocking=False) is False
    with pytest.raises(LockTimeout):
        waiter.acquire(timeout=0.3)
    dying_client.stop()
    assert waiter.acquire(timeout=WAIT_S)
    wait_for(lambda: waiter.holders() == ["waiter"], what="permit moved")
    with pytest.raises(ValueError):
        Semaphore(zk, path, 2).acquire(timeout=1)  # every client must agree on N
    assert waiter.release()
