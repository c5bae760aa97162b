"""zkCli's ACL and authentication commands (getAcl, setAcl, addauth, whoami) and its ACL
parser."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kazoo.protocol.serialization import GetACL, SetACL
from kazoo.security import ACL, Id

from zkcompat.shell import format as fmt
from zkcompat.shell import wire
from zkcompat.shell.cli_command import (
    NO_OPTIONS,
    CliError,
    Command,
    check_path,
    java_int,
    visit_dfs,
)
from zkcompat.shell.options import Opt, OptionSpec, Parsed
from zkcompat.shell.session import KeeperError

if TYPE_CHECKING:
    from zkcompat.shell.commands import Shell


def parse_acl(shell: Shell, text: str) -> list[ACL]:
    """AclParser.parse: bad entries are reported on stderr and skipped."""
    acl = []
    for a in text.split(","):
        first, last = a.find(":"), a.rfind(":")
        if first == -1 or first == last:
            shell.printer.err(f"{a} does not have the form scheme:id:perm")
            continue
        perms = 0
        for ch in a[last + 1:]:
            bit = {"r": fmt.READ, "w": fmt.WRITE, "c": fmt.CREATE, "d": fmt.DELETE,
                   "a": fmt.ADMIN}.get(ch)
            if bit is None:
                shell.printer.err(f"Unknown perm type: {ch}")
            else:
                perms |= bit
        acl.append(ACL(perms, Id(a[:first], a[first + 1:last])))
    return acl


GETACL = OptionSpec([Opt("s", False, "stats")])


def run_getacl(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["getAcl"].usage())
    path = p.args[1]
    check_path(path)
    acl, stat = shell.call(GetACL(shell.server_path(path)), path)
    for line in fmt.acl_lines(acl):
        shell.printer.out(line)
    if p.has("s"):
        shell.print_stat(stat)


SETACL = OptionSpec([Opt("s", False, "stats"), Opt("v", True, "version"),
                     Opt("R", False, "recursive")])


def run_setacl(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 3:
        raise CliError(COMMANDS["setAcl"].usage())
    path = p.args[1]
    acl = parse_acl(shell, p.args[2])
    version = java_int(p.value("v")) if p.has("v") else -1
    check_path(path)
    if p.has("R"):
        def set_one(node: str) -> None:
            try:
                shell.s.call(SetACL(shell.server_path(node), acl, version), node)
            except KeeperError as e:
                shell.printer.out(str(e), end="")  # zkCli uses out.print: no newline
        visit_dfs(shell, path, None, set_one)
        return
    stat = shell.call(SetACL(shell.server_path(path), acl, version), path)
    if p.has("s"):
        shell.print_stat(stat)


def run_addauth(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["addauth"].usage())
    # ZooKeeper.addAuthInfo is fire-and-forget; a refusal shows as an AuthFailed event.
    shell.s.client.add_auth_async(p.args[1], p.args[2] if len(p.args) >= 3 else "")


def run_whoami(shell: Shell, p: Parsed, args: list[str]) -> None:
    infos = shell.call(wire.WhoAmI(), None)
    shell.printer.out("Auth scheme: User")
    for scheme, user in infos:
        shell.printer.out(f"{scheme}: {user}")


COMMANDS: dict[str, Command] = {c.name: c for c in [
    Command("getAcl", "[-s] path", GETACL, run_getacl),
    Command("setAcl", "[-s] [-v version] [-R] path acl", SETACL, run_setacl),
    Command("addauth", "scheme auth", NO_OPTIONS, run_addauth),
    Command("whoami", "", NO_OPTIONS, run_whoami),
]}
