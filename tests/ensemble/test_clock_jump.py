"""The wall clock jumps on real servers (an hour forward on the leader, an hour back on a
follower, then two hours back on the leader) while the monotonic clock runs on, as when
an operator or NTP steps the system clock. ZooKeeper decides session expiry on the
monotonic clock (SessionTrackerImpl, Time.currentElapsedTime), so no session may expire
because of the jump, and a session whose client died must expire one timeout after it
died, not an hour early or late. What replicas record from the wall clock (a znode's
ctime and mtime, from the leader that proposed it) follows the jump, as in ZooKeeper:
that is how this test knows the jump took effect.

The jump goes through the test hook of server/clock.py (ZKCOMPAT_TEST_WALL_OFFSET_DIR):
libfaketime here cannot move only the wall clock (Python's sleep fails with EINVAL)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from kazoo.client import KazooState

from zkcompat.server.clock import TEST_WALL_OFFSET_DIR_ENV

from .harness import FAST, check_trees_agree, wait_for

HOUR_MS = 3_600_000
SESSION_TIMEOUT_S = 4.0
TICK_S = FAST["tickTime"] / 1000
EXPIRY_SLACK_S = 4.0  # the tracker's tick buckets, the touch reports, a loaded 2-core box
HOLD_S = 3 * SESSION_TIMEOUT_S  # sessions keep pinging across the jump for this long
CLOCK_RECHECK_S = 0.5  # server/clock.py rereads its offset file every 20 ms at most
ROOT = "/clock"

# A client that dies without closeSession: its session must expire, on time.
DOOMED = """
import sys, time
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1], timeout=float(sys.argv[2]))
zk.start(timeout=30)
zk.create(sys.argv[3], b"doomed", ephemeral=True)
print(hex(zk.client_id[0]), flush=True)
time.sleep(600)
"""


def _jump(offsets, sid: int, offset_ms: int) -> None:
    path = offsets / f"server.{sid}"
    path.write_text(f"{offset_ms}\n")
    os.utime(path, ns=(time.time_ns(), time.time_ns() + offset_ms))  # a new mtime for certain


def _ctime_ms_of_new_node(client, path: str) -> int:
    client.create(path, b"")
    return client.exists(path).ctime


def test_a_wall_clock_jump_expires_no_session_and_a_dead_client_expires_on_time(
        ensemble, tmp_path, monkeypatch):
    offsets = tmp_path / "wall-offsets"
    offsets.mkdir()
    monkeypatch.setenv(TEST_WALL_OFFSET_DIR_ENV, str(offsets))
    ensemble.start(3, settings=FAST)
    leader = ensemble.wait_one_leader()
    follower, other = [s for s in ensemble.sids if s != leader]
    assert "event=test_hook_enabled hook=wall_clock_offset" in ensemble.log_since(leader)

    clients, lost = {}, []
    for sid in ensemble.sids:
        client = ensemble.client_on(sid, timeout_s=SESSION_TIMEOUT_S)
        client.add_listener(lambda state, sid=sid: state == KazooState.LOST and lost.append(sid))
        clients[sid] = client
    clients[leader].ensure_path(ROOT)
    sessions = {sid: c.client_id[0] for sid, c in clients.items()}
    for sid, client in clients.items():
        client.create(f"{ROOT}/held-{sid}", b"", ephemeral=True)

    before_ms = _ctime_ms_of_new_node(clients[follower], f"{ROOT}/before")
    _jump(offsets, leader, HOUR_MS)
    _jump(offsets, follower, -HOUR_MS)
    time.sleep(CLOCK_RECHECK_S)
    # The leader's prep stamps ctime: an hour ahead now, whichever server took the write.
    jumped_ms = _ctime_ms_of_new_node(clients[follower], f"{ROOT}/after-forward")
    assert jumped_ms - before_ms >= HOUR_MS - 60_000, (before_ms, jumped_ms)

    deadline = time.monotonic() + HOLD_S
    i = 0
    while time.monotonic() < deadline:  # writes through every server while time is off
        for sid, client in clients.items():
            client.create(f"{ROOT}/w-{sid}-{i:04d}", b"x")
        i += 1
        time.sleep(0.2)
    assert not lost, f"sessions lost on servers {lost} after a wall-clock jump"
    assert {sid: c.client_id[0] for sid, c in clients.items()} == sessions
    for sid in ensemble.sids:
        assert clients[other].exists(f"{ROOT}/held-{sid}") is not None

    # A client dies while the leader's wall clock steps two hours back: its session ends
    # one timeout later by the monotonic clock, on the leader that tracks it.
    doomed = subprocess.Popen([sys.executable, "-c", DOOMED, ensemble.address(other),
                               str(SESSION_TIMEOUT_S), f"{ROOT}/doomed"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert doomed.stdout.readline().startswith("0x")
        _jump(offsets, leader, -HOUR_MS)
        time.sleep(CLOCK_RECHECK_S)
        back_ms = _ctime_ms_of_new_node(clients[other], f"{ROOT}/after-back")
        assert before_ms - back_ms >= HOUR_MS - 60_000, (before_ms, back_ms)
        os.kill(doomed.pid, signal.SIGKILL)
        died = time.monotonic()
    finally:
        if doomed.poll() is None:
            doomed.kill()
        doomed.wait(timeout=10)
    assert clients[leader].exists(f"{ROOT}/doomed") is not None
    gone = wait_for(lambda: clients[leader].exists(f"{ROOT}/doomed") is None and time.monotonic(),
                    SESSION_TIMEOUT_S + EXPIRY_SLACK_S, what="the dead client's session expired")
    assert gone - died >= SESSION_TIMEOUT_S - 2 * TICK_S, f"expired after {gone - died:.1f}s"

    assert not lost, f"sessions lost on servers {lost} after the second jump"
    assert {sid: c.client_id[0] for sid, c in clients.items()} == sessions
    check_trees_agree(ensemble, ROOT)
