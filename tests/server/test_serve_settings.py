"""`serve` runs the interpreter as the hot path was measured: GIL switch interval and GC
thresholds (node.py says why), set before the first request."""

import asyncio
import gc
import sys

from zkcompat.config import Config
from zkcompat.peer.node import GC_THRESHOLDS, GIL_SWITCH_INTERVAL_S, serve


def test_serve_sets_the_switch_interval_and_gc_thresholds(tmp_path):
    before = sys.getswitchinterval(), gc.get_threshold()

    async def go():
        ready = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(serve(Config(data_dir=tmp_path, client_port=0,
                                                client_port_address="127.0.0.1",
                                                force_sync=False), ready))
        await asyncio.wait_for(ready, 30)
        seen = sys.getswitchinterval(), gc.get_threshold()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        return seen

    try:
        interval, thresholds = asyncio.run(go())
    finally:
        sys.setswitchinterval(before[0])
        gc.set_threshold(*before[1])
    assert interval != before[0] or thresholds != before[1]  # the test can see a change
    assert abs(interval - GIL_SWITCH_INTERVAL_S) < 1e-9
    assert thresholds == GC_THRESHOLDS
