"""Scenarios about many sessions rather than many requests: a watch fan-out (N sessions
watch one node, one setData, time until all N events arrive) and N mostly idle sessions
that only ping while a small closed-loop load runs beside them."""

from __future__ import annotations

import multiprocessing
import selectors
import statistics
import time
import uuid
from array import array

from zkcompat.bench import wire
from zkcompat.bench.loadgen import LoadPlan, cpu_seconds, rss_bytes, run_load
from zkcompat.bench.scenarios import MB, SATURATED, Row
from zkcompat.bench.servers import Target
from zkcompat.bench.workloads import GetDataWorkload
from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode

EVENT_TIMEOUT_S = 30.0
IDLE_SESSION_TIMEOUT_MS = 6_000  # a client pings every third of it: every 2 s
RECV_BYTES = 1 << 16


def _open_sessions(address: tuple[str, int], n: int,
                   timeout_ms: int = wire.SESSION_TIMEOUT_MS) -> list[wire.SyncSession]:
    out = []
    try:
        for _ in range(n):
            s = wire.SyncSession(*address, session_timeout_ms=timeout_ms)
            s.sock.setblocking(False)
            out.append(s)
    except BaseException:
        _close_all(out)
        raise
    return out


def _close_all(sessions: list[wire.SyncSession]) -> None:
    for s in sessions:
        s.sock.close()  # the server expires them; nothing waits for that


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def _drain(sel: selectors.BaseSelector, until: float, on_frame) -> None:
    """Read every readable session, handing (session, xid, now) to on_frame until it
    returns True or `until` passes."""
    unpack = wire.REPLY_HEADER.unpack_from
    while True:
        left = until - time.monotonic()
        if left <= 0:
            raise TimeoutError("no reply or event in time")
        for key, _ in sel.select(timeout=min(left, 0.5)):
            sess = key.data
            try:
                data = sess.sock.recv(RECV_BYTES)
            except BlockingIOError:
                continue
            if not data:
                raise wire.WireError("the server closed a session")
            now = time.monotonic()
            for body in sess.reader.feed(data):
                if on_frame(sess, unpack(body)[0], now):
                    return


def fanout(targets: list[Target], watchers: int, rounds: int, log=print) -> list[Row]:
    """Per target: `watchers` sessions (one client process) each set a data watch on one
    node (getData with watch), then one setData from another session; the time from
    sending that setData until the last watcher has read its event. Repeated `rounds`
    times, watches re-armed each round."""
    section = f"watch fan-out, {watchers:,} sessions x 1 node"
    rows = [Row(section, "until all events arrived, median round (ms)", fmt="{:.1f}"),
            Row(section, "until all events arrived, worst round (ms)", fmt="{:.1f}"),
            Row(section, "one event p50 (ms)", fmt="{:.2f}"),
            Row(section, "server CPU s / round", fmt="{:.3f}"),
            Row(section, "server RSS (MB)", fmt="{:,.0f}"),
            Row(section, "generator CPU while collecting (%)", fmt="{:.0f}")]
    for t in targets:
        pid = t.server.pid if t.server is not None else None
        path = f"/bench-fanout-{uuid.uuid4().hex[:8]}"
        admin = wire.SyncSession(*t.addresses[0])
        sessions: list[wire.SyncSession] = []
        try:
            if admin.create(path, b"0"):
                raise wire.WireError(f"create {path} failed")
            sessions = _open_sessions(t.addresses[0], watchers)
            sel = selectors.DefaultSelector()
            for s in sessions:
                sel.register(s.sock, selectors.EVENT_READ, s)
            alls, one, cpu, gen = [], [], [], []
            for rnd in range(rounds):
                pending = set()
                for s in sessions:
                    s.xid += 1
                    s.sock.send(wire.request(s.xid, OpCode.GET_DATA, r.GetDataRequest(path, True)))
                    pending.add(s)

                def armed(sess, xid, _now, pending=pending):
                    if xid == sess.xid:
                        pending.discard(sess)
                    return not pending

                _drain(sel, time.monotonic() + EVENT_TIMEOUT_S, armed)
                waiting = set(sessions)
                got: list[float] = []
                c0 = cpu_seconds(pid) if pid else None
                p0 = time.process_time()
                t0 = time.monotonic()
                admin.xid += 1
                admin.sock.sendall(wire.request(admin.xid, OpCode.SET_DATA, r.SetDataRequest(
                    path, str(rnd).encode(), -1)))

                def event(sess, xid, now, waiting=waiting, got=got, t0=t0):
                    if xid == wire.NOTIFICATION_XID and sess in waiting:
                        waiting.discard(sess)
                        got.append((now - t0) * 1000)
                    return not waiting

                _drain(sel, t0 + EVENT_TIMEOUT_S, event)
                wall = time.monotonic() - t0
                gen.append((time.process_time() - p0) / wall if wall > 0 else 0.0)
                admin._recv_frame()  # the setData reply
                if pid and c0 is not None:
                    time.sleep(0.05)
                    c1 = cpu_seconds(pid)
                    if c1 is not None:
                        cpu.append(c1 - c0)
                alls.append(max(got))
                one.append(statistics.median(got))
            rss = rss_bytes(pid) if pid else None
        finally:
            _close_all(sessions)
            admin.close()
        log(f"  fan-out to {watchers:,} on {t.name}: all events in "
            f"{statistics.median(alls):.1f} ms (median of {rounds}), worst {max(alls):.1f} ms")
        rows[0].values[t.name] = statistics.median(alls)
        rows[1].values[t.name] = max(alls)
        rows[2].values[t.name] = statistics.median(one)
        rows[3].values[t.name] = statistics.median(cpu) if cpu else None
        rows[4].values[t.name] = rss / MB if rss else None
        rows[5].values[t.name] = statistics.median(gen) * 100
    return rows


def _idle_process(address, n: int, ready, stop, results) -> None:
    try:
        sessions = _open_sessions(address, n, IDLE_SESSION_TIMEOUT_MS)
    except Exception as e:  # noqa: BLE001 - reported to the parent
        ready.put(("error", f"{type(e).__name__}: {e}"))
        return
    ready.put(("ready", None))
    sel = selectors.DefaultSelector()
    interval = IDLE_SESSION_TIMEOUT_MS / 3000.0
    start = time.monotonic()
    due = {}
    for i, s in enumerate(sessions):
        sel.register(s.sock, selectors.EVENT_READ, s)
        due[s] = start + interval * i / n  # staggered, like clients that connected apart
    sent_at: dict[wire.SyncSession, float] = {}
    lat = array("d")
    lost = 0
    unpack = wire.REPLY_HEADER.unpack_from
    ping = wire.request(wire.PING_XID, OpCode.PING, None)
    while not stop.is_set():
        now = time.monotonic()
        for s in sessions:
            if due[s] <= now and s not in sent_at:
                try:
                    s.sock.send(ping)
                except OSError:
                    continue
                sent_at[s] = now
                due[s] = now + interval
        for key, _ in sel.select(timeout=0.05):
            s = key.data
            try:
                data = s.sock.recv(RECV_BYTES)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                lost += 1
                sel.unregister(s.sock)
                sessions.remove(s)
                continue
            now = time.monotonic()
            for body in s.reader.feed(data):
                if unpack(body)[0] == wire.PING_XID and s in sent_at:
                    lat.append((now - sent_at.pop(s)) * 1000)
    _close_all(sessions)
    results.put((lost, lat.tobytes()))


def idle(targets: list[Target], idle_sessions: int, duration_s: float, warmup_s: float,
         log=print) -> list[Row]:
    """Per target: `idle_sessions` sessions (one client process) that only ping, every 2 s
    each, while a small closed-loop getData load (4 sessions x 1 in flight, one process)
    runs beside them for `duration_s`."""
    section = f"{idle_sessions:,} idle sessions (pings) + getData 4x1"
    rows = [Row(section, "active throughput (ops/s)", fmt="{:,.0f}"),
            Row(section, "active latency p50 (ms)", fmt="{:.2f}"),
            Row(section, "active latency p99 (ms)", fmt="{:.2f}"),
            Row(section, "active latency p999 (ms)", fmt="{:.2f}"),
            Row(section, "ping latency p99 (ms)", fmt="{:.2f}"),
            Row(section, "server CPU (% of a core)", fmt="{:.1f}"),
            Row(section, "server RSS (MB)", fmt="{:,.0f}"),
            Row(section, "sessions lost", fmt="{:,.0f}")]
    ctx = multiprocessing.get_context("fork")
    for t in targets:
        pid = t.server.pid if t.server is not None else None
        ready, results, stop = ctx.Queue(), ctx.Queue(), ctx.Event()
        proc = ctx.Process(target=_idle_process, args=(t.addresses[0], idle_sessions, ready,
                                                       stop, results), daemon=True)
        proc.start()
        try:
            kind, detail = ready.get(timeout=120)
            if kind == "error":
                raise RuntimeError(f"idle sessions on {t.name}: {detail}")
            wl = GetDataWorkload(root=f"/bench-idle-{uuid.uuid4().hex[:8]}")
            res = run_load(LoadPlan(wl, t.addresses, 1, 4, 1, duration_s, warmup_s,
                                    server_pid=pid))
            stop.set()
            lost, lat_bytes = results.get(timeout=60)
        finally:
            stop.set()
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join()
        lat = array("d")
        lat.frombytes(lat_bytes)
        pings = sorted(lat)
        log(f"  {idle_sessions:,} idle sessions on {t.name}: {res.throughput:,.0f} ops/s "
            f"active, {len(pings):,} pings, p99 {_pct(pings, 0.99):.2f} ms, lost {lost}")
        rows[0].values[t.name] = res.throughput
        rows[1].values[t.name] = res.percentile(0.5)
        rows[2].values[t.name] = res.percentile(0.99)
        rows[3].values[t.name] = res.percentile(0.999)
        rows[4].values[t.name] = _pct(pings, 0.99)
        rows[5].values[t.name] = (res.server_cpu_s / res.cpu_window_s * 100
                                  if res.server_cpu_s is not None and res.cpu_window_s else None)
        rows[6].values[t.name] = res.server_rss / MB if res.server_rss else None
        rows[7].values[t.name] = lost
    return rows


def fanout_saturated(rows: list[Row]) -> list[str]:
    out = []
    for row in rows:
        if row.metric.startswith("generator CPU while collecting"):
            for name, value in row.values.items():
                if value is not None and value >= SATURATED * 100:
                    out.append(f"{row.section} on {name}: the watching process at "
                               f"{value:.0f}% of a core while events arrived")
    return out
