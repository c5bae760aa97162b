"""Server-to-server connections as ZooKeeper opens and accepts them, before anything of ZAB
is said: plaintext, TLS (sslQuorum), or either on one port (portUnification, told apart by
the first 5 bytes as UnifiedServerSocket does), with the peer's certificate checked
against its address. The election (cnxmanager.py) and quorum (transport.py) layers get a
Link: a connected transport whose bytes, every one of them, are theirs.

A connection that fails here (plaintext where only TLS is taken, a failed handshake, a
certificate that does not name its peer, a timeout) is closed with one logged reason,
event=quorum_link_refused, and nothing else happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import ssl
from collections.abc import Callable

from zkcompat.security.quorum_tls import QuorumTls, names_peer
from zkcompat.security.tls import failure_reason
from zkcompat.security.unified import (
    TLS_RECORD_HEADER_BYTES,
    accept_forever,
    listening_socket,
    looks_like_tls,
    peek,
)
from zkcompat.security.unified import remote_of as _remote

log = logging.getLogger(__name__)

# A test hook for real processes (docs/faults.md): set to 1, this server's outgoing links
# leave from its own server.N address, as from a host of its own. On loopback they would
# all leave from 127.0.0.1, and a firewall could not tell the servers apart. Only tests set it.
TEST_BIND_PEER_SOURCE_ENV = "ZKCOMPAT_TEST_BIND_PEER_SOURCE"
_peer_source_host: str | None = None


def bind_peer_source(own_host: str, environ=os.environ) -> None:
    """Switch the hook on for this process, if the environment asks; logs that it did."""
    global _peer_source_host
    if environ.get(TEST_BIND_PEER_SOURCE_ENV) != "1":
        return
    _peer_source_host = own_host
    log.warning("event=test_hook_enabled hook=bind_peer_source host=%s", own_host)


class _Gate(asyncio.Protocol):
    """A transport's protocol until its Link is attached: it keeps what arrives.
    `on_made(transport, gate)`, if given, is called once connected."""

    def __init__(self, on_made: Callable[[asyncio.Transport, _Gate], None] | None = None):
        self.transport: asyncio.Transport | None = None
        self.early: list[bytes] = []
        self.eof = False
        self.lost = False
        self.lost_exc: BaseException | None = None
        self._on_made = on_made
        self.arrived: asyncio.Event | None = None  # made by Link.receive, set on news

    def connection_made(self, transport) -> None:
        self.transport = transport
        if self._on_made is not None:
            self._on_made(transport, self)

    def data_received(self, data: bytes) -> None:
        self.early.append(data)
        if self.arrived is not None:
            self.arrived.set()

    def eof_received(self) -> bool:
        self.eof = True
        if self.arrived is not None:
            self.arrived.set()
        return True  # keep the transport: the protocol attached later sees the EOF

    def connection_lost(self, exc) -> None:
        self.lost = True
        self.lost_exc = exc
        if self.arrived is not None:
            self.arrived.set()


class Link:
    """One connection, ready: `attach` hands it to the layer above, early bytes first."""

    def __init__(self, transport: asyncio.Transport, gate: _Gate, remote: str, secure: bool):
        self.transport = transport
        self._gate = gate
        self.remote = remote
        self.secure = secure

    def attach(self, protocol: asyncio.Protocol) -> None:
        gate = self._gate
        self.transport.set_protocol(protocol)
        protocol.connection_made(self.transport)
        for data in gate.early:
            protocol.data_received(data)
        gate.early.clear()
        if gate.eof and not gate.lost:
            if not protocol.eof_received():
                self.transport.close()
        if gate.lost:
            protocol.connection_lost(gate.lost_exc)

    def streams(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """The connection as asyncio streams (the election layer reads and writes those)."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=2**20)
        protocol = asyncio.StreamReaderProtocol(reader)
        self.attach(protocol)
        return reader, asyncio.StreamWriter(self.transport, protocol, reader, loop)

    def close(self) -> None:
        self.transport.close()

    async def authenticate(self, exchange, first: bytes = b"") -> None:
        """Run a quorum SASL exchange on this link before it is attached (run_exchange);
        the bytes past it stay for the layer attached next."""
        gate = self._gate
        gate.arrived = asyncio.Event()
        pending = b"".join(gate.early)
        gate.early.clear()

        async def receive() -> bytes:
            while not gate.early:
                if gate.eof or gate.lost:
                    return b""
                gate.arrived.clear()
                await gate.arrived.wait()
            data = b"".join(gate.early)
            gate.early.clear()
            return data

        try:
            leftover = await run_exchange(exchange, receive, self.transport.write, first,
                                          pending)
        finally:
            gate.arrived = None
        if leftover:
            gate.early.insert(0, leftover)


async def run_exchange(exchange, receive: Callable, send: Callable[[bytes], None],
                       first: bytes = b"", pending: bytes = b"") -> bytes:
    """Drive a quorum SASL exchange (zkcompat.security.quorum_sasl): send `first`, feed it
    `pending` and then what `receive()` returns, and send what it answers, until it is done;
    returns the bytes received past it (the next layer's). Raises the exchange's
    QuorumAuthError after sending its to_send, or ConnectionError if the peer goes away
    first. The caller bounds it in time, as ZooKeeper's socket timeout does."""
    if first:
        send(first)
    try:
        while not exchange.done:
            if not pending:
                pending = await receive()
                if not pending:
                    raise ConnectionError("the peer closed the connection during quorum SASL")
                continue
            out = exchange.feed(pending)
            pending = b""
            if out:
                send(out)
    except Exception as e:
        to_send = getattr(e, "to_send", b"")
        if to_send:
            send(to_send)
        raise
    return exchange.leftover + pending


class Listener:
    """Accepts on (host, port) and calls on_link(link) for each connection that gets
    through; `what` names the port in the log ("election" or "quorum").

    Without TLS it is the loop's own server (so the simulator's loop carries it); with
    TLS or port unification it accepts on its own socket, to look at a connection's first
    bytes before the loop reads any."""

    def __init__(self, security: QuorumTls | None, on_link: Callable[[Link], None], what: str):
        self.security = security
        self.on_link = on_link
        self.what = what
        self._server: asyncio.AbstractServer | None = None
        self._sock: socket.socket | None = None
        self._accepting: asyncio.Task | None = None
        self._admitting: set[asyncio.Task] = set()

    async def start(self, host: str, port: int) -> None:
        loop = asyncio.get_running_loop()
        if self.security is None:
            self._server = await loop.create_server(lambda: _Gate(self._accepted), host, port,
                                                    reuse_address=True)
            return
        sock = listening_socket(host, port)
        self._sock = sock
        self._accepting = asyncio.create_task(
            accept_forever(sock, self._admit, self._admitting, self.what),
            name=f"{self.what}-accept")

    def _accepted(self, transport: asyncio.Transport, gate: _Gate) -> None:
        self.on_link(Link(transport, gate, _remote(transport.get_extra_info("peername")),
                          False))

    @property
    def serving(self) -> bool:
        if self._server is not None:
            return self._server.is_serving()
        return self._accepting is not None and not self._accepting.done()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        tasks = list(self._admitting)
        if self._accepting is not None:
            tasks.append(self._accepting)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    async def _admit(self, sock: socket.socket, remote: str) -> None:
        security = self.security
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            secure = False
            if security is not None:
                first = await peek(sock, TLS_RECORD_HEADER_BYTES, security.detection_timeout_s)
                secure = looks_like_tls(first)
                if not secure and not security.accepts_plaintext:
                    _refused(self.what, remote, "plaintext connection on a TLS-only port "
                             "(sslQuorum=true, portUnification=false)")
                    sock.close()
                    return
            link = await _link(sock, remote, security if secure else None, self.what)
        except asyncio.CancelledError:
            sock.close()
            raise
        if link is not None:
            self.on_link(link)


async def _link(sock: socket.socket, remote: str, security: QuorumTls | None,
                what: str) -> Link | None:
    """The accepted socket as a Link: after its TLS handshake and the check of the client's
    certificate, when `security` is given."""
    loop = asyncio.get_running_loop()
    gate = _Gate()
    try:
        if security is None:
            transport, _ = await loop.connect_accepted_socket(lambda: gate, sock)
            return Link(transport, gate, remote, False)
        transport, _ = await asyncio.wait_for(
            loop.connect_accepted_socket(lambda: gate, sock, ssl=security.server_context,
                                         ssl_handshake_timeout=security.detection_timeout_s),
            security.detection_timeout_s * 2)
    except (OSError, ssl.SSLError, TimeoutError, EOFError) as e:
        _refused(what, remote, f"TLS handshake failed: {failure_reason(e)}")
        sock.close()
        return None
    reason = await _check_peer(transport, remote.rsplit(":", 1)[0], None, security)
    if reason is not None:
        _refused(what, remote, reason)
        transport.abort()
        return None
    _secured(transport, what, remote, "in")
    return Link(transport, gate, remote, True)


async def open_link(security: QuorumTls | None, host: str, port: int, timeout_s: float,
                    what: str) -> Link:
    """Connect to a peer: in TLS when sslQuorum is on, its certificate checked against the
    address (or the name) connected to. Raises OSError (ConnectionError for a refused
    certificate) or TimeoutError."""
    loop = asyncio.get_running_loop()
    gate = _Gate()
    tls_on = security is not None and security.ssl_quorum
    context = security.client_context if tls_on else None
    try:
        transport, _ = await asyncio.wait_for(
            loop.create_connection(lambda: gate, host, port, ssl=context,
                                   ssl_handshake_timeout=(security.detection_timeout_s
                                                          if tls_on else None),
                                   local_addr=(_peer_source_host, 0) if _peer_source_host else None),
            timeout_s)
    except ssl.SSLError as e:
        raise ConnectionError(f"TLS handshake with {host}:{port} failed: {failure_reason(e)}") from None
    remote = _remote(transport.get_extra_info("peername"))
    if tls_on:
        peer_ip = remote.rsplit(":", 1)[0]
        name = None if _is_address(host) else host
        reason = await _check_peer(transport, peer_ip, name, security)
        if reason is not None:
            transport.abort()
            _refused(what, f"{host}:{port}", reason)
            raise ConnectionError(f"{what} peer {host}:{port} refused: {reason}")
        _secured(transport, what, remote, "out")
    return Link(transport, gate, remote, tls_on)


async def _check_peer(transport, peer_ip: str, name: str | None,
                      security: QuorumTls) -> str | None:
    """ZKTrustManager's host check on the peer's certificate (both ways on the quorum:
    QuorumX509Util.shouldVerifyClientHostname), unless <prefix>hostnameVerification=false;
    an accepted peer with no certificate (clientAuth=none or want) is not checked."""
    settings = security.settings
    if not settings.hostname_verification:
        return None
    sslobj = transport.get_extra_info("ssl_object")
    cert = sslobj.getpeercert(binary_form=True) if sslobj is not None else None
    if not cert:
        return None
    if name is None and settings.allow_reverse_dns_lookup:
        with contextlib.suppress(OSError):
            name, _ = await asyncio.get_running_loop().getnameinfo((peer_ip, 0))
    return names_peer(cert, peer_ip, name)


def _is_address(host: str) -> bool:
    try:
        socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
    except OSError:
        return False
    return True


def _secured(transport, what: str, remote: str, direction: str) -> None:
    sslobj = transport.get_extra_info("ssl_object")
    cipher = transport.get_extra_info("cipher")
    log.info("event=quorum_link_tls port=%s remote=%s direction=%s protocol=%s cipher=%s",
             what, remote, direction, sslobj.version() if sslobj else "?",
             cipher[0] if cipher else "?")


def _refused(what: str, remote: str, reason: str) -> None:
    log.warning("event=quorum_link_refused port=%s remote=%s reason=%r", what, remote, reason)
