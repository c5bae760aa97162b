"""zkCli's quota commands: setquota, listquota, delquota, on the nodes under
/zookeeper/quota."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kazoo.protocol.serialization import Delete, Exists, GetChildren, GetData, SetData

from zkcompat.shell import format as fmt
from zkcompat.shell import wire
from zkcompat.shell.cli_command import (
    NO_OPTIONS,
    OPEN_ACL_UNSAFE,
    CliError,
    Command,
    check_path,
    java_int,
    visit_dfs,
    wrap,
)
from zkcompat.shell.options import Opt, OptionSpec, Parsed
from zkcompat.shell.session import KeeperError

if TYPE_CHECKING:
    from zkcompat.shell.commands import Shell

QUOTA_ZOOKEEPER = "/zookeeper/quota"  # Quotas.quotaZookeeper
PROC_ZOOKEEPER = "/zookeeper"
LIMIT_NODE = "zookeeper_limits"
STAT_NODE = "zookeeper_stats"


def _exists(shell: Shell, path: str):
    return shell.call(Exists(shell.server_path(path), None), path)


def _create_ignoring_exists(shell: Shell, path: str, data: bytes | None) -> None:
    try:
        shell.s.call(wire.CreateAny(1, shell.server_path(path), data, OPEN_ACL_UNSAFE, 0), path)
    except KeeperError as e:
        if e.code != fmt.NODEEXISTS:
            raise wrap(e) from None


def _children(shell: Shell, path: str) -> list[str]:
    return shell.s.call(GetChildren(shell.server_path(path), None), path)


SETQUOTA = OptionSpec([Opt("n", True, "num soft quota"), Opt("b", True, "bytes soft quota"),
                       Opt("N", True, "num hard quota"), Opt("B", True, "bytes hard quota")],
                      group=("n", "b", "N", "B"), group_required=True)


def run_setquota(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["setquota"].usage())
    path = p.args[1]
    if path.startswith(QUOTA_ZOOKEEPER):
        shell.printer.err(f"cannot set a quota under the path: {QUOTA_ZOOKEEPER}")
        return
    quota = {}
    keys = {"n": ("count", 32, True), "b": ("bytes", 64, False),
            "N": ("countHardLimit", 32, True), "B": ("byteHardLimit", 64, False)}
    for flag, (key, bits, positive) in keys.items():
        if not p.has(flag):
            continue
        try:
            value = java_int(p.value(flag), bits)
        except CliError:
            shell.printer.err("NumberFormatException happens when parsing the option value")
            return
        if positive and value <= 0:
            shell.printer.err("the num quota must be greater than zero")
            return
        if not positive and value < 0:
            shell.printer.err("the bytes quota must be greater than or equal to zero")
            return
        quota[key] = value
    check_path(path)
    if _exists(shell, path) is None:
        raise CliError(f"{path} does not exist.")
    _check_child_quota(shell, path)
    _check_parent_quota(shell, path)
    if _exists(shell, QUOTA_ZOOKEEPER) is None:
        _create_ignoring_exists(shell, PROC_ZOOKEEPER, None)
        _create_ignoring_exists(shell, QUOTA_ZOOKEEPER, None)
    quota_path = QUOTA_ZOOKEEPER
    for part in path.split("/")[1:]:
        quota_path += "/" + part
        if _exists(shell, quota_path) is None:
            _create_ignoring_exists(shell, quota_path, None)
    stat_path, limit_path = f"{quota_path}/{STAT_NODE}", f"{quota_path}/{LIMIT_NODE}"
    if _exists(shell, limit_path) is None:
        track = fmt.StatsTrack()
        track.stats = {"count": -1, "bytes": -1, "countHardLimit": -1, "byteHardLimit": -1}
        track.stats.update(quota)
        shell.call(wire.CreateAny(1, shell.server_path(limit_path), str(track).encode(),
                                  OPEN_ACL_UNSAFE, 0), limit_path)
        stats = fmt.StatsTrack("count=0,bytes=0")
        shell.call(wire.CreateAny(1, shell.server_path(stat_path), str(stats).encode(),
                                  OPEN_ACL_UNSAFE, 0), stat_path)
        _check_quota(shell, limit_path, stat_path)
    else:
        data, _ = shell.call(GetData(shell.server_path(limit_path), None), limit_path)
        track = fmt.StatsTrack(data)
        track.stats.update(quota)
        _check_quota(shell, None, stat_path, track)
        shell.call(SetData(shell.server_path(limit_path), str(track).encode(), -1), limit_path)


def _check_quota(shell: Shell, limit_path: str | None, stat_path: str,
                 quota: fmt.StatsTrack | None = None) -> None:
    if quota is None:
        quota = fmt.StatsTrack(shell.call(GetData(shell.server_path(limit_path), None),
                                          limit_path)[0])
    stats = fmt.StatsTrack(shell.call(GetData(shell.server_path(stat_path), None),
                                      stat_path)[0])
    count, nbytes = stats.get("count"), stats.get("bytes")
    if (-1 < quota.get("count") < count) or (-1 < quota.get("countHardLimit") < count):
        shell.printer.out("[Warning]: the count quota you create is less than the existing "
                          f"count:{count}")
    if (-1 < quota.get("bytes") < nbytes) or (-1 < quota.get("byteHardLimit") < nbytes):
        shell.printer.out("[Warning]: the bytes quota you create is less than the existing "
                          f"bytes:{nbytes}")


def _check_child_quota(shell: Shell, path: str) -> None:
    real = QUOTA_ZOOKEEPER + path
    try:
        shell.s.call(GetData(shell.server_path(real), None), real)
    except KeeperError as e:
        if e.code == fmt.NONODE:
            return
        raise wrap(e) from None

    def visit(node: str) -> None:
        try:
            children = _children(shell, node)
        except KeeperError:
            return
        for child in children:
            if node != QUOTA_ZOOKEEPER + path and child == LIMIT_NODE:
                raise CliError(f"{path} has a child {node[len(QUOTA_ZOOKEEPER):]} which has "
                               "a quota")

    visit_dfs(shell, real, None, visit)


def _check_parent_quota(shell: Shell, path: str) -> None:
    quota_path = QUOTA_ZOOKEEPER
    for part in path.split("/")[1:-1]:
        quota_path += "/" + part
        try:
            children = _children(shell, quota_path)
        except KeeperError as e:
            if e.code == fmt.NONODE:
                return
            raise wrap(e) from None
        if not children:
            return
        for child in children:
            if quota_path != QUOTA_ZOOKEEPER + path and child == LIMIT_NODE:
                raise CliError(f"{path} has a parent {quota_path[len(QUOTA_ZOOKEEPER):]} "
                               "which has a quota")


def run_listquota(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["listquota"].usage())
    path = p.args[1]
    limit_path = f"{QUOTA_ZOOKEEPER}{path}/{LIMIT_NODE}"
    shell.printer.err(f"absolute path is {limit_path}")
    lines = []
    try:
        for node, label in ((limit_path, "quota"),
                            (f"{QUOTA_ZOOKEEPER}{path}/{STAT_NODE}", "stat")):
            data, _ = shell.s.call(GetData(shell.server_path(node), None), node)
            lines.append(f"Output {label} for {path} {fmt.StatsTrack(data)}")
    except KeeperError as e:
        if e.code != fmt.NONODE:
            raise wrap(e) from None
        for line in lines:
            shell.printer.out(line)
        shell.printer.err(f"quota for {path} does not exist.")
        return
    for line in lines:
        shell.printer.out(line)


DELQUOTA = OptionSpec([Opt("n", False, "num soft quota"), Opt("b", False, "bytes soft quota"),
                       Opt("N", False, "num hard quota"), Opt("B", False, "bytes hard quota")],
                      group=("n", "b", "N", "B"))


def run_delquota(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["delquota"].usage())
    path = p.args[1]
    parent, limit_path = QUOTA_ZOOKEEPER + path, f"{QUOTA_ZOOKEEPER}{path}/{LIMIT_NODE}"
    try:
        if shell.s.call(Exists(shell.server_path(limit_path), None), limit_path) is None:
            shell.printer.out(f"Quota does not exist for {path}")
            return
        data, _ = shell.s.call(GetData(shell.server_path(limit_path), None), limit_path)
        flags = [f for f in "nbNB" if p.has(f)]
        if not flags:
            for child in _children(shell, parent):
                shell.s.call(Delete(shell.server_path(f"{parent}/{child}"), -1), parent)
            node = parent
            while node != QUOTA_ZOOKEEPER and not _children(shell, node):
                shell.s.call(Delete(shell.server_path(node), -1), node)
                node = node[:node.rfind("/")]
            return
        track = fmt.StatsTrack(data)
        for f in flags:
            track.stats[{"n": "count", "b": "bytes", "N": "countHardLimit",
                         "B": "byteHardLimit"}[f]] = -1
        shell.s.call(SetData(shell.server_path(limit_path), str(track).encode(), -1), limit_path)
    except KeeperError as e:
        if e.code == fmt.NONODE:
            shell.printer.err(f"quota for {path} does not exist.")
            return
        raise wrap(e) from None


COMMANDS: dict[str, Command] = {c.name: c for c in [
    Command("setquota", "-n|-b|-N|-B val path", SETQUOTA, run_setquota),
    Command("listquota", "path", NO_OPTIONS, run_listquota),
    Command("delquota", "[-n|-b|-N|-B] path", DELQUOTA, run_delquota),
]}
