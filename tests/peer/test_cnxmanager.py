"""QuorumCnxManager and Elector on loopback: elections among our own servers, the
larger-sid rule, the send queue of one, and bad peers closing only their own connection."""

from __future__ import annotations

import asyncio
import logging
import random
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest

from bench.servers import HOST, free_port
from zkcompat.jute.election import (
    ConnectionHeaderReader,
    ElectionFrameReader,
    Notification,
    ServerState,
    encode_connection_header,
    encode_old_connection_header,
    frame_message,
)
from zkcompat.peer.cnxmanager import QuorumCnxManager
from zkcompat.peer.elector import Elector
from zkcompat.zab.membership import QuorumServer

WAIT_S = 10.0
pytestmark = pytest.mark.timeout(60)


def run(coro: Awaitable) -> object:
    return asyncio.run(asyncio.wait_for(coro, 30))


def _servers(n: int) -> list[QuorumServer]:
    return [QuorumServer(sid, HOST, free_port(), free_port()) for sid in range(1, n + 1)]


async def until(cond: Callable[[], bool], what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while not cond():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


@dataclass
class FakePeer:
    """A raw election endpoint speaking the wire by hand."""

    sid: int
    port: int

    async def connect(self, to_port: int, header: bytes | None = None
                      ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection(HOST, to_port)
        writer.write(encode_connection_header(self.sid, [(HOST, self.port)])
                     if header is None else header)
        await writer.drain()
        return reader, writer


async def read_frames(reader: asyncio.StreamReader, count: int) -> list[bytes]:
    frames = ElectionFrameReader()
    got: list[bytes] = []
    while len(got) < count:
        data = await asyncio.wait_for(reader.read(65536), WAIT_S)
        assert data, f"closed after {len(got)} of {count} frames"
        got += frames.feed(data)
    return got


async def closed_by_peer(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(65536), WAIT_S) == b""
    except ConnectionResetError:
        return True


# -- elections among our own servers -----------------------------------------------------


@pytest.mark.parametrize("size", [3, 5])
def test_our_servers_elect_the_highest_sid_over_tcp(size: int) -> None:
    servers = _servers(size)

    async def main() -> list:
        electors = [Elector(s.sid, servers, rng=random.Random(s.sid)) for s in servers]
        try:
            return await asyncio.gather(*(e.elect(0, 0) for e in electors))
        finally:
            await asyncio.gather(*(e.close() for e in electors))

    votes = run(main())
    assert {v.leader for v in votes} == {size}
    assert [v.state for v in votes] == [ServerState.FOLLOWING] * (size - 1) + [ServerState.LEADING]


def test_a_late_elector_joins_the_leader_of_a_running_pair() -> None:
    servers = _servers(3)

    async def main() -> tuple:
        e1, e2, e3 = (Elector(s.sid, servers) for s in servers)
        try:
            first = await asyncio.gather(e1.elect(0, 0), e2.elect(0, 0))
            late = await e3.elect(0x100000005, 1)  # better history, still follows 2
            return first, late
        finally:
            await asyncio.gather(e1.close(), e2.close(), e3.close())

    first, late = run(main())
    assert [v.leader for v in first] == [2, 2]
    assert (late.leader, late.state) == (2, ServerState.FOLLOWING)


# -- the connection rules ----------------------------------------------------------------


def test_a_larger_sid_keeps_its_connection_and_its_frames_arrive() -> None:
    got: list[tuple[int, bytes]] = []

    async def main() -> None:
        me, fake = free_port(), FakePeer(5, free_port())
        cnx = QuorumCnxManager(2, {2: (HOST, me), 5: (HOST, fake.port)},
                               lambda sid, p: got.append((sid, p)))
        await cnx.start()
        try:
            _, writer = await fake.connect(me)
            writer.write(frame_message(b"one") + frame_message(b"two"))
            await writer.drain()
            await until(lambda: len(got) == 2, "two messages")
            assert cnx.connected(5)
            writer.close()
        finally:
            await cnx.close()

    run(main())
    assert got == [(5, b"one"), (5, b"two")]


def test_a_smaller_sid_is_dropped_and_we_connect_back_with_our_header() -> None:
    async def main() -> None:
        me, fake = free_port(), FakePeer(1, free_port())
        headers: list = []
        accepted = asyncio.Event()

        async def on_accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            parser = ConnectionHeaderReader()
            while (h := parser.feed(await reader.read(4096))) is None:
                pass
            headers.append(h)
            accepted.set()

        server = await asyncio.start_server(on_accept, HOST, fake.port)
        cnx = QuorumCnxManager(4, {4: (HOST, me), 1: (HOST, fake.port)}, lambda *_: None)
        await cnx.start()
        try:
            reader, _ = await fake.connect(me)
            assert await closed_by_peer(reader)
            await asyncio.wait_for(accepted.wait(), WAIT_S)
            assert headers[0].sid == 4 and headers[0].election_addresses == ((HOST, me),)
            await until(lambda: cnx.connected(1), "our connection to 1")
        finally:
            await cnx.close()
            server.close()

    run(main())


def test_to_a_larger_sid_we_send_our_header_close_and_wait_for_it() -> None:
    async def main() -> None:
        me, fake = free_port(), FakePeer(9, free_port())
        headers: list = []

        async def on_accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            parser = ConnectionHeaderReader()
            while (h := parser.feed(await reader.read(4096))) is None:
                pass
            headers.append((h, await closed_by_peer(reader)))

        server = await asyncio.start_server(on_accept, HOST, fake.port)
        cnx = QuorumCnxManager(3, {3: (HOST, me), 9: (HOST, fake.port)}, lambda *_: None)
        await cnx.start()
        try:
            cnx.to_send(9, b"vote-1")
            cnx.to_send(9, b"vote-2")  # replaces vote-1: the queue holds one
            await until(lambda: bool(headers), "our header")
            assert headers[0][0].sid == 3 and headers[0][1]  # then we closed it
            assert not cnx.connected(9) and not cnx.have_delivered()
            reader, writer = await fake.connect(me)
            assert await read_frames(reader, 1) == [b"vote-2"]
            await until(cnx.have_delivered, "an empty queue")
            writer.close()
            await until(lambda: not cnx.connected(9), "the disconnect")
            # a new connection with nothing queued gets the last message again
            reader, writer = await fake.connect(me)
            assert await read_frames(reader, 1) == [b"vote-2"]
            writer.close()
        finally:
            await cnx.close()
            server.close()

    run(main())


def test_the_old_header_form_is_accepted() -> None:
    got: list[tuple[int, bytes]] = []

    async def main() -> None:
        me = free_port()
        cnx = QuorumCnxManager(1, {1: (HOST, me)}, lambda sid, p: got.append((sid, p)))
        await cnx.start()
        try:
            _, writer = await FakePeer(7, 0).connect(
                me, encode_old_connection_header(7) + frame_message(b"hi"))
            await until(lambda: bool(got), "the message")
            writer.close()
        finally:
            await cnx.close()

    run(main())
    assert got == [(7, b"hi")]


# -- bad peers ---------------------------------------------------------------------------


@pytest.mark.parametrize("header", [
    struct.pack(">qqi", -2, 5, 3) + b"h:1",                  # unknown protocol version
    struct.pack(">qqi", -65536, 5, 4096) + b"x",             # address too long
    struct.pack(">qqi", -65536, 5, 4) + b"host",             # no port
])
def test_a_malformed_header_closes_only_that_connection(header: bytes,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    got: list[tuple[int, bytes]] = []

    async def main() -> None:
        me = free_port()
        cnx = QuorumCnxManager(1, {1: (HOST, me)}, lambda sid, p: got.append((sid, p)))
        await cnx.start()
        try:
            reader, _ = await FakePeer(5, 0).connect(me, header)
            assert await closed_by_peer(reader)
            _, writer = await FakePeer(6, 0).connect(me, encode_old_connection_header(6)
                                                     + frame_message(b"still here"))
            await until(lambda: bool(got), "the good peer's message")
            writer.close()
        finally:
            await cnx.close()

    with caplog.at_level(logging.INFO, logger="zkcompat.peer.cnxmanager"):
        run(main())
    assert got == [(6, b"still here")]
    assert "event=election_header_rejected" in caplog.text


def test_a_silent_connection_is_closed_at_the_header_timeout() -> None:
    async def main() -> None:
        me = free_port()
        cnx = QuorumCnxManager(1, {1: (HOST, me)}, lambda *_: None, header_timeout_ms=200)
        await cnx.start()
        try:
            reader, _ = await asyncio.open_connection(HOST, me)
            assert await closed_by_peer(reader)
        finally:
            await cnx.close()

    run(main())


@pytest.mark.parametrize("bad", [struct.pack(">i", 0), struct.pack(">i", -5),
                                 struct.pack(">i", 512 * 1024 + 1)])
def test_a_bad_frame_length_closes_the_connection_after_the_good_frames(
        bad: bytes, caplog: pytest.LogCaptureFixture) -> None:
    got: list[tuple[int, bytes]] = []

    async def main() -> None:
        me = free_port()
        cnx = QuorumCnxManager(1, {1: (HOST, me)}, lambda sid, p: got.append((sid, p)))
        await cnx.start()
        try:
            reader, _ = await FakePeer(3, free_port()).connect(
                me, encode_old_connection_header(3) + frame_message(b"good") + bad + b"rest")
            assert await closed_by_peer(reader)
        finally:
            await cnx.close()

    with caplog.at_level(logging.INFO, logger="zkcompat.peer.cnxmanager"):
        run(main())
    assert got == [(3, b"good")]
    assert "event=election_frame_rejected" in caplog.text


def test_an_undecodable_notification_is_skipped_and_the_connection_kept(
        caplog: pytest.LogCaptureFixture) -> None:
    servers = _servers(3)
    good = Notification(ServerState.LOOKING, 3, 0, 1, 0)

    async def main() -> Elector:
        elector = Elector(1, servers)
        task = asyncio.create_task(elector.elect(0, 0))
        await until(lambda: elector.cnx.listening, "the listener")
        _, writer = await FakePeer(3, servers[2].election_port).connect(
            servers[0].election_port)
        writer.write(frame_message(b"\x00" * 20) + frame_message(good.encode()))
        await writer.drain()
        await until(lambda: len(elector.received) == 1, "the good notification")
        assert elector.cnx.connected(3)
        writer.close()
        task.cancel()
        await elector.close()
        return elector

    with caplog.at_level(logging.INFO):
        elector = run(main())
    assert list(elector.received) == [(3, good)]
    assert "event=election_notification_skipped sid=3 bytes=20" in caplog.text
