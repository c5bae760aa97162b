"""4-byte big-endian length framing, sans I/O: bytes in, complete frame payloads out.

The bound is NIOServerCnxn.readLength's: a length below 0 or above jute.maxbuffer is
refused (exactly maxbuffer, and 0, are accepted).
"""

from __future__ import annotations

from struct import Struct

from zkcompat.jute.constants import JUTE_MAXBUFFER_DEFAULT_BYTES
from zkcompat.jute.errors import JuteError

_LENGTH = Struct(">i")
_LENGTH_BYTES = _LENGTH.size


class FrameError(JuteError):
    """A frame header the peer should never send: close the connection.

    `frames` holds the complete frames that preceded the bad header in the same feed();
    ZooKeeper processes those before it closes the connection.
    """

    def __init__(self, message: str, frames: list[bytes] | None = None) -> None:
        super().__init__(message)
        self.frames: list[bytes] = frames if frames is not None else []


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """The payload with its 4-byte length prefix."""
    return _LENGTH.pack(len(payload)) + bytes(payload)


class FrameReader:
    """Splits a byte stream into frame payloads.

    Buffers at most one partial frame (<= 4 + max_frame_bytes). Each byte is copied at most
    twice (into the partial buffer, out into its frame), whatever the chunking, so a
    pipelining client costs linear time. After a FrameError the reader is broken: every
    later feed() raises the same error.
    """

    __slots__ = ("max_frame_bytes", "_partial", "_error")

    def __init__(self, max_frame_bytes: int = JUTE_MAXBUFFER_DEFAULT_BYTES) -> None:
        if max_frame_bytes < 0:
            raise ValueError(f"max_frame_bytes must be >= 0, not {max_frame_bytes}")
        self.max_frame_bytes = max_frame_bytes
        self._partial = bytearray()
        self._error: FrameError | None = None

    @property
    def buffered_bytes(self) -> int:
        """Bytes of an incomplete frame held until more data arrives."""
        return len(self._partial)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Every frame payload completed by data, in order; the rest stays buffered."""
        if self._error is not None:
            raise FrameError(str(self._error))
        partial = self._partial
        if not partial and type(data) is bytes and len(data) >= _LENGTH_BYTES:
            # What a client waiting for each reply sends: one whole frame per read.
            (length,) = _LENGTH.unpack_from(data)
            if length == len(data) - _LENGTH_BYTES and length <= self.max_frame_bytes:
                return [data[_LENGTH_BYTES:]]
        if partial:
            partial += data
            buf: bytes | bytearray = partial
        else:
            buf = data if type(data) is bytes else bytes(data)
        frames: list[bytes] = []
        # Slicing a memoryview of the partial buffer copies each frame once, not twice.
        view = memoryview(buf) if buf is partial else buf
        end = len(buf)
        pos = 0
        max_bytes = self.max_frame_bytes
        unpack_length = _LENGTH.unpack_from
        while end - pos >= _LENGTH_BYTES:
            (length,) = unpack_length(buf, pos)
            if length < 0 or length > max_bytes:
                self._error = FrameError(
                    f"frame length {length} is negative" if length < 0 else
                    f"frame length {length} exceeds the maximum of {max_bytes} bytes (jute.maxbuffer)",
                    frames,
                )
                if view is not buf:
                    view.release()
                self._partial = bytearray()
                raise self._error
            start = pos + _LENGTH_BYTES
            stop = start + length
            if stop > end:
                break
            frames.append(bytes(view[start:stop]))
            pos = stop
        if buf is partial:
            view.release()  # a bytearray cannot be resized while a view is exported
            if pos:
                del partial[:pos]
        elif pos < end:
            partial += memoryview(buf)[pos:]
        return frames
