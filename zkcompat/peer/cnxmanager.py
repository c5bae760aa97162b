"""QuorumCnxManager's job in asyncio: one election connection per pair of servers, on
ZooKeeper 3.8's wire, carrying framed messages; only the connection the larger sid opened
survives. Message bytes go up to a callback; what they mean is peer/elector.py's business.

Every event is logged as one key=value line: event=election_connected sid=2 ...
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
from collections import deque
from collections.abc import Callable, Mapping

from zkcompat.jute.election import (
    OBSERVER_ID,
    ConnectionHeader,
    ConnectionHeaderReader,
    ElectionFrameReader,
    encode_connection_header,
    frame_message,
)
from zkcompat.jute.errors import JuteError
from zkcompat.peer.links import Link, Listener, open_link, run_exchange
from zkcompat.security.quorum_auth_packet import QuorumAuthError
from zkcompat.security.quorum_sasl import QuorumAuthLearnerExchange, QuorumAuthServerExchange
from zkcompat.security.quorum_sasl_settings import QuorumSaslSettings
from zkcompat.security.quorum_tls import QuorumTls

log = logging.getLogger(__name__)

# QuorumCnxManager.SEND_CAPACITY: "initialized to 1 to prevent sending stale notifications".
SEND_CAPACITY = 1
# QuorumCnxManager.cnxTO: how long a connect may take.
CONNECT_TIMEOUT_MS = 5000
# ZooKeeper bounds the header read by its socket timeout (tickTime * initLimit).
HEADER_TIMEOUT_MS = 5000
RECONNECT_MIN_MS = 100
RECONNECT_MAX_MS = 5000
# Ours, not ZooKeeper's: a connection whose sent bytes stay unacknowledged this long is
# dropped by the kernel (TCP_USER_TIMEOUT) and opened again. Without it, a link that lost
# its packets for a while (a partition) keeps the connection, and TCP's retransmission
# backoff, doubling from 200 ms, first tries again up to a partition's length after it
# heals: a 5-server ensemble cut into a bridge for 30 s elected nobody for 25 s after
# the heal (docs/faults.md). A paused peer's kernel still acknowledges, so a pause does
# not drop the connection.
UNACKED_TIMEOUT_MS = 5000
READ_CHUNK_BYTES = 64 * 1024

Address = tuple[str, int]
OnMessage = Callable[[int, bytes], None]


class _Connection:
    """One live election connection: a sender and a receiver task."""

    def __init__(self, sid: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 direction: str) -> None:
        self.sid = sid
        self.reader = reader
        self.writer = writer
        self.direction = direction
        self.tasks: list[asyncio.Task] = []
        self.closed = False

    @property
    def remote(self) -> str:
        peer = self.writer.get_extra_info("peername")
        return f"{peer[0]}:{peer[1]}" if peer else "?"


class _Peer:
    """What we keep per sid: its send queue, the message last written, its connection."""

    def __init__(self, sid: int) -> None:
        self.sid = sid
        self.queue: deque[bytes] = deque(maxlen=SEND_CAPACITY)
        self.last_sent: bytes | None = None
        self.conn: _Connection | None = None
        self.wake = asyncio.Event()
        self.connected = asyncio.Event()
        self.connector: asyncio.Task | None = None


class QuorumCnxManager:
    """Election connections of server my_sid; `addresses` maps sid -> election address
    (ours included: we listen there). on_message(sid, payload) gets each message.

    Rules, as QuorumCnxManager (3.8.0):
    - every connection starts with the opener's header (zkcompat.jute.election), written in
      one write: ZooKeeper reads the address with a single read();
    - we connect to a larger sid: send the header, close, and wait for it to connect back;
      a smaller sid connects to us: read its header, close, drop any connection we had to
      it, and connect back (to the address in its header, else the configured one); a
      larger sid connects to us: keep it, replacing any older connection to it;
    - one send queue per peer of SEND_CAPACITY (1): a new message replaces the one waiting,
      so a peer only ever gets our newest vote; the message last written is written again
      when a new connection to that peer starts with nothing queued (SendWorker.run);
    - have_delivered() is haveDelivered(): true when SOME peer's queue is empty;
    - a malformed header or frame, or a header not complete within header_timeout_ms,
      closes that one connection with a logged reason;
    - (ours) a connection whose bytes stay unacknowledged for unacked_timeout_ms is dropped
      by the kernel, and opened again while a message waits.
    With `security` (sslQuorum, portUnification) connections are opened and accepted as
    peer/links.py says, before the header. With `sasl` (quorum.auth.enableSasl) the opener
    authenticates after its header and the acceptor checks it there, before either looks
    at the sids (QuorumCnxManager.startConnection, handleConnection), within
    header_timeout_ms.
    Reconnects (ours, not ZooKeeper's, which retries only when FastLeaderElection sends):
    while a message waits for a peer, we retry with backoff from reconnect_min_ms doubling
    to reconnect_max_ms, jittered by the injected RNG.
    """

    def __init__(self, my_sid: int, addresses: Mapping[int, Address], on_message: OnMessage, *,
                 connect_timeout_ms: int = CONNECT_TIMEOUT_MS,
                 header_timeout_ms: int = HEADER_TIMEOUT_MS,
                 reconnect_min_ms: int = RECONNECT_MIN_MS,
                 reconnect_max_ms: int = RECONNECT_MAX_MS,
                 unacked_timeout_ms: int = UNACKED_TIMEOUT_MS,
                 rng: random.Random | None = None,
                 security: QuorumTls | None = None,
                 sasl: QuorumSaslSettings | None = None) -> None:
        if my_sid not in addresses:
            raise ValueError(f"no election address for our own sid {my_sid}")
        self.my_sid = my_sid
        self.addresses = dict(addresses)
        self.on_message = on_message
        self.connect_timeout_ms = connect_timeout_ms
        self.header_timeout_ms = header_timeout_ms
        self.reconnect_min_ms = reconnect_min_ms
        self.reconnect_max_ms = reconnect_max_ms
        self.unacked_timeout_ms = unacked_timeout_ms
        self.rng = rng if rng is not None else random.Random()
        self.security = security
        self.sasl = sasl
        self._peers: dict[int, _Peer] = {}
        self._server: Listener | None = None
        self._handshakes: set[asyncio.Task] = set()
        self._closed = False
        host, port = self.addresses[my_sid]
        self._header = encode_connection_header(my_sid, [(host, port)])

    # -- the API ---------------------------------------------------------------------

    async def start(self) -> None:
        """Listen on our election address."""
        host, port = self.addresses[self.my_sid]
        server = Listener(self.security, self._on_accept, "election")
        await server.start(host, port)
        self._server = server
        self._log(logging.INFO, "election_listening", addr=f"{host}:{port}")

    def to_send(self, sid: int, payload: bytes) -> None:
        """Queue a message for sid (replacing one still waiting) and connect if needed."""
        assert sid != self.my_sid, "messages to ourselves loop back in the state machine"
        frame = frame_message(payload)
        peer = self._peer(sid)
        peer.queue.append(frame)
        peer.wake.set()
        self.connect_one(sid)

    def connect_one(self, sid: int, address: Address | None = None) -> None:
        """Connect to sid unless connected or already trying."""
        if self._closed:
            return
        peer = self._peer(sid)
        if peer.conn is not None or (peer.connector is not None and not peer.connector.done()):
            return
        address = address or self.addresses.get(sid)
        if address is None:
            self._log(logging.WARNING, "election_unknown_sid", sid=sid, action="ignore")
            return
        peer.connector = asyncio.create_task(self._connector(peer, address),
                                             name=f"election-connect-{sid}")

    def connect_all(self) -> None:
        """connectAll: every peer we have a queue for."""
        for sid in sorted(self._peers):
            self.connect_one(sid)

    @property
    def listening(self) -> bool:
        return self._server is not None and self._server.serving

    def have_delivered(self) -> bool:
        return any(not p.queue for p in self._peers.values())

    def connected(self, sid: int) -> bool:
        peer = self._peers.get(sid)
        return peer is not None and peer.conn is not None

    async def close(self) -> None:
        self._closed = True
        tasks: list[asyncio.Task] = list(self._handshakes)
        for peer in self._peers.values():
            if peer.connector is not None:
                tasks.append(peer.connector)
            if peer.conn is not None:
                tasks += peer.conn.tasks
                self._finish(peer.conn, "closing")
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.close(), 1.0)
        self._log(logging.INFO, "election_closed")

    def _log(self, level: int, event: str, **fields: object) -> None:
        if log.isEnabledFor(level):
            kv = "".join(f" {k}={v}" for k, v in fields.items())
            log.log(level, "event=%s my_sid=%d%s", event, self.my_sid, kv)

    # -- connecting ------------------------------------------------------------------

    def _peer(self, sid: int) -> _Peer:
        peer = self._peers.get(sid)
        if peer is None:
            peer = self._peers[sid] = _Peer(sid)
        return peer

    async def _connector(self, peer: _Peer, address: Address) -> None:
        """Try to connect until connected, or nothing waits to be sent to this peer."""
        backoff_ms = self.reconnect_min_ms
        while not self._closed and peer.conn is None:
            await self._attempt(peer, address)
            if peer.conn is not None or not peer.queue:
                return
            wait_ms = backoff_ms * (0.5 + self.rng.random())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(peer.connected.wait(), wait_ms / 1000)
            backoff_ms = min(backoff_ms * 2, self.reconnect_max_ms)

    async def _attempt(self, peer: _Peer, address: Address) -> None:
        host, port = address
        link = None
        try:
            link = await open_link(self.security, host, port, self.connect_timeout_ms / 1000,
                                   "election")
            link.transport.write(self._header)
            if self.sasl is not None:
                # _HOST in a Kerberos service principal is the peer's host as its
                # server.N line writes it.
                exchange = QuorumAuthLearnerExchange(
                    self.sasl, peer_host=self.addresses.get(peer.sid, address)[0])
                if not exchange.done:
                    # A Kerberos learner's first token may wait on the KDC: off the loop.
                    first = await asyncio.to_thread(exchange.start)
                    await asyncio.wait_for(link.authenticate(exchange, first),
                                           self.header_timeout_ms / 1000)
                    self._log(logging.INFO, "quorum_sasl_authenticated", sid=peer.sid,
                              port="election", role="learner")
            reader, writer = link.streams()
            await writer.drain()
        except (OSError, TimeoutError, QuorumAuthError) as e:
            event = ("quorum_sasl_failed" if isinstance(e, QuorumAuthError)
                     else "election_connect_failed")
            self._log(logging.INFO if event == "election_connect_failed" else logging.WARNING,
                      event, sid=peer.sid, addr=f"{host}:{port}", error=repr(e))
            if link is not None:
                link.close()
            return
        if peer.sid > self.my_sid:
            self._log(logging.INFO, "election_challenge_lost", sid=peer.sid, action="wait_for_it")
            writer.close()
            return
        if peer.conn is None:
            self._start(peer.sid, reader, writer, "out", b"")
        else:  # it connected to us meanwhile and won
            writer.close()

    def _on_accept(self, link: Link) -> None:
        if self._closed:
            link.close()
            return
        reader, writer = link.streams()
        task = asyncio.create_task(self._handshake(reader, writer))
        self._handshakes.add(task)
        task.add_done_callback(self._handshakes.discard)

    async def _handshake(self, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter) -> None:
        peername = writer.get_extra_info("peername")
        remote = f"{peername[0]}:{peername[1]}" if peername else "?"
        parser = ConnectionHeaderReader()
        try:
            header = await asyncio.wait_for(self._read_header(reader, parser),
                                            self.header_timeout_ms / 1000)
        except (JuteError, TimeoutError, OSError, EOFError) as e:
            self._log(logging.WARNING, "election_header_rejected", remote=remote,
                      reason=repr(str(e) or type(e).__name__), action="close")
            writer.close()
            return
        rest = parser.rest
        if self.sasl is not None:
            rest = await self._check_learner(header.sid, reader, writer, remote, rest)
            if rest is None:
                writer.close()
                return
        self._on_header(header, reader, writer, remote, rest)

    async def _check_learner(self, sid: int, reader: asyncio.StreamReader,
                             writer: asyncio.StreamWriter, remote: str,
                             rest: bytes) -> bytes | None:
        """SaslQuorumAuthServer.authenticate after the header: the bytes past it, or None
        to close. Without serverRequireSasl a peer that does not authenticate, fails to,
        or goes away is let through, as ZooKeeper lets it (it then finds what is left)."""
        exchange = QuorumAuthServerExchange(self.sasl)
        if exchange.done:
            return rest
        try:
            rest = await asyncio.wait_for(
                run_exchange(exchange, lambda: reader.read(READ_CHUNK_BYTES), writer.write,
                             pending=rest), self.header_timeout_ms / 1000)
        except (QuorumAuthError, OSError, TimeoutError) as e:
            required = self.sasl.server_require_sasl
            self._log(logging.WARNING, "quorum_sasl_failed", sid=sid, port="election",
                      remote=remote, reason=repr(str(e) or type(e).__name__),
                      action="close" if required else "let_through")
            return None if required else b""
        if exchange.username is not None:
            self._log(logging.INFO, "quorum_sasl_authenticated", sid=sid, port="election",
                      remote=remote, user=exchange.username)
        elif exchange.failure is not None:
            self._log(logging.WARNING, "quorum_sasl_failed", sid=sid, port="election",
                      remote=remote, reason=repr(exchange.failure), action="let_through")
        return rest

    @staticmethod
    async def _read_header(reader: asyncio.StreamReader,
                           parser: ConnectionHeaderReader) -> ConnectionHeader:
        while True:
            data = await reader.read(READ_CHUNK_BYTES)
            if not data:
                raise EOFError("connection closed before the header was complete")
            header = parser.feed(data)
            if header is not None:
                return header

    def _on_header(self, header: ConnectionHeader, reader: asyncio.StreamReader,
                   writer: asyncio.StreamWriter, remote: str, rest: bytes) -> None:
        sid = header.sid
        if self._closed:
            writer.close()
        elif sid == OBSERVER_ID:
            self._log(logging.WARNING, "election_header_rejected", remote=remote,
                      reason="observer_id", action="close")
            writer.close()
        elif sid < self.my_sid:
            self._log(logging.INFO, "election_connection_dropped", sid=sid, remote=remote,
                      reason="smaller_sid", action="connect_back")
            writer.close()
            peer = self._peer(sid)
            if peer.conn is not None:
                self._finish(peer.conn, "peer reconnected")
            addrs = header.election_addresses
            self.connect_one(sid, addrs[0] if addrs else None)
        elif sid == self.my_sid:
            self._log(logging.WARNING, "election_connection_dropped", sid=sid, remote=remote,
                      reason="our_own_sid", action="close")  # ZOOKEEPER-2164
            writer.close()
        else:
            self._start(sid, reader, writer, "in", rest)

    # -- a live connection -----------------------------------------------------------

    def _start(self, sid: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
               direction: str, rest: bytes) -> None:
        peer = self._peer(sid)
        if peer.conn is not None:
            self._finish(peer.conn, "replaced by a new connection")
        conn = _Connection(sid, reader, writer, direction)
        sock = writer.get_extra_info("socket")
        if sock is not None and hasattr(socket, "TCP_USER_TIMEOUT"):  # Linux
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, self.unacked_timeout_ms)
        peer.conn = conn
        peer.connected.set()
        self._log(logging.INFO, "election_connected", sid=sid, direction=direction,
                  remote=conn.remote)
        conn.tasks = [asyncio.create_task(self._sender(peer, conn), name=f"election-send-{sid}"),
                      asyncio.create_task(self._receiver(conn, rest), name=f"election-recv-{sid}")]

    async def _sender(self, peer: _Peer, conn: _Connection) -> None:
        try:
            if not peer.queue and peer.last_sent is not None:
                conn.writer.write(peer.last_sent)
                await conn.writer.drain()
            while not conn.closed:
                if not peer.queue:
                    peer.wake.clear()
                    await peer.wake.wait()
                    continue
                frame = peer.queue.popleft()
                peer.last_sent = frame
                conn.writer.write(frame)
                await conn.writer.drain()
        except (OSError, RuntimeError) as e:
            self._finish(conn, f"send failed: {e!r}")

    async def _receiver(self, conn: _Connection, rest: bytes) -> None:
        frames = ElectionFrameReader()
        reason = "peer closed the connection"
        try:
            data = rest
            while True:
                if data:
                    for payload in frames.feed(data):
                        self._deliver(conn.sid, payload)
                data = await conn.reader.read(READ_CHUNK_BYTES)
                if not data:
                    break
        except JuteError as e:
            for payload in frames.frames_before_error:
                self._deliver(conn.sid, payload)
            self._log(logging.WARNING, "election_frame_rejected", sid=conn.sid, reason=repr(str(e)),
                      action="close")
            reason = "malformed frame"
        except OSError as e:
            reason = f"read failed: {e!r}"
        self._finish(conn, reason)

    def _deliver(self, sid: int, payload: bytes) -> None:
        try:
            self.on_message(sid, payload)
        except Exception:
            log.exception("event=election_message_handler_failed my_sid=%d sid=%d",
                          self.my_sid, sid)

    def _finish(self, conn: _Connection, reason: str) -> None:
        if conn.closed:
            return
        conn.closed = True
        conn.writer.close()
        peer = self._peers.get(conn.sid)
        if peer is not None and peer.conn is conn:
            peer.conn = None
            peer.connected.clear()
            peer.wake.set()  # let the sender see it is closed
            if peer.queue and not self._closed:
                self.connect_one(conn.sid)  # a message still waits for this peer
        current = asyncio.current_task()
        for task in conn.tasks:
            if task is not current:
                task.cancel()
        self._log(logging.INFO, "election_disconnected", sid=conn.sid, direction=conn.direction,
                  reason=repr(reason))
