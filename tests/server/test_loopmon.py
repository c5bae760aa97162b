"""The loop monitor names garbage collections as long as a logged stall."""

import asyncio
import gc
import logging

from zkcompat.server import loopmon


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
