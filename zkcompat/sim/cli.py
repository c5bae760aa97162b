"""`zkcompat sim`: run seeds of the deterministic simulator, or replay one with its trace.

    zkcompat sim --seeds 1000 --servers 5       progress on stderr, a summary at the end
    zkcompat sim --seed 17 --servers 5 --trace  the same events in the same order, every time

Stdout depends only on the options (byte-identical from run to run); wall-clock figures
(seeds/s) go to stderr. The exit status is 1 if any seed failed.

The servers read their clocks from their context (server/clock.py); the simulation gives
each a sim/loop.VirtualClock, so nothing of the server code is patched for a run.
"""

from __future__ import annotations

import logging
import os
import sys
import time

import click

from zkcompat.sim.bugs import BUGS

SERVER_COUNTS = ("3", "5", "7")


def _pin_hash_seed() -> None:
    """str hashing is salted per process; set iteration over znode paths must repeat."""
    if os.environ.get("PYTHONHASHSEED") == "0":
        return
    env = dict(os.environ, PYTHONHASHSEED="0")
    os.execve(sys.executable, [sys.executable, "-m", "zkcompat", *sys.argv[1:]], env)


@click.command()
@click.option("--seeds", type=int, default=None, help="Run this many seeds.")
@click.option("--first-seed", type=int, default=1, show_default=True)
@click.option("--seed", type=int, default=None, help="Run (replay) just this seed.")
@click.option("--servers", type=click.Choice(SERVER_COUNTS), default="3", show_default=True)
@click.option("--faults", default="all", show_default=True,
              help="Fault profile: none, crash, partition, power, pause, clock, fsync, "
                   "newleader, stale_leader, reconfig (membership changes, with "
                   "reconfigEnabled), all.")
@click.option("--duration", type=float, default=None, help="Virtual seconds of load.")
@click.option("--trace", is_flag=True, help="Print the run's trace.")
@click.option("--bug", type=click.Choice(BUGS), default=None,
              help="Switch on an injected bug (the checks must catch it).")
@click.option("--fsync-ms", nargs=2, type=float, default=None, help="fsync latency range.")
@click.option("--quorum-sync", is_flag=True,
              help="quorumSync=true on every server: a sync confirms the leader with a quorum.")
def sim(seeds, first_seed, seed, servers, faults, duration, trace, bug, fsync_ms,
        quorum_sync) -> None:
    """Deterministic simulation of an ensemble: faults, clients, and the checks."""
    _pin_hash_seed()
    # cluster.run mutes the servers' logging during a run, but its teardown, after the mute,
    # ends every server's term (which logs) onto the progress line: keep them off stderr.
    logging.getLogger("zkcompat").addHandler(logging.NullHandler())
    logging.getLogger("zkcompat").propagate = False
    from zkcompat.sim.cluster import DURATION_S, run_seed  # noqa: PLC0415
    from zkcompat.sim.nemesis import PROFILES  # noqa: PLC0415

    if faults not in PROFILES:
        raise click.BadParameter(f"one of {sorted(PROFILES)}", param_hint="--faults")
    n = int(servers)
    if seed is not None:
        todo = [seed]
    else:
        todo = list(range(first_seed, first_seed + (seeds if seeds is not None else 100)))
    options = {"profile": faults, "duration_s": duration or DURATION_S, "bug": bug,
               "quorum_sync": quorum_sync}
    if fsync_ms:
        options["fsync_ms"] = tuple(fsync_ms)
    replay = (f"zkcompat sim --servers {n} --faults {faults}"
              + (f" --duration {duration}" if duration else "")
              + (f" --bug {bug}" if bug else "")
              + (f" --fsync-ms {fsync_ms[0]} {fsync_ms[1]}" if fsync_ms else "")
              + (" --quorum-sync" if quorum_sync else ""))
    failed = []
    ops = 0
    t0 = time.monotonic()
    for i, s in enumerate(todo, 1):
        result = run_seed(s, n, **options)
        ops += result.operations
        if trace:
            click.echo("\n".join(result.trace))
        if not result.ok:
            failed.append(s)
            click.echo(f"FAIL seed {s}: {result.failures[0].splitlines()[0]}")
            for f in result.failures[1:5]:
                click.echo(f"  also: {f.splitlines()[0]}")
            if trace:
                for f in result.failures:
                    click.echo(f)
            click.echo(f"  replay: {replay} --seed {s} --trace")
        elapsed = time.monotonic() - t0
        click.echo(f"\r[{i}/{len(todo)}] seed {s} {'ok' if result.ok else 'FAIL'} "
                   f"failed={len(failed)} {i / elapsed:.2f} seeds/s", err=True, nl=False)
    click.echo("", err=True)
    elapsed = time.monotonic() - t0
    click.echo(f"{len(todo)} seeds, {n} servers, faults={faults}"
               f"{', quorumSync' if quorum_sync else ''}: {len(todo) - len(failed)} "
               f"passed, {len(failed)} failed; {ops} client operations")
    if failed:
        click.echo("failed seeds: " + " ".join(map(str, failed)))
    click.echo(f"wall {elapsed:.1f}s, {len(todo) / elapsed:.2f} seeds/s", err=True)
    if failed:
        raise SystemExit(1)
