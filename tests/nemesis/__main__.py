"""`python -m tests.nemesis` (scripts/nemesis): nemesis rounds by hand, more and longer than
pytest's. Each round starts a fresh ensemble under --dir; a failed round's folder is kept
and its replay command printed. Exit 1 if any round failed."""

from __future__ import annotations

import argparse
import logging
import random
import shutil
import sys
import tempfile
from pathlib import Path

from .runner import CASES, SIZES, run_round, spread_ensemble


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
    parser.add_argument("--dir", type=Path, default=None,
                        help="where rounds keep their servers, logs and histories "
                             "(default: a temporary folder; passed rounds are removed)")
    args = parser.parse_args(argv)
    # kazoo warns of every dropped connection; under a nemesis that is thousands of lines
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    cases = list(CASES) if args.case == "all" else [args.case]
    seed = random.randrange(1 << 31) if args.seed is None else args.seed
    base = args.dir or Path(tempfile.mkdtemp(prefix="nemesis-"))
    failed = 0
    for n in range(args.rounds):
        for case in cases:
            directory = base / f"{case}-{seed}"
            with spread_ensemble(directory, case, seed, args.servers) as rig:
                outcome = run_round(rig, case, seed, args.fault_seconds,
                                    args.clients_per_server)
            print(outcome.line(), flush=True)
            if outcome.failures:
                failed += 1
                print(outcome.report(), flush=True)
            elif args.dir is None:
                shutil.rmtree(directory, ignore_errors=True)
            seed += 1
        del n
    total = args.rounds * len(cases)
    print(f"nemesis: {total - failed} of {total} rounds passed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
