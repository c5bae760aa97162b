"""Session expiry on time: wake at each expiry bucket's boundary, as SessionTrackerImpl.run does.

A session last active at t expires at the first multiple of tickTime after t + timeout
(ExpiryQueue.roundToNextInterval); this task closes it then, not up to a tick later.
"""

import asyncio
from collections.abc import Awaitable, Callable


def expirer_wait_ms(next_expiration_ms: int | None, now_ms: int, tick_ms: int) -> int:
    """How long to sleep: until the next bucket boundary (ExpiryQueue.getWaitTime), but no
    longer than one tick, so a session created meanwhile is seen in time (its bucket is
    at least minSessionTimeout, two ticks, away)."""
    if next_expiration_ms is None:
        return tick_ms
    return max(0, min(next_expiration_ms - now_ms, tick_ms))


async def run_expirer(pipeline, tick_ms: int, clock_ms: Callable[[], int], *,
                      sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
    """Call pipeline.expire_sessions() at every boundary of pipeline.tracker's buckets,
    on the monotonic clock_ms the tracker's buckets are on (the server context's), until
    cancelled. An early wake-up (a timer rounded down) just sleeps the rest."""
    assert tick_ms > 0, tick_ms
    while True:
        # Looked up each time: a role change may give the pipeline a new tracker.
        next_ms = pipeline.tracker.next_expiration_ms()
        wait_ms = expirer_wait_ms(next_ms, clock_ms(), tick_ms)
        if wait_ms > 0:
            await sleep(wait_ms / 1000)
            continue
        pipeline.expire_sessions()
