"""The nemesis's checks can fail: each catches its planted problem in a fabricated history,
and the firewall leaves no table behind, also when the code between open and close raises.
No servers here; the firewall tests need root and nft."""

from __future__ import annotations

import random
import shutil
from types import SimpleNamespace

import pytest

from tests.nemesis import checks, mixed, net, runner
from tests.nemesis.workload import FencedWrite, Holding, Layout, Seen
from zkcompat.jute.constants import Code
from zkcompat.sim.history import (
    Create,
    CreateSequential,
    Err,
    GetData,
    Ok,
    Operation,
    SetData,
)

LAYOUT = Layout("/r")
K = LAYOUT.keys[0]


def test_an_acknowledged_write_then_gone_is_not_linearizable():
    acked = [Operation(1, Create(K, b"v1"), 0, 10, Ok(K)),
             Operation(2, SetData(K, b"v2", 0), 20, 30, Ok(1))]
    healed = Operation(1001, GetData(K), 40, 50, Ok((b"v2", 1)))
    assert checks.check_linearizable([*acked, healed], LAYOUT.setup_paths) == []
    # A server's sync-then-read after the heal shows the value before the acked write.
    lost = Operation(1001, GetData(K), 40, 50, Ok((b"v1", 0)))
    failures = checks.check_linearizable([*acked, lost], LAYOUT.setup_paths)
    assert failures and "not linearizable" in failures[0], failures


def test_a_stale_sync_read_is_not_linearizable():
    history = [Operation(1, Create(K, b"v1"), 0, 10, Ok(K)),
               Operation(1, SetData(K, b"v2"), 20, 30, Ok(1)),
               Operation(2, GetData(K), 40, 50, Ok((b"v1", 0)))]
    assert checks.check_linearizable(history, LAYOUT.setup_paths)


def test_an_unknown_outcome_may_have_happened_or_not():
    history = [Operation(1, Create(K, b"v1"), 0, 10, Ok(K)),
               Operation(2, SetData(K, b"v2"), 20),  # ConnectionLoss: unknown
               Operation(3, GetData(K), 40, 50, Ok((b"v2", 1))),
               Operation(3, GetData(K), 60, 70, Ok((b"v2", 1)))]
    assert checks.check_linearizable(history, LAYOUT.setup_paths) == []
    went_back = [*history, Operation(3, GetData(K), 80, 90, Ok((b"v1", 0)))]
    assert checks.check_linearizable(went_back, LAYOUT.setup_paths)


def test_a_sequential_name_given_twice_is_caught():
    name = f"{LAYOUT.seq_prefix}0000000003"
    history = [Operation(1, CreateSequential(LAYOUT.seq_prefix, b"a"), 0, 10, Ok(name)),
               Operation(2, CreateSequential(LAYOUT.seq_prefix, b"b"), 5, 15, Ok(name))]
    assert "given twice" in checks.check_sequential_unique(history)[0]
    assert checks.check_linearizable(history, LAYOUT.setup_paths)


def test_a_lost_sequential_node_is_caught_per_server():
    history = [Operation(1, CreateSequential(LAYOUT.seq_prefix, b"a"), 0, 10,
                         Ok(f"{LAYOUT.seq_prefix}0000000000"))]
    children = {1: ["s-0000000000"], 2: [], 3: ["s-0000000000"]}
    failures = checks.check_acked_present(history, children, LAYOUT.queue)
    assert len(failures) == 1 and failures[0].startswith("server.2 lost 1 of 1"), failures


def test_a_session_that_goes_back_in_time_is_caught():
    seen = [Seen(1, 0x10, 1, K, 0x105, True),
            Seen(1, 0x10, 2, K, 0x103, False),  # older than its own write
            Seen(1, 0x11, 3, K, 0x101, False),  # a new session: no order with the old one
            Seen(2, 0x20, 1, K, 0x101, False)]
    failures = checks.check_session_order(seen)
    assert len(failures) == 1 and "after its own write showed 0x105" in failures[0], failures


def test_overlapping_requests_of_one_client_are_caught():
    history = [Operation(1, GetData(K), 0, 30, Err(Code.NONODE)),
               Operation(1, GetData(K), 20, 40, Err(Code.NONODE))]
    assert "overlapped" in checks.check_client_order(history)[0]


def test_digests_that_differ_are_caught():
    stats = {1: {"zk_digest_mismatches_count": "0"}, 2: {"zk_digest_mismatches_count": "2"}}
    logs = {1: [{"zxid": 0x100000080, "digest": 7}], 2: [{"zxid": 0x100000080, "digest": 8}],
            3: [{"zxid": 0x100000080, "digest": 7}]}
    failures = checks.check_digests(stats, logs)
    assert failures[0] == "server.2: zk_digest_mismatches_count 2"
    assert failures[1].startswith("digests differ at zxid 0x100000080"), failures


def test_two_lock_holders_at_once_are_caught():
    ms = 1_000_000
    fine = [Holding(1, 0x105, 0, 100 * ms), Holding(2, 0x109, 100 * ms, 180 * ms),
            Holding(1, 0x10c, 200 * ms, 300 * ms)]
    assert checks.check_lock_exclusive(fine) == []
    # Client 3 is told it holds the lock while client 2 has not yet called release().
    overlap = [*fine, Holding(3, 0x10a, 150 * ms, 170 * ms)]
    failures = checks.check_lock_exclusive(overlap)
    assert len(failures) == 1 and failures[0].startswith(
        "client 3 acquired the lock (token 0x10a) 30.0 ms before client 2"), failures


def test_a_token_that_does_not_grow_with_acquisitions_is_caught():
    history = [Holding(1, 0x105, 0, 100), Holding(2, 0x104, 120, 180)]
    failures = checks.check_lock_exclusive(history)
    assert failures == ["client 2's token 0x104 is not above the earlier holder client 1's "
                        "0x105"], failures


def test_a_fenced_write_of_an_older_token_acknowledged_later_is_caught():
    writes = [FencedWrite(1, 0x105, 0, 10, True), FencedWrite(2, 0x109, 20, 30, True),
              FencedWrite(1, 0x104, 5, None, None),  # unknown: no order, either way
              FencedWrite(3, 0x10c, 40, 50, False)]  # refused: its lock node was gone
    assert checks.check_fenced_writes(writes, 0x109) == []
    stale = [*writes, FencedWrite(1, 0x105, 60, 70, True)]
    assert "0x105 was acknowledged after client 2's of 0x109" in checks.check_fenced_writes(
        stale, 0x105)[0]
    assert "holds 0x105 after the heal, older than the acknowledged token 0x109" in (
        checks.check_fenced_writes(writes, 0x105)[0])


# -- the firewall ---------------------------------------------------------------------------

PEERS = [net.Peer(1, "127.0.0.1", 20001, 20002), net.Peer(2, "127.0.0.2", 20003, 20004),
         net.Peer(3, "127.0.0.3", 20005, 20006)]
needs_nft = pytest.mark.skipif(shutil.which("nft") is None, reason=net.NFT_MISSING)


def test_partitions_name_the_links_they_cut():
    assert net.isolate(2, [1, 2, 3]) == {(1, 2), (2, 1), (2, 3), (3, 2)}
    assert net.bridge(1, [1, 2, 3]) == {(2, 3), (3, 2)}
    assert net.one_way(3, [1, 2, 3]) == {(3, 1), (3, 2)}


def test_a_link_is_cut_on_peer_ports_only():
    rules = net.Firewall(PEERS, name="t").rules({(1, 2)})
    assert rules == [
        "add rule inet t input ip saddr 127.0.0.1 ip daddr 127.0.0.2 tcp dport "
        "{ 20003, 20004 } drop",
        "add rule inet t input ip saddr 127.0.0.1 ip daddr 127.0.0.2 tcp sport "
        "{ 20001, 20002 } drop"]


@needs_nft
def test_the_table_is_gone_after_a_failure_inside():
    firewall = net.Firewall(PEERS, name="zkcompat_nemesis_test_checks")
    with pytest.raises(RuntimeError, match="planted"), firewall:
        firewall.cut(net.isolate(1, [1, 2, 3]))
        assert firewall.name in net.table_names()
        raise RuntimeError("planted")
    assert firewall.name not in net.table_names()


# -- a fault that did not bite --------------------------------------------------------------


class _Logs:
    """What Nemesis reads of an ensemble to judge a fault: its servers' logs and kinds."""

    def __init__(self, logs: dict[int, str], zookeeper: frozenset[int] = frozenset()) -> None:
        self.logs = logs
        self.zookeeper = zookeeper

    def member(self, sid: int) -> SimpleNamespace:
        return SimpleNamespace(kind="zookeeper" if sid in self.zookeeper else "zkcompat")

    def log_size(self, sid: int) -> int:
        return 0

    def log_since(self, sid: int, offset: int = 0) -> str:
        return self.logs[sid][offset:]


def test_a_fault_nobody_felt_fails_the_round():
    logs = {1: "event=term_ended role=follower\n", 2: "event=leader_elected\n",
            3: "event=slow_txn_log_sync write_ms=1203\n"}
    n = runner.Nemesis(SimpleNamespace(ens=_Logs(logs)), random.Random(0), 1.0, "/p")
    n.expect_term_end(1)
    n.expect_log(3, runner.SLOW_SYNC, "never warned of a slow fsync")
    assert n.felt() == []
    n.expect_term_end(2)
    n.expect_log(2, runner.SYNC_FAILED, "did not stop on a failing fsync")
    assert n.felt() == [
        "server.2 never ended its term: the fault did nothing (no /event=term_ended/ in its log)",
        "server.2 did not stop on a failing fsync "
        "(no /event=txn_log_sync_failed .*action=stop_server/ in its log)"]


def test_a_zookeeper_member_ends_its_term_in_its_own_words():
    logs = {1: "INFO [QuorumPeer[myid=1]] Peer state changed: looking\n",
            2: "INFO [QuorumPeer[myid=2]] Peer state changed: following - broadcast\n"}
    n = runner.Nemesis(SimpleNamespace(ens=_Logs(logs, frozenset({1, 2}))), random.Random(0),
                       1.0, "/p")
    n.expect_term_end(1)
    assert n.felt() == []
    n.expect_term_end(2)
    assert n.felt() == ["server.2 never ended its term: the fault did nothing "
                        "(no /Peer state changed: looking/ in its log)"]


# -- mixed ensembles: what is ZooKeeper's own -----------------------------------------------

ZK_HOST, ZKC_HOST = "127.0.0.1", "127.0.0.2"


def _stale_sync_read() -> tuple[list[Operation], Operation]:
    history = [Operation(1, Create(K, b"v1"), 0, 10, Ok(K)),
               Operation(1, SetData(K, b"v2"), 20, 30, Ok(1))]
    stale = Operation(2, GetData(K), 40, 50, Ok((b"v1", 0)))
    return [*history, stale], stale


def test_a_stale_sync_read_a_zookeeper_member_served_is_zookeepers_not_a_failure():
    history, stale = _stale_sync_read()
    served = {id(op): frozenset({ZKC_HOST}) for op in history}
    served[id(stale)] = frozenset({ZK_HOST})
    ours, theirs = runner._linearizable(history, [], LAYOUT, served, None, {ZK_HOST})
    assert ours == [] and len(theirs) == 1 and "ZooKeeper's" in theirs[0], theirs


def test_a_stale_sync_read_a_zkcompat_member_served_with_no_zookeeper_leading_fails():
    history, _ = _stale_sync_read()
    served = {id(op): frozenset({ZKC_HOST}) for op in history}
    ours, theirs = runner._linearizable(history, [], LAYOUT, served, None, {ZK_HOST})
    assert ours and "not linearizable" in ours[0] and theirs == []
    # The same history in an all-zkcompat round fails as it always did.
    assert runner._linearizable(history, [], LAYOUT, served, None, set())[0]


def test_a_read_after_the_heal_is_never_set_aside():
    """A lost acknowledged write shows in the reads after the heal, whoever serves them."""
    acked = [Operation(1, Create(K, b"v1"), 0, 10, Ok(K)),
             Operation(2, SetData(K, b"v2", 0), 20, 30, Ok(1))]
    lost = Operation(1001, GetData(K), 40, 50, Ok((b"v1", 0)))
    served = {id(lost): frozenset({ZK_HOST})}
    ours, theirs = runner._linearizable(acked, [lost], LAYOUT, served, None, {ZK_HOST})
    assert ours and theirs == []


def test_a_session_going_back_on_a_zookeeper_member_is_zookeepers():
    seen = [Seen(1, 7, 1, K, 0x105, False, frozenset({ZKC_HOST})),
            Seen(1, 7, 2, K, 0x103, False, frozenset({ZK_HOST}))]
    going_back = checks.describe_going_back(*seen)
    assert runner._session_order(seen, {ZK_HOST}) == ([], [f"ZooKeeper's: {going_back}"])
    back_on_ours = [seen[1], Seen(1, 7, 3, K, 0x101, False, frozenset({ZKC_HOST}))]
    ours, theirs = runner._session_order(back_on_ours, {ZK_HOST})
    assert len(ours) == 1 and theirs == []


def test_a_zookeeper_sync_that_died_of_zookeeper_4394_is_told_apart():
    npe = ('WARN [QuorumPeer[myid=3]] Exception when following the leader\n'
           'java.lang.NullPointerException: Cannot read field "hdr" because "pif" is null\n')
    logs = _Logs({1: "INFO Peer state changed: following - broadcast\n", 2: "", 3: npe},
                 frozenset({1, 3}))
    assert mixed.broken_syncs(logs, {1, 3}) == {3}
    assert mixed.broken_syncs(logs, {1}) == set()  # only ZooKeeper members are asked


def test_digest_mismatches_replaying_a_fuzzy_zookeeper_snap_are_zookeepers(tmp_path):
    """A zkcompat learner's mismatches are ZooKeeper's only when its log and the snapshot
    it installed show them: the leader was ZooKeeper, the SNAP held txns past its zxid,
    and the first mismatch and the count fall within them."""
    from zkcompat.jute import records as r  # noqa: PLC0415
    from zkcompat.jute.constants import OpCode  # noqa: PLC0415
    from zkcompat.store.snapshot import SnapshotStore  # noqa: PLC0415
    from zkcompat.tree.datatree import DataTree  # noqa: PLC0415
    from zkcompat.tree.txn import Txn  # noqa: PLC0415

    snap_zxid = 0x200000010
    tree = DataTree()
    hdr = r.TxnHeader(1, 1, snap_zxid + 3, 0, OpCode.CREATE)  # a txn the SNAP should not hold
    tree.apply(Txn(hdr, r.CreateTxn("/f", b"x", [], False, 1)))
    tree.last_processed_zxid = snap_zxid
    store = SnapshotStore(tmp_path / "3" / "zkcompat" / "snapshots")
    store.write_sync(tree)
    store.close()
    log = ("event=listening address=127.0.0.3 port=1\n"
           "event=elected leader=2 my_sid=3 state=follower zxid=0x1\n"
           f"event=snap_installed zxid=0x{snap_zxid:x} nodes=3\n"
           f"event=digest_mismatch zxid=0x{snap_zxid + 1:x} leader_digest=1 our_digest=2\n")
    ens = SimpleNamespace(log_since=lambda sid: log,
                          member=lambda sid: SimpleNamespace(data_dir=str(tmp_path / "3")))
    why = mixed.fuzzy_snap_mismatches(ens, 3, 2, {2})
    assert why and "fuzzy SNAP" in why and "0x200000013" in why, why
    assert mixed.fuzzy_snap_mismatches(ens, 3, 4, {2}) is None  # more than the fuzzy range
    assert mixed.fuzzy_snap_mismatches(ens, 3, 2, {1}) is None  # a zkcompat leader's SNAP
