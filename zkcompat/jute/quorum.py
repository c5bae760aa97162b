"""The quorum port's wire: QuorumPacket types and the payloads ZooKeeper packs into `data`.

QuorumPackets travel unframed, one jute record after another (Learner.readPacket), so the
reader here finds where a packet ends before decoding it. Payload layouts are those of
ZooKeeper 3.8's Leader, LearnerHandler, Learner and Follower.
"""

from __future__ import annotations

import struct
from enum import IntEnum

from zkcompat.jute import records as r
from zkcompat.jute.errors import JuteError


# Leader.java's packet types.
class PacketType(IntEnum):
    REQUEST = 1
    PROPOSAL = 2
    ACK = 3
    COMMIT = 4
    PING = 5
    REVALIDATE = 6
    SYNC = 7
    INFORM = 8
    COMMITANDACTIVATE = 9
    NEWLEADER = 10
    FOLLOWERINFO = 11
    UPTODATE = 12
    DIFF = 13
    TRUNC = 14
    SNAP = 15
    OBSERVERINFO = 16
    LEADERINFO = 17
    ACKEPOCH = 18
    INFORMANDACTIVATE = 19


# Learner.registerWithLeader / Leader: "Zab 1.0" (0x10000) is what every 3.x server speaks.
PROTOCOL_VERSION = 0x10000
# The learner sends its FOLLOWERINFO with configVersion of its QuorumVerifier; a static
# zoo.cfg has version 0.
STATIC_CONFIG_VERSION = 0
# An ACKEPOCH whose epoch is -1 does not count as an ack (the learner already accepted it).
ACKEPOCH_ALREADY_ACCEPTED = -1
# LearnerHandler refuses a packet whose data is larger than jute.maxbuffer plus ZooKeeper's
# extra allowance; a proposal carries a whole request, so allow the client's maximum and
# the header around it.
PACKET_DATA_MAX_BYTES = 0xFFFFF + 64 * 1024
# zookeeper.jute.maxbuffer.extrasize's floor (BinaryInputArchive): with it unset, the extra
# allowance is jute.maxbuffer itself, and never under this.
JUTE_MAXBUFFER_EXTRASIZE_MIN_BYTES = 1024
AUTHINFO_MAX = 1024

_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_QI = struct.Struct(">qi")
_QB = struct.Struct(">q?")
_QII = struct.Struct(">qii")
_HEAD = struct.Struct(">iqi")  # type, zxid, data length


def packet(type_: int, zxid: int = 0, data: bytes | None = None, authinfo=None) -> r.QuorumPacket:
    return r.QuorumPacket(type_, zxid, data, authinfo)


_NO_AUTHINFO = _I.pack(-1)
_BARE = struct.Struct(">iqii")  # type, zxid, null data, null authinfo
BARE_PACKET_BYTES = _BARE.size


def bare_packet_bytes(type_: int, zxid: int) -> bytes:
    """A packet with no data and no authinfo (ACK, COMMIT, PING, SYNC, UPTODATE...), on
    the wire: what the broadcast sends per txn, built without a record object."""
    return _BARE.pack(type_, zxid, -1, -1)


def data_packet_bytes(type_: int, zxid: int, data: bytes) -> bytes:
    """A packet with data and no authinfo (PROPOSAL, INFORM), on the wire."""
    return _HEAD.pack(type_, zxid, len(data)) + data + _NO_AUTHINFO


# What data_packet_bytes adds around the data: len(packet) - this is the data's length.
DATA_PACKET_OVERHEAD_BYTES = _HEAD.size + len(_NO_AUTHINFO)


def bare_packet_at(buf, off: int) -> tuple[int, int] | None:
    """(type, zxid) if the packet at `off` is a whole bare packet, else None."""
    if len(buf) - off < _BARE.size:
        return None
    type_, zxid, n, count = _BARE.unpack_from(buf, off)
    if n != -1 or count != -1:
        return None
    return type_, zxid


def encode_packet(p: r.QuorumPacket) -> bytes:
    return p.to_bytes()


def _need(buf, off: int, n: int) -> bool:
    return len(buf) - off >= n


def data_max_bytes(jute_maxbuffer: int) -> int:
    """The longest buffer or string a server reads from another: BinaryInputArchive.checkLength
    allows jute.maxbuffer plus the extra size (jute.maxbuffer again by default), so a server
    whose clients may send jute.maxbuffer-sized requests can replicate them. Never less than
    PACKET_DATA_MAX_BYTES."""
    extra = max(jute_maxbuffer, JUTE_MAXBUFFER_EXTRASIZE_MIN_BYTES)
    return max(PACKET_DATA_MAX_BYTES, jute_maxbuffer + extra)


def packet_end(buf: bytes | bytearray | memoryview, off: int = 0,
               data_max_bytes: int = PACKET_DATA_MAX_BYTES) -> int:
    """Where the QuorumPacket starting at `off` ends, or -1 if `buf` does not hold all of it
    yet. Raises JuteError for lengths no ZooKeeper sends (a data or string length over
    data_max_bytes)."""
    if not _need(buf, off, _HEAD.size):
        return -1
    _, _, n = _HEAD.unpack_from(buf, off)
    o = off + _HEAD.size
    if n < -1 or n > data_max_bytes:
        raise JuteError(f"QuorumPacket data length {n} out of range")
    o += max(n, 0)
    if not _need(buf, o, 4):
        return -1
    (count,) = _I.unpack_from(buf, o)
    o += 4
    if count < -1 or count > AUTHINFO_MAX:
        raise JuteError(f"QuorumPacket authinfo count {count} out of range")
    for _ in range(max(count, 0) * 2):  # each Id: scheme, id
        if not _need(buf, o, 4):
            return -1
        (slen,) = _I.unpack_from(buf, o)
        if slen < -1 or slen > data_max_bytes:
            raise JuteError(f"QuorumPacket authinfo string length {slen} out of range")
        o += 4 + max(slen, 0)
    return o if len(buf) >= o else -1


def decode_packet(buf, off: int = 0) -> tuple[r.QuorumPacket, int]:
    return r.QuorumPacket.decode(buf, off)


# -- payloads -------------------------------------------------------------------------

def learner_info(sid: int, config_version: int = STATIC_CONFIG_VERSION) -> bytes:
    return r.LearnerInfo(sid, PROTOCOL_VERSION, config_version).to_bytes()


def parse_learner_info(data: bytes | None) -> tuple[int, int]:
    """(sid, protocol version) from FOLLOWERINFO's data: a LearnerInfo, or a bare sid from
    servers before 3.4 (LearnerHandler.run accepts both)."""
    if data is None or len(data) < 8:
        raise JuteError("FOLLOWERINFO without a server id")
    if len(data) < 12:
        return _Q.unpack_from(data)[0], 0
    (sid,) = _Q.unpack_from(data)
    (version,) = _I.unpack_from(data, 8)
    return sid, version


def learner_config_version(data: bytes | None) -> int:
    """The configVersion a LearnerInfo ends with (its learner's committed config), or
    STATIC_CONFIG_VERSION when an older learner sent none (LearnerHandler.run)."""
    if data is None or len(data) < 20:
        return STATIC_CONFIG_VERSION
    return _Q.unpack_from(data, 12)[0]


def long_payload(value: int) -> bytes:
    """COMMITANDACTIVATE's data, and the head of INFORMANDACTIVATE's: the designated
    leader's sid as a long."""
    return _Q.pack(value)


def parse_activate(data: bytes | None, what: str) -> tuple[int, bytes]:
    """(designated leader, the rest): COMMITANDACTIVATE's rest is empty, INFORMANDACTIVATE's
    is the reconfig's proposal."""
    if data is None or len(data) < 8:
        raise JuteError(f"{what} without the designated leader")
    return _Q.unpack_from(data)[0], bytes(data[8:])


def int_payload(value: int) -> bytes:
    return _I.pack(value)


def parse_int_payload(data: bytes | None, what: str) -> int:
    if data is None or len(data) < 4:
        raise JuteError(f"{what} without its 4-byte value")
    return _I.unpack_from(data)[0]


def encode_touches(touches: list[tuple[int, int]]) -> bytes:
    """A learner's PING reply: (sessionId, timeout) of every session touched since the last."""
    return b"".join(_QI.pack(s, t) for s, t in touches)


def decode_touches(data: bytes | None) -> list[tuple[int, int]]:
    if not data:
        return []
    if len(data) % _QI.size:
        raise JuteError(f"PING touch table of {len(data)} bytes")
    return list(_QI.iter_unpack(data))


def encode_request(session_id: int, cxid: int, op: int, body: bytes) -> bytes:
    """REQUEST's data (Learner.request): sessionId, cxid, type, then the request's bytes."""
    return _QII.pack(session_id, cxid, op) + body


def decode_request(data: bytes | None) -> tuple[int, int, int, bytes]:
    if data is None or len(data) < _QII.size:
        raise JuteError("REQUEST shorter than its header")
    sid, cxid, op = _QII.unpack_from(data)
    return sid, cxid, op, bytes(data[_QII.size:])


def encode_revalidate(session_id: int, timeout_ms: int) -> bytes:
    return _QI.pack(session_id, timeout_ms)


def decode_revalidate(data: bytes | None) -> tuple[int, int]:
    if data is None or len(data) < _QI.size:
        raise JuteError("REVALIDATE shorter than sessionId and timeout")
    return _QI.unpack_from(data)


def encode_revalidate_reply(session_id: int, valid: bool) -> bytes:
    return _QB.pack(session_id, valid)


def decode_revalidate_reply(data: bytes | None) -> tuple[int, bool]:
    if data is None or len(data) < _QB.size:
        raise JuteError("REVALIDATE reply shorter than sessionId and flag")
    return _QB.unpack_from(data)


def encode_digest(version: int, tree_digest: int) -> bytes:
    return r.TxnDigest(version, tree_digest).to_bytes()
