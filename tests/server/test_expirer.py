"""Session expiry on ZooKeeper's schedule: ExpiryQueue's bucket arithmetic, the tracker's
next_expiration_ms, and run_expirer waking at each boundary (on a fake clock)."""

import asyncio

import pytest

from zkcompat.server.expirer import expirer_wait_ms, run_expirer
from zkcompat.server.sessions import Session, SessionTracker

TICK_MS = 2000
pytestmark = pytest.mark.timeout(30)


def _round_to_next_interval(time_ms: int, interval_ms: int) -> int:
    """ExpiryQueue.roundToNextInterval, transcribed."""
    return (time_ms // interval_ms + 1) * interval_ms


@pytest.mark.parametrize("last_active_ms, timeout_ms, bucket_ms", [
    (0, 10_000, 12_000),
    (1, 10_000, 12_000),
    (1999, 10_000, 12_000),
    (2000, 10_000, 14_000),  # a deadline on a boundary goes to the next one
    (3999, 10_000, 14_000),
    (500, 4000, 6000),
    (123_456_789, 6000, 123_464_000),
])
def test_bucket_is_the_first_tick_boundary_after_the_deadline(last_active_ms, timeout_ms,
                                                              bucket_ms):
    assert _round_to_next_interval(last_active_ms + timeout_ms, TICK_MS) == bucket_ms
    tracker = SessionTracker(TICK_MS, server_id=1, now_ms=0)
    tracker.add(Session(1, timeout_ms), last_active_ms)
    assert tracker.next_expiration_ms() == bucket_ms
    assert tracker.expired(bucket_ms - 1) == []
    assert [s.session_id for s in tracker.expired(bucket_ms)] == [1]
    assert tracker.next_expiration_ms() is None


def test_next_expiration_is_the_earliest_bucket():
    tracker = SessionTracker(TICK_MS, server_id=1, now_ms=0)
    assert tracker.next_expiration_ms() is None
    tracker.add(Session(1, 10_000), 0)  # bucket 12000
    tracker.add(Session(2, 4000), 100)  # bucket 6000
    tracker.add(Session(3, 4000), 1900)  # bucket 6000 too
    assert tracker.next_expiration_ms() == 6000
    tracker.remove(2)
    assert tracker.next_expiration_ms() == 6000
    tracker.remove(3)
    assert tracker.next_expiration_ms() == 12_000
    tracker.remove(1)
    assert tracker.next_expiration_ms() is None


def test_a_touched_session_moves_when_its_old_bucket_comes_due():
    """Touches are lazy: the old bucket stays the next boundary, and when it comes due the
    session moves to the bucket of its last touch instead of expiring."""
    tracker = SessionTracker(TICK_MS, server_id=1, now_ms=0)
    session = Session(1, 4000)
    tracker.add(session, 0)  # bucket 6000
    tracker.touch(session, 3000)  # deadline 7000: bucket 8000
    assert tracker.next_expiration_ms() == 6000
    assert tracker.expired(6000) == []
    assert tracker.next_expiration_ms() == 8000
    assert tracker.expired(8000) == [session]


def test_set_timeout_moves_the_deadline():
    tracker = SessionTracker(TICK_MS, server_id=1, now_ms=0)
    session = Session(1, 10_000)
    tracker.add(session, 0)
    tracker.set_timeout(session, 4000, 1000)
    assert tracker.next_expiration_ms() == 6000


@pytest.mark.parametrize("next_ms, now_ms, wait_ms", [
    (None, 0, TICK_MS),  # nothing to expire: look again in a tick
    (12_000, 0, TICK_MS),  # far off: at most a tick, so new sessions are seen in time
    (12_000, 11_000, 1000),
    (12_000, 12_000, 0),
    (12_000, 12_500, 0),  # overdue (a busy loop): expire now
])
def test_expirer_waits_for_the_boundary_or_a_tick(next_ms, now_ms, wait_ms):
    assert expirer_wait_ms(next_ms, now_ms, TICK_MS) == wait_ms


class _Stop(Exception):
    pass


class _FakeServer:
    """A pipeline's expiry surface, on a fake clock: sleep advances it, by `lag_ms` less
    than asked when a timer fires early (uvloop rounds to its cached loop time)."""

    def __init__(self, end_ms: int, lag_ms: int = 0):
        self.now_ms = 1_000_000
        self.end_ms = end_ms
        self.lag_ms = lag_ms
        self.tracker = SessionTracker(TICK_MS, server_id=1, now_ms=0)
        self.sleeps_ms: list[int] = []
        self.expired: list[tuple[int, int]] = []  # (session id, when)
        self.arrivals: dict[int, Session] = {}  # at fake time -> a session created then

    def clock(self) -> int:
        return self.now_ms

    async def sleep(self, seconds: float) -> None:
        asked = round(seconds * 1000)
        self.sleeps_ms.append(asked)
        for at in sorted(t for t in self.arrivals if self.now_ms < t <= self.now_ms + asked):
            self.tracker.add(self.arrivals.pop(at), at)
        self.now_ms += max(1, asked - self.lag_ms)
        if self.now_ms > self.end_ms:
            raise _Stop
        await asyncio.sleep(0)

    def expire_sessions(self) -> None:
        for session in self.tracker.expired(self.now_ms):
            self.expired.append((session.session_id, self.now_ms))


def _run(server: _FakeServer) -> None:
    with pytest.raises(_Stop):
        asyncio.run(run_expirer(server, TICK_MS, clock_ms=server.clock, sleep=server.sleep))


@pytest.mark.parametrize("lag_ms", [0, 1, 7])
def test_run_expirer_expires_each_session_at_its_boundary(lag_ms):
    server = _FakeServer(end_ms=1_030_000, lag_ms=lag_ms)
    t0 = server.now_ms
    for sid, (offset_ms, timeout_ms) in enumerate([(0, 10_000), (700, 10_000), (1999, 4000),
                                                    (2000, 4000)], start=1):
        server.tracker.add(Session(sid, timeout_ms), t0 + offset_ms)
    # Created while the expirer sleeps, with nothing else due before them.
    server.arrivals = {t0 + 15_300: Session(5, 4000), t0 + 15_301: Session(6, 6000)}
    _run(server)
    expected = [(3, t0 + 6000), (4, t0 + 8000), (1, t0 + 12_000), (2, t0 + 12_000),
                (5, t0 + 20_000), (6, t0 + 22_000)]
    assert server.expired == expected  # on the boundary: neither early nor a tick late
    assert max(server.sleeps_ms) <= TICK_MS


def test_run_expirer_polls_every_tick_when_idle():
    server = _FakeServer(end_ms=1_010_000)
    _run(server)
    assert set(server.sleeps_ms) == {TICK_MS}
    assert server.expired == []
