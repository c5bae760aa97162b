"""quorumSync, both sides over the same seeds: under the scripted stale_leader fault (a
leader cut off from the other voters and frozen while they elect and write, then asked
sync + getData through a follower on its side, probe.py), ZooKeeper's sync answers with
the old data and the linearizability check reports it; with quorumSync the deposed
leader's PING round reaches no quorum, the sync is never answered, and the run passes."""

from zkcompat.sim.cluster import run_seed

STALE_SEEDS = range(1, 4)
DURATION_S = 9.0
PROBE_PATH = "/w/p1"  # the probe's own znode (probe.py): no other client writes it


def _run(seed, servers=5, **options):
    return run_seed(seed, servers, profile="stale_leader", duration_s=DURATION_S, **options)


def _probe_lines(result):
    return [line for line in result.trace if "nemesis stale_leader" in line]


def _stale_read_reported(result) -> bool:
    return any("not linearizable" in f and f"get_data({PROBE_PATH}) -> ok (b'old'" in f
               for f in result.failures)


def test_without_quorum_sync_a_deposed_leader_answers_sync_then_read_stale():
    stale = [s for s in STALE_SEEDS if _stale_read_reported(_run(s))]
    assert stale, f"seeds {list(STALE_SEEDS)}: no stale sync-then-read reported"


def test_with_quorum_sync_the_same_seeds_read_nothing_stale():
    for s in STALE_SEEDS:
        result = _run(s, quorum_sync=True)
        assert result.ok, (s, result.failures[:2])
        lines = _probe_lines(result)
        # Not vacuous: the new leader took the write, the old one was asked, and never
        # answered (it stepped down at syncLimit without a quorum's PINGs).
        assert any("write done" in line for line in lines), (s, lines)
        assert any("sync+read at" in line and "no answer" in line for line in lines), (s, lines)


def test_a_client_of_the_deposed_leader_itself_reads_stale_without_quorum_sync_only():
    """With 3 servers the probe's session is on the leader itself, whose pipeline answers
    a sync locally unless quorumSync sends it through the leader's round."""
    stale = [s for s in STALE_SEEDS if _stale_read_reported(_run(s, servers=3))]
    assert stale, f"seeds {list(STALE_SEEDS)}: no stale sync-then-read on 3 servers"
    for s in stale:
        result = _run(s, servers=3, quorum_sync=True)
        assert result.ok, (s, result.failures[:2])
        lines = _probe_lines(result)
        assert any("sync+read at" in line and "no answer" in line for line in lines), (s, lines)
