"""The QuorumAuthPacket on the wire, as ZooKeeper's QuorumAuth writes and reads it: the magic
number, Status, and a reader that cuts whole packets off a byte stream. Sans-I/O."""

from __future__ import annotations

import logging
import struct
from enum import IntEnum

from zkcompat.jute import records as r
from zkcompat.jute.errors import JuteError

# Quorum SASL's one logger, whichever of its modules logs: operators filter on its name.
log = logging.getLogger("zkcompat.security.quorum_sasl")

# QuorumAuth.QUORUM_AUTH_MAGIC_NUMBER is written -0xa0dbcafecafe1234L: in Java that literal
# is a negative long, so its negation is this positive one (the source's comment calling it
# negative is wrong). On the wire: 5f 24 35 01 35 01 ed cc.
QUORUM_AUTH_MAGIC_NUMBER = 0x5F2435013501EDCC
# ZooKeeper reads a token as any jute buffer (up to jute.maxbuffer plus its extra allowance,
# about 2 MB). DIGEST-MD5 tokens are at most 4096 bytes (RFC 2831 2.1.2) and a Kerberos
# AP-REQ is about 1 KB (tens of KB with a large authorization-data PAC), so a longer one is
# never an exchange in progress: it is refused long before ZooKeeper's bound.
TOKEN_MAX_BYTES = 64 * 1024

_HEAD = struct.Struct(">qii")  # magic, status, token length
_MAGIC = struct.Struct(">q")
MAGIC_BYTES = _MAGIC.pack(QUORUM_AUTH_MAGIC_NUMBER)


class Status(IntEnum):
    """QuorumAuth.Status."""

    IN_PROGRESS = 0
    SUCCESS = 1
    ERROR = -1


class QuorumAuthError(Exception):
    """The peer failed to authenticate or broke the exchange: close the connection.
    `to_send` holds bytes to write first (the ERROR packet a server sends), maybe empty."""

    def __init__(self, message: str, to_send: bytes = b""):
        super().__init__(message)
        self.to_send = to_send


def encode_packet(status: Status, token: bytes | None) -> bytes:
    """QuorumAuth.createPacket, on the wire."""
    return r.QuorumAuthPacket(QUORUM_AUTH_MAGIC_NUMBER, int(status), token).to_bytes()


def next_packet_is_auth(first8: bytes) -> bool:
    """QuorumAuth.nextPacketIsAuth: the next 8 bytes are the magic number."""
    if len(first8) < _MAGIC.size:
        raise ValueError("next_packet_is_auth needs the next 8 bytes")
    return bytes(first8[:_MAGIC.size]) == MAGIC_BYTES


def packet_end(buf: bytes | bytearray, token_max_bytes: int = TOKEN_MAX_BYTES) -> int:
    """Where the QuorumAuthPacket at the start of buf ends, -1 if buf does not hold all of
    it yet; a JuteError for a token length no peer sends."""
    if len(buf) < _HEAD.size:
        return -1
    _, _, n = _HEAD.unpack_from(buf)
    if n < -1 or n > token_max_bytes:
        raise JuteError(f"QuorumAuthPacket token length {n} out of range "
                        f"(at most {token_max_bytes})")
    end = _HEAD.size + max(n, 0)
    return end if len(buf) >= end else -1


def decode_packet(buf: bytes | bytearray) -> r.QuorumAuthPacket:
    """A whole packet (as packet_end found it); a JuteError if it is not one."""
    packet, _ = r.QuorumAuthPacket.decode(bytes(buf))
    return packet


def status_of(value: int) -> Status:
    """QuorumAuth.Status.getStatus: an unknown status counts as ERROR."""
    try:
        return Status(value)
    except ValueError:
        log.error("event=quorum_sasl_unknown_status status=%d", value)
        return Status.ERROR


class PacketReader:
    """Buffers stream bytes and cuts whole QuorumAuthPackets off the front."""

    def __init__(self, token_max_bytes: int):
        self.buf = bytearray()
        self._token_max_bytes = token_max_bytes

    def next(self) -> r.QuorumAuthPacket | None:
        try:
            end = packet_end(self.buf, self._token_max_bytes)
            if end < 0:
                return None
            packet = decode_packet(self.buf[:end])
        except JuteError as e:
            raise QuorumAuthError(f"malformed QuorumAuthPacket: {e}") from None
        del self.buf[:end]
        if packet.magic != QUORUM_AUTH_MAGIC_NUMBER:
            # ZooKeeper checks the magic of the first packet only, but always sends it:
            # a packet without it is not ZooKeeper's quorum SASL.
            raise QuorumAuthError(f"QuorumAuthPacket with magic {packet.magic:#x}")
        return packet
