"""peer/transport.py's SNAP over real loopback sockets: it streams over many loop turns,
exact at the zxid its packet names while txns keep applying, the packets sent after it
arrive after it in order, and a learner that stops reading holds the leader's buffer
near its high mark without stalling the loop."""

from __future__ import annotations

import asyncio

from zkcompat.jute import quorum as q
from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.peer import transport
from zkcompat.peer.transport import QuorumConnection
from zkcompat.tree.acl import OPEN_ACL_UNSAFE
from zkcompat.tree.datatree import DataTree
from zkcompat.tree.snapstream import CHUNK_BYTES, snap_stream_chunks
from zkcompat.tree.txn import Txn
from zkcompat.zab.committed_log import SNAP

P = q.PacketType
NODES = 30_000
HOST = "127.0.0.1"


def _txn(zxid: int, op: int, record) -> Txn:
    return Txn(r.TxnHeader(0x1234, zxid, zxid, 1_700_000_000_000 + zxid, op), record)


def _big_tree(data_bytes: int = 20) -> DataTree:
    tree = DataTree()
    acl = [r.ACL(p, r.Id(s, i)) for p, s, i in OPEN_ACL_UNSAFE]
    zxid = 0
    for i in range(NODES // 100):
        zxid += 1
        tree.apply(_txn(zxid, OpCode.CREATE, r.CreateTxn(f"/p{i}", b"x" * 20, acl, False, -1)))
        for j in range(99):
            zxid += 1
            tree.apply(_txn(zxid, OpCode.CREATE,
                            r.CreateTxn(f"/p{i}/c{j}", b"y" * data_bytes, acl, False, -1)))
    return tree


class Pair:
    """A leader-side and a learner-side QuorumConnection joined over loopback."""

    def __init__(self):
        self.learner_got: list = []  # (packet type, zxid) and ("tree", tree) in order
        self.leader: QuorumConnection | None = None
        self.learner: QuorumConnection | None = None

    async def open(self):
        loop = asyncio.get_running_loop()
        accepted = loop.create_future()

        def leader_side():
            conn = QuorumConnection(lambda *a: None, lambda c: None)
            accepted.set_result(conn)
            return conn
        self.server = await loop.create_server(leader_side, HOST, 0)
        port = self.server.sockets[0].getsockname()[1]
        _, self.learner = await loop.create_connection(
            lambda: QuorumConnection(self._on_packets, lambda c: None, reads_snap=True),
            HOST, port)
        self.leader = await accepted

    def _on_packets(self, conn, pkts, snap_tree):
        for pkt in pkts:
            self.learner_got.append((pkt.type, pkt.zxid))
        if snap_tree is not None:
            self.learner_got.append(("tree", snap_tree))

    def close(self):
        self.leader.close("test over")
        self.learner.close("test over")
        self.server.close()


def test_a_snap_streams_exact_while_txns_apply_and_later_packets_follow_it():
    async def main():
        tree = _big_tree()
        z = tree.last_processed_zxid
        expected = b"".join(snap_stream_chunks(tree))
        pair = Pair()
        await pair.open()
        pair.leader.send([(SNAP, tree), q.packet(P.NEWLEADER, 0x100000000)])
        assert pair.leader._snap_out is not None  # it streams: not written in one turn
        # The loop runs while it streams: txns apply, and packets sent meanwhile wait.
        acl = [r.ACL(31, r.Id("world", "anyone"))]
        zxid = z
        turns = 0
        while pair.leader._snap_out is not None:
            zxid += 1
            tree.apply(_txn(zxid, OpCode.SET_DATA, r.SetDataTxn(f"/p{turns % 300}/c1",
                                                                b"new", 1 + turns // 300)))
            zxid += 1
            tree.apply(_txn(zxid, OpCode.CREATE, r.CreateTxn(f"/late{turns}", b"", acl,
                                                             False, -1)))
            pair.leader.send([q.packet(P.COMMIT, zxid)])
            turns += 1
            await asyncio.sleep(0)
        for _ in range(200):
            if len(pair.learner_got) >= 3 + turns:
                break
            await asyncio.sleep(0.01)
        pair.close()
        return z, expected, pair.learner_got, turns

    z, expected, got, turns = asyncio.run(main())
    assert turns > 10, "the SNAP was written in a few turns: nothing interleaved"
    assert got[0] == (P.SNAP, z)
    assert got[1][0] == "tree"
    received = got[1][1]
    assert len(received.nodes) == NODES + 4  # /, /zookeeper, its quota and config
    assert b"".join(snap_stream_chunks(received)) == expected
    assert got[2] == (P.NEWLEADER, 0x100000000)
    commits = got[3:]
    assert len(commits) == turns and all(t == P.COMMIT for t, _ in commits)
    assert [zx for _, zx in commits] == sorted(zx for _, zx in commits)


def test_a_learner_that_stops_reading_holds_the_buffer_near_its_mark_not_the_loop():
    async def main():
        tree = _big_tree(data_bytes=1000)  # 30 MB: more than loopback's socket buffers
        pair = Pair()
        await pair.open()
        pair.learner.transport.pause_reading()
        pair.leader.send([(SNAP, tree)])
        loop = asyncio.get_running_loop()
        worst_gap = 0.0
        last = loop.time()
        for _ in range(50):  # the loop keeps turning: 0.5 s of 10 ms sleeps
            await asyncio.sleep(0.01)
            now = loop.time()
            worst_gap = max(worst_gap, now - last)
            last = now
        buffered = pair.leader.transport.get_write_buffer_size()
        still_streaming = pair.leader._snap_out is not None
        pair.learner.transport.resume_reading()
        for _ in range(500):
            if pair.learner_got and pair.learner_got[-1][0] == "tree":
                break
            await asyncio.sleep(0.01)
        pair.close()
        return worst_gap, buffered, still_streaming, pair.learner_got

    worst_gap, buffered, still_streaming, got = asyncio.run(main())
    assert still_streaming, "the whole SNAP fit in the socket buffers: make the tree bigger"
    assert buffered <= transport.SNAP_BUFFER_HIGH_BYTES + 2 * CHUNK_BYTES
    assert worst_gap < 0.25, f"the loop stalled {worst_gap:.3f} s behind a paused learner"
    assert got[-1][0] == "tree" and len(got[-1][1].nodes) == NODES + 4
