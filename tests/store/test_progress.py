"""Progress of long store operations in the log (zkcompat/store/progress.py): at most one
line per interval, a last one at the end once any was logged; recovery logs its snapshot
load and log replay that way."""

import logging

from zkcompat.store import datadir, progress
from zkcompat.store.datadir import DataDir

from .test_recovery import build
from .test_snapshot import state


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _lines(caplog, event: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if f"event={event} " in r.getMessage()]


def test_at_most_one_line_per_interval_and_a_last_one(caplog):
    clock = Clock()
    logger = logging.getLogger("zkcompat.test.progress")
    p = progress.LogProgress(logger, "load_progress", "zxid=0x5", interval_s=2.0, clock=clock)
    with caplog.at_level(logging.INFO, logger="zkcompat.test.progress"):
        for done in range(0, 101, 10):
            clock.now += 0.5  # 5 s in all: lines at 2 s and 4 s, and the end
            p(done, 100)
    assert _lines(caplog, "load_progress") == [
        "event=load_progress done=30 total=100 percent=30.0 zxid=0x5",
        "event=load_progress done=70 total=100 percent=70.0 zxid=0x5",
        "event=load_progress done=100 total=100 percent=100.0 zxid=0x5",
    ]


def test_a_quick_operation_logs_nothing(caplog):
    p = progress.LogProgress(logging.getLogger("zkcompat.test.progress"), "quick",
                             clock=Clock())
    with caplog.at_level(logging.INFO, logger="zkcompat.test.progress"):
        for done in range(11):
            p(done, 10)
    assert _lines(caplog, "quick") == []


def test_recovery_logs_snapshot_load_and_replay_progress(tmp_path, caplog, monkeypatch):
    tree = build(tmp_path, steps_before_snap=(300,), steps_after=50)
    monkeypatch.setattr(progress, "PROGRESS_INTERVAL_S", 0.0)
    monkeypatch.setattr(datadir, "REPLAY_PROGRESS_EVERY_TXNS", 10)
    dd = DataDir(tmp_path)
    with caplog.at_level(logging.INFO, logger="zkcompat.store.datadir"):
        assert state(dd.recover()) == state(tree)
    dd.close()
    loads = _lines(caplog, "snapshot_load_progress")
    assert loads and loads[-1].startswith("event=snapshot_load_progress done=")
    assert " percent=100.0 zxid=0x" in loads[-1]
    replays = _lines(caplog, "log_replay_progress")
    assert replays and all(" from=0x" in line for line in replays)
