"""server.N lines and dataDir/myid, and the checks QuorumPeerConfig.setupQuorumPeerConfig
makes of them, in its order: who is in the ensemble, which one this server is, and its role."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from zkcompat.config.properties import JAVA_INT, ConfigError, parse_port

if TYPE_CHECKING:
    from zkcompat.config.zoocfg import Config

log = logging.getLogger("zkcompat.config")

# zookeeperAdmin: a myid "should have a value between 1 and 255"; session ids carry it in
# their top byte (SessionTrackerImpl.initializeNextSessionId), and 0 means "no myid" here.
SERVER_ID_MIN, SERVER_ID_MAX = 1, 255
MAX_EXTENDED_SERVER_ID = 0xFE  # EphemeralType.MAX_EXTENDED_SERVER_ID: TTL nodes need < 255
WILDCARD_ADDRESS = "0.0.0.0"


class LearnerType(StrEnum):
    """QuorumPeer.LearnerType: a participant votes, an observer only follows."""

    PARTICIPANT = "participant"
    OBSERVER = "observer"


@dataclass(frozen=True, slots=True)
class QuorumServer:
    """One server.N line: host:quorumPort:electionPort[:role][;[clientHost:]clientPort]
    (QuorumPeer.QuorumServer). client_host/client_port are None without a ";" part."""

    sid: int
    host: str
    quorum_port: int
    election_port: int
    role: LearnerType = LearnerType.PARTICIPANT
    client_host: str | None = None
    client_port: int | None = None


def peer_type(key: str, value: str) -> LearnerType:
    try:
        return LearnerType(value.strip().lower())
    except ValueError:
        raise ConfigError(f"{key}: Unrecognised peertype: {value.strip()}") from None


# -- server.N lines (QuorumPeer.QuorumServer, flexible.QuorumMaj) ---------------------------

_SERVER_FORMAT = (" does not have the form server_config or server_config;client_config where "
                  "server_config is host:port:port or host:port:port:type and client_config "
                  "is port or host:port")  # QuorumServer.wrongFormat, less the "|" list


def _java_split(s: str, sep: str) -> list[str]:
    """String.split: trailing empty strings are dropped ("a:b:" is two parts)."""
    parts = s.split(sep)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def _address_port(key: str, host: str, value: str) -> int:
    if not JAVA_INT.fullmatch(value):
        raise ConfigError(f"{key}: Address unresolved: {host}:{value}")
    return parse_port(key, value)


def _host(key: str, host: str) -> str:
    if not host or host.startswith("["):
        raise ConfigError(f"{key}: {host!r} is not a host name or IPv4 address "
                          "(IPv6 addresses are not supported)")
    return host


def _client_part(key: str, value: str, part: str) -> tuple[str, int]:
    pieces = _java_split(part, ":")
    if len(pieces) > 2:
        raise ConfigError(f"{key}: {value}{_SERVER_FORMAT}")
    host = _host(key, pieces[0]) if len(pieces) == 2 else WILDCARD_ADDRESS
    return host, _address_port(key, host, pieces[-1])


def _server_id(key: str, text: str, sid_max: int) -> int:
    if not JAVA_INT.fullmatch(text):
        raise ConfigError(f"{key}: server id {text!r} is not a number")
    sid = int(text)
    if not SERVER_ID_MIN <= sid <= sid_max:
        raise ConfigError(f"{key}: server id {sid} is not between {SERVER_ID_MIN} and "
                          f"{sid_max}")
    return sid


def parse_server(key: str, value: str, sid_max: int = SERVER_ID_MAX) -> QuorumServer:
    """One server.N=host:quorumPort:electionPort[:participant|:observer][;[host:]port].
    A reconfig passes a larger sid_max: ZooKeeper takes any long as another server's id."""
    sid = _server_id(key, key[len("server."):], sid_max)
    server_client = _java_split(value, ";")
    if len(server_client) > 2:
        raise ConfigError(f"{key}: {value}{_SERVER_FORMAT}")
    if "|" in server_client[0]:
        raise ConfigError(f"{key}: multiple addresses per server (multiAddress.enabled) are "
                          "not supported")
    parts = _java_split(server_client[0], ":")
    host = _host(key, server_client[0].split(":", 1)[0])
    if not 3 <= len(parts) <= 4:
        raise ConfigError(f"{key}: {value}{_SERVER_FORMAT}")
    quorum_port = _address_port(key, host, parts[1])
    election_port = _address_port(key, host, parts[2])
    if quorum_port == election_port:
        # ZooKeeper's words misname the quorum port: "Client and election port must be
        # different! Please update the configuration file on server.N".
        raise ConfigError(f"{key}: quorum and election port must be different, both are "
                          f"{quorum_port}")
    role = peer_type(key, parts[3]) if len(parts) == 4 else LearnerType.PARTICIPANT
    client_host = client_port = None
    if len(server_client) == 2:
        client_host, client_port = _client_part(key, value, server_client[1])
    return QuorumServer(sid, host, quorum_port, election_port, role, client_host, client_port)


def _servers(props: Mapping[str, str]) -> dict[int, QuorumServer]:
    servers: dict[int, QuorumServer] = {}
    names: dict[int, str] = {}
    for key, value in props.items():
        if not key.startswith("server."):
            continue
        server = parse_server(key, value)
        if server.sid in servers:
            raise ConfigError(f"{key}: server id {server.sid} is also {names[server.sid]}")
        servers[server.sid] = server
        names[server.sid] = key
    return dict(sorted(servers.items()))


def _check_members(cfg: Config) -> None:
    """QuorumPeerConfig.parseDynamicConfig's rules on how many participants there are."""
    voters, observers = len(cfg.voters), len(cfg.observers)
    first_observer = f"server.{min(cfg.observers)}" if observers else ""
    if voters == 0:
        if not cfg.standalone_enabled:
            raise ConfigError("standaloneEnabled: standaloneEnabled = false then number of "
                              "participants should be >0")
        if observers:
            raise ConfigError(f"{first_observer}: Observers w/o participants is an invalid "
                              "configuration")
    elif voters == 1 and cfg.standalone_enabled:
        # ZooKeeper: "Invalid configuration, only one server specified (ignoring)"; it runs
        # standalone, as HBase's single server.N line expects.
        log.warning("event=config_single_server action=run_standalone detail=%r",
                    "one server.N line and standaloneEnabled=true")
        if observers:
            raise ConfigError(f"{first_observer}: Observers w/o quorum is an invalid "
                              "configuration")
    elif voters <= 2:
        log.warning("event=config_no_fault_tolerance participants=%d detail=%r", voters,
                    "No server failure will be tolerated. You need at least 3 servers.")
    elif voters % 2 == 0:
        log.warning("event=config_even_participants participants=%d detail=%r", voters,
                    "Non-optimal configuration, consider an odd number of servers.")


# -- myid, client port, peer type (QuorumPeerConfig.setupMyId ... checkValidity) ---------------


def read_myid(data_dir: Path) -> int | None:
    """dataDir/myid as setupMyId reads it: its first line, exactly (Long.parseLong: no
    surrounding spaces), or None when there is no such file."""
    path = Path(data_dir) / "myid"
    if not path.is_file():
        return None
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        raise ConfigError(f"myid: cannot read {path}: {e}") from None
    # BufferedReader.readLine: null for an empty file, else up to \n, \r or \r\n.
    line = re.split(r"\r\n|\n|\r", text, maxsplit=1)[0] if text else "null"
    if not JAVA_INT.fullmatch(line):
        raise ConfigError(f"myid: serverid {line} is not a number (first line of {path})")
    sid = int(line)
    if not SERVER_ID_MIN <= sid <= SERVER_ID_MAX:
        raise ConfigError(f"myid: serverid {sid} in {path} is not between {SERVER_ID_MIN} and "
                          f"{SERVER_ID_MAX}")
    return sid


def _setup_client_port(cfg: Config, client_port_given: bool) -> None:
    """This server's client address comes from its server.N line's ";[host:]port" when
    there is one, which must agree with clientPort/clientPortAddress if those are set."""
    me = cfg.servers.get(cfg.server_id)
    if me is None or me.client_port is None:
        return
    if client_port_given:
        given = (cfg.client_port_address, cfg.client_port)
        if cfg.client_port_address == WILDCARD_ADDRESS:
            agrees = cfg.client_port == me.client_port
        else:
            agrees = given == (me.client_host, me.client_port)
        if not agrees:
            raise ConfigError(
                f"clientPort: client address for this server (id = {cfg.server_id}) "
                f"{given[0]}:{given[1]} is different from the one of server.{cfg.server_id}: "
                f"{me.client_host}:{me.client_port}")
    cfg.client_port_address, cfg.client_port = me.client_host, me.client_port


def _setup_peer_type(cfg: Config) -> None:
    """The server.N line decides; a peerType that disagrees is logged and overruled, as
    QuorumPeerConfig.setupPeerType does."""
    by_list = (LearnerType.OBSERVER if cfg.server_id in cfg.observers
               else LearnerType.PARTICIPANT)
    if by_list != cfg.peer_type:
        log.warning("event=config_peer_type_mismatch peer_type=%s server_list=%s "
                    "action=use_server_list", cfg.peer_type, by_list)
        cfg.peer_type = by_list


def _check_validity(cfg: Config) -> None:
    """QuorumPeerConfig.checkValidity, and QuorumPeer.start's "My id N not in the peer list"."""
    if not cfg.is_ensemble:
        return
    if cfg.init_limit == 0:
        raise ConfigError("initLimit: initLimit is not set (an ensemble needs it)")
    if cfg.sync_limit == 0:
        raise ConfigError("syncLimit: syncLimit is not set (an ensemble needs it)")
    if cfg.server_id == 0:
        raise ConfigError(f"myid: myid file is missing: {cfg.data_dir / 'myid'} (its "
                          "server.N lines make this server part of an ensemble)")
    if cfg.server_id not in cfg.servers:
        raise ConfigError(f"myid: My id {cfg.server_id} not in the peer list "
                          f"(server.{', server.'.join(map(str, cfg.servers))})")
    if cfg.extended_types_enabled and cfg.server_id > MAX_EXTENDED_SERVER_ID:
        raise ConfigError(f"myid: extendedTypesEnabled is true but Server ID is too large. "
                          f"Cannot be larger than {MAX_EXTENDED_SERVER_ID}")


def setup_quorum(cfg: Config, props: Mapping[str, str], client_port_given: bool) -> None:
    """QuorumPeerConfig.setupQuorumPeerConfig's steps, in its order."""
    cfg.servers = _servers(props)
    _check_members(cfg)
    myid = read_myid(cfg.data_dir)
    if myid is not None:
        cfg.server_id = myid
    _setup_client_port(cfg, client_port_given)
    _setup_peer_type(cfg)
    _check_validity(cfg)
