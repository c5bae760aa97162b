"""FencedLock: mutual exclusion, fairness, growing tokens, lock-delay, jeopardy and loss."""

from __future__ import annotations

import threading
import time

import pytest
from kazoo.recipe.lock import Lock as KazooLock
from recipes_proxy import TcpProxy
from recipes_util import WAIT_S, wait_for

from zkcompat.recipes import (
    FencedLock,
    LockCancelled,
    LockInJeopardy,
    LockLost,
    LockState,
    LockTimeout,
)


def test_token_is_holder_node_czxid_and_grows(zk, make_client, base):
    other = make_client()
    path = f"{base}/lock"
    tokens = []
    for client in (zk, other, zk, other):
        lock = FencedLock(client, path)
        sequencer = lock.acquire(timeout=WAIT_S)
        assert sequencer.lock_path == path
        stat = client.exists(f"{path}/{sequencer.node}")
        assert stat is not None and stat.czxid == sequencer.token
        tokens.append(sequencer.token)
        assert lock.release() is True
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)


def test_mutual_exclusion_and_fifo_order(make_client, base):
    path = f"{base}/lock"
    contenders = 6
    clients = [make_client() for _ in range(contenders)]
    holder = FencedLock(clients[0], path, "c0")
    holder.acquire(timeout=WAIT_S)
    inside, max_inside, order, tokens = [0], [0], [], []
    mutex = threading.Lock()

    def contend(i: int) -> None:
        lock = FencedLock(clients[i], path, f"c{i}")
        with lock as sequencer:
            with mutex:
                inside[0] += 1
                max_inside[0] = max(max_inside[0], inside[0])
                order.append(i)
                tokens.append(sequencer.token)
            time.sleep(0.02)
            with mutex:
                inside[0] -= 1

    threads = []
    for i in range(1, contenders):
        t = threading.Thread(target=contend, args=(i,))
        t.start()
        threads.append(t)
        # Queue them in a known order: wait until contender i is in line.
        wait_for(lambda i=i: len(holder.contenders()) == i + 1, what=f"contender {i} queued")
    assert holder.contenders() == [f"c{i}" for i in range(contenders)]
    holder.release()
    for t in threads:
        t.join(WAIT_S)
        assert not t.is_alive()
    assert max_inside[0] == 1
    assert order == list(range(1, contenders))  # fair: first come, first served
    assert tokens == sorted(tokens)


def test_nonblocking_timeout_and_cancel_leave_no_node(zk, make_client, base):
    path = f"{base}/lock"
    holder = FencedLock(zk, path)
    holder.acquire()
    waiter = FencedLock(make_client(), path)
    assert waiter.acquire(blocking=False) is None
    with pytest.raises(LockTimeout):
        waiter.acquire(timeout=0.3)
    errors = []

    def wait_forever() -> None:
        try:
            waiter.acquire()
        except LockCancelled as e:
            errors.append(e)

    t = threading.Thread(target=wait_forever)
    t.start()
    wait_for(lambda: len(zk.get_children(path)) == 2, what="waiter queued")
    waiter.cancel()
    t.join(WAIT_S)
    assert len(errors) == 1
    assert zk.get_children(path) == [holder.sequencer.node]
    assert waiter.state is LockState.UNLOCKED


def test_not_reentrant(zk, base):
    lock = FencedLock(zk, f"{base}/lock")
    lock.acquire()
    with pytest.raises(RuntimeError):
        lock.acquire(timeout=1)
    lock.release()
    assert lock.acquire(timeout=WAIT_S) is not None


def test_excludes_and_is_excluded_by_kazoo_lock(zk, make_client, base):
    path = f"{base}/lock"
    kazoo_lock = KazooLock(make_client(), path)
    assert kazoo_lock.acquire(timeout=WAIT_S)
    ours = FencedLock(zk, path)
    assert ours.acquire(blocking=False) is None
    kazoo_lock.release()
    assert ours.acquire(timeout=WAIT_S) is not None
    assert not KazooLock(make_client(), path).acquire(blocking=False)
    ours.release()


def test_lock_delay_only_after_holder_died(make_client, base):
    path = f"{base}/lock"
    delay_s = 1.0
    # Clean release: no delay.
    first = FencedLock(make_client(), path, lock_delay_s=delay_s)
    first.acquire()
    waiter = FencedLock(make_client(), path, lock_delay_s=delay_s)
    first.release()
    waiter.acquire(timeout=WAIT_S)
    assert waiter.lock_delays_applied == 0
    # The holder's session ends without a release (as when it dies): the next one waits.
    dying_client = make_client()
    waiter.release()
    dying = FencedLock(dying_client, path, lock_delay_s=delay_s)
    dying.acquire()
    nxt = FencedLock(make_client(), path, lock_delay_s=delay_s)
    got = []
    t = threading.Thread(target=lambda: got.append((nxt.acquire(timeout=WAIT_S), time.monotonic())))
    t.start()
    wait_for(lambda: len(nxt.contenders()) == 2, what="successor queued")
    dying_client.stop()  # closes the session: the ephemeral node goes, no release marker
    gone_at = time.monotonic()
    t.join(WAIT_S)
    assert got and got[0][0] is not None
    assert nxt.lock_delays_applied == 1
    assert got[0][1] - gone_at >= delay_s


def test_jeopardy_then_restored_through_a_paused_connection(target, make_client, base):
    proxy = TcpProxy(target.hosts)
    try:
        states: list[LockState] = []
        client = make_client(timeout=4.0, hosts=proxy.hosts)
        lock = FencedLock(client, f"{base}/lock", on_state_change=lambda _l, s: states.append(s))
        sequencer = lock.acquire(timeout=WAIT_S)
        proxy.pause()  # shorter than the session timeout: the session survives
        wait_for(lambda: lock.state is LockState.JEOPARDY, what="jeopardy")
        with pytest.raises(LockInJeopardy):
            lock.check()
        proxy.drop()
        proxy.resume()
        wait_for(lambda: lock.state is LockState.HELD, what="held again")
        assert lock.check() == sequencer
        wait_for(lambda: states[-1:] == [LockState.HELD], what="listener saw HELD")
        assert states == [LockState.HELD, LockState.JEOPARDY, LockState.HELD]
        assert lock.release() is True
    finally:
        proxy.close()


def test_lost_when_session_expires_and_next_holder_gets_higher_token(
    target, zk, make_client, base
):
    path = f"{base}/lock"
    proxy = TcpProxy(target.hosts)
    try:
        client = make_client(timeout=1.0, hosts=proxy.hosts)
        lock = FencedLock(client, path)
        old = lock.acquire(timeout=WAIT_S)
        proxy.pause()
        successor = FencedLock(zk, path)
        new = successor.acquire(timeout=WAIT_S)  # possible only once the old session expired
        assert new.token > old.token
        proxy.drop()
        proxy.resume()
        wait_for(lambda: lock.state is LockState.LOST, what="lock lost")
        with pytest.raises(LockLost):
            lock.check()
        assert lock.release() is False  # nothing of ours left to delete
        assert successor.check() == new
    finally:
        proxy.close()


def test_jeopardy_turns_to_lost_without_a_connection(target, zk, make_client, base):
    path = f"{base}/lock"
    proxy = TcpProxy(target.hosts)
    try:
        client = make_client(timeout=1.0, hosts=proxy.hosts)
        lock = FencedLock(client, path)
        old = lock.acquire(timeout=WAIT_S)
        proxy.pause()  # and never resumed: kazoo cannot learn of the expiry from the server
        wait_for(lambda: lock.state is LockState.JEOPARDY, what="jeopardy")
        wait_for(lambda: lock.state is LockState.LOST, what="lost by the jeopardy timer")
        assert FencedLock(zk, path).acquire(timeout=WAIT_S).token > old.token
    finally:
        proxy.close()


def test_lost_when_node_is_deleted_under_the_holder(zk, base):
    path = f"{base}/lock"
    lock = FencedLock(zk, path)
    sequencer = lock.acquire()
    zk.delete(f"{path}/{sequencer.node}")
    wait_for(lambda: lock.state is LockState.LOST, what="lock lost")
    with pytest.raises(LockLost):
        lock.check()
    again = lock.acquire(timeout=WAIT_S)  # the same object can take the lock again
    assert again.token > sequencer.token and lock.check() == again
    assert zk.get_children(path) == [again.node]
