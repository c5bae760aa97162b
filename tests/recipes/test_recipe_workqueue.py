"""WorkQueue: ordered, claimed once, completed atomically, given back when a worker dies."""

from __future__ import annotations

import threading

import pytest
from kazoo.recipe.queue import LockingQueue
from recipes_util import WAIT_S

from zkcompat.recipes import ClaimLost, WorkQueue


def test_priority_then_fifo_and_complete(zk, base):
    queue = WorkQueue(zk, f"{base}/queue")
    queue.put(b"low-1", priority=200)
    queue.put(b"a")
    queue.put(b"b")
    queue.put(b"urgent", priority=1)
    taken = []
    while (item := queue.take(timeout=0)) is not None:
        taken.append(item.data)
        queue.complete(item)
    assert taken == [b"urgent", b"a", b"b", b"low-1"]
    assert len(queue) == 0


def test_take_waits_for_put(zk, make_client, base):
    consumer = WorkQueue(zk, f"{base}/queue")
    got = []
    t = threading.Thread(target=lambda: got.append(consumer.take(timeout=WAIT_S)))
    t.start()
    WorkQueue(make_client(), f"{base}/queue").put(b"job")
    t.join(WAIT_S)
    assert got and got[0].data == b"job"
    assert consumer.take(timeout=0.2) is None  # claimed, so not offered again


def test_each_item_processed_once_by_concurrent_workers(make_client, base):
    path = f"{base}/queue"
    producer = WorkQueue(make_client(), path)
    items = 40
    for i in range(items):
        producer.put(str(i).encode())
    done: list[bytes] = []
    mutex = threading.Lock()

    def worker() -> None:
        queue = WorkQueue(make_client(), path)
        while (item := queue.take(timeout=0.5)) is not None:
            with mutex:
                done.append(item.data)
            queue.complete(item)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S * 3)
    assert sorted(done, key=int) == [str(i).encode() for i in range(items)]


def test_dead_worker_item_comes_back_and_stale_complete_fails(zk, make_client, base):
    path = f"{base}/queue"
    WorkQueue(zk, path).put(b"job")
    dying_client = make_client()
    dying = WorkQueue(dying_client, path)
    first = dying.take(timeout=WAIT_S)
    survivor = WorkQueue(make_client(), path)
    assert survivor.take(timeout=0.2) is None
    dying_client.stop()
    second = survivor.take(timeout=WAIT_S)
    assert second.data == b"job" and second.token > first.token
    with pytest.raises(ClaimLost):
        survivor.complete(first)  # a claim from another session is not ours to complete
    survivor.release(second)
    third = survivor.take(timeout=WAIT_S)
    survivor.complete(third)
    assert len(survivor) == 0


def test_kazoo_locking_queue_feeds_us(zk, base):
    path = f"{base}/queue"
    LockingQueue(zk, path).put(b"from-kazoo", priority=5)
    item = WorkQueue(zk, path).take(timeout=WAIT_S)
    assert item.data == b"from-kazoo"
