"""zkcompat.security.unified.UnifiedClientPort on real loopback sockets: which protocol a
connection gets from its first bytes (DualModeSslHandler's rules), that the protocol then
reads every byte the detection looked at, and how the port counts connections against a
handshake limit (the server's own ClientLimits). (test_port_unification runs the real
thing against ZooKeeper.)"""

from __future__ import annotations

import asyncio

import pytest

from zkcompat.config import load
from zkcompat.security.unified import UnifiedClientPort
from zkcompat.server.limits import ClientLimits

pytestmark = pytest.mark.timeout(30)

SHORT_DETECTION_S = 0.3
LONG_DETECTION_S = 4.0  # for the one test that must see no wait
CLIENT_HELLO_HEAD = bytes([22, 3, 1, 0x00, 0x05])


class Recorder(asyncio.Protocol):
    """Keeps what its connection received, under the name of the side it was made for."""

    def __init__(self, side: str, seen: list):
        self.side = side
        self.seen = seen
        self.data = b""
        seen.append(self)

    def data_received(self, data: bytes) -> None:
        self.data += data


def _limits(limit: int, tmp_path) -> ClientLimits:
    """The server's own handshake counts, under netty.server.outstandingHandshake.limit."""
    return ClientLimits(load(None, {"dataDir": str(tmp_path),
                                    "netty.server.outstandingHandshake.limit": str(limit)}))


async def _port(seen: list, slots: ClientLimits | None = None) -> UnifiedClientPort:
    return await UnifiedClientPort(lambda: Recorder("plain", seen), lambda: Recorder("tls", seen),
                                   slots, SHORT_DETECTION_S).start("127.0.0.1", 0)


async def _until(predicate, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def _send(port: UnifiedClientPort, *chunks: bytes, pause_s: float = 0.0):
    host, number = port.sockets[0].getsockname()[:2]
    reader, writer = await asyncio.open_connection(host, number)
    for chunk in chunks:
        writer.write(chunk)
        await writer.drain()
        await asyncio.sleep(pause_s)
    return writer


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


@pytest.mark.parametrize(("chunks", "side"), [
    ((b"ruok",), "plain"),  # four bytes, not a handshake's first: plaintext at once
    ((b"\x00\x00\x00\x2c" + bytes(44),), "plain"),  # a ConnectRequest frame
    ((CLIENT_HELLO_HEAD + b"hello",), "tls"),
    ((CLIENT_HELLO_HEAD[:2], CLIENT_HELLO_HEAD[2:] + b"hello"), "tls"),  # header split
    ((bytes([23, 3, 3, 0, 1]) + b"x",), "tls"),  # any TLS record type, as isEncrypted
    ((bytes([22, 3, 3, 0, 0]),), "plain"),  # a record of length 0 is not TLS
])
def test_first_bytes_choose_the_protocol_which_reads_them_all(chunks, side):
    async def go():
        seen = []
        async with await _port(seen) as port:
            writer = await _send(port, *chunks, pause_s=0.05)
            whole = b"".join(chunks)
            await _until(lambda: seen and seen[0].data == whole)
            writer.close()
            return [r.side for r in seen]
    assert run(go()) == [side]


def test_plaintext_four_letter_word_is_not_held_for_the_detection_timeout():
    async def go():
        seen = []
        async with await UnifiedClientPort(lambda: Recorder("plain", seen),
                                           lambda: Recorder("tls", seen), None,
                                           LONG_DETECTION_S).start("127.0.0.1", 0) as port:
            started = asyncio.get_running_loop().time()
            writer = await _send(port, b"ruok")
            await _until(lambda: seen and seen[0].data == b"ruok")
            writer.close()
            return asyncio.get_running_loop().time() - started
    assert run(go()) < LONG_DETECTION_S / 2


def test_handshake_byte_alone_waits_then_falls_to_plaintext():
    """0x16 could begin a ClientHello: the port waits for the header's rest, and a client
    that sends no more is plaintext once the detection timeout passes."""
    async def go():
        seen = []
        async with await _port(seen) as port:
            started = asyncio.get_running_loop().time()
            writer = await _send(port, b"\x16")
            await _until(lambda: seen and seen[0].data == b"\x16")
            writer.close()
            return seen[0].side, asyncio.get_running_loop().time() - started
    side, waited = run(go())
    assert side == "plain"
    assert waited >= SHORT_DETECTION_S * 0.9


def test_silent_client_is_plaintext_and_one_gone_is_nobodys():
    async def go():
        seen = []
        async with await _port(seen) as port:
            gone = await _send(port)
            gone.close()
            await asyncio.sleep(0.1)
            silent = await _send(port)
            await _until(lambda: len(seen) == 1)
            await asyncio.sleep(SHORT_DETECTION_S)
            silent.close()
            return [(r.side, r.data) for r in seen]
    assert run(go()) == [("plain", b"")]


def test_connections_being_told_apart_hold_handshake_slots(tmp_path):
    """As NettyServerCnxnFactory with port unification: one accepted while the limit's
    worth are still silent is closed at once; a decided one frees its slot."""
    async def go():
        seen, slots = [], _limits(1, tmp_path)
        async with await _port(seen, slots) as port:
            silent = await _send(port)
            await _until(lambda: slots.outstanding_handshakes == 1)
            host, number = port.sockets[0].getsockname()[:2]
            reader, refused = await asyncio.open_connection(host, number)
            closed = await asyncio.wait_for(reader.read(), 5)
            refused.close()
            silent.write(b"ruok")
            await _until(lambda: seen and seen[0].data == b"ruok")
            after = await _send(port, b"stat")
            await _until(lambda: len(seen) == 2 and seen[1].data == b"stat")
            silent.close()
            after.close()
            return closed, slots.tls_handshakes_exceeded, slots.outstanding_handshakes
    assert run(go()) == (b"", 1, 0)
