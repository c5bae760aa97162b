"""Every generated record: round trips, Java's null/empty rules, and malformed input."""

from __future__ import annotations

import struct
import tracemalloc

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from jute_strategies import record

from zkcompat.jute import records as r
from zkcompat.jute.errors import JuteError
from zkcompat.jute.schema import RECORDS

NAMES = [rec.name for rec in RECORDS]
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def encode(rec: object) -> bytes:
    return rec.to_bytes()  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", NAMES)
@FAST
@given(data=st.data())
def test_round_trip_preserves_every_field(name: str, data: st.DataObject) -> None:
    cls = getattr(r, name)
    rec = data.draw(record(name))
    raw = encode(rec)
    decoded, end = cls.decode(raw, 0)
    assert decoded == rec
    assert end == len(raw)
    # the same bytes from a memoryview, a bytearray, and in the middle of a larger buffer
    prefix = data.draw(st.binary(max_size=8))
    suffix = data.draw(st.binary(max_size=8))
    if getattr(rec, "readOnly", False) is None:
        suffix = b""  # bytes after an absent readOnly would be read as readOnly, as in Java
    for buf in (memoryview(raw), bytearray(raw), prefix + raw + suffix):
        start = len(prefix) if len(buf) != len(raw) else 0
        again, stop = cls.decode(buf, start)
        assert again == rec and stop == start + len(raw)
        assert again.to_bytes() == raw
    out = bytearray(prefix)
    rec.encode(out)
    assert bytes(out) == prefix + raw
    assert cls.from_bytes(raw + suffix) == rec


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_every_truncation_raises_jute_error(name: str, data: st.DataObject) -> None:
    cls = getattr(r, name)
    rec = data.draw(record(name))
    raw = encode(rec)
    optional_tail = name.startswith("Connect") and rec.readOnly is not None
    for cut in range(len(raw)):
        if optional_tail and cut == len(raw) - 1:
            # a peer before 3.4 sends no readOnly: the record is complete without it
            short, end = cls.decode(raw[:cut], 0)
            assert short.readOnly is None and end == cut
            continue
        with pytest.raises(JuteError):
            cls.decode(raw[:cut], 0)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=30, deadline=None)
@given(blob=st.binary(max_size=80), offset=st.integers(0, 8))
@example(blob=b"\xff\xff\xff\xfe" * 4, offset=0)
@example(blob=b"\x7f\xff\xff\xff" * 8, offset=0)
@example(blob=b"\x80\x00\x00\x00" * 8, offset=0)
def test_random_bytes_raise_nothing_but_jute_error(name: str, blob: bytes, offset: int) -> None:
    cls = getattr(r, name)
    try:
        rec, end = cls.decode(blob, offset)
    except JuteError:
        return
    assert offset <= end <= len(blob)
    assert cls.decode(rec.to_bytes(), 0)[0] == rec or name.startswith("Connect")


def test_null_and_empty_stay_distinct() -> None:
    null = r.CreateRequest(None, None, None, 0)
    empty = r.CreateRequest("", b"", [], 0)
    assert null.to_bytes() == b"\xff\xff\xff\xff" * 3 + b"\x00\x00\x00\x00"
    assert empty.to_bytes() == b"\x00\x00\x00\x00" * 4
    assert r.CreateRequest.from_bytes(null.to_bytes()) == null
    assert r.CreateRequest.from_bytes(empty.to_bytes()) == empty
    assert null != empty
    vectors = r.GetChildrenResponse([None, ""])
    assert vectors.to_bytes() == bytes.fromhex("00000002" "ffffffff" "00000000")
    assert r.GetChildrenResponse.from_bytes(vectors.to_bytes()) == vectors


def test_stat_layout_is_jute_order_big_endian() -> None:
    stat = r.Stat(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
    assert stat.to_bytes() == struct.pack(">qqqqiiiqiiq", *range(1, 12))
    assert len(stat.to_bytes()) == 68
    assert r.Stat() == r.Stat(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    assert repr(stat).startswith("Stat(czxid=1, mzxid=2,")


def test_any_nonzero_byte_is_true() -> None:
    # DataInputStream.readBoolean: any non-zero byte reads as true.
    raw = bytearray(r.GetDataRequest("/a", False).to_bytes())
    raw[-1] = 0x7F
    assert r.GetDataRequest.from_bytes(raw).watch is True
    assert r.GetDataRequest("/a", True).to_bytes()[-1:] == b"\x01"


def test_connect_request_read_only_is_optional() -> None:
    old = r.ConnectRequest(0, 0, 30000, 0, b"\x00" * 16, None)
    new = r.ConnectRequest(0, 0, 30000, 0, b"\x00" * 16, False)
    assert len(old.to_bytes()) == 44 and len(new.to_bytes()) == 45
    assert r.ConnectRequest.from_bytes(old.to_bytes()).readOnly is None
    assert r.ConnectRequest.from_bytes(new.to_bytes()).readOnly is False
    reply = r.ConnectResponse(0, 30000, 0x1234, b"\x01" * 16, None)
    assert len(reply.to_bytes()) == 36
    assert r.ConnectResponse.from_bytes(reply.to_bytes() + b"\x01").readOnly is True


def test_negative_lengths_are_refused_but_vectors_follow_java() -> None:
    with pytest.raises(JuteError, match="negative length -2"):
        r.SyncRequest.from_bytes(b"\xff\xff\xff\xfe")
    with pytest.raises(JuteError, match="runs past the end"):
        r.GetSASLRequest.from_bytes(b"\x00\x00\x00\x05abcd")
    # BinaryInputArchive.startVector: only -1 is null; BinaryIndex.done() is n <= 0, so
    # Java reads every other negative count as an empty vector.
    assert r.GetChildrenResponse.from_bytes(b"\xff\xff\xff\xff").children is None
    assert r.GetChildrenResponse.from_bytes(b"\xff\xff\xff\xfe").children == []
    assert r.GetChildrenResponse.from_bytes(b"\x80\x00\x00\x00").children == []


def test_huge_vector_count_fails_before_allocating() -> None:
    raw = b"\x7f\xff\xff\xff" + b"\x00" * 64
    tracemalloc.start()
    try:
        for name in ("GetChildrenResponse", "GetACLResponse", "MultiTxn", "WhoAmIResponse"):
            with pytest.raises(JuteError, match="vector count 2147483647"):
                getattr(r, name).from_bytes(raw)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024


def test_strings_are_java_utf8() -> None:
    # Outside the BMP Java's BinaryOutputArchive writes each UTF-16 unit: CESU-8.
    assert r.SyncRequest("\U0001f600").to_bytes() == bytes.fromhex("00000006eda0bdedb880")
    assert r.SyncRequest("é€").to_bytes() == bytes.fromhex("00000005c3a9e282ac")
    # ... and new String(bytes, UTF_8) reads an encoded surrogate as one U+FFFD.
    assert r.SyncRequest.from_bytes(bytes.fromhex("00000006eda0bdedb880")).path == "\ufffd\ufffd"
    # a valid 4-byte sequence, as kazoo sends it, is one code point
    assert r.SyncRequest.from_bytes(bytes.fromhex("00000004f09f9880")).path == "\U0001f600"
    assert r.SyncRequest.from_bytes(bytes.fromhex("0000000361ff62")).path == "a\ufffdb"


def test_equality_is_by_type_and_fields() -> None:
    assert r.SyncRequest("/a") == r.SyncRequest("/a")
    assert r.SyncRequest("/a") != r.SyncResponse("/a")
    assert r.SyncRequest("/a") != r.SyncRequest("/b")
    with pytest.raises(TypeError):
        hash(r.SyncRequest("/a"))
    with pytest.raises(AttributeError):
        r.SyncRequest("/a").other = 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_malformed_utf8_reads_the_same_from_any_buffer(kind: type) -> None:
    raw = bytes.fromhex("0000000b" "61" "eda080" "e282" "f09f9880" "62")
    assert r.SyncRequest.decode(kind(raw), 0)[0].path == "a\ufffd\ufffd\U0001f600b"
    data = r.GetDataResponse.decode(kind(r.GetDataResponse(b"\xff", r.Stat()).to_bytes()), 0)[0]
    assert type(data.data) is bytes and data.data == b"\xff"
