"""A client connection's output: replies and watch events queued, written with one
transport.write per flush (or sooner, past OUT_SPILL_BYTES), and the replies' statistics."""

import logging

from zkcompat.jute.constants import KeeperState
from zkcompat.jute.reply import encode_notification
from zkcompat.server.connection_state import CLOSED
from zkcompat.server.stats import OP_NAMES

log = logging.getLogger("zkcompat.server.connection")  # one logger for a connection's events

# The replies one batch of requests has queued are written out as soon as they pass this,
# so that a transport the client does not drain says so (pause_writing) before the next
# request of the batch is answered: the rest of the batch then waits, unread.
OUT_SPILL_BYTES = 1024 * 1024


class Output:
    """Connection's output methods: a mixin with no state of its own (the state is
    Connection's attributes, which stay within the shared-key instance dict)."""

    __slots__ = ()

    def send(self, data: bytes) -> None:
        if self._state is CLOSED:
            return
        self.stats.sent += 1
        self.server.stats.packets_sent += 1
        self._out.append(data)
        if not self._queued:
            self._queued = True
            self.outbox.add(self)
        else:  # the first reply of a flush is not counted: a 1x1 client pays nothing here
            self._out_bytes += len(data)
            if self._out_bytes > OUT_SPILL_BYTES:
                self._spill()

    def flush(self) -> None:
        """Write everything queued with one transport.write (the outbox calls this), then
        account for the replies in it."""
        self._queued = False
        self._write_out()
        if self._replied_t0:
            self._account_replies()

    def _write_out(self) -> None:
        # A transport the peer closed refuses writes until connection_lost arrives.
        if self._state is CLOSED or self.transport is None or self.transport.is_closing():
            return
        out = self._out
        if out:
            self.transport.write(out[0] if len(out) == 1 else b"".join(out))
            out.clear()
            self._out_bytes = 0
            if self._unread is not None and self._unsent_over_bound():
                return
        if self._close_after_flush:
            self._become(CLOSED)
            self.transport.close()
            return
        # Requests are counted in when read; here those answered are counted out.
        counted = self.outstanding_counted
        if counted:
            queued = len(self.session.queue)
            if queued != counted:
                limits = self.server.limits
                limits.in_process += queued - counted
                self.outstanding_counted = queued
                if limits.held and queued < counted:
                    limits.request_throttler.wake()
        if self._paused:
            self._maybe_resume_reading()

    def _spill(self) -> None:
        """Write what is queued now, before the flush: it outgrew OUT_SPILL_BYTES."""
        transport = self.transport
        if self._state is CLOSED or transport is None or transport.is_closing():
            return
        transport.write(b"".join(self._out))
        self._out.clear()
        self._out_bytes = 0
        if self._unread is not None:
            self._unsent_over_bound()

    def _unsent_over_bound(self) -> bool:
        """A client that does not read what it is sent is dropped once limits.unsent_bytes_max
        wait in the transport (replies the session queued before it stopped reading, watch
        events): its session lives on, and its client reconnects."""
        unsent = self.transport.get_write_buffer_size()
        if unsent <= self.server.limits.unsent_bytes_max:
            return False
        log.warning("event=connection_close remote=%s reason=%r unsent_bytes=%d", self.remote,
                    "client does not read its replies", unsent)
        self._become(CLOSED)
        self._out.clear()
        self.transport.abort()  # close() would hold the unsent bytes until they are sent
        return True

    def notify(self, event_type: int, path: str, zxid: int) -> None:
        self.send(encode_notification(event_type, KeeperState.SYNC_CONNECTED, path, zxid))

    def close_after_flush(self, reason: str) -> None:
        if self._state is CLOSED:
            return
        log.info("event=connection_close remote=%s reason=%r", self.remote, reason)
        self._close_after_flush = True
        if not self._queued:
            self._queued = True
            self.outbox.add(self)

    def reply(self, req, data: bytes, zxid: int) -> None:
        """Send a request's reply. Its statistics (ServerCnxn.updateStatsForResponse) are
        kept when the outbox flushes it: once per write, not once per reply."""
        if self._state is CLOSED:
            return
        self._replied_t0.append(req.t0_ms)
        if req.is_write:  # readlatency and updatelatency are kept apart, as ZooKeeper's are
            self._write_t0.append(req.t0_ms)
        self._last_req = req
        self._last_zxid = zxid
        self.send(data)

    def _account_replies(self) -> None:
        """Latency, last op, cxid and zxid of the replies queued since the last flush, as
        if each had been counted when it was answered (the flush follows in the same
        callback): latency is the time from receipt to now."""
        t0s = self._replied_t0
        t = self.server.clock.mono_ms()
        n = len(t0s)
        lo, hi, total = t - max(t0s), t - min(t0s), n * t - sum(t0s)
        for lat in (self.stats.latency, self.server.stats.latency):
            if hi > lat.max:
                lat.max = hi
            if lo < lat.min or not lat.count:
                lat.min = lo
            lat.count += n
            lat.total += total
        writes = self._write_t0
        if writes:  # ServerStats says how reads and writes are split
            nw = len(writes)
            write_total = nw * t - sum(writes)
            ul = self.server.stats.update_latency
            ul.count += nw
            ul.total += write_total
            ul.recent.append((write_total, nw))
            writes.clear()
            if nw < n:
                self.server.stats.read_recent.append((total - write_total, n - nw))
        else:
            self.server.stats.read_recent.append((total, n))
        req = self._last_req
        stats = self.stats
        stats.last_op = OP_NAMES.get(req.type, "NA")
        stats.last_cxid = req.xid
        stats.last_zxid = self._last_zxid
        stats.last_response_ms = t
        stats.last_latency = t - req.t0_ms
        t0s.clear()
        self._last_req = None
