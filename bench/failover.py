"""Failover time of an ensemble: from kill -9 of its leader to the first write a client
has acknowledged after it, the median over several rounds, for each kind side by side.

Each round a kazoo client on the followers' addresses writes in a loop with a short
per-request timeout; the leader is killed with SIGKILL, the clock runs until a write
succeeds, then the old leader is started again and the ensemble waits until it serves.
"""

from __future__ import annotations

import signal
import statistics
import time

from bench import wire
from bench.scenarios import Row
from bench.servers import HOST, ManagedEnsemble

ROUNDS_DEFAULT = 5
WRITE_TIMEOUT_S = 0.25  # one write's wait; a failed one is retried at once
FAILOVER_LIMIT_S = 60.0  # a round without a new leader by then has failed
FOUR_LETTER_TIMEOUT_S = 2.0


def server_mode(port: int) -> str | None:
    """Mode from `srvr`, or None if the server does not answer."""
    out = wire.four_letter_word(HOST, port, "srvr", FOUR_LETTER_TIMEOUT_S) or ""
    for line in out.splitlines():
        if line.startswith("Mode: "):
            return line.removeprefix("Mode: ").strip()
    return None


def find_leader(ensemble: ManagedEnsemble, limit_s: float = FAILOVER_LIMIT_S):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        for m in ensemble.members:
            if m.alive() and server_mode(m.port) == "leader":
                return m
        time.sleep(0.05)
    raise RuntimeError(f"{ensemble.kind}: no leader within {limit_s:g} s")


def one_round(ensemble: ManagedEnsemble, while_down=None) -> float:
    """One kill -9 of the leader: the seconds until the first acknowledged write. Then
    `while_down(leader, killed)`, if given, before the old leader starts again."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import KazooException
    from kazoo.handlers.threading import KazooTimeoutError

    leader = find_leader(ensemble)
    others = ",".join(f"{HOST}:{m.port}" for m in ensemble.members if m is not leader)
    zk = KazooClient(hosts=others, timeout=10.0)
    zk.start(timeout=30)
    try:
        zk.ensure_path("/failover")
        zk.set("/failover", b"before")
        leader.popen.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        leader.popen.wait()
        deadline = killed + FAILOVER_LIMIT_S
        n = 0
        while True:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{ensemble.kind}: no write acknowledged "
                                   f"{FAILOVER_LIMIT_S:g} s after the leader's kill")
            n += 1
            try:
                zk.set_async("/failover", b"%d" % n).get(timeout=WRITE_TIMEOUT_S)
                break
            except (KazooException, KazooTimeoutError, TimeoutError):
                time.sleep(0.01)
        acked = time.monotonic() - killed
        if while_down is not None:
            while_down(leader, killed)
        return acked
    finally:
        zk.stop()
        zk.close()
        leader.spawn()
        leader.wait_serving("/")


def failover(ensembles: list[ManagedEnsemble], rounds: int = ROUNDS_DEFAULT, log=print) -> list[Row]:
    """Rounds alternate between the kinds, so a noisy minute hurts both alike."""
    times: dict[str, list[float]] = {e.kind: [] for e in ensembles}
    for r in range(rounds):
        for e in ensembles:
            t = one_round(e)
            times[e.kind].append(t)
            log(f"  failover round {r + 1} {e.kind}: {t * 1000:.0f} ms")
    size = len(ensembles[0].members) if ensembles else 0
    section = f"failover: kill -9 leader of {size} -> first acked write"
    return [
        Row(section, "median (ms)", {k: statistics.median(v) * 1000 for k, v in times.items()},
            "{:,.0f}"),
        Row(section, "max (ms)", {k: max(v) * 1000 for k, v in times.items()}, "{:,.0f}"),
    ]
