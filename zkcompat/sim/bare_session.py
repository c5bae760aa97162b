"""BareSession: the harness's own session on one simulated server (setup, reconfig), apart
from the simulated clients: no retries, and nothing it does is in a history the checks read.
"""

from __future__ import annotations

import asyncio

from zkcompat.jute import records as r
from zkcompat.jute.framing import FrameReader, frame
from zkcompat.sim.clients import SESSION_TIMEOUT_MS
from zkcompat.sim.server import CLIENT_PORT


class BareSession:
    """A session opened by hand on one server, for the harness's own requests (setup,
    reconfig): replies come back in order as raw frames, None once the connection is
    lost. open() is None if no connection or no handshake came within the timeouts."""

    def __init__(self, transport, replies: asyncio.Queue):
        self.transport = transport
        self.replies = replies

    @classmethod
    async def open(cls, host: str, connect_s: float = 1.0,
                   handshake_s: float = 2.0) -> BareSession | None:
        loop = asyncio.get_running_loop()
        replies: asyncio.Queue = asyncio.Queue()

        class Proto(asyncio.Protocol):
            def __init__(self):
                self.reader = FrameReader(1 << 20)

            def data_received(self, data):
                for f in self.reader.feed(data):
                    replies.put_nowait(bytes(f))

            def connection_lost(self, exc):
                replies.put_nowait(None)

        try:
            transport, _ = await asyncio.wait_for(
                loop.create_connection(Proto, host, CLIENT_PORT), connect_s)
        except (OSError, TimeoutError):
            return None
        session = cls(transport, replies)
        transport.write(frame(r.ConnectRequest(0, 0, SESSION_TIMEOUT_MS, 0, b"\0" * 16,
                                               False).to_bytes()))
        try:
            if await asyncio.wait_for(replies.get(), handshake_s) is not None:
                return session
        except TimeoutError:
            pass
        session.close()
        return None

    def send(self, xid: int, op: int, record=None) -> None:
        out = bytearray()
        r.RequestHeader(xid, op).encode(out)
        if record is not None:
            record.encode(out)
        self.transport.write(frame(out))

    async def reply(self, timeout_s: float) -> bytes | None:
        """The next reply frame (raises TimeoutError), or None: the connection is gone."""
        return await asyncio.wait_for(self.replies.get(), timeout_s)

    def close(self) -> None:
        self.transport.close()
