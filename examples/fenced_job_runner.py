"""A job runner that fences its writes: runners take turns holding a FencedLock, and the
result store accepts a write only with a token at least as new as any it has seen."""

# Usage:
#     scripts/run &                                  # a server on 127.0.0.1:2181
#     .venv/bin/python examples/fenced_job_runner.py [--hosts H] [--runners 3] [--jobs 9]
#
# Each runner has its own ZooKeeper session, as separate processes would. The last step
# replays a write with a token from an earlier turn (what a runner that paused through its
# session timeout would send) and shows the store rejecting it.

from __future__ import annotations

import argparse
import os
import threading
import uuid

from kazoo.client import KazooClient

from zkcompat.recipes import FencedLock, FencedResource, Sequencer, StaleTokenError

DEFAULT_HOSTS = os.environ.get("ZKCOMPAT_HOSTS", "127.0.0.1:2181")


class ResultStore:
    """The protected resource. It trusts no lock, only tokens: FencedResource rejects a
    write whose token is lower than one it already accepted."""

    def __init__(self, lock_path: str) -> None:
        self.fence = FencedResource(lock_path=lock_path)
        self.results: dict[int, tuple[str, int]] = {}

    def save(self, sequencer: Sequencer, job: int, result: str) -> None:
        def apply() -> None:
            self.results[job] = (result, sequencer.token)

        self.fence.write("results", sequencer, apply)


def runner(name: str, hosts: str, lock_path: str, jobs: list[int], store: ResultStore,
           turns: list[Sequencer], mutex: threading.Lock) -> None:
    client = KazooClient(hosts=hosts)
    client.start(timeout=15)
    lock = FencedLock(client, lock_path, identifier=name)
    try:
        while True:
            with lock as sequencer:  # blocks until this runner holds the lock
                with mutex:
                    if not jobs:
                        return
                    job = jobs.pop(0)
                    turns.append(sequencer)
                result = f"{job}^2={job * job}"
                lock.check()  # LockInJeopardy / LockLost: do not write
                store.save(sequencer, job, result)
                print(f"{name} holds token {sequencer.token}: job {job} -> {result}")
    finally:
        client.stop()
        client.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default=DEFAULT_HOSTS,
                        help="connect string (default: $ZKCOMPAT_HOSTS or 127.0.0.1:2181)")
    parser.add_argument("--runners", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=9)
    args = parser.parse_args()

    base = f"/zkcompat-examples/job-runner/{uuid.uuid4().hex[:8]}"
    lock_path = f"{base}/lock"
    store = ResultStore(lock_path)
    jobs = list(range(1, args.jobs + 1))
    turns: list[Sequencer] = []
    mutex = threading.Lock()
    threads = [
        threading.Thread(target=runner, args=(f"runner-{i}", args.hosts, lock_path, jobs,
                                              store, turns, mutex))
        for i in range(args.runners)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    tokens = [s.token for s in turns]
    assert tokens == sorted(tokens), "tokens only grow"
    print(f"{len(store.results)} jobs done; tokens grew with every turn: {tokens[0]} .. {tokens[-1]}")

    # A runner that paused (GC, VM migration) past its session timeout wakes up still
    # holding its old Sequencer and writes. The store has seen newer tokens, so:
    stale = turns[0]
    try:
        store.save(stale, 1, "overwritten by a zombie")
        print("BUG: the stale write was accepted")
        return 1
    except StaleTokenError as e:
        print(f"zombie write rejected: {e}")

    client = KazooClient(hosts=args.hosts)
    client.start(timeout=15)
    client.delete(base, recursive=True)
    client.stop()
    client.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
