"""Counter: compare-and-set on the znode version; concurrent adds lose nothing."""

from __future__ import annotations

import threading

from kazoo.recipe.counter import Counter as KazooCounter

from zkcompat.recipes import Counter


def test_compare_and_set(zk, base):
    counter = Counter(zk, f"{base}/counter")
    assert counter.get() == (0, 0)
    assert counter.compare_and_set(0, 5) is True
    assert counter.compare_and_set(0, 6) is False  # someone (we) wrote since version 0
    assert counter.get() == (5, 1)
    assert counter.add(-2) == 3


def test_concurrent_adds_are_all_counted(make_client, base):
    path = f"{base}/counter"
    workers, adds = 5, 20
    counters = [Counter(make_client(), path) for _ in range(workers)]

    def run(counter: Counter) -> None:
        for _ in range(adds):
            counter.add(1)

    threads = [threading.Thread(target=run, args=(c,)) for c in counters]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert counters[0].value == workers * adds


def test_shares_a_path_with_kazoo_counter(zk, base):
    path = f"{base}/counter"
    ours = Counter(zk, path)
    ours.add(7)
    theirs = KazooCounter(zk, path)
    theirs += 3
    assert ours.value == 10
