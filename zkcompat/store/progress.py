"""Progress of a long operation in the log: one key=value line at most every
PROGRESS_INTERVAL_S, and a last one at the end of an operation that logged any, so a
short load stays silent and a long one shows how far it got."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

PROGRESS_INTERVAL_S = 2.0


class LogProgress:
    """progress(done, total): logs `event=EVENT done=N total=M percent=P FIELDS` (without
    total and percent when total is 0: not known)."""

    def __init__(self, logger: logging.Logger, event: str, fields: str = "",
                 interval_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.log, self.event, self.fields = logger, event, f" {fields}" if fields else ""
        self.interval_s = PROGRESS_INTERVAL_S if interval_s is None else interval_s
        self.clock = clock
        self._last = clock()
        self.lines = 0

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        finished = total > 0 and done >= total
        if now - self._last < self.interval_s and not (finished and self.lines):
            return
        if finished and self.lines and self._logged_done == done:
            return
        self._last = now
        self._logged_done = done
        self.lines += 1
        if total > 0:
            self.log.info("event=%s done=%d total=%d percent=%.1f%s", self.event, done, total,
                          100.0 * done / total, self.fields)
        else:  # an open-ended count (a log read to its end)
            self.log.info("event=%s done=%d%s", self.event, done, self.fields)

    _logged_done = -1
