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


main.add_command(serve_command)
tools.register(main)
main.add_command(ensemble_group)
main.add_command(sim_command)
main.add_command(shell_command)

if __name__ == "__main__":
    main()
