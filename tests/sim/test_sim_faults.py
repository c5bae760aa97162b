"""The nemesis's process and clock faults: a pause (SIGSTOP/SIGCONT) on the virtual loop, a
clock that jumps, an fsync that fails; each in a whole run, and the loop's and the disk's
parts of them on their own. Plus the scripted newleader_power fault, which catches a
learner that ACKs NEWLEADER before its sync txns are durable."""

import asyncio
import random

from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.sim.cluster import run_seed
from zkcompat.sim.disk import SimDisk, sim_txn_log
from zkcompat.sim.loop import Node, VirtualLoop, run_virtual
from zkcompat.sim.nemesis import PAUSE_HOLD_S, PROFILES, Fault
from zkcompat.sim.server import SYNC_LIMIT_TICKS, TICK_TIME_MS
from zkcompat.tree.txn import Txn


def _lines(result, text):
    return [line for line in result.trace if text in line]


# -- the loop's pause ----------------------------------------------------------------


def test_a_paused_node_runs_nothing_until_resumed_then_everything_in_order():
    loop = VirtualLoop()
    frozen, other = Node("a"), Node("b")
    ran = []

    async def main():
        frozen.run(loop.call_later, 0.5, ran.append, ("a-timer", 0.5))
        frozen.run(loop.call_soon, ran.append, ("a-soon", 0.0))
        other.run(loop.call_later, 1.0, ran.append, ("b-timer", 1.0))
        loop.pause_node(frozen)
        frozen.run(loop.call_later, 0.1, ran.append, ("a-timer-while-paused", 0.1))
        # What another node schedules for the paused one (a delivery) waits too.
        loop.call_soon(ran.append, ("a-delivery", 0.0), context=frozen.context)
        await asyncio.sleep(2.0)
        assert ran == [("b-timer", 1.0)]
        loop.resume_node(frozen)
        await asyncio.sleep(0)
        await asyncio.sleep(0)

    run_virtual(loop, main())
    # Ready callbacks first, in the order scheduled; then the timers, by deadline.
    assert ran == [("b-timer", 1.0), ("a-soon", 0.0), ("a-delivery", 0.0),
                   ("a-timer-while-paused", 0.1), ("a-timer", 0.5)]


def test_a_node_killed_while_paused_never_runs_what_it_had():
    loop = VirtualLoop()
    node = Node("a")
    ran = []

    async def main():
        node.run(loop.call_later, 0.5, ran.append, "timer")
        loop.pause_node(node)
        node.kill()
        loop.resume_node(node)
        await asyncio.sleep(1.0)

    run_virtual(loop, main())
    assert ran == []


# -- whole runs -----------------------------------------------------------------------


def test_pauses_outlast_the_session_timeout_and_sync_limit():
    assert PAUSE_HOLD_S[0] * 1000 > 4000  # clients.SESSION_TIMEOUT_MS
    assert PAUSE_HOLD_S[0] * 1000 > SYNC_LIMIT_TICKS * TICK_TIME_MS


def test_a_paused_leader_is_replaced_and_steps_down_when_it_resumes():
    result = run_seed(4, 3, faults=[Fault(2.0, "pause_leader", 5.0, 0)], duration_s=10.0)
    assert result.ok, result.failures
    paused = _lines(result, "nemesis paused")
    assert paused, result.trace[:20]
    host = paused[0].split()[-1]
    i = next(i for i, line in enumerate(result.trace) if "nemesis paused" in line)
    j = next(i for i, line in enumerate(result.trace) if "nemesis resumed" in line)
    during = result.trace[i:j]
    assert any("serving mode=leader epoch=2" in line for line in during)
    # On SIGCONT the old leader finds its followers gone and gives up.
    assert any(f"{host} term ended mode=leader" in line for line in result.trace[j:])
    assert result.stats["acked_writes"] > 50


def test_a_paused_follower_is_dropped_and_rejoins():
    result = run_seed(5, 3, faults=[Fault(2.0, "pause", 5.0, 1)], duration_s=10.0)
    assert result.ok, result.failures
    host = _lines(result, "nemesis paused")[0].split()[-1]
    j = next(i for i, line in enumerate(result.trace) if "nemesis resumed" in line)
    assert any(f"{host} serving mode=follower" in line for line in result.trace[j:])


def test_a_monotonic_jump_on_the_leader_expires_sessions_and_breaks_nothing():
    # pick: bit 22 targets the serving leader, bit 21 jumps the monotonic clock too, and
    # (pick & 0xFFFF) % 10000 + 1 = 8001 ms, twice the session timeout.
    # Sessions not touched in the tick after the jump expire (here three of them).
    pick = (1 << 22) | (1 << 21) | 8000
    result = run_seed(12, 3, faults=[Fault(2.0, "clock_jump", 3.0, pick)], duration_s=8.0)
    assert result.ok, result.failures
    assert _lines(result, "clock jump wall=+8001ms mono=+8001ms")
    assert _lines(result, "expired"), "sessions should expire when the leader's clock leaps"


def test_wall_clock_steps_back_and_forth_change_nothing_visible():
    faults = [Fault(1.5, "clock_jump", 2.0, (1 << 20) | 9000),
              Fault(4.0, "clock_jump", 2.0, 9000)]
    result = run_seed(7, 3, faults=faults, duration_s=8.0)
    assert result.ok, result.failures
    assert len(_lines(result, "clock jump wall=")) == 4  # two jumps and two corrections


def test_a_failed_fsync_stops_the_server_and_it_restarts():
    result = run_seed(8, 3, faults=[Fault(2.0, "fsync_fail", 2.0, 1 << 20)], duration_s=8.0)
    assert result.ok, result.failures
    crash = _lines(result, "on_fatal: the log cannot sync")
    assert len(crash) == 1
    host = crash[0].split()[1]
    assert _lines(result, f"{host} start incarnation=2")


def _txn(zxid):
    hdr = r.TxnHeader(1, zxid, zxid, 0, OpCode.SET_DATA)
    return Txn(hdr, r.SetDataTxn("/a", b"x", 1))


def test_after_a_failed_fsync_the_log_never_reports_anything_durable():
    """TxnLog's contract after a failed write: waiters get the error, on_sync_failed is
    told, and neither that batch nor a later one is ever reported synced."""
    loop = VirtualLoop()
    disk = SimDisk()
    log = sim_txn_log(disk, random.Random(1))
    synced, failed = [], []
    log.on_synced = synced.append
    log.on_sync_failed = failed.append

    async def main():
        log.append([_txn(1)])
        await log.sync()
        disk.fail_syncs = 1
        log.append([_txn(2)])
        try:
            await log.sync()
        except OSError:
            pass
        else:
            raise AssertionError("sync() returned after its fsync failed")
        log.append([_txn(3)])
        await asyncio.sleep(1.0)
        try:
            await log.sync()
        except OSError:
            return
        raise AssertionError("sync() returned on a log whose fsync failed")

    run_virtual(loop, main())
    assert synced == [1]
    assert len(failed) == 1
    assert disk.zxids[:1] == [1] and 3 not in disk.zxids


def test_every_new_kind_is_in_the_all_profile():
    for kind in ("pause", "pause_leader", "clock_jump", "fsync_fail", "newleader_power"):
        assert PROFILES["all"].get(kind, 0) > 0, kind


# -- newleader_power and the injected bug it is for ---------------------------------

NEWLEADER_SEEDS = range(1, 5)


def test_a_learner_acking_newleader_before_its_sync_txns_are_durable_is_caught():
    """The injected bug (ZOOKEEPER-4646's order): the learner writes currentEpoch and ACKs
    NEWLEADER while its DIFF txns are still in its log's page cache. newleader_power loses
    them; the learner, now with the newest currentEpoch, wins the election against the old
    leader and truncates an acknowledged write away. Caught within four seeds; the same
    seeds pass with the bug off, so it is the bug the check sees."""
    caught = [s for s in NEWLEADER_SEEDS
              if any("acknowledged write lost" in f for f in run_seed(
                  s, 3, profile="newleader", bug="newleader_ack_before_durable").failures)]
    assert caught, f"seeds {list(NEWLEADER_SEEDS)} with the bug and no lost write"
    for s in NEWLEADER_SEEDS:
        control = run_seed(s, 3, profile="newleader")
        assert control.ok, (s, control.failures)
