"""Print the normalised log of scenarios against one server, for writing scenarios.

    .venv/bin/python -m conformance_tests.show test_scenarios_multi [-k NAME]
    .venv/bin/python -m conformance_tests.show test_scenarios_multi --server 127.0.0.1:2181

Without --server it starts a throwaway real ZooKeeper (as the fixtures do).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
from pathlib import Path

from . import harness
from .servers import ServerProcess, start_zookeeper


class _External:
    """Stands in for a Popen: a server this tool did not start and will not stop."""

    pid = 0

    def poll(self) -> None:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance_tests.show")
    parser.add_argument("modules", nargs="+", help="scenario modules, e.g. test_scenarios_multi")
    parser.add_argument("-k", dest="keyword", default="", help="only scenarios whose name has this")
    parser.add_argument("--server", help="host:port of a running server instead of a new ZooKeeper")
    args = parser.parse_args(argv)

    for module in args.modules:
        importlib.import_module(f"conformance_tests.{module.removesuffix('.py')}")
    scenarios = [sc for sc in harness.REGISTRY.values() if args.keyword in sc.name]
    if not scenarios:
        print("no scenarios matched", file=sys.stderr)
        return 1

    with tempfile.TemporaryDirectory(prefix="conformance-show-") as tmp:
        if args.server:
            host, port = args.server.rsplit(":", 1)
            workdir = Path(tmp)
            server = ServerProcess(
                "server", _External(), int(port), workdir, workdir / "none.log", workdir / "none"
            )
            server.host = host
        else:
            server = start_zookeeper(Path(tmp) / "zookeeper")
        try:
            for sc in scenarios:
                env = harness.run_scenario(sc, server, harness.new_base(sc.name), "reference")
                print(f"== {sc.name}" + (f"  PROBLEMS: {env.problems}" if env.problems else ""))
                for entry in harness.normalised(env):
                    print("  ", harness.format_entry(entry))
        finally:
            harness.close_admin_clients()
            if not args.server:
                server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
