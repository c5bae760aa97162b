"""A tour of the classic recipes: counter, semaphore, read/write lock, double barrier, work
queue and group membership, each in a few lines."""

# Usage:
#     scripts/run &
#     .venv/bin/python examples/classic_recipes.py [--hosts H]

from __future__ import annotations

import argparse
import os
import threading
import uuid

from kazoo.client import KazooClient

from zkcompat.recipes import (
    Counter,
    DoubleBarrier,
    FencedReadLock,
    FencedWriteLock,
    GroupMembership,
    Semaphore,
    WorkQueue,
)

DEFAULT_HOSTS = os.environ.get("ZKCOMPAT_HOSTS", "127.0.0.1:2181")


def counter(zk: KazooClient, base: str) -> None:
    hits = Counter(zk, f"{base}/hits")
    value, version = hits.get()
    assert hits.compare_and_set(version, value + 10)
    assert not hits.compare_and_set(version, 99)  # stale version: refused
    print(f"counter: {hits.add(5)} (compare-and-set on version {version}, then add)")


def semaphore(zk: KazooClient, base: str) -> None:
    pool = [Semaphore(zk, f"{base}/db-connections", permits=2, identifier=f"w{i}")
            for i in range(3)]
    assert pool[0].acquire() and pool[1].acquire()
    assert not pool[2].acquire(blocking=False)  # both permits taken
    print(f"semaphore: holders {sorted(pool[0].holders())}, third waits")
    pool[0].release()
    assert pool[2].acquire(timeout=10)
    pool[1].release()
    pool[2].release()


def read_write_lock(zk: KazooClient, base: str) -> None:
    readers = [FencedReadLock(zk, f"{base}/table", f"reader-{i}") for i in range(2)]
    tokens = [r.acquire(timeout=10).token for r in readers]
    writer = FencedWriteLock(zk, f"{base}/table", "writer")
    assert writer.acquire(blocking=False) is None  # readers in: the writer waits
    for r in readers:
        r.release()
    token = writer.acquire(timeout=10).token
    print(f"read/write lock: readers shared tokens {tokens}, then the writer got {token}")
    writer.release()


def double_barrier(zk: KazooClient, base: str) -> None:
    order: list[str] = []

    def member(i: int) -> None:
        barrier = DoubleBarrier(zk, f"{base}/phase", count=3, identifier=f"m{i}")
        barrier.enter(timeout=10)
        order.append("in")
        barrier.leave(timeout=10)
        order.append("out")

    threads = [threading.Thread(target=member, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"double barrier: {order} (all in before anyone out)")


def work_queue(zk: KazooClient, base: str) -> None:
    queue = WorkQueue(zk, f"{base}/jobs")
    for job in (b"resize img-1", b"resize img-2"):
        queue.put(job)
    queue.put(b"page the on-call", priority=0)
    done = []
    while (item := queue.take(timeout=0)) is not None:
        done.append(item.data.decode())
        queue.complete(item)  # until this, a crash would put the item back
    print(f"work queue: {done}")


def membership(zk: KazooClient, base: str, hosts: str) -> None:
    other = KazooClient(hosts=hosts)
    other.start(timeout=15)
    GroupMembership(zk, f"{base}/workers", "worker-a").join()
    GroupMembership(other, f"{base}/workers", "worker-b").join()
    seen = GroupMembership(zk, f"{base}/workers").members()
    other.stop()  # worker-b's session ends: it leaves the group by itself
    other.close()
    print(f"membership: {seen} -> {GroupMembership(zk, f'{base}/workers').members()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default=DEFAULT_HOSTS,
                        help="connect string (default: $ZKCOMPAT_HOSTS or 127.0.0.1:2181)")
    args = parser.parse_args()
    base = f"/zkcompat-examples/classic-{uuid.uuid4().hex[:8]}"
    zk = KazooClient(hosts=args.hosts)
    zk.start(timeout=15)
    try:
        counter(zk, base)
        semaphore(zk, base)
        read_write_lock(zk, base)
        double_barrier(zk, base)
        work_queue(zk, base)
        membership(zk, base, args.hosts)
        zk.delete(base, recursive=True)
    finally:
        zk.stop()
        zk.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
