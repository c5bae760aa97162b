"""zkCli's reading commands: ls, get, stat, getEphemerals, getAllChildrenNumber."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

from kazoo.protocol.serialization import Exists, GetChildren, GetChildren2, GetData

from zkcompat.shell import format as fmt
from zkcompat.shell import wire
from zkcompat.shell.cli_command import (
    NO_OPTIONS,
    CliError,
    Command,
    check_path,
    retain_compatibility,
    visit_dfs,
    wrap,
)
from zkcompat.shell.options import Opt, OptionSpec, Parsed
from zkcompat.shell.session import KeeperError

if TYPE_CHECKING:
    from zkcompat.shell.commands import Shell


LS = OptionSpec([Opt("?", False, "help"), Opt("s", False, "stat"), Opt("w", False, "watch"),
                 Opt("R", False, "recurse")])


def run_ls(shell: Shell, p: Parsed, args: list[str]) -> None:
    if p.has("?"):
        shell.printer.out("usage: ls [options] path")
        shell.printer.out(fmt.help_options([(o.key, o.has_arg, o.description)
                                            for o in LS.options]), end="")
    p = retain_compatibility(
        shell, LS, args, p,
        "'ls path [watch]' has been deprecated. Please use 'ls [-w] path' instead.")
    if len(p.args) < 2:
        raise CliError(COMMANDS["ls"].usage())
    path = p.args[1]
    watch = shell.s.watcher if p.has("w") else None
    check_path(path)
    if p.has("R"):
        visit_dfs(shell, path, watch, shell.printer.out)
        return
    sp = shell.server_path(path)
    if p.has("s"):
        children, stat = shell.call(GetChildren2(sp, watch), path)
    else:
        children, stat = shell.call(GetChildren(sp, watch), path), None
    shell.printer.out("[" + ", ".join(sorted(children)) + "]")
    if stat is not None:
        shell.print_stat(stat)


GET = OptionSpec([Opt("s", False, "Print znode stats additionally"),
                  Opt("w", False, "Watch for changes on the znode"),
                  Opt("b", False, "Output data in base64 format"),
                  Opt("x", False, "Output data in hexdump format")])


def run_get(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["get"].usage())
    p = retain_compatibility(shell, GET, args, p, "'get path [watch]' has been deprecated. "
                             "Please use 'get [-s] [-w] path' instead.")
    path = p.args[1]
    check_path(path)
    watch = shell.s.watcher if p.has("w") else None
    data, stat = shell.call(GetData(shell.server_path(path), watch), path)
    data = b"null" if data is None else data
    if p.has("x"):
        shell.printer.out(fmt.hex_dump(data))
    elif p.has("b"):
        shell.printer.out(base64.b64encode(data).decode("ascii"))
    else:
        shell.printer.out(data.decode("utf-8", errors="replace"))
    if p.has("s"):
        shell.print_stat(stat)


STAT = OptionSpec([Opt("w", False, "watch")])


def run_stat(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["stat"].usage())
    p = retain_compatibility(shell, STAT, args, p, "'stat path [watch]' has been deprecated. "
                             "Please use 'stat [-w] path' instead.")
    path = p.args[1]
    check_path(path)
    watch = shell.s.watcher if p.has("w") else None
    stat = shell.call(Exists(shell.server_path(path), watch), path)
    if stat is None:
        raise CliError(fmt.wrapped_message(fmt.NONODE, path))
    shell.print_stat(stat)


def run_getephemerals(shell: Shell, p: Parsed, args: list[str]) -> None:
    path = p.args[1] if len(p.args) >= 2 else "/"
    check_path(path)
    try:
        paths = shell.s.call(wire.GetEphemerals(path), None)
    except KeeperError as e:
        raise wrap(e) from None  # getEphemerals' KeeperException carries no path
    shell.printer.out("[" + ", ".join(paths) + "]")


def run_getallchildrennumber(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["getAllChildrenNumber"].usage())
    path = p.args[1]
    check_path(path)
    shell.printer.out(str(shell.call(wire.GetAllChildrenNumber(shell.server_path(path)), path)))


COMMANDS: dict[str, Command] = {c.name: c for c in [
    Command("ls", "[-s] [-w] [-R] path", LS, run_ls),
    Command("get", "[-s] [-w] [-b] [-x] path", GET, run_get, usage_table=True),
    Command("stat", "[-w] path", STAT, run_stat),
    Command("getEphemerals", "path", NO_OPTIONS, run_getephemerals),
    Command("getAllChildrenNumber", "path", NO_OPTIONS, run_getallchildrennumber),
]}
