"""zkCli's writing commands: set, create, delete, deleteall."""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING

from kazoo.protocol.serialization import Delete, GetChildren, SetData, Transaction

from zkcompat.jute.constants import CreateMode, OpCode
from zkcompat.shell import format as fmt
from zkcompat.shell import wire
from zkcompat.shell.acl_commands import parse_acl
from zkcompat.shell.cli_command import (
    OPEN_ACL_UNSAFE,
    CliError,
    Command,
    check_path,
    java_int,
    retain_compatibility,
    wrap,
)
from zkcompat.shell.options import Opt, OptionSpec, Parsed
from zkcompat.shell.session import KeeperError

if TYPE_CHECKING:
    from zkcompat.shell.commands import Shell

TTL_MAX = 0xFFFFFFFFFF  # EphemeralType.TTL.maxValue()
DELETEALL_BATCH_DEFAULT = 1000


SET = OptionSpec([Opt("s", False, "Print znode stats additionally"),
                  Opt("v", True, "Set with an expected version"),
                  Opt("b", False, "Supply data in base64 format")])


def run_set(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 3:
        raise CliError(COMMANDS["set"].usage())
    path = p.args[1]
    if p.has("b"):
        try:
            data = base64.b64decode(p.args[2], validate=True)
        except binascii.Error as e:
            raise CliError(f"java.lang.IllegalArgumentException: {e}") from None
    else:
        data = p.args[2].encode("utf-8")
    version = java_int(p.value("v")) if p.has("v") else -1
    check_path(path)
    stat = shell.call(SetData(shell.server_path(path), data, version), path)
    if p.has("s"):
        shell.print_stat(stat)


CREATE = OptionSpec([Opt("e", False, "ephemeral"), Opt("s", False, "sequential"),
                     Opt("c", False, "container"), Opt("t", True, "ttl")])


def run_create(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["create"].usage())
    e, s, c, t = p.has("e"), p.has("s"), p.has("c"), p.has("t")
    if c and (e or s):
        raise CliError("-c cannot be combined with -s or -e. Containers cannot be ephemeral "
                       "or sequential.")
    ttl = 0
    if t:
        try:
            ttl = java_int(p.value("t"), bits=64)
        except CliError:
            raise CliError("-t argument must be a long value") from None
    if t and e:
        raise CliError("TTLs cannot be used with Ephemeral znodes")
    if t and c:
        raise CliError("TTLs cannot be used with Container znodes")
    if e:
        flags = int(CreateMode.EPHEMERAL_SEQUENTIAL) if s else int(CreateMode.EPHEMERAL)
    elif s:
        flags = int(CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL) if t else int(CreateMode.PERSISTENT_SEQUENTIAL)
    elif c:
        flags = int(CreateMode.CONTAINER)
    else:
        flags = int(CreateMode.PERSISTENT_WITH_TTL) if t else int(CreateMode.PERSISTENT)
    if t and not 0 < ttl <= TTL_MAX:
        raise CliError(f"ttl must be positive and cannot be larger than: {TTL_MAX}")
    path = p.args[1]
    data = p.args[2].encode("utf-8") if len(p.args) > 2 else None
    acl = parse_acl(shell, p.args[3]) if len(p.args) > 3 else OPEN_ACL_UNSAFE
    check_path(path, sequential=s)
    if not acl:
        # ZooKeeper.validateACL: InvalidACLException() has no path
        shell.printer.err(fmt.keeper_message(fmt.INVALIDACL, None))
        raise CliError(fmt.wrapped_message(fmt.INVALIDACL, None))
    sp = shell.server_path(path)
    if t:
        request = wire.CreateTTL(sp, data, acl, flags, ttl)
    else:
        request = wire.CreateAny(int(OpCode.CREATE_CONTAINER if c else OpCode.CREATE), sp, data, acl, flags)
    try:
        new_path, _ = shell.s.call(request, path)
    except KeeperError as err:
        if err.code == fmt.INVALIDACL:
            shell.printer.err(str(err))
        if err.code == -120:
            shell.printer.err("Unable to create ephemeral node on a local session")
        raise wrap(err) from None
    shell.printer.err(f"Created {shell.s.client.unchroot(new_path)}")


DELETE = OptionSpec([Opt("v", True, "version")])


def run_delete(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["delete"].usage())
    p = retain_compatibility(shell, DELETE, args, p,
                             "'delete path [version]' has been deprecated. "
                             "Please use 'delete [-v version] path' instead.", rewrite=False)
    path = p.args[1]
    version = java_int(p.value("v")) if p.has("v") else -1
    check_path(path)
    shell.call(Delete(shell.server_path(path), version), path)


DELETEALL = OptionSpec([Opt("b", True, "batch size")])


def run_deleteall(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["deleteall"].usage())
    try:
        batch = java_int(p.value("b")) if p.has("b") else DELETEALL_BATCH_DEFAULT
    except CliError:
        raise CliError("-b argument must be an int value") from None
    path = p.args[1]
    check_path(path)
    # ZKUtil.listSubTreeBFS, then deletes leaves first
    tree, queue = [path], [path]
    while queue:
        node = queue.pop(0)
        for child in shell.call(GetChildren(shell.server_path(node), None), node):
            child_path = ("" if node == "/" else node) + "/" + child
            queue.append(child_path)
            tree.append(child_path)
    if batch <= 0:
        for node in reversed(tree):
            shell.call(Delete(shell.server_path(node), -1), node)
        return
    ok = True
    ops: list = []
    for i in range(len(tree) - 1, -1, -1):
        ops.append(Delete(shell.server_path(tree[i]), -1))
        if len(ops) == batch or i == 0:
            if not ok:
                break
            try:
                results = shell.s.call(Transaction(ops), tree[i])
                ok = ok and not any(isinstance(r, Exception) for r in results)
            except KeeperError:
                ok = False
            ops = []
    if not ok:
        shell.printer.err("Failed to delete some node(s) in the subtree!")


COMMANDS: dict[str, Command] = {c.name: c for c in [
    Command("set", "path data [-s] [-v version] [-b]", SET, run_set, usage_table=True),
    Command("create", "[-s] [-e] [-c] [-t ttl] path [data] [acl]", CREATE, run_create),
    Command("delete", "[-v version] path", DELETE, run_delete),
    Command("deleteall", "path [-b batch size]", DELETEALL, run_deleteall),
]}
