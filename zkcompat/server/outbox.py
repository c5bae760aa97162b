"""The connections that have replies or events queued, written out together.

Whoever finishes a unit of work (a connection's `data_received`, a batch of applied
txns) calls `flush`, so its replies leave at once instead of one loop turn later; a
queued connection is also flushed by one callback per loop turn, in case nobody does.
Each connection still gets one transport.write per flush, whatever it queued.
"""

import asyncio
import logging

log = logging.getLogger(__name__)


class Outbox:
    __slots__ = ("_queued", "_scheduled")

    def __init__(self) -> None:
        self._queued: list = []  # connections with output, each once, in the order queued
        self._scheduled = False  # a flush callback is pending on the loop

    def add(self, cnxn) -> None:
        """`cnxn` has output queued (the caller adds it only once until it is flushed)."""
        self._queued.append(cnxn)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._on_turn)

    def flush(self) -> None:
        queued = self._queued
        if queued:
            self._queued = []
            for cnxn in queued:
                try:
                    cnxn.flush()
                except Exception:  # noqa: BLE001 - one connection must not strand the rest
                    log.exception("event=flush_failed remote=%s", getattr(cnxn, "remote", "?"))

    def _on_turn(self) -> None:
        self._scheduled = False
        self.flush()
