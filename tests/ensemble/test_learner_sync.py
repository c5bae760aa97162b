"""A learner that comes back is synced the way ZooKeeper syncs it, and then agrees:
DIFF when the leader's log still holds what it missed, SNAP when the log window has moved
past it, TRUNC when it holds txns of an old epoch that never committed."""

from __future__ import annotations

import signal
import time

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from .harness import (
    FAST,
    SMALL_LOG_WINDOW,
    AckedWrites,
    Load,
    check_acked_everywhere,
    check_trees_agree,
    write_batch,
)

MISSED_FEW = 50
MISSED_MANY = 1000
UNCOMMITTED = 20
SYNC_LINE = (r"event=sync_learner sid={sid} mode={mode} peer_zxid=(0x[0-9a-f]+) "
             r"leader_zxid=(0x[0-9a-f]+)")


def _follower(ensemble, leader: int) -> int:
    return next(s for s in ensemble.sids if s != leader)


def _restart_after_missing(ensemble, n: int, root: str) -> tuple[int, int, int, AckedWrites]:
    """Stop a follower, write n znodes through the leader, start it again.
    Returns (leader, follower, leader log offset before the restart, the acked writes)."""
    leader = ensemble.wait_one_leader()
    follower = _follower(ensemble, leader)
    acked = AckedWrites()
    writer = ensemble.client(ensemble.hosts(leader))
    writer.ensure_path(root)
    write_batch(writer, {f"{root}/before-{i:04d}": b"b%d" % i for i in range(10)}, acked)
    ensemble.stop_server(follower)
    write_batch(writer, {f"{root}/missed-{i:04d}": b"m%d" % i for i in range(n)}, acked)
    offset = ensemble.log_size(leader)
    ensemble.start_server(follower)
    return leader, follower, offset, acked


def _check_caught_up(ensemble, follower: int, acked: AckedWrites, root: str) -> None:
    check_acked_everywhere(ensemble, acked, [follower])
    assert check_trees_agree(ensemble, root) > len(acked.latest())


def test_follower_that_missed_writes_gets_a_diff(ensemble):
    ensemble.start(3, settings=FAST)
    leader, follower, offset, acked = _restart_after_missing(ensemble, MISSED_FEW, "/diff")
    m = ensemble.wait_log(leader, SYNC_LINE.format(sid=follower, mode=r"\w+"), offset)
    assert "mode=diff" in m.group(0), m.group(0)
    peer, ours = (int(z, 16) for z in m.groups())
    assert ours - peer >= MISSED_FEW, m.group(0)  # it really was behind
    _check_caught_up(ensemble, follower, acked, "/diff")


def test_follower_behind_the_log_window_gets_a_snap(ensemble):
    ensemble.start(3, settings={**FAST, **SMALL_LOG_WINDOW})
    leader, follower, offset, acked = _restart_after_missing(ensemble, MISSED_MANY, "/snap")
    m = ensemble.wait_log(leader, SYNC_LINE.format(sid=follower, mode=r"\w+"), offset)
    assert "mode=snap" in m.group(0), m.group(0)
    assert "event=purged" in ensemble.log_since(leader)  # the window did move
    ensemble.wait_log(follower, r"event=snap_installed", 0)
    _check_caught_up(ensemble, follower, acked, "/snap")


def test_old_leader_with_uncommitted_txns_gets_a_trunc(ensemble):
    """Both followers freeze, the leader logs txns nobody ACKs, then it crashes; the two
    followers elect a new leader (a new epoch) and go on; the old leader must drop those
    txns (TRUNC) and hold none of their znodes."""
    ensemble.start(3, settings={**FAST, "syncLimit": 10})  # 5 s to log unACKed txns
    leader = ensemble.wait_one_leader()
    followers = [s for s in ensemble.sids if s != leader]
    acked = AckedWrites()
    on_leader = ensemble.client_on(leader)
    setup = ensemble.client(ensemble.hosts(leader))
    write_batch(setup, {"/trunc": b"", "/trunc/committed": b"c"}, acked)
    last_committed = setup.exists("/trunc/committed").czxid

    for sid in followers:
        ensemble.signal(sid, signal.SIGSTOP)
    started = time.monotonic()
    pending = [on_leader.create_async(f"/trunc/uncommitted-{i:03d}", b"u")
               for i in range(UNCOMMITTED)]
    time.sleep(1.0)  # the leader logs them (fsync) but no follower can ACK
    assert time.monotonic() - started < 4.0, "too late: the leader may have given up"
    assert ensemble.mode(leader) == "leader"
    killed_at = ensemble.kill(leader)
    for sid in followers:
        ensemble.kill(sid)  # SIGKILL reaches a stopped process: they never read a proposal
    acked_uncommitted = []
    for r in pending:
        try:
            acked_uncommitted.append(r.get(timeout=5))
        except (KazooException, KazooTimeoutError):
            pass
    assert not acked_uncommitted, f"acknowledged without a quorum: {acked_uncommitted}"
    assert time.monotonic() - killed_at < 60

    ensemble.start_servers(*followers)
    new_leader = ensemble.wait_one_leader(followers)
    after = ensemble.client(",".join(ensemble.address(s) for s in followers))
    write_batch(after, {f"/trunc/new-epoch-{i:03d}": b"n" for i in range(10)}, acked)
    offset = ensemble.log_size(new_leader)
    ensemble.start_server(leader)
    m = ensemble.wait_log(new_leader, SYNC_LINE.format(sid=leader, mode=r"\w+"), offset)
    assert "mode=trunc" in m.group(0), m.group(0)
    peer, ours = (int(z, 16) for z in m.groups())
    assert peer >> 32 < ours >> 32, m.group(0)  # an old epoch's txns
    assert peer >= last_committed + UNCOMMITTED, m.group(0)  # ... that it logged unACKed
    ensemble.wait_log(leader, r"event=truncating_log", 0)
    assert ensemble.wait_one_leader() == new_leader

    reader = ensemble.client_on(leader)
    reader.sync("/")
    children = reader.get_children("/trunc")
    assert not [c for c in children if c.startswith("uncommitted-")], children
    check_acked_everywhere(ensemble, acked)
    assert check_trees_agree(ensemble, "/trunc") == 12


def test_follower_frozen_past_synclimit_is_dropped_and_catches_up(ensemble):
    ensemble.start(3, settings=FAST)
    leader = ensemble.wait_one_leader()
    follower = _follower(ensemble, leader)
    offset = ensemble.log_size(leader)
    with Load(ensemble, [leader]) as load:
        load.wait_acks(20, 0, "before SIGSTOP")
        ensemble.signal(follower, signal.SIGSTOP)
        try:
            stopped_at = time.monotonic()
            ensemble.wait_log(leader, rf"event=learner_silent sid={follower} ", offset)
            load.wait_acks(50, stopped_at, "while a follower is frozen")
        finally:
            ensemble.signal(follower, signal.SIGCONT)
        resumed_at = time.monotonic()
        ensemble.wait_log(leader, SYNC_LINE.format(sid=follower, mode=r"\w+"), offset)
        assert ensemble.wait_one_leader() == leader
        load.wait_acks(50, resumed_at, "after SIGCONT")
    assert not load.acked.violations, load.acked.violations
    check_acked_everywhere(ensemble, load.acked)
    check_trees_agree(ensemble, "/load")
