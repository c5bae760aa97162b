"""Scenarios about many sessions rather than many requests: a watch fan-out (N sessions
watch one node, one setData, time until all N events arrive), N mostly idle sessions
that only ping while a small closed-loop load runs beside them, and `HeldSessions`, the
client processes that keep thousands of sessions open (pinging, optionally watching) for
the scale checks."""

from __future__ import annotations

import heapq
import multiprocessing
import queue
import random
import selectors
import socket
import statistics
import struct
import threading
import time
import uuid
from array import array
from collections import Counter
from collections.abc import Sequence

from bench import wire
from bench.loadgen import LoadPlan, run_load, total_cpu_seconds, total_rss_bytes
from bench.scenarios import MB, SATURATED, Row
from bench.servers import HOST, Target, raise_nofile_limit
from bench.workloads import GetDataWorkload
from zkcompat.jute import records as r
from zkcompat.jute.constants import EventType, OpCode
from zkcompat.jute.framing import FrameReader

EVENT_TIMEOUT_S = 30.0
IDLE_SESSION_TIMEOUT_MS = 6_000  # a client pings every third of it: every 2 s
# ZooKeeper's maxSessionTimeout is 20 ticks (40 s at tickTime 2000): fan-out sessions never
# ping, so the first of 10,000 must outlive the opening of the last
FANOUT_SESSION_TIMEOUT_MS = 40_000
RECV_BYTES = 1 << 16
OPEN_BATCH = 16  # handshakes in flight per client process, well inside a listen backlog of 50
OPEN_TIMEOUT_S = 300.0  # a client process that has not opened its share by then gives up
CLOSE_TIMEOUT_S = 30.0  # how long closeSession replies are waited for, all sessions together
READ_INTERVAL_S = 0.002  # PacedReader's pause between reads: ~500 reads/s
BASELINE_S = 2.0  # a PacedReader's reads before what it is beside begins, to compare with
FD_MARGIN = 64  # descriptors a process needs besides its sessions
COMMAND_TIMEOUT_S = 60.0  # a HeldSessions client process answers a command within this
RECONNECT_PAUSE_S = 1.0  # ClientCnxn.startConnect: a random pause up to 1 s before each try
EVENT_TYPE = struct.Struct(">i")


def _open_batch(addresses: list[tuple[str, int]], timeout_ms: int,
                source: str | None = None) -> list[wire.SyncSession]:
    """A session on each address, their handshakes in flight together; non-blocking once
    open."""
    batch: list[wire.SyncSession] = []
    try:
        for address in addresses:
            batch.append(wire.SyncSession(*address, session_timeout_ms=timeout_ms,
                                          handshake=False, source=source))
        for s in batch:
            s.finish_handshake()
            s.sock.setblocking(False)
    except BaseException:
        for s in batch:
            s.sock.close()
        raise
    return batch


def _open_sessions(address: tuple[str, int], n: int,
                   timeout_ms: int = wire.SESSION_TIMEOUT_MS) -> list[wire.SyncSession]:
    out: list[wire.SyncSession] = []
    try:
        while len(out) < n:
            out += _open_batch([address] * min(OPEN_BATCH, n - len(out)), timeout_ms)
    except BaseException:
        _close_all(out, graceful=False)
        raise
    return out


def _close_all(sessions: list[wire.SyncSession], graceful: bool = True) -> None:
    """Close every session. Graceful sends closeSession on each and waits (at most
    CLOSE_TIMEOUT_S) for the replies, so the server does not expire thousands of sessions
    in the middle of the next measurement."""
    if graceful:
        sel = selectors.DefaultSelector()
        pending: dict[wire.SyncSession, int] = {}
        for s in sessions:
            s.xid += 1
            try:
                s.sock.setblocking(False)
                s.sock.send(wire.request(s.xid, OpCode.CLOSE_SESSION, None))
                sel.register(s.sock, selectors.EVENT_READ, s)
                pending[s] = s.xid
            except OSError:
                continue
        deadline = time.monotonic() + CLOSE_TIMEOUT_S
        unpack = wire.REPLY_HEADER.unpack_from
        while pending and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=0.5):
                s = key.data
                try:
                    data = s.sock.recv(RECV_BYTES)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                try:
                    done = not data or any(unpack(b)[0] == pending[s] for b in s.reader.feed(data))
                except Exception:  # noqa: BLE001 - a garbled stream: nothing more to wait for
                    done = True
                if done:
                    sel.unregister(s.sock)
                    del pending[s]
        sel.close()
    for s in sessions:
        s.sock.close()


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def _drain(sel: selectors.BaseSelector, until: float, on_frame) -> None:
    """Read every readable session, handing (session, xid, now, body) to on_frame until it
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
                if on_frame(sess, unpack(body)[0], now, body):
                    return


class PacedReader:
    """One session on one server reading random nodes of `paths`, one read every
    READ_INTERVAL_S or so (a small load, beside what is measured), in a thread, each
    read's start and latency kept; `window` gives the latencies started inside it."""

    def __init__(self, port: int, paths: list[str]) -> None:
        self.port = port
        self.paths = paths
        self.started = array("d")
        self.latency_ms = array("d")
        self.errors = 0
        self.failure: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="paced-reader", daemon=True)

    def _run(self) -> None:
        rng = random.Random(27)
        try:
            session = wire.SyncSession(HOST, self.port)
        except (OSError, wire.WireError) as e:
            self.failure = f"{type(e).__name__}: {e}"
            return
        try:
            while not self._stop.is_set():
                t0 = time.monotonic()
                err, _ = session.get_data(rng.choice(self.paths))
                self.latency_ms.append((time.monotonic() - t0) * 1000)
                self.started.append(t0)
                self.errors += err != 0
                self._stop.wait(READ_INTERVAL_S)
        except (OSError, wire.WireError) as e:
            self.failure = f"{type(e).__name__}: {e}"
        finally:
            session.close()

    def __enter__(self) -> PacedReader:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def window(self, t0: float, t1: float) -> list[float]:
        return sorted(lat for start, lat in zip(self.started, self.latency_ms, strict=True)
                      if t0 <= start < t1)


def percentile(values: list[float], q: float) -> float | None:
    """The q quantile of already sorted values; None for none."""
    return values[min(len(values) - 1, int(q * len(values)))] if values else None


def _data_changed(body: bytes) -> bool:
    return EVENT_TYPE.unpack_from(body, wire.REPLY_HEADER.size)[0] == EventType.NODE_DATA_CHANGED


def fanout(targets: list[Target], watchers: int, rounds: int, log=print,
           section: str | None = None) -> list[Row]:
    """Per target: `watchers` sessions (one client process) each set a data watch on one
    node (getData with watch), then one setData from another session; the time from
    sending that setData (and from its reply) until the last watcher has read its
    NodeDataChanged. Repeated `rounds` times, watches re-armed each round."""
    raise_nofile_limit(watchers + FD_MARGIN)
    section = section or f"watch fan-out, {watchers:,} sessions x 1 node"
    rows = [Row(section, "until all events arrived, median round (ms)", fmt="{:.1f}"),
            Row(section, "until all events arrived, worst round (ms)", fmt="{:.1f}"),
            Row(section, "setData reply, median round (ms)", fmt="{:.1f}"),
            Row(section, "from the setData reply until all events, median (ms)",
                fmt="{:.1f}"),
            Row(section, "one event p50 (ms)", fmt="{:.2f}"),
            Row(section, "server CPU s / round", fmt="{:.3f}"),
            Row(section, "server RSS (MB)", fmt="{:,.0f}"),
            Row(section, "generator CPU while collecting (%)", fmt="{:.0f}")]
    for t in targets:
        pids = t.pids
        path = f"/bench-fanout-{uuid.uuid4().hex[:8]}"
        admin = wire.SyncSession(*t.addresses[0])
        sessions: list[wire.SyncSession] = []
        try:
            if admin.create(path, b"0"):
                raise wire.WireError(f"create {path} failed")
            sessions = _open_sessions(t.addresses[0], watchers, FANOUT_SESSION_TIMEOUT_MS)
            sel = selectors.DefaultSelector()
            for s in sessions:
                sel.register(s.sock, selectors.EVENT_READ, s)
            sel.register(admin.sock, selectors.EVENT_READ, admin)
            alls, replies, after_reply, one, cpu, gen = [], [], [], [], [], []
            for rnd in range(rounds):
                pending = set()
                for s in sessions:
                    s.xid += 1
                    s.sock.send(wire.request(s.xid, OpCode.GET_DATA, r.GetDataRequest(path, True)))
                    pending.add(s)

                def armed(sess, xid, _now, _body, pending=pending):
                    if xid == sess.xid:
                        pending.discard(sess)
                    return not pending

                _drain(sel, time.monotonic() + EVENT_TIMEOUT_S, armed)
                waiting = set(sessions)
                got: list[float] = []
                reply_ms: list[float] = []
                c0 = total_cpu_seconds(pids)
                p0 = time.process_time()
                t0 = time.monotonic()
                admin.xid += 1
                admin.sock.sendall(wire.request(admin.xid, OpCode.SET_DATA, r.SetDataRequest(
                    path, str(rnd).encode(), -1)))

                def event(sess, xid, now, body, waiting=waiting, got=got, reply_ms=reply_ms,
                          t0=t0, admin=admin):
                    if sess is admin:
                        if xid == admin.xid:
                            reply_ms.append((now - t0) * 1000)
                    elif xid == wire.NOTIFICATION_XID and sess in waiting and _data_changed(body):
                        waiting.discard(sess)
                        got.append((now - t0) * 1000)
                    return not waiting and bool(reply_ms)

                _drain(sel, t0 + EVENT_TIMEOUT_S, event)
                wall = time.monotonic() - t0
                gen.append((time.process_time() - p0) / wall if wall > 0 else 0.0)
                if c0 is not None:
                    time.sleep(0.05)
                    c1 = total_cpu_seconds(pids)
                    if c1 is not None:
                        cpu.append(c1 - c0)
                alls.append(max(got))
                replies.append(reply_ms[0])
                after_reply.append(max(got) - reply_ms[0])
                one.append(statistics.median(got))
            sel.unregister(admin.sock)
            rss = total_rss_bytes(pids)
        finally:
            _close_all(sessions)
            admin.close()
        log(f"  fan-out to {watchers:,} on {t.name}: all events in "
            f"{statistics.median(alls):.1f} ms (median of {rounds}), worst {max(alls):.1f} ms, "
            f"{statistics.median(after_reply):.1f} ms after the setData reply")
        rows[0].values[t.name] = statistics.median(alls)
        rows[1].values[t.name] = max(alls)
        rows[2].values[t.name] = statistics.median(replies)
        rows[3].values[t.name] = statistics.median(after_reply)
        rows[4].values[t.name] = statistics.median(one)
        rows[5].values[t.name] = statistics.median(cpu) if cpu else None
        rows[6].values[t.name] = rss / MB if rss else None
        rows[7].values[t.name] = statistics.median(gen) * 100
    return rows


class _Holder:
    """One client process's sessions, spread round robin over `addresses` (session k of
    all the processes' on addresses[k % n]; `first` is this process's first k), each
    pinging every third of its session timeout (as client libraries do), first pings
    spread over one interval; optionally setting watches, `inflight` requests at a time
    per session, and noting when each event on `fan_path` arrives. With `reconnect`, a
    session whose connection drops tries the next address as ClientCnxn does (after a
    random pause of up to RECONNECT_PAUSE_S), naming its session id, password and the last
    zxid it saw; one the server says has expired is counted and dropped."""

    def __init__(self, addresses: list[tuple[str, int]], timeout_ms: int, seed: int,
                 first: int = 0, source: str | None = None, reconnect: bool = False,
                 watches=lambda _k: [], inflight: int = 1) -> None:
        self.addresses = addresses
        self.watches = watches  # session k -> its watch requests, [(op, record)]
        self.inflight = inflight
        self.first = first
        self.source = source
        self.reconnect = reconnect
        self.timeout_ms = timeout_ms
        self.interval_s = timeout_ms / 3000.0
        self.rng = random.Random(seed)
        self.sel = selectors.DefaultSelector()
        self.sessions: list[wire.SyncSession] = []
        self.home: dict[wire.SyncSession, int] = {}  # index of the address it is on
        self.due: list[tuple[float, int, wire.SyncSession]] = []  # heap of next pings
        self.turn = 0  # orders heap entries of equal time
        self.ping_sent: dict[wire.SyncSession, float] = {}
        self.dead: set[wire.SyncSession] = set()
        self.lat = array("d")
        self.recording = False
        self.pings = self.late = self.notifications = 0
        self.todo: dict[wire.SyncSession, list] = {}  # watch registrations not yet sent
        self.outstanding: Counter = Counter()  # session -> requests without a reply
        self.replies = 0
        self.errors: Counter = Counter()
        self.ping = wire.request(wire.PING_XID, OpCode.PING, None)
        self.fan_path: str | None = None
        self.fan_times = array("d")  # arrival of each event on fan_path
        # reconnection: lost at and from which address; attempts in flight; their pauses
        self.down: dict[wire.SyncSession, tuple[float, int]] = {}
        self.connecting: dict[wire.SyncSession, float] = {}
        self.retry: list[tuple[float, int, wire.SyncSession]] = []
        self.moves: list[tuple[float, float, int, int]] = []  # lost, back, from, to
        self.expired = 0
        self.gave_up = []  # (address, started) of attempts that timed out without an answer
        self._checked_attempts = 0.0

    def open(self, n: int, deadline: float) -> str | None:
        """Open n sessions in batches, pinging the open ones meanwhile; an error text if
        the server refused or the deadline passed first."""
        while len(self.sessions) < n:
            if time.monotonic() > deadline:
                return f"only {len(self.sessions):,} of {n:,} sessions opened in time"
            ks = range(self.first + len(self.sessions),
                       self.first + min(n, len(self.sessions) + OPEN_BATCH))
            homes = [k % len(self.addresses) for k in ks]
            try:
                batch = _open_batch([self.addresses[h] for h in homes], self.timeout_ms,
                                    self.source)
            except (OSError, wire.WireError) as e:
                return f"after {len(self.sessions):,} sessions: {type(e).__name__}: {e}"
            now = time.monotonic()
            for s, home in zip(batch, homes, strict=True):
                self.sel.register(s.sock, selectors.EVENT_READ, s)
                self.home[s] = home
                self._ping_later(s, now + self.rng.uniform(0, self.interval_s))
                self.sessions.append(s)
            self.service(0.0)
        return None

    def _ping_later(self, s: wire.SyncSession, at: float) -> None:
        self.turn += 1
        heapq.heappush(self.due, (at, self.turn, s))

    def register(self, deadline: float) -> tuple:
        """Every live session sends its `watches(k)` requests (op, record), `inflight` at a
        time: (replies, error codes, seconds)."""
        t0 = time.monotonic()
        for i, s in enumerate(self.sessions):
            if s not in self.dead and s not in self.down:
                self.todo[s] = self.watches(self.first + i)[::-1]  # popped from the end
                for _ in range(self.inflight):
                    self._send_next(s)
        while self.todo or self.outstanding:
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {self.replies:,} watches set in time")
            self.service(0.05)
        return self.replies, dict(self.errors), time.monotonic() - t0

    def _send_next(self, s: wire.SyncSession) -> None:
        todo = self.todo.get(s)
        if not todo:
            self.todo.pop(s, None)
            return
        s.xid += 1
        self.outstanding[s] += 1
        op, record = todo.pop()
        self._send(s, wire.request(s.xid, op, record))

    def _send(self, s: wire.SyncSession, data: bytes) -> None:
        try:
            n = s.sock.send(data)
        except OSError:
            self._lose(s)
            return
        if n != len(data):  # requests are tiny and few in flight: never on loopback
            raise wire.WireError("a session's socket buffer filled up")

    def _lose(self, s: wire.SyncSession) -> None:
        if s in self.dead or s in self.down:
            return
        self.todo.pop(s, None)
        self.outstanding.pop(s, None)
        self.ping_sent.pop(s, None)
        self.sel.unregister(s.sock)
        if not self.reconnect:
            self.dead.add(s)
            return
        s.sock.close()
        now = time.monotonic()
        self.down[s] = (now, self.home[s])
        self._retry_later(s, now)

    def _retry_later(self, s: wire.SyncSession, now: float) -> None:
        self.turn += 1
        heapq.heappush(self.retry, (now + self.rng.uniform(0, RECONNECT_PAUSE_S), self.turn, s))

    def _attempt(self, s: wire.SyncSession, now: float) -> None:
        """Connect to the next address, without waiting: `_connecting` goes on from there."""
        self.home[s] = (self.home[s] + 1) % len(self.addresses)
        try:
            s.sock = wire.connect(*self.addresses[self.home[s]], self.source, timeout_s=None)
        except OSError:
            self._retry_later(s, now)
            return
        s.reader = FrameReader(wire.MAX_FRAME_BYTES)
        s.frames = []
        self.connecting[s] = now
        self.sel.register(s.sock, selectors.EVENT_WRITE, s)

    def _attempt_failed(self, s: wire.SyncSession, now: float) -> None:
        self.sel.unregister(s.sock)
        s.sock.close()
        del self.connecting[s]
        self._retry_later(s, now)

    def _connecting(self, s: wire.SyncSession, mask: int, now: float) -> None:
        """One step of a reconnection: connected (send the ConnectRequest), or its
        ConnectResponse arrived (back, or expired), or the attempt failed."""
        if mask & selectors.EVENT_WRITE:
            if s.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                self._attempt_failed(s, now)
                return
            try:
                s.sock.send(wire.connect_request(self.timeout_ms, s.session_id, s.passwd,
                                                 s.last_zxid))
            except OSError:
                self._attempt_failed(s, now)
                return
            self.sel.modify(s.sock, selectors.EVENT_READ, s)
            return
        try:
            data = s.sock.recv(RECV_BYTES)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        frames = s.reader.feed(data) if data else None
        if not data:
            self._attempt_failed(s, now)
        elif frames:
            resp, _ = r.ConnectResponse.decode(frames[0], 0)
            del self.connecting[s]
            lost, was = self.down.pop(s)
            if resp.timeOut <= 0 or resp.sessionId != s.session_id:
                self.expired += 1  # ClientCnxn: a non-positive timeout means Expired
                self.sel.unregister(s.sock)
                s.sock.close()
                self.dead.add(s)
                return
            self.moves.append((lost, now, was, self.home[s]))
            self._ping_later(s, now + self.rng.uniform(0, self.interval_s))

    def _check_attempts(self, now: float) -> None:
        """An attempt that took longer than ClientCnxn's connect timeout (the session
        timeout over the number of addresses) gives up and tries the next address."""
        if now - self._checked_attempts < 1.0:
            return
        self._checked_attempts = now
        limit_s = self.timeout_ms / 1000 / len(self.addresses)
        for s, started in list(self.connecting.items()):
            if now - started > limit_s:
                self.gave_up.append((self.home[s], started))
                self._attempt_failed(s, now)

    def service(self, timeout_s: float) -> None:
        """Send the pings that are due, start the reconnections that are due, then read
        what arrived within timeout_s."""
        now = time.monotonic()
        due = self.due
        while due and due[0][0] <= now:
            _, _, s = heapq.heappop(due)
            if s in self.dead or s in self.down:
                continue  # pings again once it is back
            if s in self.ping_sent:
                self.late += 1  # the previous ping is still unanswered
            else:
                self.ping_sent[s] = now
                self._send(s, self.ping)
            self._ping_later(s, now + self.interval_s)
        while self.retry and self.retry[0][0] <= now:
            self._attempt(heapq.heappop(self.retry)[2], now)
        if self.connecting:
            self._check_attempts(now)
        for heap in (due, self.retry):
            if heap:
                timeout_s = max(0.0, min(timeout_s, heap[0][0] - now))
        unpack = wire.REPLY_HEADER.unpack_from
        for key, mask in self.sel.select(timeout=timeout_s):
            s = key.data
            if s in self.connecting:
                self._connecting(s, mask, time.monotonic())
                continue
            try:
                data = s.sock.recv(RECV_BYTES)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                self._lose(s)
                continue
            now = time.monotonic()
            for body in s.reader.feed(data):
                xid, zxid, err = unpack(body)
                if zxid > s.last_zxid:
                    s.last_zxid = zxid
                if xid == wire.PING_XID:
                    sent = self.ping_sent.pop(s, None)
                    if sent is not None and self.recording:
                        self.pings += 1
                        self.lat.append((now - sent) * 1000)
                elif xid == wire.NOTIFICATION_XID:
                    self.notifications += 1
                    if self.fan_path is not None and r.WatcherEvent.decode(
                            body, wire.REPLY_HEADER.size)[0].path == self.fan_path:
                        self.fan_times.append(now)
                elif self.outstanding[s] > 0:
                    self.outstanding[s] -= 1
                    if not self.outstanding[s]:
                        del self.outstanding[s]
                    self.replies += 1
                    if err:
                        self.errors[err] += 1
                    self._send_next(s)
                else:
                    raise wire.WireError(f"unexpected reply xid {xid}")

    def take_pings(self) -> bytes:
        """The ping latencies recorded since the last call (ms, an array of doubles)."""
        out, self.lat = self.lat.tobytes(), array("d")
        return out

    def watch_fan(self, path: str | None) -> None:
        """Note the arrival of every event on `path` from now on, forgetting earlier ones."""
        self.fan_path, self.fan_times = path, array("d")

    def reconnections(self) -> tuple:
        """(sessions open, [(lost at, from address) of those reconnecting], [(lost, back,
        from, to) of those back], expired, [(address, started) of attempts given up
        unanswered]), since the last `forget_moves`."""
        live = len(self.sessions) - len(self.dead)
        return live, list(self.down.values()), list(self.moves), self.expired, self.gave_up

    def forget_moves(self) -> None:
        self.moves, self.expired, self.gave_up = [], 0, []

    def live(self) -> list[wire.SyncSession]:
        return [s for s in self.sessions if s not in self.dead and s not in self.down]


# What a HeldSessions client process does when told: name -> (holder, argument) -> reply.
_COMMANDS = {
    "register": lambda h, _: h.register(time.monotonic() + OPEN_TIMEOUT_S),
    "measure": lambda h, _: setattr(h, "recording", True),
    "pings": lambda h, _: h.take_pings(),
    "fanout": lambda h, path: h.watch_fan(path),
    "events": lambda h, _: h.fan_times.tobytes(),
    "forget_moves": lambda h, _: h.forget_moves(),
    "reconnections": lambda h, _: h.reconnections(),
}


def _hold_process(index: int, addresses, first: int, n: int, timeout_ms: int,
                  source: str | None, reconnect: bool, watches, inflight: int, commands,
                  messages) -> None:
    """A client process of HeldSessions: open its n sessions and report, then ping and do
    what `commands` says (reporting each), until told to stop; then close the sessions and
    report what it measured."""
    holder = None
    try:
        raise_nofile_limit(n + FD_MARGIN)
        holder = _Holder(addresses, timeout_ms, index, first, source, reconnect, watches,
                         inflight)
        t0 = time.monotonic()
        error = holder.open(n, t0 + OPEN_TIMEOUT_S)
        messages.put(("opened", index, (len(holder.sessions), error, time.monotonic() - t0)))
        while True:
            try:
                what, arg = commands.get_nowait()
            except queue.Empty:
                holder.service(0.05)
                continue
            if what == "stop":
                break
            messages.put((what, index, _COMMANDS[what](holder, arg)))
        lost = len(holder.dead)
        _close_all(holder.live())
        messages.put(("done", index, (lost, holder.pings, holder.late, holder.notifications,
                                      holder.lat.tobytes())))
    except Exception as e:  # noqa: BLE001 - reported to the parent, which fails the run
        if holder is not None:
            _close_all(holder.live(), graceful=False)
        messages.put(("error", index, f"{type(e).__name__}: {e}"))


class HeldSessions:
    """`sessions` sessions spread round robin over `addresses`, held by up to `processes`
    client processes (process i connecting from sources[i] if given), each session pinging
    every third of `timeout_ms` until `stop`. With `watch_paths`, every session sets a
    getData watch on each of them when `register` is called; with `watches`, session k sends
    the requests `watches(k)` gives instead. With `reconnect`, sessions that lose their
    connection reconnect to another address (`reconnections` tells how that went)."""

    def __init__(self, addresses: list[tuple[str, int]], sessions: int, processes: int = 2,
                 timeout_ms: int = IDLE_SESSION_TIMEOUT_MS, watch_paths: Sequence[str] = (),
                 inflight: int = 16, watches=None, sources: Sequence[str] | None = None,
                 reconnect: bool = False) -> None:
        ctx = multiprocessing.get_context("fork")
        self.processes = max(1, min(processes, sessions))
        share, extra = divmod(sessions, self.processes)
        self.shares = [share + (1 if i < extra else 0) for i in range(self.processes)]
        firsts = [sum(self.shares[:i]) for i in range(self.processes)]
        if watches is None:
            reqs = [(OpCode.GET_DATA, r.GetDataRequest(p, True)) for p in watch_paths]
            watches = lambda _k: reqs  # noqa: E731 - the same watches for every session
        self.commands = [ctx.Queue() for _ in range(self.processes)]
        self.messages = ctx.Queue()
        self.procs = [ctx.Process(target=_hold_process, daemon=True, args=(
            i, list(addresses), firsts[i], n, timeout_ms,
            sources[i % len(sources)] if sources else None, reconnect, watches, inflight,
            self.commands[i], self.messages)) for i, n in enumerate(self.shares)]

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def _collect(self, kind: str, timeout_s: float) -> list:
        """One `kind` message from every process, in process order."""
        got: dict[int, object] = {}
        deadline = time.monotonic() + timeout_s
        while len(got) < len(self.procs):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"client processes did not report {kind!r} in time")
            what, index, detail = self.messages.get(timeout=left)
            if what == "error":
                raise RuntimeError(f"session client process {index}: {detail}")
            if what != kind:
                raise RuntimeError(f"session client process {index}: {what} before {kind}")
            got[index] = detail
        return [got[i] for i in range(len(self.procs))]

    def command(self, what: str, arg=None, timeout_s: float = COMMAND_TIMEOUT_S) -> list:
        """Tell every client process to do `what` (of _COMMANDS); their replies."""
        for q in self.commands:
            q.put((what, arg))
        return self._collect(what, timeout_s)

    def start(self) -> tuple[int, list[str], float]:
        """Open every session: (how many opened, the errors, seconds until the last)."""
        for p in self.procs:
            p.start()
        opened = self._collect("opened", OPEN_TIMEOUT_S + 30)
        return (sum(o[0] for o in opened), [o[1] for o in opened if o[1]],
                max(o[2] for o in opened))

    def register(self) -> tuple[int, Counter, float]:
        """Set the watches: (replies, error codes, seconds until the last process was done)."""
        done = self.command("register", timeout_s=OPEN_TIMEOUT_S + 30)
        errors: Counter = Counter()
        for d in done:
            errors.update(d[1])
        return sum(d[0] for d in done), errors, max(d[2] for d in done)

    def measure(self) -> None:
        """Ping latencies count from now on."""
        self.command("measure")

    def pings(self) -> list[float]:
        """The ping latencies (ms) since measuring began or the last call, sorted."""
        lat = array("d")
        for d in self.command("pings"):
            lat.frombytes(d)
        return sorted(lat)

    def stop(self) -> tuple[int, int, int, int, list[float]]:
        """Close the sessions: (lost, pings, late pings, notifications, ping latencies ms)."""
        for q in self.commands:
            q.put(("stop", None))
        done = self._collect("done", CLOSE_TIMEOUT_S + 30)
        lat = array("d")
        for d in done:
            lat.frombytes(d[4])
        return (sum(d[0] for d in done), sum(d[1] for d in done), sum(d[2] for d in done),
                sum(d[3] for d in done), sorted(lat))

    def close(self) -> None:
        for q in self.commands:
            q.put(("stop", None))
        for p in self.procs:
            if p.pid is None:
                continue
            p.join(CLOSE_TIMEOUT_S + 5)
            if p.is_alive():
                p.kill()
                p.join()

    def __enter__(self) -> HeldSessions:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


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
    for t in targets:
        with HeldSessions(t.addresses[:1], idle_sessions, processes=1,
                          timeout_ms=IDLE_SESSION_TIMEOUT_MS) as held:
            opened, errors, _ = held.start()
            if errors:
                raise RuntimeError(f"idle sessions on {t.name}: {errors[0]}")
            held.measure()
            wl = GetDataWorkload(root=f"/bench-idle-{uuid.uuid4().hex[:8]}")
            res = run_load(LoadPlan(wl, t.addresses, 1, 4, 1, duration_s, warmup_s,
                                    server_pids=t.pids))
            lost, _, _, _, pings = held.stop()
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
