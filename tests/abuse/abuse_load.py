"""The loads of the abuse tests, each bounded in count and in time, and what they measure: a
server process's RSS over time, and the latency of an ordinary kazoo session's requests."""

from __future__ import annotations

import errno
import json
import os
import select
import socket
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench import wire
from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode

REPORT_DIR_ENV = "ZKCOMPAT_ABUSE_REPORT"  # a directory: each test writes its figures there


def rss_bytes(pid: int, field: str = "VmRSS") -> int:
    """The process's resident set now (VmRSS), or its peak so far (VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for pid {pid}")


def peak_rss_bytes(pid: int) -> int:
    """The high-water mark of the RSS: what sampling misses between two samples."""
    return rss_bytes(pid, "VmHWM")


class RssSampler:
    """The RSS of `pid` every interval_s, on a thread, until stop()."""

    def __init__(self, pid: int, interval_s: float = 0.2):
        self.pid = pid
        self.interval_s = interval_s
        self.samples: list[tuple[float, int]] = []  # (seconds since start, bytes)
        self._stop = threading.Event()
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append((time.monotonic() - self._t0, rss_bytes(self.pid)))
            except OSError:
                return
            self._stop.wait(self.interval_s)

    @property
    def peak(self) -> int:
        return max(b for _, b in self.samples)

    def at(self, t: float) -> int:
        """The last sample taken by t seconds."""
        return [b for s, b in self.samples if s <= t][-1]


@dataclass
class PipelineResult:
    sent_bytes: int = 0
    requests: int = 0
    seconds: float = 0.0
    stalled: bool = False  # the server stopped taking bytes for stall_s
    closed_by_server: bool = False


def open_raw_session(host: str, port: int, timeout_s: float = 10.0) -> socket.socket:
    """A socket with its session open (ConnectResponse read), left blocking."""
    sock = socket.create_connection((host, port), timeout=timeout_s)
    sock.sendall(wire.connect_request())
    got = b""
    while len(got) < 4 or len(got) < 4 + int.from_bytes(got[:4], "big"):
        chunk = sock.recv(4096)
        if not chunk:
            raise AssertionError("the server closed the connection during the handshake")
        got += chunk
    return sock


def pipeline_without_reading(sock: socket.socket, make_request, max_bytes: int,
                             max_s: float, stall_s: float = 2.0) -> PipelineResult:
    """Send make_request(xid) after make_request(xid) and never read: until max_bytes are
    sent, max_s pass, or the server has taken nothing for stall_s (it stopped reading)."""
    sock.setblocking(False)
    result = PipelineResult()
    t0 = last_progress = time.monotonic()
    pending = b""
    xid = 1
    while result.sent_bytes < max_bytes:
        now = time.monotonic()
        if now - t0 > max_s:
            break
        if now - last_progress > stall_s:
            result.stalled = True
            break
        if not pending:
            pending = b"".join(make_request(x) for x in range(xid, xid + 64))
            xid += 64
        _, writable, _ = select.select([], [sock], [], 0.1)
        if not writable:
            continue
        try:
            n = sock.send(pending)
        except BlockingIOError:
            continue
        except OSError as e:
            if e.errno in (errno.EPIPE, errno.ECONNRESET):
                result.closed_by_server = True
                break
            raise
        if n:
            last_progress = time.monotonic()
            result.sent_bytes += n
            pending = pending[n:]
    result.requests = result.sent_bytes // len(make_request(1))  # taken by the server
    result.seconds = time.monotonic() - t0
    return result


def get_data_request(path: str):
    return lambda xid: wire.request(xid, OpCode.GET_DATA, r.GetDataRequest(path, False))


def set_data_request(path: str, data: bytes):
    return lambda xid: wire.request(xid, OpCode.SET_DATA, r.SetDataRequest(path, data, -1))


@dataclass
class Latencies:
    """Seconds per request of one kazoo client calling one after another."""

    samples: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str | None = None

    def quantile(self, q: float) -> float:
        s = sorted(self.samples)
        return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")

    def summary_ms(self) -> dict:
        return {"n": len(self.samples), "errors": self.errors, "first_error": self.first_error,
                "p50_ms": round(self.quantile(0.5) * 1000, 2),
                "p99_ms": round(self.quantile(0.99) * 1000, 2),
                "max_ms": round(max(self.samples, default=float("nan")) * 1000, 2),
                "mean_ms": round(statistics.fmean(self.samples) * 1000, 2)
                if self.samples else None}


class Measuring:
    """measure() on a thread, for the length of a `with` block."""

    def __init__(self, call, max_s: float = 120.0, pause_s: float = 0.002):
        self.call = call
        self.max_s = max_s
        self.pause_s = pause_s
        self.latencies = Latencies()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        end = time.monotonic() + self.max_s
        while not self._stop.is_set() and time.monotonic() < end:
            t = time.perf_counter()
            try:
                self.call()
            except Exception as e:  # noqa: BLE001 - counted, the first one kept
                self.latencies.errors += 1
                self.latencies.first_error = self.latencies.first_error or repr(e)
            self.latencies.samples.append(time.perf_counter() - t)
            self._stop.wait(self.pause_s)

    def __enter__(self) -> Measuring:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def report(name: str, figures: dict) -> None:
    """Print the figures (pytest -s shows them) and keep them where REPORT_DIR_ENV says."""
    text = json.dumps(figures, indent=2, sort_keys=True)
    print(f"\n== {name}\n{text}")
    where = os.environ.get(REPORT_DIR_ENV)
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        (Path(where) / f"{name}.json").write_text(text + "\n")


def mib(n: int) -> float:
    return round(n / (1024 * 1024), 1)
