"""What each server of a `zkcompat ensemble` gets: its kind, host and four ports (a new
ensemble's planned, a stopped one's kept), then its myid and zoo.cfg written from that.
"""

from __future__ import annotations

import socket
from collections.abc import Collection
from pathlib import Path

import click

from zkcompat.cli.ensemble_process import is_ours
from zkcompat.cli.ensemble_state import HOST, Ensemble, Member, load_state
from zkcompat.cli.launch import BASE_CFG, ENSEMBLE_CFG

# --addresses: every server on HOST, or server K alone on 127.0.0.K (its client, quorum,
# election and admin ports all bound there), so that a firewall rule can tell servers apart
# by address (tests/nemesis cuts the links between them with nftables).
ADDRESS_LAYOUTS = ("same", "spread")
KINDS = ("zkcompat", "zookeeper")
# Each server has a client, a quorum, an election and an AdminServer port; with --base-port
# P and N servers, each kind is a run of N ports: clients P.., quorum P+N.., and so on.
PORTS_PER_SERVER = 4
PORT_MAX = 65535


def free_ports(n: int, avoid: Collection[int] = ()) -> list[int]:
    """n distinct loopback ports that were free a moment ago (all bound at once), none of
    them in avoid: ports handed out earlier and closed since, which the kernel may give
    out again."""
    sockets, ports = [], []
    try:
        while len(ports) < n:
            s = socket.socket()
            s.bind((HOST, 0))
            sockets.append(s)
            if s.getsockname()[1] not in avoid:
                ports.append(s.getsockname()[1])
        return ports
    finally:
        for s in sockets:
            s.close()


def ports_of(ensemble: Ensemble) -> set[int]:
    """Every port the ensemble's members bind, for free_ports(avoid=...)."""
    return {p for m in ensemble.members.values()
            for p in (m.client_port, m.quorum_port, m.election_port, m.admin_port)
            if p is not None}


def member_kinds(kind: str, size: int) -> list[str]:
    """--kind names one kind for all, or one per server ("zookeeper,zookeeper,zkcompat")."""
    kinds = kind.split(",")
    if len(kinds) == 1:
        kinds *= size
    if len(kinds) != size or any(k not in KINDS for k in kinds):
        raise click.BadParameter(f"{kind!r}: one of {', '.join(KINDS)}, or one per server")
    return kinds


def base_port_layout(base: int, total: int) -> dict[int, tuple[int, int, int, int]]:
    """With --base-port P and N servers, server K's (client, quorum, election, admin) ports:
    P+K-1, P+N+K-1, P+2N+K-1, P+3N+K-1, so each kind is a run of N ports and the ensemble
    holds exactly P .. P+4N-1."""
    return {sid: tuple(base + kind * total + sid - 1 for kind in range(PORTS_PER_SERVER))
            for sid in range(1, total + 1)}


def member_host(addresses: str, sid: int) -> str:
    """Where server `sid` binds its ports: HOST for every server, or 127.0.0.SID (spread)."""
    return HOST if addresses == "same" else f"127.0.0.{sid}"


def _taken(ports: dict[int, tuple[int, int, int, int]], addresses: str) -> str | None:
    """The first port of the layout this machine will not let us bind, named with its role."""
    roles = ("client", "quorum", "election", "admin")
    for sid, four in ports.items():
        for role, port in zip(roles, four, strict=True):
            with socket.socket() as s:
                try:
                    s.bind((member_host(addresses, sid), port))
                except OSError:
                    host = member_host(addresses, sid)
                    on = "" if host == HOST else f" on {host}"
                    return f"port {port} (server.{sid}'s {role} port{on})"
    return None


def plan(directory: Path, size: int, kind: str, settings: dict,
         observers: int = 0, base_port: int | None = None,
         addresses: str = "same") -> Ensemble:
    total = size + observers
    if base_port is None:
        free = free_ports(PORTS_PER_SERVER * total)
        ports = {sid: tuple(free[PORTS_PER_SERVER * (sid - 1): PORTS_PER_SERVER * sid])
                 for sid in range(1, total + 1)}
    else:
        ports = base_port_layout(base_port, total)
        taken = _taken(ports, addresses)
        if taken is not None:
            raise click.ClickException(f"{taken} is in use; choose another --base-port "
                                       f"(this ensemble needs {base_port}.."
                                       f"{base_port + PORTS_PER_SERVER * total - 1})")
    ensemble = Ensemble(kind)
    for sid, member_kind in enumerate(member_kinds(kind, total), start=1):
        client, quorum, election, admin = ports[sid]
        ensemble.members[sid] = Member(sid, client, quorum, election,
                                       cfg=str(directory / f"zoo{sid}.cfg"),
                                       data_dir=str(directory / str(sid)), kind=member_kind,
                                       settings=dict(settings), observer=sid > size,
                                       admin_port=admin, host=member_host(addresses, sid))
    return ensemble


def _cfg_text(ensemble: Ensemble, member: Member) -> str:
    admin = ({} if member.admin_port is None else
             {"admin.enableServer": "true", "admin.serverAddress": member.host,
              "admin.serverPort": member.admin_port})
    settings = {**BASE_CFG, **ENSEMBLE_CFG, "dataDir": member.data_dir,
                "clientPort": member.client_port, "clientPortAddress": member.host, **admin,
                **member.settings}
    if member.observer:
        settings["peerType"] = "observer"
    for m in ensemble.members.values():
        role = ":observer" if m.observer else ""
        settings[f"server.{m.sid}"] = (f"{m.host}:{m.quorum_port}:{m.election_port}{role};"
                                       f"{m.host}:{m.client_port}")
    return "".join(f"{k}={v}\n" for k, v in settings.items())


def write_files(ensemble: Ensemble, members: list[Member] | None = None) -> None:
    """Each member's myid and zoo.cfg; a zoo.cfg that names a dynamicConfigFile belongs to
    its server now (reconfigEnabled: it rewrites it as the membership changes)."""
    for m in ensemble.members.values() if members is None else members:
        data_dir = Path(m.data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / "myid").write_text(f"{m.sid}\n")
        cfg = Path(m.cfg)
        if cfg.exists() and "dynamicConfigFile=" in cfg.read_text():
            continue
        cfg.write_text(_cfg_text(ensemble, m))


def prepare(directory: Path, size: int, kind: str, settings: dict,
            observers: int = 0, base_port: int | None = None,
            addresses: str = "same") -> Ensemble:
    """A new ensemble in directory, or the stopped one there again (same ports and data)."""
    old = load_state(directory)
    if old is None:
        return plan(directory, size, kind, settings, observers, base_port, addresses)
    running = [m.sid for m in old.members.values() if is_ours(m.pid, m.cfg)]
    if running:
        raise click.ClickException(f"{directory} already runs server.{running[0]}; "
                                   "`ensemble stop` it first")
    if (len(old.members) != size + observers
            or [m.kind for m in old.members.values()] != member_kinds(kind, len(old.members))):
        raise click.ClickException(f"{directory} holds a {len(old.members)}-server {old.kind} "
                                   "ensemble; remove it or use another --dir")
    first = old.members[min(old.members)]
    if base_port is not None and base_port != first.client_port:
        raise click.ClickException(f"{directory} holds an ensemble on the ports of "
                                   f"--base-port {first.client_port}, which it keeps; start it "
                                   "without --base-port, or remove it or use another --dir")
    for m in old.members.values():  # --set on a restart: added to what each server had
        m.settings.update(settings)
    return old
