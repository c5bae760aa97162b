"""Leader-election wire formats of ZooKeeper 3.8.0: notifications, QuorumCnxManager's
connection header and its 4-byte message framing. Bytes in, records out; nothing else.

Notification  FastLeaderElection.buildMsg (what 3.8 sends) and the WorkerReceiver parse,
              which also accepts the 28- and 40-byte formats of older servers.
Header        QuorumCnxManager.startConnection / handleConnection / InitialMessage.parse:
              protocol version (long), sid (long), int length + "host:port[|host:port]";
              or the pre-3.5 form, a bare non-negative sid.
Frames        SendWorker.send / RecvWorker.run: int length (1..PACKETMAXSIZE) + payload.

3.9.3 is byte-identical to 3.8.0 on all three.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from enum import IntEnum
from struct import Struct
from struct import error as struct_error

from zkcompat.jute.errors import JuteError

# QuorumCnxManager.PACKETMAXSIZE: the largest election message RecvWorker reads.
PACKETMAXSIZE = 1024 * 512
# QuorumCnxManager.maxBuffer: the largest address string of a connection header.
INITIAL_MESSAGE_MAX_BYTES = 2048
# QuorumCnxManager.PROTOCOL_VERSION_V1 (ZOOKEEPER-107, 3.5.0): one election address.
PROTOCOL_VERSION_V1 = -65536
# QuorumCnxManager.PROTOCOL_VERSION_V2 (ZOOKEEPER-3188, 3.6.0): "|"-joined addresses,
# sent only with multiAddress.enabled=true (ZOOKEEPER-3720).
PROTOCOL_VERSION_V2 = -65535
# QuorumPeer.OBSERVER_ID: the sid pre-3.5 observers sent; ZooKeeper gives them a
# negative id of its own choosing.
OBSERVER_ID = (1 << 63) - 1
# FastLeaderElection.Notification.CURRENTVERSION: the format with the config field.
NOTIFICATION_VERSION = 0x2

# WorkerReceiver's accepted sizes: the pre-ZOOKEEPER-107 message without peerEpoch,
# the 3.4 message without a version (and 4 bytes it ignores), and the current header.
NOTIFICATION_MIN_BYTES = 28
NOTIFICATION_NO_VERSION_BYTES = 40
NOTIFICATION_HEADER_BYTES = 44
HEADER_MAX_BYTES = 8 + 8 + 4 + INITIAL_MESSAGE_MAX_BYTES

_HEAD = Struct(">iqqq")  # state, leader, zxid, electionEpoch
_LONG = Struct(">q")
_INT = Struct(">i")
_BUILD_MSG = Struct(">iqqqqii")  # buildMsg without the config bytes
_HEADER_V1 = Struct(">qqi")
_EPOCH_SHIFT = 32  # ZxidUtils.getEpochFromZxid
_JAVA_INT = re.compile(r"[+-]?[0-9]+\Z")
_INT_MAX = (1 << 31) - 1
_PORT_MAX = 0xFFFF


class ServerState(IntEnum):
    """QuorumPeer.ServerState, sent as its ordinal."""

    LOOKING = 0
    FOLLOWING = 1
    LEADING = 2
    OBSERVING = 3


@dataclass(frozen=True, slots=True)
class Notification:
    """One election message. `version` 0 means an old format without the field; the
    config bytes exist only for version > 1 (QuorumVerifier.toString() in UTF-8)."""

    state: ServerState
    leader: int
    zxid: int
    election_epoch: int
    peer_epoch: int
    version: int = NOTIFICATION_VERSION
    config: bytes = b""

    def encode(self) -> bytes:
        """The bytes of buildMsg(state, leader, zxid, electionEpoch, peerEpoch, config),
        with this record's version in place of CURRENTVERSION."""
        if self.config and self.version <= 1:
            raise ValueError(f"version {self.version} carries no config: a peer would drop it")
        if NOTIFICATION_HEADER_BYTES + len(self.config) > PACKETMAXSIZE:
            raise ValueError(f"config of {len(self.config)} bytes exceeds PACKETMAXSIZE")
        try:
            head = _BUILD_MSG.pack(self.state, self.leader, self.zxid, self.election_epoch,
                                   self.peer_epoch, self.version, len(self.config))
        except struct_error as e:
            raise ValueError(f"notification field out of range: {e}") from None
        return head + self.config

    @classmethod
    def decode(cls, payload: bytes | bytearray | memoryview) -> Notification:
        """A received message, as WorkerReceiver reads it: the size picks the format,
        bytes after the last field are ignored. Raises JuteError where WorkerReceiver
        skips the message (short, truncated, bad config length) and for a state it does
        not know (which it drops silently; it would still answer such a message from a
        non-voter, which this codec cannot express)."""
        buf = bytes(payload)
        size = len(buf)
        if size < NOTIFICATION_MIN_BYTES:
            raise JuteError(f"notification of {size} bytes, under {NOTIFICATION_MIN_BYTES}")
        state, leader, zxid, election_epoch = _HEAD.unpack_from(buf)
        version = 0
        config = b""
        pos = _HEAD.size
        if size == NOTIFICATION_MIN_BYTES:
            peer_epoch = zxid >> _EPOCH_SHIFT
        else:
            peer_epoch, pos = _read(_LONG, buf, pos, "peerEpoch")
            if size != NOTIFICATION_NO_VERSION_BYTES:
                version, pos = _read(_INT, buf, pos, "version")
        if version > 1:
            config_length, pos = _read(_INT, buf, pos, "config length")
            # WorkerReceiver bounds it by the whole message, then reads it (underflow).
            if config_length < 0 or config_length > size:
                raise JuteError(f"invalid config length {config_length} in {size} bytes")
            if pos + config_length > size:
                raise JuteError(f"config of {config_length} bytes runs past the end")
            config = buf[pos:pos + config_length]
        try:
            known_state = ServerState(state)
        except ValueError:
            raise JuteError(f"unknown server state {state}") from None
        return cls(known_state, leader, zxid, election_epoch, peer_epoch, version, config)


def _read(fmt: Struct, buf: bytes, pos: int, what: str) -> tuple[int, int]:
    if pos + fmt.size > len(buf):
        raise JuteError(f"notification truncated in {what} ({len(buf)} bytes)")
    return fmt.unpack_from(buf, pos)[0], pos + fmt.size


# -- connection header ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConnectionHeader:
    """Who opened an election connection. protocol_version is None for the pre-3.5 form
    (a bare sid, no address); wildcard addresses are left out, as InitialMessage does."""

    sid: int
    protocol_version: int | None
    election_addresses: tuple[tuple[str, int], ...] = ()


def format_election_address(host: str, port: int) -> str:
    """NetUtils.formatInetAddr: host:port, an IPv6 literal in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def encode_connection_header(sid: int, addresses: list[tuple[str, int]],
                             protocol_version: int = PROTOCOL_VERSION_V1) -> bytes:
    """What startConnection writes before any message: V1 (the 3.8 default) carries one
    address, V2 every address joined with "|"."""
    if protocol_version not in (PROTOCOL_VERSION_V1, PROTOCOL_VERSION_V2):
        raise ValueError(f"unknown protocol version {protocol_version}")
    if not addresses or (protocol_version == PROTOCOL_VERSION_V1 and len(addresses) != 1):
        raise ValueError(f"version {protocol_version} cannot carry {len(addresses)} addresses")
    text = "|".join(format_election_address(h, p) for h, p in addresses).encode()
    if len(text) > INITIAL_MESSAGE_MAX_BYTES:
        raise ValueError(f"election address of {len(text)} bytes, over {INITIAL_MESSAGE_MAX_BYTES}")
    return _HEADER_V1.pack(protocol_version, sid, len(text)) + text


def encode_old_connection_header(sid: int) -> bytes:
    """The pre-3.5 header: the sid alone (handleConnection still accepts it)."""
    if sid < 0:
        raise ValueError("the old header format needs a non-negative sid")
    return _LONG.pack(sid)


class ConnectionHeaderReader:
    """Incremental parse of the header handleConnection reads, within HEADER_MAX_BYTES.

    feed() returns None until the header is complete, then the header; `rest` holds the
    bytes that followed it (the first frames). Java reads the address with a single
    read() and fails if it comes short; this reader waits for the rest instead. Errors
    raise JuteError and leave the reader broken.
    """

    __slots__ = ("_buf", "_header", "_error", "rest")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._header: ConnectionHeader | None = None
        self._error: JuteError | None = None
        self.rest = b""

    def feed(self, data: bytes | bytearray | memoryview) -> ConnectionHeader | None:
        if self._error is not None:
            raise JuteError(str(self._error))
        if self._header is not None:
            raise RuntimeError("the header is complete: read frames from `rest` on")
        self._buf += data
        try:
            parsed = _parse_header(bytes(self._buf))
        except JuteError as e:
            self._error = e
            self._buf = bytearray()
            raise
        if parsed is None:
            return None
        self._header, used = parsed
        self.rest = bytes(self._buf[used:])
        self._buf = bytearray()
        return self._header


def _parse_header(buf: bytes) -> tuple[ConnectionHeader, int] | None:
    if len(buf) < _LONG.size:
        return None
    (first,) = _LONG.unpack_from(buf)
    if first >= 0:
        return ConnectionHeader(first, None), _LONG.size
    if first not in (PROTOCOL_VERSION_V1, PROTOCOL_VERSION_V2):
        raise JuteError(f"unrecognized protocol version {first}")
    if len(buf) < _HEADER_V1.size:
        return None
    _, sid, remaining = _HEADER_V1.unpack_from(buf)
    if remaining <= 0 or remaining > INITIAL_MESSAGE_MAX_BYTES:
        raise JuteError(f"unreasonable address length {remaining}")
    end = _HEADER_V1.size + remaining
    if len(buf) < end:
        return None
    text = buf[_HEADER_V1.size:end].decode("utf-8", "replace")
    return ConnectionHeader(sid, first, _parse_addresses(text)), end


def _java_split(text: str, sep: str) -> list[str]:
    """String.split(regex) for a literal separator: trailing empty strings dropped, but
    a string without the separator comes back whole, even if empty."""
    if sep not in text:
        return [text]
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _host_and_port(address: str) -> list[str]:
    """ConfigUtils.getHostAndPort, raising JuteError where it raises ConfigException."""
    if not address.startswith("["):
        return _java_split(address, ":")
    close = address.find("]")
    if close < 0 or close + 2 == len(address):
        raise JuteError(f"badly formed address: {address!r}")
    if close + 2 < len(address):
        return [address[1:close], *_java_split(address[close + 2:], ":")]
    return [address.replace("[", "").replace("]", "")]


def _parse_addresses(text: str) -> tuple[tuple[str, int], ...]:
    out = []
    for address in _java_split(text, "|"):
        parts = _host_and_port(address)
        if len(parts) != 2:
            raise JuteError(f"badly formed address: {address!r}")
        host, port_text = parts
        if not _JAVA_INT.match(port_text) or abs(int(port_text)) > _INT_MAX:
            raise JuteError(f"bad port number: {port_text!r}")
        port = int(port_text)
        # InetSocketAddress refuses these; in 3.8 that IllegalArgumentException escapes
        # the listener thread, here it is just a bad header.
        if not 0 <= port <= _PORT_MAX:
            raise JuteError(f"port out of range: {port}")
        if not _is_wildcard(host):
            out.append((host, port))
    return tuple(out)


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


# -- framing -----------------------------------------------------------------------------


def frame_message(payload: bytes) -> bytes:
    """SendWorker.send: the int length, then the message."""
    if not 0 < len(payload) <= PACKETMAXSIZE:
        raise ValueError(f"an election message has 1..{PACKETMAXSIZE} bytes, not {len(payload)}")
    return _INT.pack(len(payload)) + payload


class ElectionFrameReader:
    """RecvWorker's framing: a length <= 0 or > PACKETMAXSIZE breaks the connection.

    Buffers at most one partial frame (4 + PACKETMAXSIZE bytes). On a bad length,
    feed() raises JuteError after nothing; the frames completed before it in the same
    feed() are in `frames_before_error` (RecvWorker queued them before it failed).
    """

    __slots__ = ("max_frame_bytes", "_buf", "_error", "frames_before_error")

    def __init__(self, max_frame_bytes: int = PACKETMAXSIZE) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._error: JuteError | None = None
        self.frames_before_error: list[bytes] = []

    @property
    def buffered_bytes(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        if self._error is not None:
            raise JuteError(str(self._error))
        buf = self._buf
        buf += data
        frames: list[bytes] = []
        pos = 0
        while len(buf) - pos >= _INT.size:
            (length,) = _INT.unpack_from(buf, pos)
            if length <= 0 or length > self.max_frame_bytes:
                self._error = JuteError(f"invalid election packet length {length}")
                self.frames_before_error = frames
                self._buf = bytearray()
                raise self._error
            start = pos + _INT.size
            if start + length > len(buf):
                break
            frames.append(bytes(buf[start:start + length]))
            pos = start + length
        del buf[:pos]
        return frames
