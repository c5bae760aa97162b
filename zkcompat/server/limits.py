"""Limits under abuse, as ZooKeeper has them: connections per address and in all, new
sessions per unit of time, and requests in flight. Every count the limits are checked
against lives here, shared by the server's connections; a connection only reports to it.

- maxClientCnxns / maxCnxns (NIOServerCnxnFactory.doAccept): a connection over either is
  closed as soon as it is accepted.
- zookeeper.connection_throttle_* (BlueThrottle): a session the bucket has no tokens for is
  refused at its ConnectRequest: the connection is closed without a ConnectResponse.
- globalOutstandingLimit (ZooKeeperServer.shouldThrottle): while more requests than that
  are in process, or wait in the request throttler, a connection with requests of its own
  outstanding stops reading; it reads again once the server is under the limit, or its own
  requests are all answered. zkcompat also stops reading from a session with
  OUTSTANDING_REQUESTS_MAX requests unanswered, until half are.
- zookeeper.request_throttle_* and throttled_op_wait_time (RequestThrottler, in
  server/throttle.py).
- largeRequestThreshold / largeRequestMaxBytes (ZooKeeperServer.checkRequestSize*): the
  bytes of requests over the threshold, from receipt until answered, count toward one
  total; a frame that would take it past the maximum closes its connection
  (server/large_requests.py does the counting, on the connections of such a server only).
- netty.server.outstandingHandshake.limit (NettyServerCnxnFactory): a secure connection
  accepted while that many TLS handshakes are in progress is closed at once.

"In process" is the number of requests in sessions' queues (writes waiting for their commit
and the reads behind them), as each connection last counted its own: reads answered at once
are never in flight. A connection counts after each batch it reads and each flush of its
replies, so the hot path pays one len() and a compare. The settings themselves are read
from zoo.cfg by config/limits.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from zkcompat.config.limits import LARGE_REQUEST_THRESHOLD_OFF, LimitSettings
from zkcompat.server.stats import Summary
from zkcompat.server.throttle import ConnectionThrottle, RequestThrottler

# A connection whose client does not read what it is sent is closed once this much waits
# unsent in its transport, or UNSENT_REPLIES_MIN replies of jute.maxbuffer if that is more.
# It stops reading at the transport's high-water mark, so only the replies its session had
# queued by then and watch events get that far. ZooKeeper has no such bound: its
# outgoingBuffers grow until the JVM runs out of heap.
UNSENT_BYTES_MAX = 64 * 1024 * 1024
UNSENT_REPLIES_MIN = 4


def outstanding_limit(limit: int, voters: int, ensemble: bool) -> int:
    """LeaderZooKeeperServer and LearnerZooKeeperServer share the limit among the other
    voters of an ensemble of more than two (Java's int division, toward zero)."""
    if not ensemble or voters <= 2:
        return limit
    q = abs(limit) // (voters - 1)
    return q if limit >= 0 else -q


# -- the counts ---------------------------------------------------------------------------


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ClientLimits:
    """The server's limits and the counts they are checked against. A connection calls
    admit/release around its life (when it is a listener's), session_allowed at its
    ConnectRequest, and closed at its end; it adds the change of its session's queue length
    to in_process itself, after each batch of requests it reads and each flush of replies
    (inline: that runs for every write), and asks must_stop_reading when the server is over
    globalOutstandingLimit."""

    def __init__(self, config, clock_ms: Callable[[], int] = _monotonic_ms, rng=None):
        s: LimitSettings = config.limits
        self.max_client_cnxns = config.max_client_cnxns
        self.max_cnxns = s.max_cnxns
        self.session_outstanding_max = config.outstanding_requests_max
        self.unsent_bytes_max = max(UNSENT_BYTES_MAX, UNSENT_REPLIES_MIN * config.jute_maxbuffer)
        self.outstanding_limit = outstanding_limit(s.global_outstanding_limit,
                                                   len(config.voters), config.is_ensemble)
        self.in_process = 0  # requests in sessions' queues, as their connections counted them
        self.held = 0  # requests waiting in the request throttler (its getInflight)
        self.cnxns_by_address: dict[str, int] = {}
        self.connection_throttle = ConnectionThrottle(s.connection_throttle, clock_ms(), rng)
        self.request_throttler = (RequestThrottler(s.request_throttle, self, clock_ms)
                                  if s.request_throttle.max_requests > 0 else None)
        self.clock_ms = clock_ms
        self.connections_rejected = 0  # ServerMetrics.CONNECTION_REJECTED
        self.connection_requests = 0  # ServerMetrics.CONNECTION_REQUEST_COUNT
        self.connection_token_deficit = Summary()  # ServerMetrics.CONNECTION_TOKEN_DEFICIT
        self.throttled_reads = 0  # times a connection stopped reading at a bound
        # largeRequest*: the bytes of the large requests received and not answered yet
        self.large_request_threshold = s.large_request_threshold
        self.large_request_max_bytes = s.large_request_max_bytes
        self.large_request_bytes = 0
        self.large_requests_rejected = 0  # ServerMetrics.LARGE_REQUESTS_REJECTED
        # netty.server.outstandingHandshake.limit, and the secure port's handshakes underway
        self.outstanding_handshake_limit = s.outstanding_handshake_limit
        self.outstanding_handshakes = 0  # the gauge outstanding_tls_handshake
        self.tls_handshakes_exceeded = 0  # ServerMetrics.TLS_HANDSHAKE_EXCEEDED

    # -- connections

    def admit(self, host: str, alive: int) -> str | None:
        """Count a new connection from `host` (`alive` open already), or say why not."""
        if self.max_cnxns and alive >= self.max_cnxns:
            self.connections_rejected += 1
            return f"Too many connections {alive} - max is {self.max_cnxns}"
        n = self.cnxns_by_address.get(host, 0)
        if self.max_client_cnxns and n >= self.max_client_cnxns:
            self.connections_rejected += 1
            return f"Too many connections from {host} - max is {self.max_client_cnxns}"
        self.cnxns_by_address[host] = n + 1
        return None

    def release(self, host: str) -> None:
        n = self.cnxns_by_address.get(host, 0) - 1
        if n > 0:
            self.cnxns_by_address[host] = n
        else:
            self.cnxns_by_address.pop(host, None)

    def session_allowed(self, renew: bool) -> bool:
        """processConnectRequest's connThrottle.checkLimit: False refuses the session."""
        throttle = self.connection_throttle
        if throttle.max_tokens and not throttle.check_limit(throttle.tokens_needed(renew),
                                                            self.clock_ms()):
            self.connections_rejected += 1
            return False
        self.connection_token_deficit.observe(throttle.deficit)
        self.connection_requests += 1
        return True

    @property
    def connection_drop_probability(self) -> float:
        """ZooKeeperServer.getConnectionDropChance: BLUE's chance of refusing a session."""
        return self.connection_throttle.drop

    # -- large requests (ZooKeeperServer.checkRequestSize*; server/large_requests.py)

    @property
    def large_requests_counted(self) -> bool:
        return self.large_request_threshold != LARGE_REQUEST_THRESHOLD_OFF

    def large_frame_allowed(self, length: int) -> bool:
        """checkRequestSizeWhenReceivingMessage, for a frame (any frame, the ConnectRequest
        too) over the threshold: whether `length` more bytes keep the total within the
        maximum. False refuses it: the caller closes its connection."""
        if self.large_request_bytes + length <= self.large_request_max_bytes:
            return True
        self.large_requests_rejected += 1
        return False

    def large_request_received(self, length: int) -> bool:
        """checkRequestSizeWhenMessageReceived, for a request body over the threshold: count
        it in, or refuse it (False: the caller closes its connection) if that would take the
        total past the maximum. Each one counted in is counted out by large_request_finished."""
        total = self.large_request_bytes + length
        if total > self.large_request_max_bytes:
            self.large_requests_rejected += 1
            return False
        self.large_request_bytes = total
        return True

    def large_request_finished(self, length: int) -> None:
        """requestFinished: a counted request was answered, or will never be."""
        self.large_request_bytes -= length
        assert self.large_request_bytes >= 0, "a large request counted out twice"

    # -- TLS handshakes on the secure port (NettyServerCnxnFactory)

    def handshake_started(self) -> bool:
        """A secure connection was accepted: count its handshake in, unless
        netty.server.outstandingHandshake.limit are underway already (False: the caller
        closes it, tls_handshake_exceeded). Counted whether or not there is a limit, so the
        gauge shows the handshakes underway either way."""
        limit = self.outstanding_handshake_limit
        if limit > 0 and self.outstanding_handshakes >= limit:
            self.tls_handshakes_exceeded += 1
            return False
        self.outstanding_handshakes += 1
        return True

    def handshake_finished(self) -> None:
        """updateHandshakeCountIfStarted: done, failed, or the client went away."""
        self.outstanding_handshakes -= 1
        assert self.outstanding_handshakes >= 0, "a handshake counted out twice"

    # -- requests in flight

    def must_stop_reading(self, cnxn, queued: int) -> bool:
        """`cnxn`, whose session has `queued` unanswered, read requests while more than the
        limit are in process (the connection counted them in already): whether it must stop
        reading (incrOutstandingAndCheckThrottle)."""
        if queued or self._held_of(cnxn):
            self.throttled_reads += 1
            return True
        return False

    def may_read(self, cnxn, queued: int) -> bool:
        """Whether `cnxn`, stopped at a bound, may read again (decrOutstandingAndCheckThrottle):
        its session is down to half its bound, and it has nothing outstanding or the server
        is within its limit."""
        if queued and queued >= self.session_outstanding_max // 2:
            return False
        limit = self.outstanding_limit
        return not (queued or self._held_of(cnxn)) or (
            self.in_process <= limit and self.held <= limit)

    def _held_of(self, cnxn) -> int:
        throttler = self.request_throttler
        return 0 if throttler is None else throttler.held_by.get(cnxn, 0)

    def closed(self, cnxn) -> None:
        """`cnxn` is gone: its session's queue no longer counts here."""
        if cnxn.outstanding_counted:
            self.in_process -= cnxn.outstanding_counted
            cnxn.outstanding_counted = 0
            if self.request_throttler is not None:
                self.request_throttler.wake()

    def submit_now(self, session, req) -> None:
        """Into the pipeline, counted at once (the request throttler checks the count before
        the next one)."""
        cnxn = req.cnxn
        cnxn.pipeline.submit(session, req)
        transport = cnxn.transport
        if transport is not None and not transport.is_closing() and session is not None:
            queued = len(session.queue)
            self.in_process += queued - cnxn.outstanding_counted
            cnxn.outstanding_counted = queued

    def submitter(self, pipeline) -> Callable:
        """What a connection hands its requests to: the pipeline, or the request throttler."""
        return pipeline.submit if self.request_throttler is None else self.request_throttler.submit
