"""Election wire formats against the bytes FastLeaderElection and QuorumCnxManager (3.8.0)
write and the checks they apply when reading."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcompat.jute.election import (
    HEADER_MAX_BYTES,
    INITIAL_MESSAGE_MAX_BYTES,
    PACKETMAXSIZE,
    PROTOCOL_VERSION_V1,
    PROTOCOL_VERSION_V2,
    ConnectionHeader,
    ConnectionHeaderReader,
    ElectionFrameReader,
    Notification,
    ServerState,
    encode_connection_header,
    encode_old_connection_header,
    frame_message,
)
from zkcompat.jute.errors import JuteError

LONGS = st.integers(-(1 << 63), (1 << 63) - 1)


# -- notifications -----------------------------------------------------------------------


def test_server_state_ordinals_are_quorum_peer_server_state() -> None:
    assert [s.name for s in sorted(ServerState)] == ["LOOKING", "FOLLOWING", "LEADING", "OBSERVING"]
    assert [int(s) for s in sorted(ServerState)] == [0, 1, 2, 3]


def test_notification_encodes_as_build_msg() -> None:
    # buildMsg(state, leader, zxid, electionEpoch, epoch, configData): int, 4 longs,
    # int CURRENTVERSION (2), int config length, config.
    n = Notification(ServerState.FOLLOWING, 3, 0x100000007, 2, 1, 2, b"version=0")
    assert n.encode() == bytes.fromhex(
        "00000001"
        "0000000000000003"
        "0000000100000007"
        "0000000000000002"
        "0000000000000001"
        "00000002"
        "00000009") + b"version=0"


def test_notification_defaults_to_the_current_version_and_no_config() -> None:
    n = Notification(ServerState.LOOKING, 1, 0, 1, 0)
    assert n.version == 2 and n.config == b""
    assert len(n.encode()) == 44


@settings(max_examples=200, deadline=None)
@given(state=st.sampled_from(ServerState), leader=LONGS, zxid=LONGS, ee=LONGS, pe=LONGS,
       config=st.binary(max_size=300))
def test_notification_round_trips(state: ServerState, leader: int, zxid: int, ee: int, pe: int,
                                  config: bytes) -> None:
    n = Notification(state, leader, zxid, ee, pe, 2, config)
    assert Notification.decode(n.encode()) == n


def test_28_byte_format_takes_peer_epoch_from_the_zxid() -> None:
    raw = struct.pack(">iqqq", 0, 5, 0x300000009, 7)
    assert Notification.decode(raw) == Notification(ServerState.LOOKING, 5, 0x300000009, 7, 3, 0, b"")


def test_40_byte_format_has_no_version_and_its_last_4_bytes_are_ignored() -> None:
    raw = struct.pack(">iqqqqi", 2, 5, 9, 7, 4, 0x1)  # the 5-argument buildMsg
    assert Notification.decode(raw) == Notification(ServerState.LEADING, 5, 9, 7, 4, 0, b"")


@pytest.mark.parametrize("version", [0, 1, -3])
def test_versions_up_to_1_carry_no_config(version: int) -> None:
    raw = struct.pack(">iqqqqii", 0, 1, 2, 3, 4, version, 99) + b"x" * 5
    n = Notification.decode(raw)
    assert (n.version, n.config) == (version, b"")


def test_bytes_after_the_config_are_ignored() -> None:
    raw = Notification(ServerState.LOOKING, 1, 2, 3, 4, 2, b"abc").encode() + b"trailing"
    assert Notification.decode(raw).config == b"abc"


def test_a_version_above_2_still_reads_the_config() -> None:
    raw = Notification(ServerState.LOOKING, 1, 2, 3, 4, 7, b"abc").encode()
    assert Notification.decode(raw).version == 7
    assert Notification.decode(raw).config == b"abc"


@pytest.mark.parametrize("size", [0, 1, 27, 29, 35, 36, 39])
def test_short_and_truncated_notifications_raise(size: int) -> None:
    raw = Notification(ServerState.LOOKING, 1, 2, 3, 4).encode()[:size]
    with pytest.raises(JuteError):
        Notification.decode(raw)


@pytest.mark.parametrize("size", [41, 43])
def test_version_2_without_room_for_the_config_length_raises(size: int) -> None:
    raw = Notification(ServerState.LOOKING, 1, 2, 3, 4).encode()[:size]
    with pytest.raises(JuteError):
        Notification.decode(raw)


def test_41_bytes_with_version_1_is_accepted() -> None:
    raw = struct.pack(">iqqqqi", 0, 1, 2, 3, 4, 1) + b"\x00"
    assert Notification.decode(raw).version == 1


@pytest.mark.parametrize("length", [-1, -(1 << 31), 54 + 1, 1 << 30])
def test_config_length_outside_0_to_capacity_raises(length: int) -> None:
    raw = struct.pack(">iqqqqii", 0, 1, 2, 3, 4, 2, length) + b"x" * 10
    assert len(raw) == 54
    with pytest.raises(JuteError, match="config length"):
        Notification.decode(raw)


def test_config_length_within_capacity_but_past_the_end_raises() -> None:
    raw = struct.pack(">iqqqqii", 0, 1, 2, 3, 4, 2, 20) + b"x" * 10
    with pytest.raises(JuteError, match="past the end"):
        Notification.decode(raw)


@pytest.mark.parametrize("state", [4, -1, 1 << 20])
def test_unknown_state_raises(state: int) -> None:
    raw = struct.pack(">iqqqqii", state, 1, 2, 3, 4, 2, 0)
    with pytest.raises(JuteError, match="state"):
        Notification.decode(raw)


def test_encode_refuses_what_a_peer_could_not_read() -> None:
    with pytest.raises(ValueError):
        Notification(ServerState.LOOKING, 1, 2, 3, 4, 1, b"config").encode()
    with pytest.raises(ValueError):
        Notification(ServerState.LOOKING, 1 << 63, 2, 3, 4).encode()
    with pytest.raises(ValueError):
        Notification(ServerState.LOOKING, 1, 2, 3, 4, 2, b"x" * PACKETMAXSIZE).encode()


# -- connection header -------------------------------------------------------------------


def test_header_encodes_as_start_connection() -> None:
    raw = encode_connection_header(2, [("127.0.0.1", 3888)])
    assert raw == bytes.fromhex("ffffffffffff0000" "0000000000000002" "0000000e") + b"127.0.0.1:3888"
    assert PROTOCOL_VERSION_V1 == -65536 and PROTOCOL_VERSION_V2 == -65535


def test_header_v2_joins_addresses_with_a_bar_and_brackets_ipv6() -> None:
    raw = encode_connection_header(9, [("10.0.0.1", 1), ("::1", 2)], PROTOCOL_VERSION_V2)
    assert raw[20:] == b"10.0.0.1:1|[::1]:2"
    assert struct.unpack(">qqi", raw[:20]) == (PROTOCOL_VERSION_V2, 9, 18)


def test_header_v1_carries_exactly_one_address() -> None:
    with pytest.raises(ValueError):
        encode_connection_header(1, [("a", 1), ("b", 2)])
    with pytest.raises(ValueError):
        encode_connection_header(1, [])


def _parse(raw: bytes) -> ConnectionHeader:
    reader = ConnectionHeaderReader()
    header = reader.feed(raw)
    assert header is not None
    return header


def test_header_round_trips_and_keeps_the_bytes_after_it() -> None:
    reader = ConnectionHeaderReader()
    header = reader.feed(encode_connection_header(3, [("127.0.0.1", 4000)]) + b"\x00\x00")
    assert header == ConnectionHeader(3, PROTOCOL_VERSION_V1, (("127.0.0.1", 4000),))
    assert reader.rest == b"\x00\x00"


@settings(max_examples=100, deadline=None)
@given(cuts=st.lists(st.integers(0, 40), max_size=6))
def test_header_parses_in_any_chunking(cuts: list[int]) -> None:
    raw = encode_connection_header(7, [("::1", 3888)]) + b"tail"
    bounds = sorted({0, len(raw), *(c for c in cuts if c < len(raw))})
    reader = ConnectionHeaderReader()
    got = None
    rest = b""
    for a, b in zip(bounds, bounds[1:], strict=False):
        if got is None:
            got = reader.feed(raw[a:b])
            rest = reader.rest
        else:
            rest += raw[a:b]
    assert got == ConnectionHeader(7, PROTOCOL_VERSION_V1, (("::1", 3888),))
    assert rest == b"tail"


def test_old_header_is_a_bare_non_negative_sid() -> None:
    reader = ConnectionHeaderReader()
    assert reader.feed(encode_old_connection_header(5) + b"rest") == ConnectionHeader(5, None)
    assert reader.rest == b"rest"
    assert _parse(encode_old_connection_header(0)) == ConnectionHeader(0, None)


def test_wildcard_addresses_are_left_out() -> None:
    raw = encode_connection_header(4, [("0.0.0.0", 1), ("127.0.0.1", 2), ("::", 3)],
                                   PROTOCOL_VERSION_V2)
    assert _parse(raw).election_addresses == (("127.0.0.1", 2),)


def _raw_header(text: bytes, version: int = PROTOCOL_VERSION_V2, length: int | None = None) -> bytes:
    return struct.pack(">qqi", version, 1, len(text) if length is None else length) + text


@pytest.mark.parametrize("text, expected", [
    (b"h:1|", (("h", 1),)),          # String.split drops the trailing empty string
    (b"h:1:", (("h", 1),)),          # ... here too: ConfigUtils.getHostAndPort quirk
    (b"[::1]:5", (("::1", 5),)),
    (b"[fe80::1]x5", (("fe80::1", 5),)),  # getHostAndPort skips the char after ']'
    (b"h:+7", (("h", 7),)),          # Integer.parseInt takes a sign
    (b"|", ()),                      # "|".split("\\|") is empty
])
def test_address_parsing_follows_initial_message_parse(text: bytes, expected: tuple) -> None:
    assert _parse(_raw_header(text)).election_addresses == expected


@pytest.mark.parametrize("text", [
    b"host", b"host:", b"h:1:2", b"h:x", b"h:1||k:2", b"[::1]", b"[::1]:", b"[::1", b":",
    b"h:70000", b"h:-1", b"h:99999999999",
])
def test_badly_formed_addresses_raise(text: bytes) -> None:
    with pytest.raises(JuteError):
        ConnectionHeaderReader().feed(_raw_header(text))


@pytest.mark.parametrize("length", [0, -1, INITIAL_MESSAGE_MAX_BYTES + 1])
def test_unreasonable_address_length_raises(length: int) -> None:
    with pytest.raises(JuteError, match="length"):
        ConnectionHeaderReader().feed(_raw_header(b"h:1", length=length))


def test_address_length_max_is_accepted() -> None:
    text = b"h" * (INITIAL_MESSAGE_MAX_BYTES - 2) + b":1"
    header = _parse(_raw_header(text))
    assert header.election_addresses[0][1] == 1
    assert HEADER_MAX_BYTES == 20 + INITIAL_MESSAGE_MAX_BYTES


@pytest.mark.parametrize("version", [-1, -65537, -65534, -(1 << 63)])
def test_unrecognized_protocol_version_raises(version: int) -> None:
    with pytest.raises(JuteError, match="protocol version"):
        ConnectionHeaderReader().feed(_raw_header(b"h:1", version=version))


def test_a_broken_header_reader_stays_broken() -> None:
    reader = ConnectionHeaderReader()
    with pytest.raises(JuteError):
        reader.feed(_raw_header(b"h:1", version=-2))
    with pytest.raises(JuteError):
        reader.feed(encode_old_connection_header(1))


# -- framing -----------------------------------------------------------------------------


def test_frame_is_the_int_length_then_the_message() -> None:
    assert frame_message(b"abc") == b"\x00\x00\x00\x03abc"
    with pytest.raises(ValueError):
        frame_message(b"")
    with pytest.raises(ValueError):
        frame_message(b"x" * (PACKETMAXSIZE + 1))
    assert PACKETMAXSIZE == 524288


@settings(max_examples=100, deadline=None)
@given(payloads=st.lists(st.binary(min_size=1, max_size=50), max_size=6),
       cuts=st.lists(st.integers(0, 300), max_size=10))
def test_frames_survive_any_chunking(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(frame_message(p) for p in payloads)
    bounds = sorted({0, len(stream), *(c for c in cuts if c < len(stream))})
    reader = ElectionFrameReader()
    got: list[bytes] = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        got += reader.feed(stream[a:b])
    assert got == payloads
    assert reader.buffered_bytes == 0


@pytest.mark.parametrize("length", [0, -1, PACKETMAXSIZE + 1])
def test_frame_length_outside_1_to_packetmaxsize_breaks_the_reader(length: int) -> None:
    reader = ElectionFrameReader()
    good = frame_message(b"ok")
    with pytest.raises(JuteError, match="length"):
        reader.feed(good + struct.pack(">i", length) + b"zz")
    assert reader.frames_before_error == [b"ok"]
    with pytest.raises(JuteError):
        reader.feed(good)


def test_frame_of_exactly_packetmaxsize_is_read() -> None:
    reader = ElectionFrameReader()
    payload = b"y" * PACKETMAXSIZE
    assert reader.feed(frame_message(payload)) == [payload]
