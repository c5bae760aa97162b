"""`python -m tests.nemesis` (scripts/nemesis): nemesis rounds by hand, more and longer than
pytest's. Each round starts a fresh ensemble under --dir; a failed round's folder is kept
and its replay command printed; a table per case ends the run. Exit 1 if any round
failed."""

from __future__ import annotations

import argparse
import logging
import random
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

from . import mixed
from .runner import CASES, SIZES, Outcome, run_round, spread_ensemble


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.nemesis", description=__doc__)
    parser.add_argument("--case", choices=[*CASES, "all"], default="all",
                        help="the fault to play; all: each in turn (default)")
    parser.add_argument("--servers", type=int, choices=SIZES, default=3,
                        help="ensemble size: server K on 127.0.0.K (default 3)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of each case")
    parser.add_argument("--seed", type=int, default=None,
                        help="the first round's seed (then seed+1, ...); default: random")
    parser.add_argument("--fault-seconds", type=float, default=10.0,
                        help="how long each case holds (or repeats) its fault")
    parser.add_argument("--clients-per-server", type=int, default=2)
    parser.add_argument("--mix", choices=list(mixed.MIXES), default=None,
                        help="a mixed ensemble of 3: zk1 or zk2 of its servers are Apache "
                             "ZooKeeper 3.8 (which ones, the seed chooses); zk3: all of them, "
                             "ZooKeeper's own baseline; default: all zkcompat. The clock and "
                             "disk cases are refused; 'all' leaves them out")
    parser.add_argument("--dir", type=Path, default=None,
                        help="where rounds keep their servers, logs and histories "
                             "(default: a temporary folder; passed rounds are removed)")
    args = parser.parse_args(argv)
    # kazoo warns of every dropped connection; under a nemesis that is thousands of lines
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    cases = list(CASES) if args.case == "all" else [args.case]
    if args.mix is not None:
        if args.case == "all":
            cases = [c for c in cases if c not in mixed.ZKCOMPAT_ONLY_CASES]
        try:
            for case in cases:
                mixed.check_mix(args.mix, args.servers, case)
        except ValueError as e:
            parser.error(str(e))
    seed = random.randrange(1 << 31) if args.seed is None else args.seed
    base = args.dir or Path(tempfile.mkdtemp(prefix="nemesis-"))
    failed = 0
    outcomes: list[Outcome] = []
    for n in range(args.rounds):
        for case in cases:
            directory = base / f"{case}-{seed}"
            try:
                with spread_ensemble(directory, case, seed, args.servers, args.mix) as rig:
                    outcome = run_round(rig, case, seed, args.fault_seconds,
                                        args.clients_per_server)
            except Exception:  # noqa: BLE001 - one round's error must not end the others
                failed += 1
                print(f"{case} seed={seed} ERROR (kept in {directory}):\n"
                      f"{traceback.format_exc()}", flush=True)
                seed += 1
                continue
            outcomes.append(outcome)
            print(outcome.line(), flush=True)
            for anomaly in outcome.zookeeper_anomalies:
                print(f"  {anomaly}", flush=True)
            if outcome.failures:
                failed += 1
                print(outcome.report(), flush=True)
            elif args.dir is None:
                shutil.rmtree(directory, ignore_errors=True)
            seed += 1
        del n
    total = args.rounds * len(cases)
    print(table(outcomes, args.mix), flush=True)
    print(f"nemesis: {total - failed} of {total} rounds passed", flush=True)
    if args.dir is None and not failed:
        shutil.rmtree(base, ignore_errors=True)  # each passed round's folder is gone already
    return 1 if failed else 0


def table(outcomes: list[Outcome], mix: str | None) -> str:
    """Per case: rounds, operations, indeterminate ones, rounds with anomalies (zkcompat's:
    failed rounds; ZooKeeper's own, in a mixed run), the longest unavailability."""
    rows = [("case", "mix", "rounds", "ops", "indeterminate", "failed", "zk-anomalous",
             "longest-unavailable")]
    for case in dict.fromkeys(o.case for o in outcomes):
        mine = [o for o in outcomes if o.case == case]
        rows.append((case, mix or "-", str(len(mine)),
                     str(sum(o.counts.get("ops", 0) for o in mine)),
                     str(sum(o.counts.get("unknown", 0) for o in mine)),
                     str(sum(1 for o in mine if o.failures)),
                     str(sum(1 for o in mine if o.zookeeper_anomalies)),
                     f"{max(o.unavailable_s for o in mine):.1f}s"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True))
                     for r in rows)


if __name__ == "__main__":
    sys.exit(main())
