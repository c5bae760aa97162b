"""zkCli's watch commands: addWatch (persistent and recursive watches) and removewatches."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zkcompat.shell import wire
from zkcompat.shell.cli_command import CliError, Command, check_path, wrap
from zkcompat.shell.options import Opt, OptionSpec, Parsed
from zkcompat.shell.session import KeeperError

if TYPE_CHECKING:
    from zkcompat.shell.commands import Shell


ADDWATCH = OptionSpec([Opt("m", True, "")])


def run_addwatch(shell: Shell, p: Parsed, args: list[str]) -> None:
    usage = COMMANDS["addWatch"].usage()
    if len(p.args) != 2:
        raise CliError(usage)
    mode = wire.ADD_WATCH_MODES["PERSISTENT_RECURSIVE"]
    if p.has("m"):
        name = (p.value("m") or "").upper()
        if name not in wire.ADD_WATCH_MODES:
            raise CliError(usage)
        mode = wire.ADD_WATCH_MODES[name]
    path = p.args[1]
    check_path(path)
    shell.call(wire.AddWatch(shell.server_path(path), mode, shell.s._added), path)


REMOVEWATCHES = OptionSpec([Opt("c", False, "child watcher type"),
                            Opt("d", False, "data watcher type"),
                            Opt("p", False, "persistent watcher type"),
                            Opt("r", False, "persistent recursive watcher type"),
                            Opt("a", False, "any watcher type"),
                            Opt("l", False, "remove locally when there is no server connection")])


def run_removewatches(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["removewatches"].usage())
    path = p.args[1]
    kind = next((k for flag, k in (("c", "Children"), ("d", "Data"), ("p", "Persistent"),
                                   ("r", "PersistentRecursive"), ("a", "Any")) if p.has(flag)),
                "Any")
    check_path(path)
    try:
        shell.s.remove_watches(path, kind, p.has("l"))
    except KeeperError as e:
        raise wrap(e) from None


COMMANDS: dict[str, Command] = {c.name: c for c in [
    Command("addWatch", "[-m mode] path # optional mode is one of [PERSISTENT, "
            "PERSISTENT_RECURSIVE] - default is PERSISTENT_RECURSIVE", ADDWATCH, run_addwatch),
    Command("removewatches", "path [-c|-d|-a] [-l]", REMOVEWATCHES, run_removewatches),
]}
