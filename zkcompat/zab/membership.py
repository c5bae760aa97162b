"""An ensemble's membership as ZooKeeper's QuorumMaj holds it: the server lines, the
config version, who votes and what a quorum is; and its text, byte for byte as 3.8 writes
it into election notifications, NEWLEADER, /zookeeper/config and zoo.cfg.dynamic.<version>.

    m = Membership(servers)                 # zoo.cfg's server.N lines, version 0
    m = Membership.parse(data)              # the text a peer or a reconfig txn carries
    m.contains_quorum(acked_sids)           # a strict majority of m.voters
    m.to_bytes()                            # "server.N=...\n" per member, "version=<hex>"
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from zkcompat.jute.java_order import properties_order


class QuorumServer(NamedTuple):
    """One server.N line of zoo.cfg. client_port is the ";[host:]port" part of that line
    (None when the line has none); client_host None with a port means "0.0.0.0"."""

    sid: int
    host: str
    quorum_port: int
    election_port: int
    role: str = "participant"
    client_host: str | None = None
    client_port: int | None = None


def as_quorum_server(s: object) -> QuorumServer:
    """A QuorumServer from a 7-tuple or from anything with those attributes (such as
    zkcompat.config.QuorumServer)."""
    if isinstance(s, tuple):
        return QuorumServer(*s)
    return QuorumServer(*(getattr(s, name) for name in QuorumServer._fields))


# java.util.HashMap's defaults: the order QuorumMaj.toString walks its members in.
_HASHMAP_CAPACITY = 16
_HASHMAP_LOAD_FACTOR = 0.75
_INT_MASK = 0xFFFFFFFF
_OBSERVER = "observer"
_ROLES = ("participant", _OBSERVER)
# QuorumMaj(Properties): "version" is read as hex; a static zoo.cfg has none, so 0.
STATIC_CONFIG_VERSION = 0


def quorum_config_bytes(servers: Iterable[object],
                        cfg_keys: Sequence[str] | None = None) -> bytes:
    """QuorumMaj.toString().getBytes(UTF_8) for a static zoo.cfg with these server lines:
    "server.N=host:qport:eport:role[;clientHost:clientPort]\n" per member, then
    "version=0" with no newline.

    A server line without a client part prints none on every server (its own client
    address comes from clientPort and is marked isClientAddrFromStatic).

    Members come in java.util.HashMap<Long> order: by sid modulo the table size (16 up to
    12 servers, then 32, ...). Sids sharing a slot (1 and 17) come in the order
    QuorumMaj(Properties) met them, which is java.util.Properties' (a ConcurrentHashMap
    of every zoo.cfg key): pass cfg_keys, all keys of zoo.cfg in file order, to get it
    exactly; without them such sids keep the order given here.

    Send exactly this: a 3.8 peer parses it (configFromString); a config version above
    its own makes a LOOKING ZooKeeper reconfigure to it, an unparsable one is logged
    ("Something went wrong while processing config"), and one that raises a
    RuntimeException there (a non-numeric server.X id) kills its WorkerReceiver thread.
    """
    return Membership(servers, STATIC_CONFIG_VERSION, cfg_keys).to_bytes()


def _server_value(m: QuorumServer) -> str:
    """QuorumServer.toString for one address."""
    if m.role not in _ROLES:
        raise ValueError(f"server.{m.sid}: role {m.role!r} is not one of {_ROLES}")
    text = f"{_delimited(m.host)}:{m.quorum_port}:{m.election_port}:{m.role}"
    if m.client_port is not None:
        text += f";{_delimited(m.client_host or '0.0.0.0')}:{m.client_port}"
    return text


def _delimited(host: str) -> str:
    """QuorumServer.delimitedHostString."""
    return f"[{host}]" if ":" in host else host


def _hashmap_order(members: list[QuorumServer]) -> list[QuorumServer]:
    capacity = _HASHMAP_CAPACITY
    while len(members) > capacity * _HASHMAP_LOAD_FACTOR:
        capacity *= 2
    return sorted(members, key=lambda m: _long_hash_bucket(m.sid, capacity))  # stable


def _long_hash_bucket(sid: int, capacity: int) -> int:
    """HashMap.hash(Long.valueOf(sid)) & (capacity - 1)."""
    v = sid & ((1 << 64) - 1)
    h = (v ^ (v >> 32)) & _INT_MASK
    return (h ^ (h >> 16)) & (capacity - 1)


class Membership:
    """One configuration of the ensemble (QuorumMaj): its members in the order ZooKeeper
    prints them, and its version (the zxid of the txn or NEWLEADER that made it; 0 for a
    static zoo.cfg). Immutable; equal when members and version are."""

    __slots__ = ("servers", "version", "voters", "observers", "_half", "_bytes")

    def __init__(self, servers: Iterable[object], version: int = STATIC_CONFIG_VERSION,
                 cfg_keys: Sequence[str] | None = None) -> None:
        members = _print_order([as_quorum_server(s) for s in servers], cfg_keys)
        sids = [m.sid for m in members]
        if len(set(sids)) != len(sids):
            raise ValueError(f"a server id is given twice: {sorted(sids)}")
        self.servers: dict[int, QuorumServer] = {m.sid: m for m in members}
        self.version = version
        self.voters = frozenset(m.sid for m in members if m.role != _OBSERVER)
        self.observers = frozenset(m.sid for m in members if m.role == _OBSERVER)
        self._half = len(self.voters) // 2
        lines = "".join(f"server.{m.sid}={_server_value(m)}\n" for m in members)
        self._bytes = (lines + f"version={version:x}").encode()

    @classmethod
    def parse(cls, data: bytes | str) -> Membership:
        """QuorumPeer.configFromString: "server.N=..." lines and "version=<hex>" (0 if
        absent); other keys (a peer's group or weight lines) are refused. ValueError."""
        text = data.decode() if isinstance(data, bytes | bytearray) else data
        servers, version = [], STATIC_CONFIG_VERSION
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            key, sep, value = line.partition("=")
            key, value = key.strip(), value.strip()
            if not sep:
                raise ValueError(f"{line!r} is not key=value")
            if key == "version":
                version = int(value, 16)
            elif key.startswith("server."):
                servers.append(parse_server_value(key, value))
            else:
                raise ValueError(f"{key}: not a membership key")
        return cls(servers, version)

    @classmethod
    def of_voters(cls, sids: Iterable[int]) -> Membership:
        """Voters with no addresses: a standalone server's ensemble of one, and tests'."""
        return cls(QuorumServer(sid, "", 0, 0) for sid in sids)

    def contains_quorum(self, sids: Iterable[int]) -> bool:
        """QuorumMaj.containsQuorum: more than half of the voters are among `sids`."""
        return len(self.voters.intersection(sids)) > self._half

    @property
    def quorum_size(self) -> int:
        return self._half + 1

    def to_bytes(self) -> bytes:
        return self._bytes

    def dynamic_file_text(self) -> str:
        """zoo.cfg.dynamic.<version> as QuorumPeerConfig.writeDynamicConfig writes a
        committed config: the server lines, without the version line."""
        return "".join(f"server.{m.sid}={_server_value(m)}\n" for m in self.servers.values())

    def with_version(self, version: int) -> Membership:
        return Membership(self.servers.values(), version)

    def same_members(self, other: Membership) -> bool:
        return self.servers == other.servers

    def designated_leader(self, previous: Membership, leader: int, acked: Iterable[int]) -> int:
        """Leader.getDesignatedLeader: who leads this config once the reconfig that made it
        commits. The leader that committed it, if it votes here at the same quorum address;
        else the lowest new voter that acknowledged the reconfig (each has every committed
        txn, the reconfig being the last); the leader itself if none did."""
        before, after = previous.servers.get(leader), self.servers.get(leader)
        if (leader in self.voters and before is not None and after is not None
                and (before.host, before.quorum_port) == (after.host, after.quorum_port)):
            return leader
        return min((sid for sid in acked if sid in self.voters and sid != leader), default=leader)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Membership) and self._bytes == other._bytes

    def __hash__(self) -> int:
        return hash(self._bytes)

    def __repr__(self) -> str:
        return f"Membership(version=0x{self.version:x}, voters={sorted(self.voters)}, " \
               f"observers={sorted(self.observers)})"


def parse_server_value(key: str, value: str) -> QuorumServer:
    """One server.N value as QuorumServer(id, addressStr) reads it:
    host:quorumPort:electionPort[:participant|:observer][;[clientHost:]clientPort]."""
    try:
        sid = int(key[len("server."):])
    except ValueError:
        raise ValueError(f"{key}: the server id is not a number") from None
    server, _, client = value.partition(";")
    parts = server.split(":")
    if not 3 <= len(parts) <= 4:
        raise ValueError(f"{key}={value}: each server should have at least 3 ports specified"
                         if len(parts) < 3 else f"{key}={value}: not host:port:port[:type]")
    role = parts[3].strip().lower() if len(parts) == 4 else "participant"
    if role not in _ROLES:
        raise ValueError(f"{key}={value}: unknown role {parts[3]!r}")
    client_host = client_port = None
    if client:
        pieces = client.split(":")
        if len(pieces) > 2:
            raise ValueError(f"{key}={value}: the client part is not [host:]port")
        client_host = pieces[0] if len(pieces) == 2 else None
        client_port = _port(key, pieces[-1])
    return QuorumServer(sid, parts[0], _port(key, parts[1]), _port(key, parts[2]), role,
                        client_host, client_port)


def _port(key: str, text: str) -> int:
    if not text.strip().isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{key}: {text!r} is not a port")
    return int(text)


def _print_order(members: list[QuorumServer],
                 cfg_keys: Sequence[str] | None) -> list[QuorumServer]:
    if cfg_keys is not None:
        rank = {key: i for i, key in enumerate(properties_order(cfg_keys))}
        missing = [m.sid for m in members if f"server.{m.sid}" not in rank]
        if missing:
            raise ValueError(f"cfg_keys lack server.N for {missing}")
        members = sorted(members, key=lambda m: rank[f"server.{m.sid}"])
    return _hashmap_order(members)
