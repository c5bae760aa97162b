"""kazoo's recipes (lock, election, barriers, counter, queues, party, semaphore).

Each test runs against zkcompat and, as a control, against real ZooKeeper: a
failure on zkcompat alone is ours. The recipes are exercised by several
clients and threads; invariants (mutual exclusion, lease limits, totals,
orders) are checked directly, not compared.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.recipe.barrier import Barrier, DoubleBarrier
from kazoo.recipe.counter import Counter
from kazoo.recipe.election import Election
from kazoo.recipe.lock import Lock, ReadLock, Semaphore, WriteLock
from kazoo.recipe.party import Party, ShallowParty
from kazoo.recipe.queue import LockingQueue, Queue

from .servers import ServerProcess

SESSION_TIMEOUT_S = 10.0
START_TIMEOUT_S = 15.0
JOIN_TIMEOUT_S = 20.0  # every worker thread must be done within this
STEP_TIMEOUT_S = 10.0  # one blocking recipe step (acquire, wait, get)
SETTLE_S = 0.3  # "it stays blocked": how long we watch for it not to move

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["zookeeper", "zkcompat"])
def server(request) -> ServerProcess:
    return request.getfixturevalue(request.param)


class Clients:
    """Started kazoo clients for one test, all stopped at the end."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.started: list[KazooClient] = []
        self.base = f"/recipes/{uuid.uuid4().hex[:12]}"

    def new(self) -> KazooClient:
        zk = KazooClient(hosts=self.server.connect_string, timeout=SESSION_TIMEOUT_S)
        self.started.append(zk)
        zk.start(timeout=START_TIMEOUT_S)
        return zk

    def close(self) -> None:
        for zk in self.started:
            try:
                zk.stop()
                zk.close()
            except Exception:  # noqa: BLE001 - best effort teardown
                pass


@pytest.fixture
def clients(server: ServerProcess) -> Iterator[Clients]:
    c = Clients(server)
    try:
        yield c
    finally:
        c.close()


def run_threads(targets: list[Callable[[], None]]) -> None:
    """Runs targets in threads; re-raises the first failure; fails on a hang."""
    errors: list[BaseException] = []

    def wrap(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        return run

    threads = [threading.Thread(target=wrap(t), daemon=True) for t in targets]
    for t in threads:
        t.start()
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    stuck = sum(t.is_alive() for t in threads)
    assert stuck == 0, (
        f"{stuck} of {len(threads)} worker threads still running after {JOIN_TIMEOUT_S}s"
    )
    if errors:
        raise errors[0]


class Occupancy:
    """Counts how many holders are inside a critical section at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.inside = 0
        self.max_inside = 0
        self.entries = 0

    def enter(self) -> None:
        with self._lock:
            self.inside += 1
            self.entries += 1
            self.max_inside = max(self.max_inside, self.inside)

    def leave(self) -> None:
        with self._lock:
            self.inside -= 1


# ---------------------------------------------------------------- Lock


def test_lock_mutual_exclusion(clients: Clients) -> None:
    """3 clients x 2 threads, 4 rounds each: never two holders, every round done."""
    path = clients.base + "/lock"
    occupancy = Occupancy()
    rounds = 4
    workers = []
    for c in range(3):
        zk = clients.new()
        for t in range(2):
            lock = Lock(zk, path, identifier=f"client{c}-thread{t}")

            def work(lock: Lock = lock) -> None:
                for _ in range(rounds):
                    assert lock.acquire(timeout=STEP_TIMEOUT_S), "lock not acquired in time"
                    try:
                        occupancy.enter()
                        time.sleep(0.005)
                        occupancy.leave()
                    finally:
                        lock.release()

            workers.append(work)
    run_threads(workers)
    assert occupancy.max_inside == 1
    assert occupancy.entries == 3 * 2 * rounds
    assert clients.started[0].get_children(path) == []


def test_lock_contenders_in_arrival_order(clients: Clients) -> None:
    """Waiters queue in the order they asked; the lock passes along that order."""
    path = clients.base + "/lock"
    holder_zk = clients.new()
    holder = Lock(holder_zk, path, identifier="holder")
    assert holder.acquire(timeout=STEP_TIMEOUT_S)
    order: list[str] = []
    order_lock = threading.Lock()
    waiters = []
    for name in ("first", "second", "third"):
        lock = Lock(clients.new(), path, identifier=name)
        waiters.append((name, lock))

    def wait_turn(name: str, lock: Lock) -> Callable[[], None]:
        def run() -> None:
            assert lock.acquire(timeout=STEP_TIMEOUT_S), f"{name} never got the lock"
            with order_lock:
                order.append(name)
            time.sleep(0.05)
            lock.release()

        return run

    threads = []
    for name, lock in waiters:
        t = threading.Thread(target=wait_turn(name, lock), daemon=True)
        t.start()
        threads.append(t)
        # Each waiter's sequential node must exist before the next one asks.
        deadline = time.monotonic() + STEP_TIMEOUT_S
        while name not in holder.contenders() and time.monotonic() < deadline:
            time.sleep(0.02)
    assert holder.contenders() == ["holder", "first", "second", "third"]
    time.sleep(SETTLE_S)
    assert order == [], "a waiter got the lock while it was held"
    holder.release()
    for t in threads:
        t.join(JOIN_TIMEOUT_S)
    assert order == ["first", "second", "third"]


def test_lock_released_when_holder_session_closes(clients: Clients) -> None:
    """A holder whose session ends (ephemeral node gone) hands the lock on."""
    path = clients.base + "/lock"
    holder_zk = clients.new()
    assert Lock(holder_zk, path, identifier="holder").acquire(timeout=STEP_TIMEOUT_S)
    waiter = Lock(clients.new(), path, identifier="waiter")
    assert not waiter.acquire(blocking=False)
    got = threading.Event()
    t = threading.Thread(
        target=lambda: waiter.acquire(timeout=STEP_TIMEOUT_S) and got.set(), daemon=True
    )
    t.start()
    time.sleep(SETTLE_S)
    assert not got.is_set()
    holder_zk.stop()
    assert got.wait(STEP_TIMEOUT_S), "the lock did not pass on when the holder's session closed"
    assert waiter.contenders() == ["waiter"]
    waiter.release()


def test_read_write_lock(clients: Clients) -> None:
    """Readers share; a writer excludes readers and other writers."""
    path = clients.base + "/rw"
    zk1, zk2, zk3 = clients.new(), clients.new(), clients.new()
    r1, r2 = ReadLock(zk1, path, "r1"), ReadLock(zk2, path, "r2")
    w = WriteLock(zk3, path, "w")
    assert r1.acquire(timeout=STEP_TIMEOUT_S)
    assert r2.acquire(timeout=STEP_TIMEOUT_S), "two readers must share the lock"
    assert not w.acquire(blocking=False), "a writer got in beside readers"
    r1.release()
    r2.release()
    assert w.acquire(timeout=STEP_TIMEOUT_S)
    assert not ReadLock(zk1, path, "r3").acquire(blocking=False), "a reader got in beside a writer"
    w.release()


# ------------------------------------------------------------ Election


def test_election_leaders_follow_contender_order(clients: Clients) -> None:
    """One leader at a time, in the order the contenders joined."""
    path = clients.base + "/election"
    leaders: list[str] = []
    occupancy = Occupancy()
    step_down = {name: threading.Event() for name in ("a", "b", "c")}
    elected = threading.Condition()
    elections = {name: Election(clients.new(), path, identifier=name) for name in step_down}

    def lead(name: str) -> None:
        occupancy.enter()
        with elected:
            leaders.append(name)
            elected.notify_all()
        step_down[name].wait(STEP_TIMEOUT_S)
        occupancy.leave()

    threads = []
    for name, election in elections.items():
        t = threading.Thread(target=election.run, args=(lead, name), daemon=True)
        t.start()
        threads.append(t)
        deadline = time.monotonic() + STEP_TIMEOUT_S
        while name not in election.contenders() and time.monotonic() < deadline:
            time.sleep(0.02)
    assert elections["a"].contenders() == ["a", "b", "c"]
    for expected in ("a", "b", "c"):
        with elected:
            assert elected.wait_for(lambda e=expected: e in leaders, STEP_TIMEOUT_S), leaders
        time.sleep(SETTLE_S)
        assert leaders[-1] == expected and len(leaders) == "abc".index(expected) + 1, leaders
        step_down[expected].set()
    for t in threads:
        t.join(JOIN_TIMEOUT_S)
    assert leaders == ["a", "b", "c"]
    assert occupancy.max_inside == 1


def test_election_cancel_before_winning(clients: Clients) -> None:
    """A cancelled contender leaves the queue and never leads."""
    path = clients.base + "/election"
    first = Election(clients.new(), path, "first")
    quitter = Election(clients.new(), path, "quitter")
    release = threading.Event()
    led: list[str] = []
    t1 = threading.Thread(
        target=first.run,
        args=(lambda: (led.append("first"), release.wait(STEP_TIMEOUT_S)),),
        daemon=True,
    )
    t1.start()
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while "first" not in led and time.monotonic() < deadline:
        time.sleep(0.02)
    t2 = threading.Thread(target=quitter.run, args=(lambda: led.append("quitter"),), daemon=True)
    t2.start()
    while "quitter" not in first.contenders() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert first.contenders() == ["first", "quitter"]
    quitter.cancel()
    t2.join(STEP_TIMEOUT_S)
    assert not t2.is_alive()
    release.set()
    t1.join(STEP_TIMEOUT_S)
    assert led == ["first"]
    assert first.contenders() == []


# ------------------------------------------------------------- Barriers


def test_barrier_holds_until_removed(clients: Clients) -> None:
    path = clients.base + "/barrier"
    owner = Barrier(clients.new(), path)
    owner.create()
    passed: list[str] = []
    waiters = []
    for name in ("w1", "w2"):
        b = Barrier(clients.new(), path)
        waiters.append(
            threading.Thread(
                target=lambda b=b, n=name: b.wait(STEP_TIMEOUT_S) and passed.append(n), daemon=True
            )
        )
    for t in waiters:
        t.start()
    time.sleep(SETTLE_S)
    assert passed == [], "a waiter passed a standing barrier"
    assert owner.remove()
    for t in waiters:
        t.join(STEP_TIMEOUT_S)
    assert sorted(passed) == ["w1", "w2"]
    assert Barrier(clients.new(), path).wait(0.1), "no barrier left means no wait"


def test_double_barrier_enter_and_leave_together(clients: Clients) -> None:
    """Nobody is through enter() before all 3 arrive, nor through leave() before all go."""
    path = clients.base + "/double"
    n = 3
    entered: list[int] = []
    left: list[int] = []
    arrived = threading.Semaphore(0)
    go_leave = threading.Event()
    lock = threading.Lock()
    barriers = [DoubleBarrier(clients.new(), path, n, identifier=f"p{i}") for i in range(n)]

    def participant(i: int) -> Callable[[], None]:
        def run() -> None:
            barriers[i].enter()
            with lock:
                entered.append(i)
            arrived.release()
            assert go_leave.wait(STEP_TIMEOUT_S)
            if i > 0:
                time.sleep(0.2 * i)  # staggered departures
            barriers[i].leave()
            with lock:
                left.append(i)

        return run

    threads = [threading.Thread(target=participant(i), daemon=True) for i in range(n - 1)]
    for t in threads:
        t.start()
    time.sleep(SETTLE_S)
    assert entered == [], "enter() returned before all participants arrived"
    last = threading.Thread(target=participant(n - 1), daemon=True)
    last.start()
    threads.append(last)
    for _ in range(n):
        assert arrived.acquire(timeout=STEP_TIMEOUT_S), f"only {len(entered)} entered"
    go_leave.set()
    for t in threads:
        t.join(JOIN_TIMEOUT_S)
    assert sorted(entered) == [0, 1, 2]
    assert sorted(left) == [0, 1, 2]
    assert clients.started[0].get_children(path) == [], "participants left nodes behind"


# -------------------------------------------------------------- Counter


def test_counter_concurrent_increments(clients: Clients) -> None:
    """4 clients x 2 threads x 15 increments: the total is exact (version-checked CAS)."""
    path = clients.base + "/counter"
    workers = []
    for _ in range(4):
        zk = clients.new()
        for _ in range(2):
            counter = Counter(zk, path)

            def work(counter: Counter = counter) -> None:
                for _ in range(15):
                    counter += 1

            workers.append(work)
    run_threads(workers)
    assert Counter(clients.new(), path).value == 4 * 2 * 15


def test_counter_values(clients: Clients) -> None:
    zk = clients.new()
    counter = Counter(zk, clients.base + "/c")
    assert counter.value == 0
    counter += 5
    assert (counter.pre_value, counter.post_value) == (0, 5)
    counter -= 2
    assert (counter.pre_value, counter.post_value) == (5, 3)
    floats = Counter(zk, clients.base + "/f", default=0.5)
    floats += 0.25
    assert floats.value == 0.75
    assert zk.get(clients.base + "/c")[0] == b"3"


# --------------------------------------------------------------- Queues


def test_queue_priority_and_fifo(clients: Clients) -> None:
    path = clients.base + "/queue"
    producer, consumer = Queue(clients.new(), path), Queue(clients.new(), path)
    for item, priority in (
        (b"low-1", 200),
        (b"high-1", 10),
        (b"mid", 100),
        (b"high-2", 10),
        (b"low-2", 200),
    ):
        producer.put(item, priority=priority)
    assert len(consumer) == 5
    got = [consumer.get() for _ in range(5)]
    assert got == [b"high-1", b"high-2", b"mid", b"low-1", b"low-2"]
    assert consumer.get() is None
    assert len(producer) == 0


def test_queue_concurrent_consumers_take_each_item_once(clients: Clients) -> None:
    path = clients.base + "/queue"
    producer = Queue(clients.new(), path)
    items = [f"item-{i:02d}".encode() for i in range(30)]
    for item in items:
        producer.put(item)
    taken: list[bytes] = []
    lock = threading.Lock()
    consumers = [Queue(clients.new(), path) for _ in range(3)]

    def consume(q: Queue) -> Callable[[], None]:
        def run() -> None:
            while (item := q.get()) is not None:
                with lock:
                    taken.append(item)

        return run

    run_threads([consume(q) for q in consumers])
    assert sorted(taken) == items, "an item was lost or taken twice"


def test_locking_queue(clients: Clients) -> None:
    """An entry being processed is invisible to other consumers; release puts it back."""
    path = clients.base + "/lq"
    a, b = LockingQueue(clients.new(), path), LockingQueue(clients.new(), path)
    a.put(b"one")
    a.put_all([b"two", b"three"], priority=50)
    assert len(a) == 3
    first = a.get(timeout=STEP_TIMEOUT_S)
    assert first == b"two"
    assert a.holds_lock()
    second = b.get(timeout=STEP_TIMEOUT_S)
    assert second == b"three", "a locked entry was handed to a second consumer"
    assert b.release()  # b gives "three" back unprocessed
    assert a.consume()
    assert len(a) == 2
    assert a.get(timeout=STEP_TIMEOUT_S) == b"three"
    assert a.consume()
    assert b.get(timeout=STEP_TIMEOUT_S) == b"one"
    assert b.consume()
    assert a.get(timeout=0.3) is None
    assert len(b) == 0


def test_locking_queue_get_blocks_until_put(clients: Clients) -> None:
    path = clients.base + "/lq"
    consumer, producer = LockingQueue(clients.new(), path), LockingQueue(clients.new(), path)
    result: list[bytes | None] = []
    t = threading.Thread(
        target=lambda: result.append(consumer.get(timeout=STEP_TIMEOUT_S)), daemon=True
    )
    t.start()
    time.sleep(SETTLE_S)
    assert result == []
    producer.put(b"late")
    t.join(STEP_TIMEOUT_S)
    assert result == [b"late"]
    assert consumer.consume()


# ---------------------------------------------------------------- Party


@pytest.mark.parametrize("party_class", [Party, ShallowParty])
def test_party_membership(clients: Clients, party_class) -> None:
    path = clients.base + "/party"
    members = {}
    for name in ("ann", "bo", "cy"):
        zk = clients.new()
        members[name] = (zk, party_class(zk, path, identifier=name))
        members[name][1].join()
    observer = party_class(clients.new(), path)
    assert len(observer) == 3
    assert sorted(observer) == ["ann", "bo", "cy"]
    members["bo"][1].leave()
    assert sorted(observer) == ["ann", "cy"]
    members["cy"][0].stop()  # membership is ephemeral: session end is leaving
    assert sorted(observer) == ["ann"]
    assert len(observer) == 1


# ------------------------------------------------------------ Semaphore


def test_semaphore_respects_max_leases(clients: Clients) -> None:
    """5 clients through a 2-lease semaphore: never more than 2 inside, all 5 get through."""
    path = clients.base + "/sem"
    occupancy = Occupancy()
    sems = [Semaphore(clients.new(), path, identifier=f"s{i}", max_leases=2) for i in range(5)]

    def work(sem: Semaphore) -> Callable[[], None]:
        def run() -> None:
            for _ in range(2):
                assert sem.acquire(timeout=STEP_TIMEOUT_S), "no lease in time"
                try:
                    occupancy.enter()
                    time.sleep(0.05)
                    occupancy.leave()
                finally:
                    sem.release()

        return run

    run_threads([work(s) for s in sems])
    assert occupancy.max_inside == 2, f"max inside was {occupancy.max_inside}"
    assert occupancy.entries == 10


def test_semaphore_lease_holders_and_mismatch(clients: Clients) -> None:
    path = clients.base + "/sem"
    a = Semaphore(clients.new(), path, identifier="a", max_leases=2)
    b = Semaphore(clients.new(), path, identifier="b", max_leases=2)
    c = Semaphore(clients.new(), path, identifier="c", max_leases=2)
    assert a.acquire(timeout=STEP_TIMEOUT_S) and b.acquire(timeout=STEP_TIMEOUT_S)
    assert sorted(a.lease_holders()) == ["a", "b"]
    assert not c.acquire(blocking=False)
    a.release()
    assert c.acquire(timeout=STEP_TIMEOUT_S)
    assert sorted(c.lease_holders()) == ["b", "c"]
    # The lease count is stored in the semaphore node; a disagreeing client is refused.
    greedy = Semaphore(clients.new(), path, identifier="greedy", max_leases=3)
    with pytest.raises(ValueError):
        greedy.acquire(blocking=False)
