"""`zkcompat ensemble`: 3, 5 or 7 servers on loopback, started detached and ended by PID.

D/ensemble.json records each server's ports, zoo.cfg and PID; a PID is signalled only while
/proc/PID/cmdline still names that server's zoo.cfg, so a recycled PID is never hit. This
module is the click commands; what ensemble.json holds is ensemble_state.py, each server's
ports and files ensemble_plan.py, and its process ensemble_process.py.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import click

from zkcompat.cli.ensemble_plan import (
    ADDRESS_LAYOUTS,
    KINDS,
    PORT_MAX,
    PORTS_PER_SERVER,
    free_ports,
    member_host,
    prepare,
    write_files,
)
from zkcompat.cli.ensemble_process import (
    FOUR_LETTER_TIMEOUT_S,
    GONE_TIMEOUT_S,
    POLL_S,
    RESTART_MODES,
    START_MODES,
    is_ours,
    port_refuses,
    send_signal,
    server_mode,
    spawn,
    stop_members,
    wait_serving,
    wait_until,
)
from zkcompat.cli.ensemble_state import (
    HOST,
    STATE_FILE,
    Ensemble,
    Member,
    load_state,
    record_pid,
    save_state,
    update_member,
)

START_TIMEOUT_S = 120.0  # three JVMs electing a leader on a loaded 2-core box
CONFIG_NODE = "/zookeeper/config"


# -- state --------------------------------------------------------------------------------


def _require_state(directory: Path) -> Ensemble:
    ensemble = load_state(directory)
    if ensemble is None:
        raise click.ClickException(f"no ensemble in {directory} (no {STATE_FILE}; "
                                   "`ensemble start N` makes one)")
    return ensemble


def _member(ensemble: Ensemble, sid: int) -> Member:
    if sid not in ensemble.members:
        raise click.ClickException(f"no server.{sid} in this ensemble (servers "
                                   f"{', '.join(map(str, ensemble.members))})")
    return ensemble.members[sid]


# -- configuration and start ------------------------------------------------------------------


# zoo.cfg keys `ensemble` writes for each server itself: --set cannot move them.
MANAGED_KEYS = frozenset(("dataDir", "clientPort", "clientPortAddress", "peerType",
                          "admin.serverPort", "admin.serverAddress"))
MANAGED_PREFIXES = ("server.",)


def _settings(pairs: tuple[str, ...]) -> dict:
    """--set KEY=VALUE pairs, in order (a later one for the same KEY wins)."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise click.BadParameter(f"{pair!r}: expected KEY=VALUE", param_hint="'--set'")
        if "\n" in pair or "\r" in pair:
            raise click.BadParameter(f"{pair!r}: one line only", param_hint="'--set'")
        if key in MANAGED_KEYS or key.startswith(MANAGED_PREFIXES):
            raise click.BadParameter(
                f"{key} is written by `ensemble` itself for each server (its ports, dataDir "
                "and the server.N lines)", param_hint="'--set'")
        out[key] = value
    return out


def _serving_or_exit(ens: Ensemble, members: list[Member], modes: frozenset[str],
                     timeout_s: float) -> None:
    """Return once every member serves in one of `modes`; else name those that did not
    and exit 1."""
    why = wait_serving(members, modes, timeout_s)
    if why:
        _report_failures(ens, why, timeout_s)
        raise SystemExit(1)


def _report_failures(ensemble: Ensemble, why: dict[int, str], timeout_s: float) -> None:
    for sid, reason in why.items():
        m = ensemble.members[sid]
        within = "" if reason == "process exited" else f" within {timeout_s:g}s"
        click.echo(f"server.{sid} {m.address} did not come up{within}: {reason} "
                   f"(log {m.log_path})", err=True)


# -- the commands -----------------------------------------------------------------------------

_DIR_OPTION = click.option("--dir", "directory", default="ensemble", show_default=True,
                           type=click.Path(file_okay=False, path_type=Path),
                           help="Where the configs, data, logs and ensemble.json live.")


def _absolute(directory: Path) -> Path:
    return directory.expanduser().resolve()


@click.group()
def ensemble() -> None:
    """A local ensemble of 3, 5 or 7 servers on loopback (scripts/ensemble)."""


@ensemble.command()
@click.argument("size", type=click.Choice(["3", "5", "7"]))
@_DIR_OPTION
@click.option("--kind", default="zkcompat", show_default=True,
              help="zkcompat, or zookeeper (Apache ZooKeeper 3.8 from Debian's package, which "
              "scripts/install-zookeeper installs), or one per server, comma-separated: "
              "zookeeper,zookeeper,zkcompat.")
@click.option("--timeout", "timeout_s", type=float, default=START_TIMEOUT_S, hidden=True)
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE",
              help="A zoo.cfg line for every server, after the defaults, so it overrides them "
              "(--set tickTime=500); repeat it for more keys. Not the keys ensemble writes "
              "per server (ports, dataDir, server.N). On a restart it is added to what the "
              "servers had.")
@click.option("--observers", type=click.IntRange(0, 7), default=0, hidden=True,
              help="Observers to add after the SIZE voters (server.SIZE+1, ...).")
@click.option("--base-port", type=click.IntRange(1, PORT_MAX), metavar="P",
              help="Put every port in P .. P+4N-1 (N servers): server K gets client P+K-1, "
              "quorum P+N+K-1, election P+2N+K-1, admin P+3N+K-1.  [default: free ports "
              "the system picks]")
@click.option("--addresses", type=click.Choice(ADDRESS_LAYOUTS), default="same",
              show_default=True,
              help="same: every server on 127.0.0.1; spread: server K alone on 127.0.0.K "
              "(all four of its ports), so a firewall can cut the links between servers.")
def start(size: str, directory: Path, kind: str, timeout_s: float,
          settings: tuple[str, ...], observers: int, base_port: int | None,
          addresses: str) -> None:
    """Start SIZE servers; print `connect: ...` once every one serves.

    Each server has a client, a quorum, an election and an AdminServer port
    (127.0.0.1:PORT/commands), all on 127.0.0.1, or all of server K's on 127.0.0.K with
    --addresses spread. With --base-port P they are the 4N ports
    from P (N = SIZE): for 3 servers and P = 12000, clients 12000-12002, quorum
    12003-12005, election 12006-12008, AdminServers 12009-12011. A stopped ensemble starts
    again on the ports it had.

    \b
    Environment, as zkServer.sh takes it:
      SERVER_JVMFLAGS, JVMFLAGS  java flags, in that order, for each ZooKeeper server
                                 (--kind zookeeper), after ours (-Xmx1g, serial GC), so
                                 -Xmx or a JAAS file given here wins. zkcompat servers get
                                 both variables, read their -D settings as ZooKeeper does
                                 (a zoo.cfg key wins over a -D) and ignore the rest."""
    total = int(size) + observers
    if base_port is not None and base_port + PORTS_PER_SERVER * total - 1 > PORT_MAX:
        raise click.BadParameter(
            f"{base_port}: {total} servers need {PORTS_PER_SERVER * total} ports from it; at "
            f"most {PORT_MAX - PORTS_PER_SERVER * total + 1}", param_hint="'--base-port'")
    directory = _absolute(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ens = prepare(directory, int(size), kind, _settings(settings), observers, base_port,
                   addresses)
    write_files(ens)
    for m in ens.members.values():
        m.pid = spawn(m.kind, m)
        save_state(directory, ens)  # recorded at once: `stop` can end it whatever follows
    _serving_or_exit(ens, list(ens.members.values()), START_MODES, timeout_s)
    click.echo(f"connect: {ens.connect_string}")


@ensemble.command()
@_DIR_OPTION
def status(directory: Path) -> None:
    """One line per server: server.K 127.0.0.1:PORT MODE (MODE from srvr, or down)."""
    ens = _require_state(_absolute(directory))
    for m in ens.members.values():
        click.echo(f"server.{m.sid} {m.address} {server_mode(m.client_port, m.host) or 'down'}")


@ensemble.command()
@click.argument("sid", type=int)
@_DIR_OPTION
def kill(sid: int, directory: Path) -> None:
    """SIGKILL server SID, as a crash would."""
    m = _member(_require_state(_absolute(directory)), sid)
    if not send_signal(m, signal.SIGKILL):
        click.echo(f"server.{sid} is not running", err=True)
        return
    if not wait_until(lambda: not is_ours(m.pid, m.cfg), GONE_TIMEOUT_S):
        raise click.ClickException(f"server.{sid} (pid {m.pid}) survived SIGKILL")


@ensemble.command("stop-server")
@click.argument("sid", type=int)
@_DIR_OPTION
def stop_server(sid: int, directory: Path) -> None:
    """Stop server SID (SIGTERM); return once its client port refuses connections."""
    m = _member(_require_state(_absolute(directory)), sid)
    if stop_members([m]):
        raise click.ClickException(f"server.{sid} is still up (pid {m.pid}, {m.address})")


@ensemble.command("start-server")
@click.argument("sid", type=int)
@_DIR_OPTION
@click.option("--timeout", "timeout_s", type=float, default=START_TIMEOUT_S, hidden=True)
@click.option("--kind", type=click.Choice(KINDS),
              help="Start it as this kind, from now on: the same zoo.cfg, myid, ports and "
              "dataDir (replacing servers one at a time: docs/migrating-from-zookeeper.md). "
              "Each kind keeps its data apart in the dataDir (ZooKeeper in version-2, zkcompat "
              "in zkcompat/): move the other's out first, or it is there for the next switch "
              "back.  [default: the kind it ran as]")
def start_server(sid: int, directory: Path, timeout_s: float, kind: str | None) -> None:
    """Start server SID again on its data; return once it serves in the ensemble.
    SERVER_JVMFLAGS and JVMFLAGS reach it as they do at `start`."""
    directory = _absolute(directory)
    ens = _require_state(directory)
    m = _member(ens, sid)
    if is_ours(m.pid, m.cfg):
        raise click.ClickException(f"server.{sid} is already running (pid {m.pid})")
    if not port_refuses(m.client_port, m.host):
        raise click.ClickException(f"{m.address} is taken by another process")
    if kind is not None and kind != m.kind:
        m.kind = kind
        update_member(directory, sid, kind=kind)
    m.pid = spawn(m.kind, m)
    record_pid(directory, sid, m.pid)
    _serving_or_exit(ens, [m], RESTART_MODES, timeout_s)
    click.echo(f"server.{sid} {m.address} {server_mode(m.client_port, m.host) or 'down'}")


_AUTH_OPTION = click.option(
    "--auth", metavar="USER:PASSWORD",
    help="A digest identity reconfig accepts: the super user of "
    "DigestAuthenticationProvider.superDigest (set it with --set at `start`).")


def _reconfig(ens: Ensemble, sids: list[int], auth: str, done: Callable[[bytes], bool],
              **change) -> bytes:
    """kazoo's reconfig through the servers `sids`; the committed config it returns. A
    reply lost with the connection (a follower restarts its role when the leader changes
    with the config) is no answer: the config node says whether it committed (`done`)."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import ConnectionLoss, KazooException

    hosts = ",".join(ens.members[s].address for s in sids)
    client = KazooClient(hosts=hosts, auth_data=[("digest", auth)])
    try:
        client.start(timeout=FOUR_LETTER_TIMEOUT_S * 10)
        try:
            data, _ = client.reconfig(from_config=-1, **change)
            return data
        except ConnectionLoss:
            deadline = time.monotonic() + START_TIMEOUT_S
            while time.monotonic() < deadline:
                try:
                    client.sync(CONFIG_NODE)
                    data, _ = client.get(CONFIG_NODE)
                except ConnectionLoss:
                    time.sleep(POLL_S)
                    continue
                if done(data):
                    return data
                break
            raise click.ClickException(f"reconfig {change}: ConnectionLoss, and "
                                       f"{CONFIG_NODE} does not show it") from None
    except KazooException as e:
        raise click.ClickException(f"reconfig {change}: {type(e).__name__}") from None
    finally:
        client.stop()
        client.close()


def _names(data: bytes, sid: int) -> bool:
    return any(line.startswith(f"server.{sid}=") for line in data.decode().splitlines())


@ensemble.command()
@click.argument("sid", type=click.IntRange(1, 255))
@_DIR_OPTION
@_AUTH_OPTION
@click.option("--observer", is_flag=True, help="Add it as an observer, not a participant.")
@click.option("--kind", type=click.Choice(KINDS), default="zkcompat", show_default=True)
@click.option("--static", is_flag=True,
              help="No reconfig: only start it, for a rolling restart that changes the "
              "membership (give the others its server.SID line and restart them one by one).")
@click.option("--timeout", "timeout_s", type=float, default=START_TIMEOUT_S, hidden=True)
def add(sid: int, directory: Path, auth: str | None, observer: bool, kind: str,
        static: bool, timeout_s: float) -> None:
    """Add server SID to a running ensemble with reconfigEnabled=true: start it with a
    config that names the ensemble and itself, wait until it follows (as a non-voting
    participant, or an observer), then `reconfig -add` it. Prints the new config."""
    if auth is None and not static:
        raise click.UsageError("--auth USER:PASSWORD is needed to reconfig (or --static)")
    directory = _absolute(directory)
    ens = _require_state(directory)
    if sid in ens.members:
        raise click.ClickException(f"server.{sid} is in {directory} already")
    others = list(ens.members)
    first = ens.members[others[0]]
    spread = any(m.host != HOST for m in ens.members.values())
    client, quorum, election, admin = free_ports(PORTS_PER_SERVER)
    m = Member(sid, client, quorum, election, cfg=str(directory / f"zoo{sid}.cfg"),
               data_dir=str(directory / str(sid)), kind=kind, settings=dict(first.settings),
               observer=observer, admin_port=admin,
               host=member_host("spread" if spread else "same", sid))
    ens.members[sid] = m
    write_files(ens, [m])
    m.pid = spawn(m.kind, m)
    save_state(directory, ens)
    _serving_or_exit(ens, [m], RESTART_MODES, timeout_s)
    if static:
        click.echo(f"server.{sid} {m.address} {server_mode(m.client_port, m.host) or 'down'}")
        return
    role = "observer" if observer else "participant"
    spec = f"server.{sid}={m.host}:{m.quorum_port}:{m.election_port}:{role};{m.address}"
    data = _reconfig(ens, others, auth, lambda d: _names(d, sid), joining=spec, leaving=None,
                     new_members=None)
    click.echo(data.decode())


@ensemble.command()
@click.argument("sid", type=int)
@_DIR_OPTION
@_AUTH_OPTION
def remove(sid: int, directory: Path, auth: str | None) -> None:
    """`reconfig -remove` server SID (the leader too: another takes over), then stop it
    and forget it; its data stays in DIR/SID. Prints the new config."""
    if auth is None:
        raise click.UsageError("--auth USER:PASSWORD is needed to reconfig")
    directory = _absolute(directory)
    ens = _require_state(directory)
    m = _member(ens, sid)
    others = [s for s in ens.members if s != sid]
    data = _reconfig(ens, others, auth, lambda d: not _names(d, sid), joining=None,
                     leaving=str(sid), new_members=None)
    left = stop_members([m])
    if left:
        raise click.ClickException(f"server.{sid} is out of the config but still up")
    del ens.members[sid]
    save_state(directory, ens)
    click.echo(data.decode())


@ensemble.command()
@_DIR_OPTION
def stop(directory: Path) -> None:
    """Stop every server (SIGTERM, then SIGKILL after a grace period), by PID."""
    ens = _require_state(_absolute(directory))
    left = stop_members(list(ens.members.values()))
    if left:
        raise click.ClickException("still up: " + ", ".join(f"server.{m.sid}" for m in left))
