"""Service discovery: two instances register (ephemeral, with a JSON payload), a client
watches the set, and one instance dies."""

# Usage:
#     scripts/run &
#     .venv/bin/python examples/service_discovery.py [--hosts H]

from __future__ import annotations

import argparse
import os
import time
import uuid

from kazoo.client import KazooClient

from zkcompat.recipes import ServiceRegistry

DEFAULT_HOSTS = os.environ.get("ZKCOMPAT_HOSTS", "127.0.0.1:2181")
SETTLE_S = 0.5  # let the watcher print before the next change


def client(hosts: str) -> KazooClient:
    c = KazooClient(hosts=hosts)
    c.start(timeout=15)
    return c


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default=DEFAULT_HOSTS,
                        help="connect string (default: $ZKCOMPAT_HOSTS or 127.0.0.1:2181)")
    args = parser.parse_args()
    base = f"/zkcompat-examples/services-{uuid.uuid4().hex[:8]}"

    watcher = client(args.hosts)
    registry = ServiceRegistry(watcher, base)
    registry.watch("billing", lambda instances: print(f"billing instances: {instances}"))

    a, b = client(args.hosts), client(args.hosts)
    ServiceRegistry(a, base).register("billing", "10.0.0.1:8080", {"host": "10.0.0.1", "port": 8080})
    time.sleep(SETTLE_S)
    ServiceRegistry(b, base).register("billing", "10.0.0.2:8080", {"host": "10.0.0.2", "port": 8080})
    time.sleep(SETTLE_S)
    print("instance 10.0.0.1 dies (its session ends)")
    a.stop()
    time.sleep(SETTLE_S)
    remaining = registry.instances("billing")
    print(f"lookup: {remaining}")
    b.stop()
    watcher.delete(base, recursive=True)
    watcher.stop()
    for c in (a, b, watcher):
        c.close()
    return 0 if list(remaining) == ["10.0.0.2:8080"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
