"""zkCli's commands on the session and the ensemble: sync, config, close, version and
reconfig."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kazoo.protocol.serialization import GetData, Reconfig, Sync

from zkcompat import __version__
from zkcompat.jute.java_order import properties_order
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
    """ConfigUtils.getClientConfigStr: "version host:port,host:port", in the order its
    java.util.Properties iterates the lines."""
    props = {}
    for raw in config.splitlines():
        key, _, value = raw.partition("=")
        props.setdefault(key.strip(), value.strip())
    version, clients = "", []
    for key in properties_order(list(props)):
        value = props[key]
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


RECONFIG = OptionSpec([Opt("s", False, "stats"), Opt("v", True, "required current config version"),
                       Opt("file", True, "path of config file to parse for membership"),
                       Opt("members", True, "comma-separated list of config strings for "
                           "non-incremental reconfig"),
                       Opt("add", True, "comma-separated list of config strings for new servers"),
                       Opt("remove", True, "comma-separated list of server IDs to remove")])


def run_reconfig(shell: Shell, p: Parsed, args: list[str]) -> None:
    """ReconfigCommand: its checks and messages, then ZooKeeperAdmin.reconfigure."""
    incremental, whole = p.has("add") or p.has("remove"), p.has("file") or p.has("members")
    if not incremental and not whole:
        raise CliError(COMMANDS["reconfig"].usage())
    version = -1
    if p.has("v"):
        try:
            version = int(p.values["v"] or "", 16)
        except ValueError:
            raise CliError("-v must be followed by a long (configuration version)") from None
    if whole and incremental:
        raise CliError("Can't use -file or -members together with -add or -remove (mixing "
                       "incremental and non-incremental modes is not allowed)")
    if p.has("file") and p.has("members"):
        raise CliError("Can't use -file and -members together (conflicting non-incremental "
                       "modes)")
    joining, leaving, members = (_lower(p, "add"), _lower(p, "remove"), _lower(p, "members"))
    if p.has("file"):
        members = _members_of_file(p.values["file"] or "")
    # ZooKeeperAdmin.reconfigure's KeeperException names the path "".
    data, stat = shell.call(Reconfig(joining, leaving, members, version), "")
    shell.printer.out("Committed new configuration:\n" + (data or b"").decode("utf-8", "replace"))
    if p.has("s"):
        shell.print_stat(stat)


def _lower(p: Parsed, key: str) -> str | None:
    return (p.values[key] or "").lower() if p.has(key) else None


def _members_of_file(path: str) -> str:
    """The server.N lines of a dynamic config file, one per line (the leader checks them)."""
    try:
        with open(path) as f:
            lines = [ln.strip() for ln in f if ln.strip().startswith("server.")]
    except OSError as e:
        raise CliError(f"Error processing {path}{e}") from None
    return "\n".join(lines)


COMMANDS: dict[str, Command] = {c.name: c for c in [
    Command("sync", "path", NO_OPTIONS, run_sync),
    Command("config", "[-c] [-w] [-s]", CONFIG, run_config),
    Command("version", "", NO_OPTIONS, run_version),
    Command("close", "", NO_OPTIONS, run_close),
    Command("reconfig", "[-s] [-v version] [[-file path] | [-members serverID=host:port1:"
            "port2;port3[,...]*]] | [-add serverId=host:port1:port2;port3[,...]]* "
            "[-remove serverId[,...]*]", RECONFIG, run_reconfig),
]}
