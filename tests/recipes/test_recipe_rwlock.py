"""FencedReadLock / FencedWriteLock: readers share, writers exclude, tokens still grow."""

from __future__ import annotations

import threading

from kazoo.recipe.lock import ReadLock as KazooReadLock
from recipes_util import WAIT_S, wait_for

from zkcompat.recipes import FencedReadLock, FencedWriteLock


def test_readers_share_writers_exclude(zk, make_client, base):
    path = f"{base}/rw"
    r1 = FencedReadLock(zk, path, "r1")
    r2 = FencedReadLock(make_client(), path, "r2")
    s1 = r1.acquire(timeout=WAIT_S)
    s2 = r2.acquire(timeout=WAIT_S)
    assert s1 and s2
    writer = FencedWriteLock(make_client(), path, "w")
    assert writer.acquire(blocking=False) is None
    got = []
    t = threading.Thread(target=lambda: got.append(writer.acquire(timeout=WAIT_S)))
    t.start()
    wait_for(lambda: len(r1.contenders()) == 3, what="writer queued")
    # A reader arriving after a waiting writer queues behind it (no writer starvation).
    late_reader = FencedReadLock(make_client(), path, "r3")
    assert late_reader.acquire(blocking=False) is None
    r1.release()
    assert not got
    r2.release()
    t.join(WAIT_S)
    assert got and got[0].token > s2.token
    assert late_reader.acquire(blocking=False) is None
    writer.release()
    assert late_reader.acquire(timeout=WAIT_S) is not None
    late_reader.release()


def test_interoperates_with_kazoo_read_lock(zk, make_client, base):
    path = f"{base}/rw"
    kazoo_reader = KazooReadLock(make_client(), path)
    assert kazoo_reader.acquire(timeout=WAIT_S)
    assert FencedReadLock(zk, path).acquire(blocking=False) is not None
    assert FencedWriteLock(make_client(), path).acquire(blocking=False) is None
    kazoo_reader.release()
