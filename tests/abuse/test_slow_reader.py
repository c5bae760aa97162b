"""A slow reader (a client that never reads its socket) cannot stall other sessions: one with
a persistent recursive watch that fires on every write of another client, and one that has
also pipelined big getData replies behind a write of its own. The others' latency is measured
meanwhile, and the server's RSS: the watch events wait in the slow reader's transport (it has
stopped reading at its high-water mark), and replies past zkcompat's bound of unsent bytes get
the connection closed with a logged reason (ZooKeeper has no such bound: its buffers grow).

Real sockets against a real `zkcompat serve`; every load is bounded in count and in time.
"""

from __future__ import annotations

import socket
import time

import pytest
from abuse_load import (
    Measuring,
    RssSampler,
    mib,
    open_raw_session,
    peak_rss_bytes,
    report,
    rss_bytes,
)
from kazoo.protocol.states import KazooState

from bench import wire
from zkcompat.jute import records as r
from zkcompat.jute.constants import AddWatchMode, OpCode
from zkcompat.server.limits import UNSENT_BYTES_MAX

pytestmark = pytest.mark.timeout(180)

BIG_DATA = b"b" * 1_000_000
BIG_GETS = 200  # queued behind the slow reader's own write: ~200 MB of replies at once
WRITES = 2000  # another client's setData on the watched path, each an event for the reader
P99_MAX_S = 0.5
RSS_GROWTH_MAX_BYTES = UNSENT_BYTES_MAX + 64 * 1024 * 1024


def slow_reader(server, big: bool) -> socket.socket:
    """A session that watches /w recursively, and (big) asks for BIG_GETS copies of /big behind
    a write of its own; it never reads a byte after its ConnectResponse."""
    sock = open_raw_session(server.host, server.port)
    frames = wire.request(1, OpCode.ADD_WATCH, r.AddWatchRequest(
        "/w", int(AddWatchMode.PERSISTENT_RECURSIVE)))
    if big:
        frames += wire.request(2, OpCode.SET_DATA, r.SetDataRequest("/n", b"x", -1))
        frames += b"".join(wire.request(x, OpCode.GET_DATA, r.GetDataRequest("/big", False))
                           for x in range(3, 3 + BIG_GETS))
    sock.sendall(frames)
    return sock


def closed_by_server(sock: socket.socket, timeout_s: float = 5.0) -> bool:
    """Whether the server closed this socket (reading what it sent until the close)."""
    sock.settimeout(timeout_s)
    try:
        while sock.recv(1 << 20):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


@pytest.mark.parametrize("big", [False, True], ids=["watch-only", "watch-and-big-replies"])
def test_a_slow_reader_cannot_stall_other_sessions(big, zkcompat_launcher, kazoo_factory):
    server = zkcompat_launcher.start()
    writer, prober = kazoo_factory(server), kazoo_factory(server)
    writer.create("/big", BIG_DATA)
    writer.create("/n", b"")
    writer.create("/w", b"")
    lost = []
    for c in (writer, prober):
        c.add_listener(lambda state: lost.append(state) if state != KazooState.CONNECTED
                       else None)
    with Measuring(lambda: prober.get("/w")) as quiet:
        time.sleep(2.0)
    base = rss_bytes(server.pid)
    sock = slow_reader(server, big)
    try:
        t0 = time.monotonic()
        with RssSampler(server.pid) as rss, Measuring(lambda: prober.get("/w")) as busy:
            writes = Measuring(lambda: writer.set("/w", b"v"), pause_s=0)
            with writes:
                while len(writes.latencies.samples) < WRITES and time.monotonic() - t0 < 60:
                    time.sleep(0.05)
            time.sleep(0.5)
        closed = closed_by_server(sock, timeout_s=1.0 if not big else 5.0)
        hwm = peak_rss_bytes(server.pid)
    finally:
        sock.close()
    log_text = server.log_path.read_text(errors="replace")
    figures = {"big_replies": big, "writes_firing_events": len(writes.latencies.samples),
               "others_get_quiet": quiet.latencies.summary_ms(),
               "others_get_during": busy.latencies.summary_ms(),
               "writer_set_during": writes.latencies.summary_ms(),
               "sessions_lost": len(lost), "slow_reader_closed": closed,
               "rss_base_mib": mib(base), "rss_sampled_peak_mib": mib(rss.peak),
               "rss_hwm_mib": mib(hwm), "rss_growth_mib": mib(hwm - base)}
    report(f"slow-reader-{'big' if big else 'watch'}", figures)
    assert not lost and not busy.latencies.errors and not writes.latencies.errors, figures
    assert len(writes.latencies.samples) >= WRITES, figures
    assert busy.latencies.quantile(0.99) < P99_MAX_S, figures
    assert writes.latencies.quantile(0.99) < P99_MAX_S, figures
    assert hwm - base < RSS_GROWTH_MAX_BYTES, figures
    if big:
        assert closed and "client does not read its replies" in log_text, figures
    else:
        assert not closed, figures  # a few events wait for it; it keeps its connection
