"""The `zkcompat` command: the click group, with every subcommand registered in one place
(serve, the offline tools, ensemble, sim, shell)."""

import click

from zkcompat.cli import tools
from zkcompat.cli.ensemble import ensemble as ensemble_group
from zkcompat.cli.serve import serve as serve_command
from zkcompat.shell.main import shell as shell_command
from zkcompat.sim.cli import sim as sim_command


@click.group()
def main() -> None:
    """zkcompat: a coordination server that speaks the ZooKeeper client protocol."""


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def bench(args) -> None:
    """zkcompat vs Apache ZooKeeper side by side (scripts/bench; --help for options)."""
    from zkcompat.bench.cli import main as bench_main  # noqa: PLC0415

    raise SystemExit(bench_main(list(args)))


main.add_command(serve_command)
tools.register(main)
main.add_command(ensemble_group)
main.add_command(sim_command)
main.add_command(shell_command)

if __name__ == "__main__":
    main()
