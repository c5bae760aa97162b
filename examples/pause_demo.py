"""Kleppmann's scenario, for real: a lock holder process is frozen (SIGSTOP) past its session
timeout, another client takes the lock, the frozen one wakes up and writes. Linux/macOS."""

# Usage:
#     scripts/run &
#     .venv/bin/python examples/pause_demo.py [--hosts H]
#
# The storage service runs in this process; the first holder is a child process. Takes
# about two session timeouts (4 s each with scripts/run's tickTime of 2 s).

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from multiprocessing.connection import Client, Listener

from kazoo.client import KazooClient

from zkcompat.recipes import FencedLock, FencedResource, Sequencer, StaleTokenError

DEFAULT_HOSTS = os.environ.get("ZKCOMPAT_HOSTS", "127.0.0.1:2181")
AUTHKEY = b"zkcompat-pause-demo"
HOLDER_SESSION_TIMEOUT_S = 4.0  # scripts/run's minimum (2 x tickTime 2000 ms)


def storage_service(listener: Listener, fence: FencedResource, rows: list[str]) -> None:
    """The protected storage: appends a row only if the writer's token passes the fence."""
    while True:
        try:
            conn = listener.accept()
        except OSError:
            return
        threading.Thread(target=serve_writer, args=(conn, fence, rows), daemon=True).start()


def serve_writer(conn, fence: FencedResource, rows: list[str]) -> None:
    with conn:
        while True:
            try:
                sequencer_text, row = conn.recv()
            except (EOFError, OSError):
                return
            try:
                fence.write("rows", Sequencer.parse(sequencer_text), lambda r=row: rows.append(r))
                conn.send("accepted")
            except StaleTokenError as e:
                conn.send(f"REJECTED: {e}")


def child(hosts: str, lock_path: str, port: int) -> int:
    """The first holder: take the lock, write once, then write again on each stdin line."""
    logging.getLogger("kazoo").setLevel(logging.ERROR)  # its reconnect chatter after the pause
    client = KazooClient(hosts=hosts, timeout=HOLDER_SESSION_TIMEOUT_S)
    client.start(timeout=15)
    lock = FencedLock(client, lock_path, identifier="holder-1")
    sequencer = lock.acquire(timeout=30)
    storage = Client(("127.0.0.1", port), authkey=AUTHKEY)
    storage.send((str(sequencer), f"holder-1 (token {sequencer.token}): first write"))
    print(f"[holder-1] acquired the lock, token {sequencer.token}; storage: {storage.recv()}",
          flush=True)
    for _ in sys.stdin:  # frozen somewhere around here
        print(f"[holder-1] woke up; my lock state says {lock.state.value!r}; writing anyway",
              flush=True)
        storage.send((str(sequencer), f"holder-1 (token {sequencer.token}): write after pause"))
        print(f"[holder-1] storage: {storage.recv()}", flush=True)
    client.stop()
    client.close()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default=DEFAULT_HOSTS,
                        help="connect string (default: $ZKCOMPAT_HOSTS or 127.0.0.1:2181)")
    parser.add_argument("--child", nargs=2, metavar=("LOCK_PATH", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.hosts, args.child[0], int(args.child[1]))

    base = f"/zkcompat-examples/pause-demo/{uuid.uuid4().hex[:8]}"
    lock_path = f"{base}/lock"
    rows: list[str] = []
    listener = Listener(("127.0.0.1", 0), authkey=AUTHKEY)
    threading.Thread(target=storage_service,
                     args=(listener, FencedResource(lock_path=lock_path), rows),
                     daemon=True).start()
    holder = subprocess.Popen(
        [sys.executable, __file__, "--hosts", args.hosts,
         "--child", lock_path, str(listener.address[1])],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    client = KazooClient(hosts=args.hosts)
    client.start(timeout=15)
    try:
        print(holder.stdout.readline(), end="")
        os.kill(holder.pid, signal.SIGSTOP)
        print(f"[demo] froze holder-1 (pid {holder.pid}) with SIGSTOP")
        started = time.monotonic()
        lock = FencedLock(client, lock_path, identifier="holder-2")
        sequencer = lock.acquire(timeout=60)  # possible once holder-1's session has expired
        print(f"[holder-2] acquired the lock after {time.monotonic() - started:.1f}s, "
              f"token {sequencer.token}")
        storage = Client(listener.address, authkey=AUTHKEY)
        storage.send((str(sequencer), f"holder-2 (token {sequencer.token}): write"))
        print(f"[holder-2] storage: {storage.recv()}")
        holder.stdin.write("go\n")
        holder.stdin.flush()
        os.kill(holder.pid, signal.SIGCONT)
        print(f"[demo] resumed holder-1 (pid {holder.pid})")
        print(holder.stdout.readline(), end="")
        print(holder.stdout.readline(), end="")
        holder.stdin.close()
        holder.wait(timeout=30)
        lock.release()
        print("[demo] what the storage holds:")
        for row in rows:
            print(f"    {row}")
        client.delete(base, recursive=True)
        return 0 if not any("after pause" in row for row in rows) else 1
    finally:
        if holder.poll() is None:  # only the child we started, by its pid
            os.kill(holder.pid, signal.SIGCONT)
            holder.kill()
            holder.wait()
        client.stop()
        client.close()
        listener.close()


if __name__ == "__main__":
    raise SystemExit(main())
