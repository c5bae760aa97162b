"""largeRequestThreshold / largeRequestMaxBytes: a Connection that counts its large requests
toward the server's total (limits.ClientLimits) from receipt until answered, and closes at
a frame that would take the total past the maximum. A server without a threshold never
makes one, so its connections' request path pays nothing for it.

As ZooKeeperServer has it: a frame (the ConnectRequest too) longer than the threshold is
refused when its length would take the total past the maximum
(checkRequestSizeWhenReceivingMessage, as NIOServerCnxn.readLength and NettyServerCnxn read
the length); a request whose body (the frame less its RequestHeader, as 3.9's processPacket
measures it) is longer than the threshold is counted in, or refused if that takes the total
past the maximum (checkRequestSizeWhenMessageReceived); auth and SASL packets are never
counted in. A refusal is an IOException there: the connection is closed, with no reply,
and the requests read before it go on. The bytes are counted out when the request is
answered (FinalRequestProcessor's requestFinished) or, for what a closed connection left
unanswered, when it closes: ZooKeeper counts those until its pipeline is done with them.
"""

from __future__ import annotations

import logging
import struct

from zkcompat.jute.constants import OpCode
from zkcompat.server.connection import OPEN, Connection

log = logging.getLogger(__name__)

_REQUEST_HEADER = struct.Struct(">ii")  # RequestHeader{int xid; int type}
_UNCOUNTED_OPS = frozenset((OpCode.AUTH, OpCode.SASL))  # processPacket answers them itself
REJECTED = "Rejecting large request"  # ZooKeeperServer's IOException message
_NEXT = None  # the key, in _large, of a request counted in and not yet submitted


class LargeRequestConnection(Connection):
    """A Connection of a server with largeRequestThreshold set. `_large` maps each request
    of this connection counted in (and not answered) to its bytes; it is the one attribute
    this class adds (Connection stays within Python's shared-key instance dict)."""

    def __init__(self, server):
        super().__init__(server)
        self._large: dict = {}
        submit, large = self._submit, self._large

        def submit_counted(session, req) -> None:
            # The request that _on_request counted in: it is known by its object from now.
            n = large.pop(_NEXT, 0)
            if n:
                large[req] = n
            submit(session, req)

        self._submit = submit_counted

    def _on_frame(self, payload) -> None:
        """Frames before the session is open (the ConnectRequest, and what is pipelined
        behind it) are checked on their length alone; an open session's in _on_request."""
        if self._state is not OPEN and not self._frame_allowed(len(payload)):
            return
        super()._on_frame(payload)

    def _on_request(self, payload, t0_ms: int) -> None:
        limits = self.server.limits
        n = len(payload)
        if n <= limits.large_request_threshold:  # the usual case
            super()._on_request(payload, t0_ms)
            return
        if not self._frame_allowed(n):
            return
        body = n - _REQUEST_HEADER.size
        if body <= limits.large_request_threshold or (
                _REQUEST_HEADER.unpack_from(payload)[1] in _UNCOUNTED_OPS):
            super()._on_request(payload, t0_ms)
            return
        if not limits.large_request_received(body):
            self._reject(body)
            return
        self._large[_NEXT] = body
        super()._on_request(payload, t0_ms)
        # Not submitted after all (the connection closed at it, or it was refused before
        # the pipeline saw it): it counts no longer.
        left = self._large.pop(_NEXT, 0)
        if left:
            limits.large_request_finished(left)

    def _frame_allowed(self, length: int) -> bool:
        limits = self.server.limits
        if length <= limits.large_request_threshold or limits.large_frame_allowed(length):
            return True
        self._reject(length)
        return False

    def _reject(self, length: int) -> None:
        log.warning("event=large_request_rejected remote=%s bytes=%d large_request_bytes=%d "
                    "max=%d", self.remote, length, self.server.limits.large_request_bytes,
                    self.server.limits.large_request_max_bytes)
        self.close(REJECTED)

    def reply(self, req, data: bytes, zxid: int) -> None:
        large = self._large
        if large:
            n = large.pop(req, 0)
            if n:
                self.server.limits.large_request_finished(n)
        super().reply(req, data, zxid)

    def connection_lost(self, exc) -> None:
        large = self._large
        counted = sum(large.values())
        large.clear()  # in place: submit_counted holds this dict
        if counted:
            self.server.limits.large_request_finished(counted)
        super().connection_lost(exc)
