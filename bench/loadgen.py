"""Closed-loop load from several client processes, many requests in flight per session.

Each process opens its sessions (spread round robin over the target's addresses), keeps
`inflight` requests outstanding on each (a reply sends the next one), and reports the
replies that arrived inside the measured window, their latencies and error codes. Either
a duration (throughput) or a total number of requests (loading data) ends the run. With
a rate the load is offered instead, open loop: requests go out at that pace to sessions
with fewer than `inflight` outstanding, and those due when every session is full are
counted as missed, not sent later. `run_loads` runs several plans side by side.

A run with a total survives a server closing a session's connection, as a client would:
the session reconnects (a new session) to the next address and sends again what was
outstanding. A run with a duration fails instead, its numbers being no longer comparable.
"""

from __future__ import annotations

import multiprocessing
import os
import selectors
import socket
import time
from array import array
from collections import Counter
from dataclasses import dataclass, field

from bench import wire
from bench.workloads import SessionSlot, Workload
from zkcompat.jute.constants import Code
from zkcompat.jute.framing import FrameReader

RECV_BYTES = 1 << 18
READY_TIMEOUT_S = 60.0
RESULT_GRACE_S = 120.0  # after the planned end, how long a client process may take to report
START_DELAY_S = 0.3  # every process starts at one moment a little after all are ready
LATENCY_SAMPLES_MAX = 1_000_000
PACE_TICK_S = 0.001  # with a rate: how long a client process waits for replies at most
CONNECT_TIMEOUT_S = 10.0  # one connect and handshake
# With a total: how long one outage of a session may last, trying each address in turn,
# before the run fails; a ZooKeeper follower that lost its leader serves again once a new
# one is elected, within seconds.
RECONNECT_MAX_S = 60.0
RECONNECT_PAUSE_S = 0.2  # between two connect attempts
NO_REPLY_MAX_S = 60.0  # with a total: no reply (nor reconnect) for this long fails the run
NODEEXISTS = int(Code.NODEEXISTS)


@dataclass
class LoadPlan:
    workload: Workload
    addresses: list[tuple[str, int]]
    processes: int = 2
    sessions: int = 8  # per process
    inflight: int = 32  # per session
    duration_s: float | None = 10.0
    warmup_s: float = 2.0
    total_requests: int | None = None  # instead of a duration: stop after this many
    latencies: bool = True
    rate_per_s: float | None = None  # offered requests per second, all processes together
    # The server's processes (an ensemble's members), sampled for CPU and RSS over the
    # measured window: both are the sums over them.
    server_pids: list[int] = field(default_factory=list)

    def slots(self) -> list[SessionSlot]:
        return [SessionSlot(p, s) for p in range(self.processes) for s in range(self.sessions)]


@dataclass
class LoadResult:
    replies: int = 0  # inside the measured window
    seconds: float = 0.0
    errors: Counter = field(default_factory=Counter)  # err code -> count (all replies)
    latencies_ms: list[float] = field(default_factory=list)  # sorted sample
    total_replies: int = 0
    server_cpu_s: float | None = None  # utime+stime of the server inside the window
    server_rss: int | None = None  # bytes, at the end of the window
    generator_cpu: float | None = None  # busiest client process: CPU s / wall s (1.0 = a core)
    generator_cpu_all: float | None = None  # all client processes together, in cores
    cpu_window_s: float = 0.0
    offered: int = 0  # with a rate: requests due inside the measured window
    missed: int = 0  # ... of which not sent, every session having `inflight` outstanding
    reconnects: int = 0  # with a total: sessions opened again after the server closed one
    # ... requests sent again on the new session whose reply was NODEEXISTS: the create was
    # applied before the connection closed, so it counts as done, not as an error
    resent_existing: int = 0

    @property
    def cpu_per_kop(self) -> float | None:
        """Server CPU seconds per 1,000 replies inside the window."""
        if self.server_cpu_s is None or not self.replies or self.cpu_window_s <= 0:
            return None
        # the CPU window is the parent's, the replies the clients'; scale to the clients'
        return self.server_cpu_s * (self.seconds / self.cpu_window_s) / self.replies * 1000

    @property
    def throughput(self) -> float:
        return self.replies / self.seconds if self.seconds > 0 else 0.0

    def percentile(self, q: float) -> float:
        lat = self.latencies_ms
        if not lat:
            return float("nan")
        return lat[min(len(lat) - 1, int(q * len(lat)))]


def _open(address: tuple[str, int], timeout_s: float) -> tuple[socket.socket, FrameReader]:
    """A new session (id 0) on `address`, its handshake read; the socket non-blocking."""
    sock = wire.connect(*address, timeout_s=timeout_s)
    try:
        sock.sendall(wire.connect_request())
        reader = FrameReader(wire.MAX_FRAME_BYTES)
        frames: list[bytes] = []
        while not frames:
            data = sock.recv(4096)
            if not data:
                raise wire.WireError("closed during the handshake")
            frames = reader.feed(data)
        if len(frames) > 1:
            raise wire.WireError("unexpected frames after the handshake")
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock, reader


class _Session:
    """One session's connection and its outstanding requests. With `frames` (a run with a
    total) it keeps each outstanding request's bytes by xid, so that `reconnect` can send
    them again on a new session."""

    __slots__ = ("sock", "reader", "out", "requests", "sent_at", "xid", "outstanding",
                 "writing", "at", "frames", "resent")

    def __init__(self, addresses: list[tuple[str, int]], at: int, requests,
                 keep_frames: bool) -> None:
        self.sock, self.reader = _open(addresses[at], CONNECT_TIMEOUT_S)
        self.at = at  # the index in addresses of the server it is connected to
        self.out = bytearray()
        self.requests = requests
        self.sent_at: dict[int, float] = {}
        self.xid = 0
        self.outstanding = 0
        self.writing = False
        self.frames: dict[int, bytes] | None = {} if keep_frames else None
        self.resent: set[int] = set()  # outstanding xids sent on an earlier connection too

    def queue_next(self, now: float) -> None:
        op, record = next(self.requests)
        self.xid += 1
        data = wire.request(self.xid, op, record)
        self.out += data
        if self.frames is not None:
            self.frames[self.xid] = data
        self.sent_at[self.xid] = now
        self.outstanding += 1

    def reconnect(self, sel, addresses: list[tuple[str, int]]) -> None:
        """The server closed the connection: a new session on the next address that takes
        one (round robin, RECONNECT_PAUSE_S between attempts), registered with `sel`, and
        every outstanding request queued on it again, in xid order, with its xid and its
        first send time (so its latency includes the outage). The xids go on from where
        they were. WireError if no address takes a session within RECONNECT_MAX_S."""
        assert self.frames is not None, "only a run with a total reconnects"
        assert self.frames.keys() == self.sent_at.keys()
        sel.unregister(self.sock)
        self.sock.close()
        deadline = time.monotonic() + RECONNECT_MAX_S
        last = "no attempt"
        while True:
            self.at = (self.at + 1) % len(addresses)
            left_s = deadline - time.monotonic()
            try:
                self.sock, self.reader = _open(addresses[self.at],
                                               max(0.1, min(CONNECT_TIMEOUT_S, left_s)))
                break
            except (OSError, wire.WireError) as e:
                last = f"{addresses[self.at]}: {type(e).__name__}: {e}"
            if time.monotonic() + RECONNECT_PAUSE_S >= deadline:
                raise wire.WireError(f"the server closed a session and none took a new one "
                                     f"within {RECONNECT_MAX_S:g} s (last: {last})")
            time.sleep(RECONNECT_PAUSE_S)
        self.out = bytearray(b"".join(self.frames[xid] for xid in sorted(self.sent_at)))
        self.resent.update(self.sent_at)
        self.writing = False
        sel.register(self.sock, selectors.EVENT_READ, self)


def _client_process(index: int, plan: LoadPlan, ready, go, results) -> None:
    try:
        results.put(_run_client(index, plan, ready, go))
    except Exception as e:  # noqa: BLE001 - reported to the parent, which fails the run
        ready.put(("error", index, f"{type(e).__name__}: {e}"))
        results.put(("error", index, f"{type(e).__name__}: {e}"))


def _run_client(index: int, plan: LoadPlan, ready, go):
    budgeted = plan.total_requests is not None  # only such a run survives a closed session
    sessions = []
    for s in range(plan.sessions):
        slot = SessionSlot(index, s)
        at = (index * plan.sessions + s) % len(plan.addresses)
        sessions.append(_Session(plan.addresses, at, plan.workload.requests(slot), budgeted))
    ready.put(("ready", index, None))
    if not go.wait(READY_TIMEOUT_S):
        raise TimeoutError("no start signal")
    start_at = go.start_at.value
    while time.monotonic() < start_at:
        time.sleep(min(0.01, max(0.0, start_at - time.monotonic())))
    budget = None
    if plan.total_requests is not None:
        share, extra = divmod(plan.total_requests, plan.processes)
        budget = share + (1 if index < extra else 0)
    measure_from = start_at + (plan.warmup_s if plan.duration_s else 0.0)
    end_at = start_at + plan.duration_s if plan.duration_s else float("inf")

    sel = selectors.DefaultSelector()
    issued = 0
    now = time.monotonic()
    rate = plan.rate_per_s / plan.processes if plan.rate_per_s else None
    for sess in sessions:
        sel.register(sess.sock, selectors.EVENT_READ, sess)
        for _ in range(plan.inflight if rate is None else 0):
            if budget is not None and issued >= budget:
                break
            sess.queue_next(now)
            issued += 1
    replies = total = 0
    offered = missed = 0  # inside the window, with a rate
    due_sent = 0  # requests the pace has called for so far
    turn = 0  # the next session a paced request tries
    errors: Counter = Counter()
    lat = array("d")
    record_latency = plan.latencies
    unpack = wire.REPLY_HEADER.unpack_from
    last_reply = start_at
    stalled_from = start_at  # the last reply or reconnect
    reconnects = resent_existing = 0

    def lost(sess: _Session) -> None:
        """The server closed sess's connection (budgeted runs only)."""
        nonlocal reconnects, stalled_from
        sess.reconnect(sel, plan.addresses)
        reconnects += 1
        stalled_from = time.monotonic()

    while True:
        now = time.monotonic()
        if rate is not None and now < end_at:
            due = int((now - start_at) * rate) - due_sent
            due_sent += due
            counted = measure_from <= now
            offered += due if counted else 0
            while due > 0:
                for _ in range(len(sessions)):
                    sess = sessions[turn]
                    turn = (turn + 1) % len(sessions)
                    if sess.outstanding < plan.inflight:
                        sess.queue_next(now)
                        due -= 1
                        break
                else:
                    missed += due if counted else 0
                    break
        for sess in sessions:
            if not _flush(sel, sess, budgeted):
                lost(sess)
        if now >= end_at:
            break
        if budget is not None and issued >= budget and all(s.outstanding == 0 for s in sessions):
            break
        for key, mask in sel.select(timeout=0.5 if rate is None else PACE_TICK_S):
            sess = key.data
            if mask & selectors.EVENT_WRITE and not _flush(sel, sess, budgeted):
                lost(sess)
                continue
            if not mask & selectors.EVENT_READ:
                continue
            try:
                data = sess.sock.recv(RECV_BYTES)
            except BlockingIOError:
                continue
            except OSError:  # ConnectionResetError and the like
                if not budgeted:
                    raise
                data = b""
            if not data:
                if not budgeted:
                    raise wire.WireError("the server closed a session")
                lost(sess)
                continue
            now = time.monotonic()
            for body in sess.reader.feed(data):
                xid, _, err = unpack(body)
                if xid in (wire.NOTIFICATION_XID, wire.PING_XID):
                    continue
                sent = sess.sent_at.pop(xid)
                if sess.frames is not None:
                    del sess.frames[xid]
                sess.outstanding -= 1
                total += 1
                if err:
                    if err == NODEEXISTS and xid in sess.resent:
                        resent_existing += 1  # applied before the old connection closed
                    else:
                        errors[err] += 1
                if sess.resent:
                    sess.resent.discard(xid)
                if measure_from <= now < end_at:
                    replies += 1
                    if record_latency and len(lat) < LATENCY_SAMPLES_MAX:
                        lat.append((now - sent) * 1000.0)
                last_reply = stalled_from = now
                if rate is None and now < end_at and (budget is None or issued < budget):
                    sess.queue_next(now)
                    issued += 1
        if budget is not None and time.monotonic() - stalled_from > NO_REPLY_MAX_S:
            raise TimeoutError(f"no reply for {NO_REPLY_MAX_S:g} s")
    for sess in sessions:
        sess.sock.close()  # the sessions expire on the server; nothing waits for that
    window = (min(end_at, time.monotonic()) - measure_from) if plan.duration_s else \
        (last_reply - start_at)
    return ("ok", index, {"replies": replies if plan.duration_s else total, "total": total,
                          "seconds": window, "errors": dict(errors), "lat": lat.tobytes(),
                          "offered": offered, "missed": missed, "reconnects": reconnects,
                          "resent_existing": resent_existing})


def _flush(sel, sess: _Session, budgeted: bool) -> bool:
    """Sends what the socket takes of sess.out; False if the connection is broken and the
    run is budgeted (the caller reconnects the session), else a broken one raises."""
    if not sess.out:
        return True
    try:
        n = sess.sock.send(sess.out)
    except BlockingIOError:
        n = 0
    except OSError:  # BrokenPipeError, ConnectionResetError: the server closed it
        if not budgeted:
            raise
        return False
    del sess.out[:n]
    want_write = bool(sess.out)
    if want_write != sess.writing:
        sess.writing = want_write
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if want_write else 0)
        sel.modify(sess.sock, events, sess)
    return True


class _Go:
    """A start event plus the shared moment every process begins at."""

    def __init__(self, ctx) -> None:
        self.event = ctx.Event()
        self.start_at = ctx.Value("d", 0.0)

    def wait(self, timeout):
        return self.event.wait(timeout)


CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """utime+stime of a process (all its threads) from /proc/PID/stat; None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_bytes(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def total_cpu_seconds(pids: list[int]) -> float | None:
    """utime+stime summed over processes; None if there are none or one is gone."""
    times = [cpu_seconds(p) for p in pids]
    return sum(times) if times and None not in times else None


def total_rss_bytes(pids: list[int]) -> int | None:
    """VmRSS summed over processes; None if there are none or one is gone."""
    sizes = [rss_bytes(p) for p in pids]
    return sum(sizes) if sizes and None not in sizes else None


def _sleep_until(t: float) -> None:
    while (left := t - time.monotonic()) > 0:
        time.sleep(min(left, 0.5))


def _sample(server_pids: list[int], pids: list[int]) -> tuple[float, list[float | None]]:
    """Now, then the servers' CPU seconds (summed) followed by each client process's."""
    return time.monotonic(), [total_cpu_seconds(server_pids)] + [cpu_seconds(p) for p in pids]


def run_load(plan: LoadPlan) -> LoadResult:
    """Set the workload up, run the client processes, merge what they measured."""
    return run_loads([plan])[0]


def run_loads(plans: list[LoadPlan]) -> list[LoadResult]:
    """Several plans side by side (reads beside writes, say): each workload set up, then
    every plan's client processes started at one moment; what each plan's measured, in
    order. Plans with a duration must share it and their warm-up."""
    timed = {(p.duration_s, p.warmup_s) for p in plans if p.duration_s}
    assert len(timed) <= 1, f"plans side by side with different durations: {timed}"
    for plan in plans:
        host, port = plan.addresses[0]
        admin = wire.SyncSession(host, port)
        try:
            plan.workload.setup(admin, plan.slots())
        finally:
            admin.close()
    ctx = multiprocessing.get_context("fork")
    go = _Go(ctx)
    runs: list[tuple[LoadPlan, object, object, list]] = []
    try:
        for plan in plans:
            ready, results = ctx.Queue(), ctx.Queue()
            procs = [ctx.Process(target=_client_process, args=(i, plan, ready, go, results),
                                 daemon=True) for i in range(plan.processes)]
            runs.append((plan, ready, results, procs))
            for p in procs:
                p.start()
        for _, ready, _, procs in runs:
            for _ in procs:
                kind, index, detail = ready.get(timeout=READY_TIMEOUT_S)
                if kind == "error":
                    raise RuntimeError(f"client process {index}: {detail}")
        start_at = time.monotonic() + START_DELAY_S
        go.start_at.value = start_at
        go.event.set()
        cpu: list = [None] * len(runs)
        if timed:
            # CPU of the servers and of every client process over the measured window
            duration_s, warmup_s = next(iter(timed))
            _sleep_until(start_at + warmup_s)
            c0 = [_sample(plan.server_pids, [p.pid for p in procs])
                  for plan, _, _, procs in runs]
            _sleep_until(start_at + duration_s)
            for i, (plan, _, _, procs) in enumerate(runs):
                if plan.duration_s:
                    t1, c1 = _sample(plan.server_pids, [p.pid for p in procs])
                    cpu[i] = (t1 - c0[i][0], c0[i][1], c1, total_rss_bytes(plan.server_pids))
        return [_merge(plan, results, procs, start_at, cpu[i])
                for i, (plan, _, results, procs) in enumerate(runs)]
    finally:
        for _, _, _, procs in runs:
            for p in procs:
                p.join(5)
                if p.is_alive():
                    p.kill()
                    p.join()


def _merge(plan: LoadPlan, results, procs: list, start_at: float, cpu) -> LoadResult:
    """One plan's client processes' reports, merged, with its CPU sample if it has one."""
    wait_s = (plan.duration_s or 0) + START_DELAY_S + RESULT_GRACE_S
    if plan.total_requests is not None:
        wait_s += 3600
    deadline = start_at + wait_s
    merged = LoadResult()
    lat = array("d")
    seconds = []
    for _ in procs:
        kind, index, detail = results.get(timeout=max(1.0, deadline - time.monotonic()))
        if kind == "error":
            raise RuntimeError(f"client process {index}: {detail}")
        merged.replies += detail["replies"]
        merged.total_replies += detail["total"]
        merged.errors.update(detail["errors"])
        merged.offered += detail["offered"]
        merged.missed += detail["missed"]
        merged.reconnects += detail["reconnects"]
        merged.resent_existing += detail["resent_existing"]
        seconds.append(detail["seconds"])
        lat.frombytes(detail["lat"])
    merged.seconds = max(seconds)
    merged.latencies_ms = sorted(lat)
    if cpu is not None:
        window, c0, c1, rss = cpu
        merged.cpu_window_s = window
        if c0[0] is not None and c1[0] is not None:
            merged.server_cpu_s = c1[0] - c0[0]
        merged.server_rss = rss
        gen = [b - a for a, b in zip(c0[1:], c1[1:], strict=True)
               if a is not None and b is not None]
        if gen and window > 0:
            merged.generator_cpu = max(gen) / window
            merged.generator_cpu_all = sum(gen) / window
    return merged
