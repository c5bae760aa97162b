"""FrameReader and frame(): NIOServerCnxn's length rules, any chunking, bounded buffering."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcompat.jute.constants import JUTE_MAXBUFFER_DEFAULT_BYTES
from zkcompat.jute.errors import JuteError
from zkcompat.jute.framing import FrameError, FrameReader, frame


def test_frame_prefixes_the_big_endian_length() -> None:
    assert frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert frame(b"") == b"\x00\x00\x00\x00"
    assert frame(memoryview(b"xy")) == b"\x00\x00\x00\x02xy"


@settings(max_examples=100, deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=40), max_size=8),
    cuts=st.lists(st.integers(0, 400), max_size=12),
    kind=st.sampled_from([bytes, bytearray, memoryview]),
)
def test_any_chunking_yields_the_same_frames(payloads: list[bytes], cuts: list[int], kind: type) -> None:
    stream = b"".join(frame(p) for p in payloads)
    bounds = sorted({0, len(stream), *(c for c in cuts if c < len(stream))})
    reader = FrameReader()
    got: list[bytes] = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        frames = reader.feed(kind(stream[a:b]))
        assert all(type(f) is bytes for f in frames)
        got += frames
    assert got == payloads
    assert reader.buffered_bytes == 0


def test_partial_frames_stay_buffered() -> None:
    reader = FrameReader()
    assert reader.feed(b"\x00\x00") == []
    assert reader.feed(b"\x00\x05ab") == []
    assert reader.buffered_bytes == 6
    assert reader.feed(b"cde\x00\x00\x00\x01") == [b"abcde"]
    assert reader.buffered_bytes == 4
    assert reader.feed(b"z") == [b"z"]


def test_length_bound_is_inclusive_like_nio_server_cnxn() -> None:
    # NIOServerCnxn.readLength: `len < 0 || len > BinaryInputArchive.maxBuffer` is an error.
    reader = FrameReader(max_frame_bytes=10)
    assert reader.feed(frame(b"x" * 10)) == [b"x" * 10]
    assert reader.feed(frame(b"")) == [b""]
    with pytest.raises(FrameError, match="frame length 11 exceeds the maximum of 10 bytes"):
        reader.feed(b"\x00\x00\x00\x0b")
    assert FrameReader().max_frame_bytes == JUTE_MAXBUFFER_DEFAULT_BYTES == 1048575
    big = FrameReader()
    assert big.feed(JUTE_MAXBUFFER_DEFAULT_BYTES.to_bytes(4, "big")) == []
    with pytest.raises(FrameError, match="1048576"):
        FrameReader().feed((JUTE_MAXBUFFER_DEFAULT_BYTES + 1).to_bytes(4, "big"))


def test_one_whole_frame_per_read_keeps_every_rule() -> None:
    """A client that waits for each reply sends one whole frame per read (the fast path):
    the bound still holds, and a refused frame still breaks the reader."""
    reader = FrameReader(max_frame_bytes=10)
    for payload in (b"", b"x", b"y" * 10):
        assert reader.feed(frame(payload)) == [payload]
        assert reader.buffered_bytes == 0
    with pytest.raises(FrameError, match="frame length 11 exceeds the maximum of 10 bytes"):
        reader.feed(frame(b"z" * 11))
    with pytest.raises(FrameError):
        reader.feed(frame(b"ok"))
    reader = FrameReader()
    assert reader.feed(frame(b"ab")[:3]) == []  # a partial frame is never taken whole
    assert reader.feed(frame(b"ab")[3:]) == [b"ab"]


def test_negative_length_is_refused_and_breaks_the_reader() -> None:
    reader = FrameReader()
    with pytest.raises(FrameError, match="frame length -1 is negative") as info:
        reader.feed(frame(b"ok") + b"\xff\xff\xff\xff" + frame(b"never"))
    assert isinstance(info.value, JuteError)
    # the frames before the bad header are handed over, as ZooKeeper processes them first
    assert info.value.frames == [b"ok"]
    with pytest.raises(FrameError):
        reader.feed(frame(b"later"))


def test_bad_header_after_buffered_bytes() -> None:
    reader = FrameReader(max_frame_bytes=100)
    assert reader.feed(b"\x00\x00\x00\x02a") == []
    with pytest.raises(FrameError) as info:
        reader.feed(b"b\x7f\xff\xff\xff")
    assert info.value.frames == [b"ab"]


@settings(max_examples=200, deadline=None)
@given(chunks=st.lists(st.binary(max_size=30), max_size=6), limit=st.integers(0, 64))
def test_random_bytes_raise_nothing_but_frame_error(chunks: list[bytes], limit: int) -> None:
    reader = FrameReader(max_frame_bytes=limit)
    try:
        for chunk in chunks:
            for payload in reader.feed(chunk):
                assert len(payload) <= limit
            assert reader.buffered_bytes <= 4 + limit
    except FrameError:
        pass


def test_many_pipelined_frames_in_one_feed() -> None:
    payloads = [bytes([i % 251]) * (i % 17) for i in range(5000)]
    stream = b"".join(frame(p) for p in payloads)
    reader = FrameReader()
    assert reader.feed(stream[:-3]) == payloads[:-1]
    assert reader.feed(stream[-3:]) == payloads[-1:]


def test_max_frame_bytes_must_not_be_negative() -> None:
    with pytest.raises(ValueError):
        FrameReader(max_frame_bytes=-1)
