"""The loop monitor names garbage collections as long as a logged stall; srst restarts
its longest stall, as it does the latency maximum."""

import asyncio
import gc
import logging

from zkcompat.config import Config
from zkcompat.peer.node import build_standalone
from zkcompat.server import loopmon
from zkcompat.server.adminhttp import AdminHttp
from zkcompat.server.metrics import LOOP_STALL_GAUGE


def test_a_long_collection_is_logged_with_its_generation(monkeypatch, caplog):
    monkeypatch.setattr(loopmon, "STALL_LOG_MS", -1.0)  # every collection counts as long

    async def go():
        mon = loopmon.LoopMonitor()
        mon.start()
        try:
            gc.collect(1)
        finally:
            mon.stop()
        gc.collect(2)  # after stop: not logged

    with caplog.at_level(logging.WARNING, logger=loopmon.__name__):
        asyncio.run(go())
    pauses = [m for m in caplog.messages if m.startswith("event=gc_pause")]
    assert len(pauses) >= 1
    assert all("generation=" in m and " ms=" in m for m in pauses)
    assert any("generation=1" in m for m in pauses)
    assert not any("generation=2" in m for m in pauses)


def test_srst_restarts_the_longest_stall(tmp_path):
    ctx = build_standalone(Config(data_dir=tmp_path, force_sync=False))
    ctx.loopmon.max_stall_ms = 250.0  # a stall during the load before a measurement
    assert AdminHttp(ctx, None).run("srst", {}) == {"command": "stat_reset", "error": None}
    assert ctx.loopmon.max_stall_ms == 0.0
    assert LOOP_STALL_GAUGE == "zkcompat_event_loop_max_stall_ms"  # what bench/ reads
