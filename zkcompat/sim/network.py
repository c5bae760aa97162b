"""The simulated network: byte streams between simulated nodes, with TCP's guarantees only.

A connection delivers its bytes in order, each write after a delay drawn from the seed's
rng; it never duplicates or reorders. A partition (a cut from one host to another) turns
every connection that tries to cross it into a black hole: nothing more arrives either
way, nobody is told, as with a cable pulled out; when the cut heals, such a connection is
reset (the next segment meets an RST). A reset reaches both ends as connection_lost.
Connecting across a cut times out; connecting to a port nobody listens on is refused.
"""

from __future__ import annotations

import asyncio
from collections import deque

from zkcompat.sim.loop import Node

LINK_DELAY_MIN_MS = 0.2
LINK_DELAY_MAX_MS = 2.0
CONNECT_TIMEOUT_MS = 1000.0  # a SYN into a partition: the caller's timeout fires first
WRITE_BUFFER_MAX_BYTES = 64 << 20  # one direction's bytes in flight; beyond it: reset


class SimListener:
    """What create_server returns: enough of asyncio.Server for the code that uses it."""

    def __init__(self, network: SimNetwork, node: Node, address, factory):
        self.network = network
        self.node = node
        self.address = address
        self.factory = factory
        self.sockets = ()
        self._serving = True

    def close(self) -> None:
        if self._serving:
            self._serving = False
            if self.network.listeners.get(self.address) is self:
                del self.network.listeners[self.address]

    def is_serving(self) -> bool:
        return self._serving

    async def wait_closed(self) -> None:
        return None

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self.close()

    async def start_serving(self) -> None:
        return None


class _Direction:
    """Bytes from one end to the other, in order."""

    __slots__ = ("queue", "timer", "last_at", "bytes")

    def __init__(self):
        self.queue: deque = deque()  # (deliver_at, data or None for EOF)
        self.timer = None
        self.last_at = 0.0
        self.bytes = 0


class SimTransport(asyncio.Transport):
    """One end of a simulated TCP connection."""

    def __init__(self, conn: SimConnection, side: int):
        super().__init__()
        self.conn = conn
        self.side = side
        self.protocol = None
        self.closing = False

    def get_extra_info(self, name, default=None):
        c = self.conn
        if name == "peername":
            return (c.hosts[1 - self.side], c.ports[1 - self.side])
        if name == "sockname":
            return (c.hosts[self.side], c.ports[self.side])
        return default

    def set_protocol(self, protocol) -> None:
        self.protocol = protocol

    def get_protocol(self):
        return self.protocol

    def write(self, data) -> None:
        if self.closing or not data:
            return
        self.conn.send(self.side, bytes(data))

    def writelines(self, lines) -> None:
        self.write(b"".join(lines))

    def close(self) -> None:
        if self.closing:
            return
        self.closing = True
        self.conn.close_side(self.side)

    def abort(self) -> None:
        self.close()

    def is_closing(self) -> bool:
        return self.closing

    def can_write_eof(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high=None, low=None) -> None:
        pass

    def get_write_buffer_limits(self):
        return (0, 0)

    def pause_reading(self) -> None:
        pass  # flow control is not simulated: the reader's own bounds still apply

    def resume_reading(self) -> None:
        pass

    def is_reading(self) -> bool:
        return not self.closing


class SimConnection:
    """A connection between node 0 (who connected) and node 1 (who accepted)."""

    def __init__(self, network: SimNetwork, nodes, hosts, ports):
        self.network = network
        self.nodes = nodes
        self.hosts = hosts
        self.ports = ports
        self.ends = (SimTransport(self, 0), SimTransport(self, 1))
        self.dirs = (_Direction(), _Direction())  # dirs[i]: bytes from side i
        self.lost = [False, False]  # connection_lost delivered (or the end is dead)
        self.blackholed = False
        self.closed = False

    def send(self, side: int, data: bytes) -> None:
        net = self.network
        if self.blackholed or self.lost[1 - side]:
            return
        if net.is_cut(self.hosts[side], self.hosts[1 - side]):
            self.blackhole()
            return
        self._enqueue(side, data)

    def _enqueue(self, side: int, data: bytes | None) -> None:
        d = self.dirs[side]
        loop = self.network.loop
        at = max(loop.time() + self.network.delay_s(self.hosts[side], self.hosts[1 - side]),
                 d.last_at)
        d.last_at = at
        d.queue.append((at, data))
        if data is not None:
            d.bytes += len(data)
            if d.bytes > WRITE_BUFFER_MAX_BYTES:
                self.reset()
                return
        if d.timer is None:
            self._arm(side)

    def _arm(self, side: int) -> None:
        d = self.dirs[side]
        dest = self.nodes[1 - side]
        d.timer = self.network.loop.call_at(d.queue[0][0], self._deliver, side,
                                            context=dest.context)

    def _deliver(self, side: int) -> None:
        d = self.dirs[side]
        d.timer = None
        other = 1 - side
        if self.lost[other] or self.blackholed:
            d.queue.clear()
            return
        if self.network.is_cut(self.hosts[side], self.hosts[other]):
            self.blackhole()
            return
        now = self.network.loop.time()
        chunks = []
        eof = False
        while d.queue and d.queue[0][0] <= now:
            _, data = d.queue.popleft()
            if data is None:
                eof = True
                break
            d.bytes -= len(data)
            chunks.append(data)
        proto = self.ends[other].protocol
        if chunks and proto is not None:
            proto.data_received(b"".join(chunks))
        if eof:
            self._lose(other, None)
            return
        if d.queue and d.timer is None and not self.lost[other]:
            self._arm(side)

    def _lose(self, side: int, exc) -> None:
        """Tell side `side` its connection is gone (once)."""
        if self.lost[side]:
            return
        self.lost[side] = True
        self.ends[side].closing = True
        self.network.forget(self)
        if not self.nodes[side].dead and self.ends[side].protocol is not None:
            self.ends[side].protocol.connection_lost(exc)

    def close_side(self, side: int) -> None:
        """side closed its end: it hears connection_lost now, the peer after the bytes."""
        loop = self.network.loop
        loop.call_soon(self._lose, side, None, context=self.nodes[side].context)
        if not self.blackholed and not self.lost[1 - side]:
            self._enqueue(side, None)

    def blackhole(self) -> None:
        if not self.blackholed:
            self.blackholed = True
            for d in self.dirs:
                d.queue.clear()
                if d.timer is not None:
                    d.timer.cancel()
                    d.timer = None

    def reset(self) -> None:
        """An RST: both ends hear connection_lost, after a delay."""
        self.blackhole()
        for side in (0, 1):
            if not self.lost[side]:
                at = self.network.loop.time() + self.network.delay_s(self.hosts[1 - side],
                                                                     self.hosts[side])
                self.network.loop.call_at(at, self._lose, side, ConnectionResetError("reset"),
                                          context=self.nodes[side].context)


class SimNetwork:
    def __init__(self, loop, rng, trace=None):
        self.loop = loop
        self.rng = rng
        self.trace = trace or (lambda *a: None)
        self.listeners: dict[tuple[str, int], SimListener] = {}
        self.cuts: set[tuple[str, str]] = set()  # (from host, to host): nothing gets through
        self.slow: dict[str, float] = {}  # host -> extra ms on every link to or from it
        self.connections: dict[int, SimConnection] = {}  # by creation number: a stable order
        self._conn_ids: dict[int, int] = {}
        self._next_id = 0
        self.nodes: dict[str, Node] = {}

    def add_node(self, node: Node) -> None:
        self.nodes[node.name] = node

    # -- faults ---------------------------------------------------------------------

    def is_cut(self, src: str, dst: str) -> bool:
        return (src, dst) in self.cuts

    def set_cuts(self, cuts: set[tuple[str, str]]) -> None:
        """Replace the partition; connections black-holed by a healed cut are reset."""
        self.cuts = set(cuts)
        for conn in list(self.connections.values()):
            if conn.blackholed and not (self.is_cut(*conn.hosts) or
                                        self.is_cut(conn.hosts[1], conn.hosts[0])):
                conn.reset()

    def delay_s(self, src: str, dst: str) -> float:
        ms = self.rng.uniform(LINK_DELAY_MIN_MS, LINK_DELAY_MAX_MS)
        ms += self.slow.get(src, 0.0) + self.slow.get(dst, 0.0)
        return ms / 1000

    def reset_between(self, a: str, b: str) -> int:
        """Every connection between hosts a and b drops (a lost segment, as TCP has it)."""
        n = 0
        for conn in list(self.connections.values()):
            if set(conn.hosts) == {a, b} and not conn.blackholed:
                conn.reset()
                n += 1
        return n

    def crash(self, host: str) -> None:
        for addr, lst in list(self.listeners.items()):
            if addr[0] == host:
                lst.close()
        for conn in list(self.connections.values()):
            for side in (0, 1):
                if conn.hosts[side] == host and not conn.lost[side]:
                    conn.lost[side] = True
                    conn.ends[side].closing = True
                    other = 1 - side
                    crossable = not (self.is_cut(host, conn.hosts[other]) or
                                     self.is_cut(conn.hosts[other], host))
                    conn.blackhole()
                    if crossable and not conn.lost[other]:
                        conn.reset()

    def forget(self, conn: SimConnection) -> None:
        if all(conn.lost):
            self.connections.pop(self._conn_ids.pop(id(conn), -1), None)

    # -- what the loop asks ------------------------------------------------------------

    def listen(self, node: Node, host: str, port: int, factory) -> SimListener:
        assert node is not None, "a listener outside any simulated node"
        addr = (node.name, port)
        old = self.listeners.get(addr)
        if old is not None and old.node is not node:
            raise OSError(98, f"address {addr} in use")
        lst = self.listeners[addr] = SimListener(self, node, addr, factory)
        return lst

    async def connect(self, node: Node, host: str, port: int, factory):
        assert node is not None, "a connection from outside any simulated node"
        src = node.name
        if self.is_cut(src, host) or self.is_cut(host, src):
            await asyncio.sleep(CONNECT_TIMEOUT_MS / 1000)
            raise TimeoutError(f"connect to {host}:{port}: no route (partitioned)")
        await asyncio.sleep(self.delay_s(src, host) + self.delay_s(host, src))
        lst = self.listeners.get((host, port))
        if lst is None or lst.node.dead or self.is_cut(src, host) or self.is_cut(host, src):
            raise ConnectionRefusedError(111, f"connect to {host}:{port}: refused")
        self._next_id += 1
        conn = SimConnection(self, (node, lst.node), (src, host), (40000 + self._next_id, port))
        self.connections[self._next_id] = conn
        self._conn_ids[id(conn)] = self._next_id
        if lst.node.paused:
            # The kernel completes the handshake; the frozen process accepts on SIGCONT,
            # before it reads anything sent meanwhile (its timers run after its ready list).
            self.loop.call_soon(self._accept, conn, lst.factory, context=lst.node.context)
            client_proto = factory()
            conn.ends[0].protocol = client_proto
            client_proto.connection_made(conn.ends[0])
            return conn.ends[0], client_proto
        server_proto = lst.node.run(lst.factory)
        conn.ends[1].protocol = server_proto
        client_proto = factory()
        conn.ends[0].protocol = client_proto
        lst.node.run(server_proto.connection_made, conn.ends[1])
        client_proto.connection_made(conn.ends[0])
        return conn.ends[0], client_proto

    @staticmethod
    def _accept(conn: SimConnection, factory) -> None:
        """In the listening node's context, after its pause."""
        if conn.lost[1]:
            return
        server_proto = factory()
        conn.ends[1].protocol = server_proto
        server_proto.connection_made(conn.ends[1])
