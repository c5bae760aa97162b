"""A closed connection is freed by reference counting alone. The server's GC thresholds
(node.GC_THRESHOLDS) make full collections rare, so anything a closed connection left
in a reference cycle would linger for hours."""

import asyncio
import gc
import socket
import weakref

import uvloop

from bench import wire
from zkcompat.config import Config
from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.peer.node import _Listener, build_standalone


def test_a_closed_connection_is_freed_without_the_cyclic_gc(tmp_path):
    async def go():
        ctx = build_standalone(Config(data_dir=tmp_path, force_sync=False))
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _Listener(ctx), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        refs = []
        for close_session in (False, True):
            sock = socket.create_connection(("127.0.0.1", port))
            sock.setblocking(False)
            await loop.sock_sendall(sock, wire.connect_request())
            await loop.sock_recv(sock, 4096)  # ConnectResponse: the session is open
            await loop.sock_sendall(sock, wire.request(1, OpCode.GET_DATA,
                                                       r.GetDataRequest("/", True)))
            await loop.sock_recv(sock, 4096)
            (cnxn,) = ctx.connections
            refs.append(weakref.ref(cnxn))
            del cnxn
            if close_session:
                await loop.sock_sendall(sock, wire.request(2, OpCode.CLOSE_SESSION, None))
                await loop.sock_recv(sock, 4096)
            sock.close()
            for _ in range(200):
                if not ctx.connections:
                    break
                await asyncio.sleep(0.005)
            await asyncio.sleep(0.05)  # callbacks already scheduled run out
        alive = [ref() is not None for ref in refs]  # while the loop and server still run
        server.close()
        await server.wait_closed()
        return alive

    gc.disable()
    try:
        alive = uvloop.run(go())
    finally:
        gc.enable()
    assert alive == [False, False]
