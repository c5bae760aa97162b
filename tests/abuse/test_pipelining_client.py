"""A client that pipelines requests and never reads a reply does not grow the server's memory
without bound: the server stops reading from it once its replies fill the transport (or its
requests in flight reach the session's bound, or globalOutstandingLimit), and the rest waits
in the kernel's socket buffers, on the client's side of the flow control.

Real sockets against a real `zkcompat serve` process; the server's RSS is sampled from /proc
while the client sends. Every load stops at a byte count, a time, or when the server has taken
nothing for a while. The figures are printed (pytest -s) and kept under $ZKCOMPAT_ABUSE_REPORT.
"""

from __future__ import annotations

import re
import threading
import time

import pytest
from abuse_load import (
    RssSampler,
    get_data_request,
    mib,
    open_raw_session,
    peak_rss_bytes,
    pipeline_without_reading,
    report,
    rss_bytes,
    set_data_request,
)

pytestmark = pytest.mark.timeout(180)

BIG_DATA = b"b" * 1_000_000  # under jute.maxbuffer (1048575) with its reply header
SEND_MAX_BYTES = 200 * 1024 * 1024  # of requests, per client
SEND_MAX_S = 20.0
STALL_S = 3.0  # nothing taken for this long: the server has stopped reading
RSS_GROWTH_MAX_BYTES = 64 * 1024 * 1024


@pytest.mark.parametrize("size", [len(BIG_DATA), 10], ids=["1MB-replies", "small-replies"])
def test_pipelined_gets_never_read(size, zkcompat_launcher, kazoo_factory):
    server = zkcompat_launcher.start()
    zk = kazoo_factory(server)
    zk.create("/n", BIG_DATA[:size])
    sock = open_raw_session(server.host, server.port)
    try:
        base = rss_bytes(server.pid)
        with RssSampler(server.pid) as rss:
            sent = pipeline_without_reading(sock, get_data_request("/n"), SEND_MAX_BYTES,
                                            SEND_MAX_S, STALL_S)
            time.sleep(0.5)
        hwm = peak_rss_bytes(server.pid)
        # The server serves everyone else meanwhile.
        assert zk.get("/n")[0] == BIG_DATA[:size]
    finally:
        sock.close()
    figures = {"reply_bytes": size, "requests_taken": sent.requests,
               "request_mib_taken": mib(sent.sent_bytes), "seconds": round(sent.seconds, 1),
               "server_stopped_reading": sent.stalled, "rss_base_mib": mib(base),
               "rss_sampled_peak_mib": mib(rss.peak), "rss_hwm_mib": mib(hwm),
               "rss_growth_mib": mib(hwm - base),
               "rss_mib_each_second": " ".join(str(mib(b)) for _, b in rss.samples[::5])}
    report(f"pipelining-client-gets-{size}", figures)
    assert sent.stalled, figures  # it stopped reading well before the client's bounds
    assert hwm - base < RSS_GROWTH_MAX_BYTES, figures


def outstanding(server) -> int:
    """srvr's Outstanding: the requests in sessions' queues (Admin.outstanding)."""
    text = server.four_letter_word("srvr")
    return int(re.search(r"^Outstanding: (\d+)$", text, re.M).group(1))


CONNECTIONS = 8
WRITE_DATA = b"w" * 16 * 1024
WRITE_SEND_MAX_BYTES = 4 * 1024 * 1024  # per connection: 256 setData of 16 KiB
GLOBAL_LIMIT = 100
DEFAULT_GLOBAL_LIMIT = 1000  # globalOutstandingLimit unset
# With the default limit about 1000 requests of 16 KiB wait at once, with their replies and
# the txn log's batches: RSS grew 54-70 MiB in ten runs (on this session's code and the
# code before it), too close to RSS_GROWTH_MAX_BYTES for a fixed bound.
DEFAULT_LIMIT_RSS_GROWTH_MAX_BYTES = 96 * 1024 * 1024
# Each connection reads one batch (a socket read) before it counts: 256 KiB, 16 requests.
BATCH_OVERSHOOT = 16


@pytest.mark.parametrize("limit", [GLOBAL_LIMIT, None], ids=["limit-100", "default-1000"])
def test_pipelined_writes_never_read_stay_under_global_outstanding_limit(
        limit, zkcompat_launcher, kazoo_factory):
    settings = {} if limit is None else {"globalOutstandingLimit": limit}
    server = zkcompat_launcher.start(settings)
    zk = kazoo_factory(server)
    zk.create("/w", b"")
    socks = [open_raw_session(server.host, server.port) for _ in range(CONNECTIONS)]
    peaks = []
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peaks.append(outstanding(server))
            stop.wait(0.02)

    results = [None] * CONNECTIONS

    def client(i):
        results[i] = pipeline_without_reading(socks[i], set_data_request("/w", WRITE_DATA),
                                              WRITE_SEND_MAX_BYTES, SEND_MAX_S, STALL_S)

    base = rss_bytes(server.pid)
    sampler = threading.Thread(target=sample, daemon=True)
    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(CONNECTIONS)]
    try:
        with RssSampler(server.pid) as rss:
            sampler.start()
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=SEND_MAX_S + 10)
            deadline = time.monotonic() + 30
            while outstanding(server) and time.monotonic() < deadline:
                time.sleep(0.05)
            stop.set()
            sampler.join(timeout=5)
        hwm = peak_rss_bytes(server.pid)
        assert zk.get("/w")[0] == WRITE_DATA  # every write got through, in the end
    finally:
        stop.set()
        for s in socks:
            s.close()
    figures = {"globalOutstandingLimit": limit or 1000, "connections": CONNECTIONS,
               "request_mib_taken": mib(sum(r.sent_bytes for r in results)),
               "outstanding_peak": max(peaks), "outstanding_samples": len(peaks),
               "rss_base_mib": mib(base), "rss_sampled_peak_mib": mib(rss.peak),
               "rss_hwm_mib": mib(hwm), "rss_growth_mib": mib(hwm - base)}
    report(f"pipelining-writes-{'limit' if limit else 'default'}", figures)
    assert max(peaks) <= (limit or DEFAULT_GLOBAL_LIMIT) + CONNECTIONS * BATCH_OVERSHOOT, figures
    rss_max = RSS_GROWTH_MAX_BYTES if limit is not None else DEFAULT_LIMIT_RSS_GROWTH_MAX_BYTES
    assert hwm - base < rss_max, figures
