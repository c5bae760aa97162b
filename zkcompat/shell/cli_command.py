"""What every zkCli command shares: the Command record, CliError, Java's number and path
checks, the deprecated `cmd path watch` form, and ZKUtil's depth-first walk."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kazoo.protocol.serialization import GetChildren, GetData
from kazoo.security import ACL, Id

from zkcompat.shell import format as fmt
from zkcompat.shell.options import OptionSpec, Parsed, ParseError, parse
from zkcompat.shell.session import KeeperError

if TYPE_CHECKING:
    from zkcompat.shell.commands import Shell

OPEN_ACL_UNSAFE = [ACL(31, Id("world", "anyone"))]
EXIT_ERROR = 1  # CliException.DEFAULT_EXCEPTION_EXIT_CODE
JAVA_INT = re.compile(r"^[+-]?\d+$")
NO_OPTIONS = OptionSpec([])


class CliError(Exception):
    """A CliException: its message goes to stderr and its exit code becomes the shell's."""

    def __init__(self, message: str, exit_code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def wrap(e: KeeperError) -> CliError:
    return CliError(fmt.wrapped_message(e.code, e.path))


def java_int(text: str | None, bits: int = 32) -> int:
    """Integer.parseInt / Long.parseLong; zkCli lets their exception escape, we print it."""
    if text is not None and JAVA_INT.match(text):
        value = int(text)
        if -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            return value
    raise CliError(f'java.lang.NumberFormatException: For input string: "{text}"')


@dataclass(frozen=True)
class Command:
    name: str
    option_str: str
    spec: OptionSpec
    run: Callable[[Shell, Parsed, list[str]], None]
    usage_table: bool = False  # 3.9 passes Options to CliCommand for get and set only

    def usage(self) -> str:
        text = f"{self.name} {self.option_str}"
        if self.usage_table and self.spec.options:
            text += "\n" + fmt.help_options(
                [(o.key, o.has_arg, o.description) for o in self.spec.options])
        return text


def check_path(path: str, sequential: bool = False) -> None:
    """PathUtils.validatePath in the Java client: MalformedPathException(message)."""
    problem = fmt.validate_path(path, sequential)
    if problem:
        raise CliError(problem)


def retain_compatibility(shell: Shell, spec: OptionSpec, args: list[str], parsed: Parsed,
                         text: str, rewrite: bool = True) -> Parsed:
    """retainCompatibility: `cmd path watch` means -w, with a warning."""
    if len(parsed.args) <= 2:
        return parsed
    if rewrite:
        args[2] = "-w"
    shell.printer.err(text)
    try:
        return parse(spec, args)
    except ParseError as e:
        raise CliError(str(e)) from None


def visit_dfs(shell: Shell, path: str, watch, visit: Callable[[str], None]) -> None:
    """ZKUtil.visitSubTreeDFS: the root's getData, then children sorted, level by level."""
    shell.call(GetData(shell.server_path(path), watch), path)
    visit(path)

    def helper(node: str) -> None:
        try:
            children = sorted(shell.s.call(GetChildren(shell.server_path(node), watch), node))
        except KeeperError as e:
            if e.code == fmt.NONODE:
                return
            raise wrap(e) from None
        base = node if node == "/" else node + "/"
        for child in children:
            visit(base + child)
        for child in children:
            helper(base + child)

    helper(path)
