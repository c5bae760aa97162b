"""The lock holder process of the fault test: acquires a FencedLock, then writes to the ledger
service with that token whenever stdin says so (as a holder that paused mid-work would)."""

from __future__ import annotations

import argparse
import json
import sys

from kazoo.client import KazooClient
from recipes_resource import ledger_client

from zkcompat.recipes import FencedLock


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", required=True)
    parser.add_argument("--lock", required=True)
    parser.add_argument("--ledger-port", type=int, required=True)
    parser.add_argument("--session-timeout", type=float, default=1.0)
    args = parser.parse_args()

    client = KazooClient(hosts=args.hosts, timeout=args.session_timeout)
    client.start(timeout=15)
    ledger = ledger_client(("127.0.0.1", args.ledger_port))
    lock = FencedLock(client, args.lock, identifier="worker")
    sequencer = lock.acquire(timeout=30)
    print(f"ACQUIRED {sequencer}", flush=True)
    for line in sys.stdin:
        command, _, value = line.strip().partition(" ")
        if command == "write":
            believed = lock.state.value  # what the holder thinks, just before it writes
            ledger.send({"key": "ledger", "sequencer": str(sequencer), "writer": "worker",
                         "value": value})
            reply = ledger.recv()
            print("RESULT " + json.dumps({"believed": believed, **reply}), flush=True)
        elif command == "state":
            print(f"STATE {lock.state.value}", flush=True)
        elif command == "quit":
            break
    client.stop()
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
