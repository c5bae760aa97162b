"""Barrier and DoubleBarrier."""

from __future__ import annotations

import threading
import time

import pytest
from recipes_util import WAIT_S

from zkcompat.recipes import Barrier, BarrierTimeout, DoubleBarrier


def test_barrier_holds_until_removed(zk, make_client, base):
    barrier = Barrier(zk, f"{base}/barrier")
    barrier.create()
    waiter = Barrier(make_client(), f"{base}/barrier")
    assert waiter.wait(timeout=0.2) is False
    passed = []
    t = threading.Thread(target=lambda: passed.append(waiter.wait(timeout=WAIT_S)))
    t.start()
    time.sleep(0.1)
    assert barrier.remove() is True
    t.join(WAIT_S)
    assert passed == [True]


def test_double_barrier_enters_together_and_leaves_together(make_client, base):
    path = f"{base}/double"
    members = 4
    log: list[tuple[str, int]] = []
    mutex = threading.Lock()
    errors: list[BaseException] = []

    def member(i: int) -> None:
        try:
            barrier = DoubleBarrier(make_client(), path, members, f"m{i}")
            time.sleep(0.05 * i)  # arrive one by one
            barrier.enter(timeout=WAIT_S)
            with mutex:
                log.append(("entered", i))
            time.sleep(0.05 * (members - i))  # finish in the other order
            with mutex:
                log.append(("leaving", i))
            barrier.leave(timeout=WAIT_S)
            with mutex:
                log.append(("left", i))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=member, args=(i,)) for i in range(members)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S * 2)
    assert not errors, errors
    kinds = [k for k, _ in log]
    # Nobody is past enter() before all have entered... (all "entered" precede any "leaving")
    assert kinds[:members] == ["entered"] * members
    # ...and nobody is past leave() before all have started leaving.
    first_left = kinds.index("left")
    assert kinds[:first_left].count("leaving") == members


def test_double_barrier_enter_times_out_and_leaves(zk, base):
    path = f"{base}/double"
    barrier = DoubleBarrier(zk, path, 2, "alone")
    with pytest.raises(BarrierTimeout):
        barrier.enter(timeout=0.3)
    assert zk.get_children(path) == []
