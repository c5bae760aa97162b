"""Event-loop stall monitor: how late a 10 ms timer fires is how long the loop was blocked.
A stall over STALL_LOG_MS is logged, so an operator sees what clients felt; so is a
garbage collection that long, which names the stall's cause."""

import asyncio
import gc
import logging
import time

log = logging.getLogger(__name__)

INTERVAL_S = 0.010
STALL_LOG_MS = 100.0


class LoopMonitor:
    def __init__(self):
        self.max_stall_ms = 0.0  # since start (or the last reset)
        self._task: asyncio.Task | None = None
        self._gc_started = 0.0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())
        gc.callbacks.append(self._on_gc)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_started = time.monotonic()
            return
        ms = (time.monotonic() - self._gc_started) * 1000
        if ms > STALL_LOG_MS:
            log.warning("event=gc_pause generation=%d ms=%.1f collected=%d",
                        info["generation"], ms, info["collected"])

    def reset(self) -> float:
        worst, self.max_stall_ms = self.max_stall_ms, 0.0
        return worst

    async def _run(self) -> None:
        while True:
            t0 = time.monotonic()
            await asyncio.sleep(INTERVAL_S)
            late_ms = (time.monotonic() - t0 - INTERVAL_S) * 1000
            if late_ms > self.max_stall_ms:
                self.max_stall_ms = late_ms
            if late_ms > STALL_LOG_MS:
                log.warning("event=loop_stall ms=%.1f", late_ms)
