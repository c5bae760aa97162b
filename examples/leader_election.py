"""Leader election with epochs: candidates take turns leading; each leader fences what it
writes with its epoch, so a deposed leader's late write is rejected."""

# Usage:
#     scripts/run &
#     .venv/bin/python examples/leader_election.py [--hosts H] [--candidates 3]

from __future__ import annotations

import argparse
import os
import threading
import uuid

from kazoo.client import KazooClient

from zkcompat.recipes import FencedResource, LeaderElection, Sequencer, StaleTokenError

DEFAULT_HOSTS = os.environ.get("ZKCOMPAT_HOSTS", "127.0.0.1:2181")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default=DEFAULT_HOSTS,
                        help="connect string (default: $ZKCOMPAT_HOSTS or 127.0.0.1:2181)")
    parser.add_argument("--candidates", type=int, default=3)
    args = parser.parse_args()

    path = f"/zkcompat-examples/election/{uuid.uuid4().hex[:8]}"
    config = FencedResource(lock_path=path)  # e.g. the cluster config only the leader writes
    epochs: list[Sequencer] = []
    clients = []

    def lead(name: str, election: LeaderElection) -> None:
        def as_leader(sequencer: Sequencer) -> None:
            print(f"{name} leads, epoch {sequencer.token}; followers: {election.contenders()[1:]}")
            config.write("cluster-config", sequencer, lambda: epochs.append(sequencer))

        election.run(as_leader)  # campaign, lead, resign when as_leader returns

    threads = []
    for i in range(args.candidates):
        client = KazooClient(hosts=args.hosts)
        client.start(timeout=15)
        clients.append(client)
        election = LeaderElection(client, path, identifier=f"node-{i}")
        threads.append(threading.Thread(target=lead, args=(f"node-{i}", election)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert [e.token for e in epochs] == sorted(e.token for e in epochs)
    try:
        config.write("cluster-config", epochs[0], lambda: None)  # the first leader, too late
        print("BUG: a deposed leader's write was accepted")
        return 1
    except StaleTokenError as e:
        print(f"deposed leader's write rejected: {e}")
    clients[0].delete(path, recursive=True)
    for client in clients:
        client.stop()
        client.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
