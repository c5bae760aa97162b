"""Snappy decompression for ZooKeeper's `snapshot.<zxid>.snappy` files: xerial
snappy-java's stream format around Google's raw blocks. Pure Python and read-only: cold
path (import, dump).
"""

from __future__ import annotations

import struct

# SnapStream: xerial snappy-java's stream header (SnappyCodec.MAGIC_HEADER + two ints).
SNAPPY_MAGIC = b"\x82SNAPPY\x00"
SNAPPY_HEADER_BYTES = len(SNAPPY_MAGIC) + 8


class SnappyError(ValueError):
    """Bytes that are not a snappy stream or block (damaged or truncated)."""


def decompress_block(src: bytes | memoryview) -> bytes:
    """One raw snappy block (Google's format): varint length, then literals and copies."""
    src = memoryview(src)
    n = shift = pos = 0
    while True:
        if pos >= len(src):
            raise SnappyError("snappy block: truncated length")
        b = src[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            break
    out = bytearray()
    end = len(src)
    while pos < end:
        tag = src[pos]
        pos += 1
        kind = tag & 3
        if kind == 0:  # literal
            length = tag >> 2
            if length >= 60:
                extra = length - 59
                length = int.from_bytes(src[pos : pos + extra], "little")
                pos += extra
            length += 1
            if pos + length > end:
                raise SnappyError("snappy block: literal runs past the end")
            out += src[pos : pos + length]
            pos += length
            continue
        if kind == 1:
            length = ((tag >> 2) & 7) + 4
            offset = ((tag >> 5) << 8) | src[pos]
            pos += 1
        elif kind == 2:
            length = (tag >> 2) + 1
            offset = int.from_bytes(src[pos : pos + 2], "little")
            pos += 2
        else:
            length = (tag >> 2) + 1
            offset = int.from_bytes(src[pos : pos + 4], "little")
            pos += 4
        if offset == 0 or offset > len(out):
            raise SnappyError(f"snappy block: copy offset {offset} outside {len(out)} bytes")
        start = len(out) - offset
        if offset >= length:
            out += out[start : start + length]
        else:  # the copy overlaps what it writes: a repeating pattern
            pattern = bytes(out[start:])
            out += (pattern * (length // offset + 1))[:length]
    if len(out) != n:
        raise SnappyError(f"snappy block: {len(out)} bytes, header says {n}")
    return bytes(out)


def stream_decompress(raw: bytes) -> bytes:
    """snappy-java's SnappyInputStream format: header, then (int length, block)*; a second
    header may follow (concatenated streams)."""
    if not raw.startswith(SNAPPY_MAGIC):
        raise SnappyError("not a snappy-java stream (bad magic)")
    out = []
    pos = 0
    view = memoryview(raw)
    while pos < len(raw):
        if raw.startswith(SNAPPY_MAGIC, pos):
            pos += SNAPPY_HEADER_BYTES
            continue
        if pos + 4 > len(raw):
            raise SnappyError("snappy stream: truncated block length")
        (n,) = struct.unpack_from(">i", raw, pos)
        pos += 4
        if n < 0 or pos + n > len(raw):
            raise SnappyError(f"snappy stream: block of {n} bytes runs past the end")
        out.append(decompress_block(view[pos : pos + n]))
        pos += n
    return b"".join(out)
