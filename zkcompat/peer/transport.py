"""The quorum port's asyncio shell: QuorumPackets between a leader and its learners.

Packets travel unframed, one jute record after another; a SNAP packet is followed by the
tree in ZooKeeper's snapshot serialization and the "BenWasHere" signature, which this
layer streams out (leader) or reads in (learner) before the next packet. The role state
machines never see a socket: they get decoded packets and return what to send.
A malformed packet closes that one connection with a logged reason.

A SNAP streams over many loop turns, exact at the zxid it names (tree/view.py), as fast
as the learner reads it: the leader keeps serving meanwhile, its output buffer for that
learner stays near SNAP_BUFFER_HIGH_BYTES, and the packets sent to that learner after the
SNAP wait, encoded, behind it (at most OUTPUT_BUFFER_MAX_BYTES, or the learner is dropped).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from zkcompat.jute import quorum as q
from zkcompat.jute import records as r
from zkcompat.jute.errors import JuteError
from zkcompat.peer.links import open_link
from zkcompat.security.quorum_auth_packet import QuorumAuthError
from zkcompat.security.quorum_sasl import QuorumAuthLearnerExchange
from zkcompat.security.quorum_sasl_settings import QuorumSaslSettings
from zkcompat.security.quorum_tls import QuorumTls
from zkcompat.tree.snapstream import (
    LENGTH_MAX_BYTES,
    SLICE_NODES,
    SnapReader,
    SnapStreamError,
    snap_stream_chunks,
)
from zkcompat.tree.view import TreeView
from zkcompat.zab.committed_log import Snap

log = logging.getLogger(__name__)

P = q.PacketType
_ACK, _SNAP = int(P.ACK), int(P.SNAP)
_BARE_BYTES = q.BARE_PACKET_BYTES
_COUNTER_MASK = 0xFFFFFFFF  # a zxid's counter: 0 in NEWLEADER's and UPTODATE's ACKs
# A learner whose output buffer grows past this is not keeping up: ZooKeeper's
# LearnerHandler queue is unbounded, ours drops the learner, which then resyncs.
OUTPUT_BUFFER_MAX_BYTES = 256 * 1024 * 1024
SNAP_PROGRESS_EVERY_NODES = 100_000
# A SNAP waits while this much is unsent (asyncio's pause_writing), and goes on once the
# buffer is down to the low mark.
SNAP_BUFFER_HIGH_BYTES = 1024 * 1024
SNAP_BUFFER_LOW_BYTES = 256 * 1024
# Learner.connectToLeader: retry every zookeeper.leaderConnectDelayDuringRetryMs (100 ms,
# ZOOKEEPER-3575) until initLimit has passed; a new leader opens its port a moment after
# its followers have learned who it is.
CONNECT_RETRY_S = 0.1


class QuorumConnection(asyncio.Protocol):
    """One quorum-port connection. `on_packets(conn, pkts, snap_tree)` gets the packets of
    one read together, in order (a SNAP alone, with the tree read after it, on a
    learner); `on_lost(conn)` once it closes. On the leader's side (not reads_snap) a run
    of ACKs in one read is handed over as its last: a learner ACKs in zxid order, so the
    last says all the others said (an ACK of a zxid whose counter is 0, NEWLEADER's or
    UPTODATE's, is never merged). A packet's data, and a SNAP's buffers and strings, may be
    data_max_bytes long (jute.maxbuffer and its extra size: quorum.data_max_bytes)."""

    def __init__(self, on_packets: Callable, on_lost: Callable, *, reads_snap: bool = False,
                 data_max_bytes: int = q.PACKET_DATA_MAX_BYTES,
                 snap_slice_nodes: int = SLICE_NODES):
        self.on_packets = on_packets
        self.on_lost = on_lost
        self.reads_snap = reads_snap
        self.data_max_bytes = data_max_bytes
        self.snap_slice_nodes = snap_slice_nodes  # a SNAP yields to the loop this often
        self.transport: asyncio.Transport | None = None
        self.sid: int | None = None  # the learner's, once its first packet named it
        self.remote = "?"
        self._buf = bytearray()
        self._snap: SnapReader | None = None
        self._snap_pkt = None
        self._closed = False
        # Leader's side: a SNAP streaming out, what waits behind it, and flow control.
        self._snap_out: asyncio.Task | None = None
        self._held = bytearray()
        self._writable = asyncio.Event()
        self._writable.set()

    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.remote = f"{peer[0]}:{peer[1]}" if peer else "?"

    def connection_lost(self, exc) -> None:
        self._writable.set()  # a SNAP waiting to write sees the end
        if not self._closed:
            self._closed = True
            self.on_lost(self)

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def close(self, reason: str) -> None:
        if self._closed:
            return
        log.info("event=quorum_connection_closed remote=%s sid=%s reason=%r", self.remote,
                 self.sid, reason)
        self._closed = True
        self._writable.set()
        if self.transport is not None:
            self.transport.close()
        self.on_lost(self)

    # -- in ---------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        try:
            self._received(data)
        except (JuteError, SnapStreamError) as e:
            self.close(f"malformed quorum traffic: {e}")

    def _received(self, data: bytes) -> None:
        if self._snap is not None:
            self._snap.feed(data)
            if not self._snap.done:
                return
            self._snap_finished()
            data = b""
        buf = self._buf
        buf += data
        off = 0
        pkts = []
        coalesce = not self.reads_snap
        last_ack = None
        while True:
            bare = q.bare_packet_at(buf, off)
            if bare is not None and not (bare[0] == _SNAP and self.reads_snap):
                type_, zxid = bare
                off += _BARE_BYTES
                if coalesce and type_ == _ACK and zxid & _COUNTER_MASK:
                    last_ack = zxid
                    continue
                if last_ack is not None:
                    pkts.append(r.QuorumPacket(_ACK, last_ack))
                    last_ack = None
                pkts.append(r.QuorumPacket(type_, zxid))
                continue
            end = q.packet_end(buf, off, self.data_max_bytes)
            if end < 0:
                break
            pkt, _ = q.decode_packet(buf, off)
            off = end
            if last_ack is not None:
                pkts.append(r.QuorumPacket(_ACK, last_ack))
                last_ack = None
            if pkt.type == P.SNAP and self.reads_snap:
                rest = bytes(buf[off:])
                del buf[:]
                if pkts:
                    self.on_packets(self, pkts, None)
                if self._closed:
                    return
                self._start_snap(pkt)
                if rest:
                    self._received(rest)
                return
            pkts.append(pkt)
        if last_ack is not None:
            pkts.append(r.QuorumPacket(_ACK, last_ack))
        del buf[:off]
        if pkts:
            self.on_packets(self, pkts, None)

    def _start_snap(self, pkt) -> None:
        log.info("event=snap_receiving zxid=0x%x", pkt.zxid)
        self._snap_pkt = pkt
        self._snap = SnapReader(pkt.zxid, progress=_snap_progress("snap_received"),
                                length_max_bytes=max(LENGTH_MAX_BYTES, self.data_max_bytes))

    def _snap_finished(self) -> None:
        result = self._snap.result()
        pkt = self._snap_pkt
        self._snap = self._snap_pkt = None
        log.info("event=snap_received zxid=0x%x nodes=%d", pkt.zxid, len(result.tree.nodes))
        self.on_packets(self, [pkt], result.tree)
        if result.rest and not self._closed:
            self._received(result.rest)

    # -- out --------------------------------------------------------------------------

    def send(self, packets: list) -> None:
        """Packets in order: wire bytes, records, or (Snap, tree), which starts streaming
        the tree as it is now (SNAP + snapshot); what follows waits behind it."""
        if self._closed or self.transport is None:
            return
        out = self._held if self._snap_out is not None else bytearray()
        for pkt in packets:
            if type(pkt) is bytes:
                out += pkt
                continue
            if isinstance(pkt, tuple):  # (Snap, tree)
                assert self._snap_out is None, "one SNAP at a time on a connection"
                if out:
                    self.transport.write(bytes(out))
                out = self._held
                self._send_snap(pkt[1])
                continue
            pkt.encode(out)
        if self._snap_out is None and out:
            self.transport.write(bytes(out))
        if len(self._held) + self.transport.get_write_buffer_size() > OUTPUT_BUFFER_MAX_BYTES:
            self.close("learner is not reading: output buffer over its bound")

    def _send_snap(self, tree) -> None:
        """SNAP at the tree's zxid now; the snapshot streams from a view taken now."""
        view = TreeView(tree)
        log.info("event=snap_sending sid=%s zxid=0x%x nodes=%d", self.sid, view.zxid,
                 len(view.paths))
        self.transport.write(q.packet(P.SNAP, view.zxid).to_bytes())
        self.transport.set_write_buffer_limits(SNAP_BUFFER_HIGH_BYTES, SNAP_BUFFER_LOW_BYTES)
        self._snap_out = asyncio.get_running_loop().create_task(self._stream_snap(view))

    async def _stream_snap(self, view: TreeView) -> None:
        progress = _snap_progress("snap_sent", self.sid)
        started = asyncio.get_running_loop().time()
        try:
            for chunk in snap_stream_chunks(view.tree, progress=progress, view=view,
                                            slice_nodes=self.snap_slice_nodes):
                if chunk:
                    self.transport.write(chunk)
                if self._writable.is_set():
                    await asyncio.sleep(0)  # apply and the other learners run between
                else:
                    await self._writable.wait()  # until the learner has read enough
                if self._closed:
                    return
            elapsed = asyncio.get_running_loop().time() - started
            log.info("event=snap_sent sid=%s zxid=0x%x nodes=%d seconds=%.3f "
                     "changed_meanwhile=%d", self.sid, view.zxid, len(view.paths), elapsed,
                     view.saved_count)
            held, self._held = self._held, bytearray()
            self._snap_out = None
            if held:
                self.transport.write(bytes(held))
        except Exception as e:  # our bug: this learner resyncs, the others go on
            log.exception("event=snap_failed sid=%s zxid=0x%x", self.sid, view.zxid)
            self.close(f"SNAP failed: {e!r}")
        finally:
            view.close()
            self._snap_out = None


def _snap_progress(event: str, sid=None):
    state = {"next": SNAP_PROGRESS_EVERY_NODES}

    def progress(done: int, total: int | None = None) -> None:
        if done >= state["next"]:
            state["next"] += SNAP_PROGRESS_EVERY_NODES
            log.info("event=%s_progress sid=%s nodes=%d total=%s", event, sid, done, total)
    return progress


def is_snap(item) -> bool:
    return isinstance(item, Snap)


async def connect_to_leader(host: str, port: int, on_packet, on_lost, limit_s: float,
                            data_max_bytes: int = q.PACKET_DATA_MAX_BYTES,
                            security: QuorumTls | None = None,
                            sasl: QuorumSaslSettings | None = None) -> QuorumConnection:
    """Learner.connectToLeader: try every CONNECT_RETRY_S until `limit_s` (initLimit); then
    quorum SASL, when the learner must authenticate, before FOLLOWERINFO (a failure raises
    ConnectionError: the learner looks for a leader again, as ZooKeeper's does)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    attempt = 0
    while True:
        attempt += 1
        try:
            link = await open_link(security, host, port, max(deadline - loop.time(), 0.001),
                                   "quorum")
        except (OSError, TimeoutError) as e:
            if loop.time() + CONNECT_RETRY_S > deadline:
                raise ConnectionError(f"cannot reach the leader at {host}:{port} in "
                                      f"{attempt} tries: {e!r}") from None
            if attempt == 1:
                log.info("event=leader_connect_retrying host=%s port=%d error=%r", host, port,
                         str(e))
            await asyncio.sleep(CONNECT_RETRY_S)
            continue
        if sasl is not None:
            exchange = QuorumAuthLearnerExchange(sasl, peer_host=host)
            if not exchange.done:
                try:
                    # A Kerberos learner's first token may wait on the KDC: off the loop.
                    first = await asyncio.to_thread(exchange.start)
                    await asyncio.wait_for(link.authenticate(exchange, first),
                                           max(deadline - loop.time(), 0.001))
                except (QuorumAuthError, OSError, TimeoutError) as e:
                    link.close()
                    log.warning("event=quorum_sasl_failed port=quorum remote=%s:%d reason=%r",
                                host, port, str(e) or type(e).__name__)
                    raise ConnectionError(f"quorum SASL with the leader at {host}:{port} "
                                          f"failed: {e!r}") from None
                log.info("event=quorum_sasl_authenticated port=quorum remote=%s:%d role=learner",
                         host, port)
        conn = QuorumConnection(on_packet, on_lost, reads_snap=True,
                                data_max_bytes=data_max_bytes)
        link.attach(conn)
        return conn
