"""jute.maxbuffer at every entry point, with a value set (4096) rather than the default:

- the client port, before the handshake (the ConnectRequest's frame) and after it (a request's
  frame): a length over it closes the connection, exactly it is read; the same on ZooKeeper 3.8
  run with -Djute.maxbuffer=4096 (tests/security/test_tls_limits.py does the secure port);
- a field inside a frame (a buffer's or a string's length) can never pass its frame: a length
  past the frame's end is a MARSHALLINGERROR, on both;
- the quorum port: a QuorumPacket's data and a SNAP's buffers may be jute.maxbuffer plus its
  extra size (BinaryInputArchive), so an ensemble whose jute.maxbuffer was raised replicates
  the requests its clients may now send (they were refused over 1 MiB + 64 KiB before);
- the election port keeps QuorumCnxManager's own PACKETMAXSIZE (512 KiB), as ZooKeeper does
  (tests/zab has its cases).
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import time

import pytest
from abuse_load import open_raw_session

from bench import wire
from conformance_tests.servers import HOST, REPO_ROOT, start_zookeeper
from zkcompat.jute import quorum as q
from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.jute.errors import JuteError
from zkcompat.jute.framing import FrameReader
from zkcompat.peer.transport import QuorumConnection

pytestmark = pytest.mark.timeout(240)

MAXBUFFER = 4096
TICK_TIME_MS = 2000
QUIET_S = 1.0
MARSHALLINGERROR = -5


@pytest.fixture(params=["zookeeper", "zkcompat"])
def server(request, tmp_path, zkcompat_launcher):
    if request.param == "zookeeper":
        zk = start_zookeeper(tmp_path / "zk", TICK_TIME_MS, {},
                             jvm_flags=(f"-Djute.maxbuffer={MAXBUFFER}",))
        yield zk
        zk.stop()
    else:
        yield zkcompat_launcher.start({"jute.maxbuffer": MAXBUFFER, "tickTime": TICK_TIME_MS})


def outcome(sock: socket.socket, wait_s: float = QUIET_S) -> str | tuple[int, int]:
    """The first reply's (xid, err), "closed", or "waiting" (nothing, still open)."""
    sock.settimeout(wait_s)
    reader = FrameReader(1 << 20)
    try:
        while True:
            data = sock.recv(1 << 16)
            if not data:
                return "closed"
            for f in reader.feed(data):
                xid, _, err = wire.REPLY_HEADER.unpack_from(f)
                if xid != wire.NOTIFICATION_XID:
                    return (xid, err)
    except (ConnectionResetError, BrokenPipeError):
        return "closed"
    except TimeoutError:
        return "waiting"


def length(n: int) -> bytes:
    return struct.pack(">i", n)


@pytest.mark.parametrize("n, expected", [(MAXBUFFER + 1, "closed"), (MAXBUFFER, "waiting")])
def test_the_connect_request_frame(n, expected, server):
    with socket.create_connection((HOST, server.port), timeout=10) as sock:
        sock.sendall(length(n) + b"\0" * 64)  # the rest of a legal frame would follow
        assert outcome(sock) == expected


def set_data_frame(xid: int, frame_bytes: int) -> bytes:
    """A setData of /d whose frame is frame_bytes long."""
    base = len(wire.request(xid, OpCode.SET_DATA, r.SetDataRequest("/d", b"", -1))) - 4
    return wire.request(xid, OpCode.SET_DATA,
                        r.SetDataRequest("/d", b"x" * (frame_bytes - base), -1))


@pytest.mark.parametrize("n, expected", [(MAXBUFFER + 1, "closed"), (MAXBUFFER, (2, 0))])
def test_a_request_frame(n, expected, server):
    sock = open_raw_session(HOST, server.port)
    try:
        sock.sendall(wire.request(1, OpCode.CREATE, r.CreateRequest("/d", b"", wire.OPEN_ACL, 0)))
        assert outcome(sock, 10) == (1, 0)
        frame = set_data_frame(2, n)
        assert len(frame) == 4 + n
        sock.sendall(frame)
        assert outcome(sock, 10) == expected
    finally:
        sock.close()


def test_a_field_longer_than_its_frame(server):
    """setData's data says MAXBUFFER + 1 bytes; its frame ends after 100 of them."""
    sock = open_raw_session(HOST, server.port)
    try:
        body = struct.pack(">ii", 1, OpCode.SET_DATA) + struct.pack(">i", 2) + b"/d" \
            + length(MAXBUFFER + 1) + b"x" * 100
        sock.sendall(length(len(body)) + body)
        assert outcome(sock, 10) == (1, MARSHALLINGERROR)
        assert outcome(sock) == "waiting"  # the session goes on
    finally:
        sock.close()


# -- the quorum port ---------------------------------------------------------------------------


def proposal(data_bytes: int) -> bytes:
    """A PROPOSAL QuorumPacket carrying data_bytes of data, as its wire bytes."""
    return r.QuorumPacket(q.PacketType.PROPOSAL, 0x100000001, b"p" * data_bytes, None).to_bytes()


def received(conn_kw: dict, data: bytes) -> tuple[list, bool]:
    got, lost = [], []
    conn = QuorumConnection(lambda c, pkts, _tree: got.extend(pkts), lambda c: lost.append(c),
                            **conn_kw)

    class Transport:
        def close(self):
            pass

        def get_extra_info(self, name, default=None):
            return None

    conn.connection_made(Transport())
    conn.data_received(data)
    return got, bool(lost)


def test_the_quorum_bound_follows_jute_maxbuffer():
    assert q.data_max_bytes(0xFFFFF) == 2 * 0xFFFFF  # ZooKeeper's, with the defaults
    assert q.data_max_bytes(4 << 20) == 8 << 20
    assert q.data_max_bytes(MAXBUFFER) == q.PACKET_DATA_MAX_BYTES  # never lower than before


def test_a_proposal_over_one_mib_with_jute_maxbuffer_raised():
    big = proposal(3 << 20)
    got, lost = received({}, big)
    assert (got, lost) == ([], True)  # the old bound: the learner dropped its leader
    got, lost = received({"data_max_bytes": q.data_max_bytes(4 << 20)}, big)
    assert not lost and len(got) == 1 and len(got[0].data) == 3 << 20
    with pytest.raises(JuteError):
        q.packet_end(proposal((8 << 20) + 1), 0, q.data_max_bytes(4 << 20))


ENSEMBLE_START_S = 90


def test_an_ensemble_with_jute_maxbuffer_raised_replicates_a_3_mib_write(tmp_path):
    """The production config's jute.maxbuffer=4194304: a client's 3 MiB setData is accepted by
    the leader's client port, and every follower must apply it."""
    from kazoo.client import KazooClient

    workdir = tmp_path / "ensemble"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    cmd = [sys.executable, "-m", "zkcompat", "ensemble"]
    started = subprocess.run(
        [*cmd, "start", "3", "--dir", str(workdir), "--set", "tickTime=500",
         "--set", f"jute.maxbuffer={4 << 20}", "--set", "maxClientCnxns=0"],
        env=env, capture_output=True, text=True,
        timeout=ENSEMBLE_START_S)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        connect = started.stdout.strip().splitlines()[-1].removeprefix("connect: ")
        data = b"m" * (3 << 20)
        writer = KazooClient(hosts=connect.split(",")[0])
        writer.start(timeout=20)
        try:
            writer.create("/big", data)
        finally:
            writer.stop()
            writer.close()
        for host in connect.split(","):
            zk = KazooClient(hosts=host)
            zk.start(timeout=20)
            try:
                deadline = time.monotonic() + 30
                while True:
                    zk.sync("/big")
                    if zk.exists("/big") and zk.get("/big")[0] == data:
                        break
                    assert time.monotonic() < deadline, f"{host} never applied /big"
                    time.sleep(0.2)
            finally:
                zk.stop()
                zk.close()
    finally:
        subprocess.run([*cmd, "stop", "--dir", str(workdir)],
                       env=env, capture_output=True, timeout=60)

