"""store/snappy.py: the decoder of ZooKeeper's .snappy snapshots, against a small encoder
written here (every tag form, overlapping copies), concatenated streams, damage."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkcompat.store import snappy
from zkcompat.store.snappy import SnappyError


def snappy_compress(data: bytes) -> bytes:
    """A small greedy snappy encoder (literals and all three copy forms, overlapping
    copies included), enough to check the decoder against."""
    out = bytearray()
    n = len(data)
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            break
    i = lit_start = 0

    def literal(chunk: bytes) -> None:
        ln = len(chunk) - 1
        if ln < 60:
            out.append(ln << 2)
        else:
            nb = (ln.bit_length() + 7) // 8
            out.append((59 + nb) << 2)
            out.extend(ln.to_bytes(nb, "little"))
        out.extend(chunk)

    while i < len(data):
        best_len = best_off = 0
        for off in (1, 2, 3, 7, 64, 300, 2100, 70000):
            if off > i:
                break
            ln = 0
            while i + ln < len(data) and ln < 64 and data[i + ln] == data[i + ln - off]:
                ln += 1
            if ln > best_len:
                best_len, best_off = ln, off
        if best_len >= 4:
            if lit_start < i:
                literal(data[lit_start:i])
            if best_off < 2048 and best_len <= 11:
                out.append(1 | ((best_len - 4) << 2) | ((best_off >> 8) << 5))
                out.append(best_off & 0xFF)
            elif best_off < 65536:
                out.append(2 | ((best_len - 1) << 2))
                out.extend(best_off.to_bytes(2, "little"))
            else:
                out.append(3 | ((best_len - 1) << 2))
                out.extend(best_off.to_bytes(4, "little"))
            i += best_len
            lit_start = i
        else:
            i += 1
    if lit_start < len(data):
        literal(data[lit_start:])
    return bytes(out)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=30), st.sampled_from([b"a" * 100, b"ab" * 50,
                                                                    b"xyz" * 33])),
                max_size=20))
def test_snappy_block_round_trip(parts):
    data = b"".join(parts)
    assert snappy.decompress_block(snappy_compress(data)) == data


def test_snappy_stream_with_two_blocks_and_a_second_header():
    header = snappy.SNAPPY_MAGIC + (1).to_bytes(4, "big") + (1).to_bytes(4, "big")
    blocks = [b"hello " * 30, bytes(range(256)) * 3, b"tail"]
    raw = header
    for i, b in enumerate(blocks):
        if i == 2:
            raw += header  # SnappyInputStream reads concatenated streams
        c = snappy_compress(b)
        raw += len(c).to_bytes(4, "big") + c
    assert snappy.stream_decompress(raw) == b"".join(blocks)
    with pytest.raises(SnappyError):
        snappy.stream_decompress(raw[:-3])
    with pytest.raises(SnappyError, match="magic"):
        snappy.stream_decompress(b"\x00" + raw)


def test_snappy_bad_copy_offset_is_an_error():
    with pytest.raises(SnappyError, match="offset"):
        snappy.decompress_block(bytes([10, 1 | (2 << 2), 5]))
