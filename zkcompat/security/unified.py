"""One port for TLS and plaintext alike: a connection's first bytes say which it is, read
with MSG_PEEK before the event loop reads any, so a TLS handshake still sees them all.

The election and quorum ports do this with portUnification (UnifiedServerSocket; see
peer/links.py), the client port with client.portUnification (NettyServerCnxnFactory's
DualModeSslHandler): `UnifiedClientPort` below.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable

from zkcompat.security.tls import HandshakeCount

log = logging.getLogger(__name__)

# A TLS record's header: content type (change_cipher_spec, alert, handshake, application
# data, heartbeat), major version 3, and a length (Netty's SslHandler.isEncrypted).
_TLS_CONTENT_TYPES = frozenset((20, 21, 22, 23, 24))
TLS_RECORD_HEADER_BYTES = 5
_TLS_HANDSHAKE_RECORD_TYPE = 22  # what a ClientHello's record starts with
# X509Util's handshakeDetectionTimeoutMillis default. On the client port ZooKeeper waits
# for the first bytes without limit; a client silent this long is taken for plaintext, so
# maxClientCnxns and the session's own timeouts apply to it.
CLIENT_DETECTION_TIMEOUT_S = 5.0
_PEEK_RETRY_S = 0.01  # a TLS record header split over packets: look again after this
_ACCEPT_RETRY_S = 0.1


def looks_like_tls(first: bytes) -> bool:
    """UnifiedServerSocket.detectMode's test on an accepted connection's first 5 bytes."""
    if len(first) < TLS_RECORD_HEADER_BYTES:
        return False
    length = int.from_bytes(first[3:5], "big")
    return first[0] in _TLS_CONTENT_TYPES and first[1] == 3 and length > 0


async def peek(sock: socket.socket, n: int, timeout_s: float,
               enough: Callable[[bytes], bool] | None = None) -> bytes:
    """Up to n bytes of what the peer sent, left unread; fewer at EOF, after timeout_s, or
    as soon as enough(seen) says fewer will do."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    seen = b""
    while True:
        try:
            seen = sock.recv(n, socket.MSG_PEEK)
            if len(seen) >= n or not seen or enough is not None and enough(seen):
                return seen
        except BlockingIOError:
            pass
        remaining = deadline - loop.time()
        if remaining <= 0:
            return seen
        if seen:  # part of a header: its rest is on its way
            await asyncio.sleep(min(_PEEK_RETRY_S, remaining))
            continue
        readable = loop.create_future()
        loop.add_reader(sock.fileno(), _set_once, readable)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(readable, remaining)
        finally:
            loop.remove_reader(sock.fileno())


def _set_once(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)


def _not_a_handshake(seen: bytes) -> bool:
    """DualModeSslHandler with fewer than 5 bytes: a first byte that cannot begin a TLS
    handshake is plaintext at once (a four-letter word is only 4 bytes)."""
    return seen[0] != _TLS_HANDSHAKE_RECORD_TYPE


def listening_socket(host: str, port: int) -> socket.socket:
    """A bound, listening, non-blocking socket, as the loop's create_server makes one."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(100)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


async def accept_forever(listening: socket.socket, admit: Callable[[socket.socket, str],
                         Awaitable[None]], tasks: set[asyncio.Task], what: str) -> None:
    """Accept until cancelled; each connection is admit(sock, "ip:port")'s, in a task kept
    in `tasks` while it runs."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            sock, address = await loop.sock_accept(listening)
        except OSError as e:  # EMFILE and the like: the next accept may work
            log.warning("event=accept_failed port=%s error=%r", what, str(e))
            await asyncio.sleep(_ACCEPT_RETRY_S)
            continue
        task = asyncio.create_task(admit(sock, remote_of(address)))
        tasks.add(task)
        task.add_done_callback(tasks.discard)


def remote_of(address) -> str:
    """A peer's "ip:port" for the log."""
    return f"{address[0]}:{address[1]}" if address else "?"


class UnifiedClientPort:
    """clientPort with client.portUnification=true: a connection whose first bytes are a
    TLS record gets `secure()`'s protocol (which does the handshake, as on the secure
    port), any other `plain()`'s. What asyncio.Server is to node.py: sockets, close, and
    `async with`.

    As NettyServerCnxnFactory throttles handshakes on such a port, every connection counts
    in `handshakes` from its accept until its first bytes are read (and, for TLS, on
    through its handshake): one accepted past netty.server.outstandingHandshake.limit is
    closed at once, plaintext or not."""

    def __init__(self, plain: Callable[[], asyncio.Protocol],
                 secure: Callable[[], asyncio.Protocol],
                 handshakes: HandshakeCount | None = None,
                 detection_timeout_s: float = CLIENT_DETECTION_TIMEOUT_S):
        self._plain = plain
        self._secure = secure
        self._handshakes = handshakes
        self._timeout_s = detection_timeout_s
        self._sock: socket.socket | None = None
        self._accepting: asyncio.Task | None = None
        self._admitting: set[asyncio.Task] = set()
        self.sockets: list[socket.socket] = []

    async def start(self, host: str, port: int) -> UnifiedClientPort:
        self._sock = listening_socket(host, port)
        self.sockets = [self._sock]
        self._accepting = asyncio.create_task(
            accept_forever(self._sock, self._admit, self._admitting, "client"),
            name="client-accept")
        return self

    async def _admit(self, sock: socket.socket, remote: str) -> None:
        loop = asyncio.get_running_loop()
        handshakes = self._handshakes
        if handshakes is not None and not handshakes.handshake_started():
            log.info("event=tls_handshake_refused remote=%s reason=%r", remote,
                     "outstanding handshake limit")
            sock.close()
            return
        counted = handshakes is not None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            first = await peek(sock, TLS_RECORD_HEADER_BYTES, self._timeout_s, _not_a_handshake)
            # The secure protocol counts its handshake in again as it starts it.
            counted = False
            if handshakes is not None:
                handshakes.handshake_finished()
            if not first and _at_eof(sock):
                sock.close()  # gone before it said anything
                return
            factory = self._secure if looks_like_tls(first) else self._plain
            await loop.connect_accepted_socket(factory, sock)
        except asyncio.CancelledError:
            sock.close()
            raise
        except OSError as e:
            log.info("event=connection_close remote=%s reason=%r", remote,
                     f"before its first bytes: {e}")
            sock.close()
        finally:
            if counted:
                handshakes.handshake_finished()

    def close(self) -> None:
        """Stop accepting, and drop the connections not yet told apart; the listening
        socket closes in wait_closed, once the accept task no longer waits on it."""
        if self._accepting is not None:
            self._accepting.cancel()
        for task in list(self._admitting):
            task.cancel()

    async def wait_closed(self) -> None:
        tasks = list(self._admitting)
        if self._accepting is not None:
            tasks.append(self._accepting)
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    async def __aenter__(self) -> UnifiedClientPort:
        return self

    async def __aexit__(self, *exc) -> None:
        self.close()
        await self.wait_closed()


def _at_eof(sock: socket.socket) -> bool:
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
