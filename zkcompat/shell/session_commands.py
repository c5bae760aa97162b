"""zkCli's commands on the session and the ensemble: sync, config, close, version, and
reconfig (refused)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kazoo.protocol.serialization import GetData, Sync

from zkcompat import __version__
from zkcompat.shell.cli_command import NO_OPTIONS, CliError, Command, check_path
from zkcompat.shell.options import Opt, OptionSpec, Parsed
from zkcompat.shell.session import KeeperError

if TYPE_CHECKING:
    from zkcompat.shell.commands import Shell

CONFIG_NODE = "/zookeeper/config"  # ZooDefs.CONFIG_NODE


def run_sync(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["sync"].usage())
    path = p.args[1]
    check_path(path)
    try:
        shell.s.call(Sync(shell.server_path(path)), path)
    except KeeperError as e:
        shell.printer.out(f"Sync has failed. rc={e.code}")
        return
    shell.printer.out("Sync is OK")


CONFIG = OptionSpec([Opt("s", False, "stats"), Opt("w", False, "watch"),
                     Opt("c", False, "client connection string")])


def client_config_str(config: str) -> str:
    """ConfigUtils.getClientConfigStr: "version host:port,host:port"."""
    version, clients = "", []
    for raw in config.splitlines():
        key, _, value = raw.partition("=")
        key, value = key.strip(), value.strip()
        if key == "version":
            version = value
        if key.startswith("server.") and ";" in value:
            client = value.rsplit(";", 1)[1]
            host, _, port = client.rpartition(":")
            clients.append(f"{host or '0.0.0.0'}:{port}")
    return f"{version} {','.join(clients)}"


def run_config(shell: Shell, p: Parsed, args: list[str]) -> None:
    watch = shell.s.watcher if p.has("w") else None
    data, stat = shell.call(GetData(shell.server_path(CONFIG_NODE), watch), None)
    text = "null" if data is None else data.decode("utf-8", errors="replace")
    shell.printer.out(client_config_str(text) if p.has("c") else text)
    if p.has("s"):
        shell.print_stat(stat)


def run_version(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) > 1:
        raise CliError(COMMANDS["version"].usage())
    shell.printer.out(f"ZooKeeper CLI version: zkcompat-{__version__} (zkCli of ZooKeeper 3.9)")


def run_close(shell: Shell, p: Parsed, args: list[str]) -> None:
    shell.s.close()


def run_reconfig(shell: Shell, p: Parsed, args: list[str]) -> None:
    raise CliError("reconfig is not supported by zkcompat shell")


COMMANDS: dict[str, Command] = {c.name: c for c in [
    Command("sync", "path", NO_OPTIONS, run_sync),
    Command("config", "[-c] [-w] [-s]", CONFIG, run_config),
    Command("version", "", NO_OPTIONS, run_version),
    Command("close", "", NO_OPTIONS, run_close),
    Command("reconfig", "[-s] [-v version] [[-file path] | [-members serverID=host:port1:"
            "port2;port3[,...]*]] | [-add serverId=host:port1:port2;port3[,...]]* "
            "[-remove serverId[,...]*]", OptionSpec([]), run_reconfig),
]}
