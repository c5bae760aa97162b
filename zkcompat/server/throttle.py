"""ZooKeeper's two throttles: BlueThrottle's token bucket on new sessions, and RequestThrottler's
bound on requests in process. ConnectionThrottle is pure (the clock and the RNG come in);
RequestThrottler holds requests in one FIFO, so every session's order is kept, and answers
one that waited longer than throttled_op_wait_time THROTTLEDOP.
"""

from __future__ import annotations

import asyncio
import logging
import random
import weakref
from collections import deque
from collections.abc import Callable

from zkcompat.config.limits import ConnectionThrottleSettings, RequestThrottleSettings
from zkcompat.jute.constants import OpCode
from zkcompat.server.request import mark_throttled
from zkcompat.server.stats import Summary

log = logging.getLogger(__name__)

_CLOSE_SESSION = OpCode.CLOSE_SESSION
# Request.isThrottlable: never a ping or a session's birth or death. Auth and SASL packets
# never reach ZooKeeper's throttler (processPacket answers them itself); here they wait in
# order with the rest, and are never marked either.
_NOT_THROTTLABLE = frozenset((OpCode.PING, OpCode.CLOSE_SESSION, OpCode.CREATE_SESSION,
                              OpCode.AUTH, OpCode.SASL))


class ConnectionThrottle:
    """BlueThrottle: a token bucket with BLUE's random early drop on top.

    Each new session takes `need` tokens (1, or a weight); the bucket refills fill_count
    tokens per fill_time_ms, up to `tokens`. With freeze_time_ms set, every freeze period
    the drop chance rises by drop_increase while the bucket is empty, and falls by
    drop_decrease while the deficit is at most decrease_ratio of the bucket; a session is
    refused with that chance even when tokens are left. At the bound the connection is
    refused (ClientCnxnLimitException): the caller closes it.
    """

    def __init__(self, settings: ConnectionThrottleSettings, now_ms: int,
                 rng: random.Random | None = None):
        self.max_tokens = settings.tokens
        self.fill_time_ms = settings.fill_time_ms
        self.fill_count = settings.fill_count
        self.freeze_time_ms = settings.freeze_time_ms
        self.drop_increase = settings.drop_increase
        self.drop_decrease = settings.drop_decrease
        self.decrease_point = settings.decrease_ratio
        self.weight_enabled = settings.weight_enabled
        self.global_weight = settings.global_session_weight
        self.renew_weight = settings.renew_session_weight
        self.tokens = self.max_tokens
        self.last_time_ms = now_ms
        self.last_freeze_ms = now_ms
        self.drop = 0.0
        self.rng = rng if rng is not None else random.Random()

    @property
    def enabled(self) -> bool:
        return self.max_tokens != 0

    @property
    def deficit(self) -> int:
        return self.max_tokens - self.tokens

    def tokens_needed(self, renew: bool) -> int:
        """processConnectRequest: 1 without weights; with them a new (global) session's
        weight, or a reconnect's (zkcompat has no local sessions)."""
        if not self.weight_enabled:
            return 1
        return self.renew_weight if renew else self.global_weight

    def check_limit(self, need: int, now_ms: int) -> bool:
        """BlueThrottle.checkLimit: whether a session needing `need` tokens may start now."""
        if self.max_tokens == 0:
            return True
        diff = now_ms - self.last_time_ms
        if diff > self.fill_time_ms:
            # Java computes this in a long and casts it to int, which wraps after a long
            # enough idle time; the bucket is full by then anyway.
            refill = min(diff * self.fill_count // self.fill_time_ms, self.max_tokens)
            self.tokens = min(self.tokens + refill, self.max_tokens)
            self.last_time_ms = now_ms
        if self.freeze_time_ms != -1 and not self.check_blue(now_ms):
            return False
        if self.tokens < need:
            return False
        self.tokens -= need
        return True

    def check_blue(self, now_ms: int) -> bool:
        """BlueThrottle.checkBlue: adjust the drop chance once per freeze period, then draw."""
        length = self.max_tokens - self.tokens
        diff = now_ms - self.last_freeze_ms
        threshold = _java_round(self.max_tokens * self.decrease_point)
        if diff > self.freeze_time_ms:
            if length == self.max_tokens and self.drop < 1.0:
                self.drop = min(self.drop + self.drop_increase, 1.0)
            elif length <= threshold and self.drop > 0.0:
                self.drop = max(self.drop - self.drop_decrease, 0.0)
            self.last_freeze_ms = now_ms
        return not self.rng.random() < self.drop


def _java_round(x: float) -> int:
    """Math.round: half up (Python's round is half to even)."""
    return int((x + 0.5) // 1)


class RequestThrottler:
    """RequestThrottler: while `max_requests` requests are in process, the rest wait here,
    in arrival order across all sessions (so each session's order holds), and go on as
    requests finish. A request found stale when its turn comes (its connection closed, or
    older than its session's timeout with the latency check on) is dropped with drop_stale,
    as ZooKeeper drops it; a connection that still lives is then closed (setInvalid) and
    the rest of its waiting requests dropped with it. One that waited longer than
    throttled_op_wait_time goes on marked throttled (shouldThrottleOp): the pipeline answers
    it THROTTLEDOP, in its session's order, without carrying it out.

    The queue is bounded by globalOutstandingLimit: connections stop reading while more
    than that many requests wait here (ZooKeeperServer.shouldThrottle's getInflight).
    `in_process` and `submit_now` come from the server's ClientLimits.
    """

    def __init__(self, settings: RequestThrottleSettings, limits,
                 clock_ms: Callable[[], int]):
        self.max_requests = settings.max_requests
        self.stall_time_s = settings.stall_time_ms / 1000
        self.drop_stale = settings.drop_stale
        self.stale_connection_check = settings.stale_connection_check
        self.stale_latency_check = settings.stale_latency_check
        self.throttled_op_wait_ms = settings.throttled_op_wait_time_ms
        self.limits = limits
        self.clock_ms = clock_ms
        self.waiting: deque = deque()  # (session, request), in arrival order
        self.held_by: dict = {}  # connection -> how many of its requests wait here
        self.dropped = 0  # ServerMetrics.STALE_REQUESTS_DROPPED
        self.waits = 0  # ServerMetrics.REQUEST_THROTTLE_WAIT_COUNT
        self.stale_passed = 0  # ServerMetrics.STALE_REQUESTS: stale, and passed on all the same
        self.throttled_ops = 0  # ServerMetrics.THROTTLED_OPS
        self.queue_time = Summary()  # ServerMetrics.REQUEST_THROTTLE_QUEUE_TIME, ms
        self._invalid: weakref.WeakSet = weakref.WeakSet()  # connections whose requests drop
        self._release_handle: asyncio.Handle | None = None  # a release is due, then or soon
        self._woken = False  # ... soon

    def submit(self, session, req) -> None:
        """A connection's request: into the pipeline now, or behind those already waiting."""
        limits = self.limits
        if not self.waiting and limits.in_process < self.max_requests:
            queue_time = self.queue_time  # it waited 0 ms: observe(0), inlined
            queue_time.count += 1
            queue_time.recent.append(_WAITED_0)
            limits.submit_now(session, req)
            return
        self.waiting.append((session, req))
        limits.held += 1
        held_by = self.held_by
        held_by[req.cnxn] = held_by.get(req.cnxn, 0) + 1
        if limits.held > limits.outstanding_limit:  # shouldThrottle: getInflight() over it
            limits.throttled_reads += 1
            req.cnxn.stop_reading()
        if len(self.waiting) == 1 and self._release_handle is None:
            self._stall()

    def wake(self) -> None:
        """Requests finished (throttleWake): let the waiting ones go at the next loop turn."""
        if self.waiting and not self._woken:
            if self._release_handle is not None:
                self._release_handle.cancel()
            self._woken = True
            self._release_handle = asyncio.get_running_loop().call_soon(self.release)

    def _stall(self) -> None:
        """throttleSleep: look again after stall_time, or when woken. With 0 only a wake
        does it, as Java's wait(0) waits until notified."""
        self.waits += 1
        self._release_handle = None if not self.stall_time_s else (
            asyncio.get_running_loop().call_later(self.stall_time_s, self.release))

    def release(self) -> None:
        """Submit waiting requests while fewer than max_requests are in process; look again
        after stall_time (or at the next wake) if some must still wait."""
        self._release_handle = None
        self._woken = False
        waiting, limits = self.waiting, self.limits
        flushed = None
        while waiting and limits.in_process < self.max_requests:
            session, req = waiting.popleft()
            limits.held -= 1
            cnxn = req.cnxn
            n = self.held_by.pop(cnxn) - 1
            if n:
                self.held_by[cnxn] = n
            if cnxn in self._invalid:  # Request.mustDrop
                continue
            if self._stale(req, session):
                if self.drop_stale:
                    self._drop(cnxn)
                    continue
                self.stale_passed += 1
            waited_ms = self.clock_ms() - req.t0_ms
            self.queue_time.observe(waited_ms)
            if waited_ms > self.throttled_op_wait_ms > 0 and req.type not in _NOT_THROTTLABLE:
                mark_throttled(req)  # shouldThrottleOp
                self.throttled_ops += 1
            limits.submit_now(session, req)
            flushed = cnxn.outbox
        if flushed is not None:
            flushed.flush()  # the replies to the reads let go leave now
        if waiting:
            self._stall()

    def _stale(self, req, session) -> bool:
        """Request.isStale: never a closeSession; otherwise a closed connection, or (with the
        latency check) a request older than its session's timeout."""
        if req.type == _CLOSE_SESSION:
            return False
        if self.stale_connection_check and _closed(req.cnxn):
            return True
        return self.stale_latency_check and (
            self.clock_ms() - req.t0_ms > session.timeout_ms)

    def _drop(self, cnxn) -> None:
        """RequestThrottler.dropRequest: the connection is invalid from now on."""
        self.dropped += 1
        self._invalid.add(cnxn)
        if not _closed(cnxn):
            cnxn.close_after_flush("request dropped by the request throttler: stale")


_WAITED_0 = (0, 1)  # a Summary's recent entry: one observation of 0


def _closed(cnxn) -> bool:
    """ServerCnxn.isStale: the connection is closed or closing."""
    transport = cnxn.transport
    return transport is None or transport.is_closing()
