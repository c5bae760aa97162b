"""FastLeaderElection state machine: one test per rule of lookForLeader/WorkerReceiver
(3.8.0), then whole elections over an in-memory network that delays, reorders and drops."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from zkcompat.jute.election import Notification, ServerState
from zkcompat.zab.election import (
    FINALIZE_WAIT_MS,
    LONG_MIN,
    ElectionEffects,
    FastLeaderElection,
    Vote,
    total_order_predicate,
)
from zkcompat.zab.membership import QuorumServer, properties_order, quorum_config_bytes

LOOKING, FOLLOWING, LEADING, OBSERVING = (ServerState.LOOKING, ServerState.FOLLOWING,
                                          ServerState.LEADING, ServerState.OBSERVING)
CONFIG = b"version=0"


def fle(my_sid: int, voters: set[int], observers: set[int] = frozenset(), **kw) -> FastLeaderElection:
    return FastLeaderElection(my_sid, frozenset(voters), frozenset(observers), CONFIG, **kw)


def looking(leader: int, zxid: int = 0, ee: int = 1, pe: int = 0) -> Notification:
    return Notification(LOOKING, leader, zxid, ee, pe, 2, CONFIG)


def sent_to(fx: ElectionEffects) -> list[int]:
    return [sid for sid, _ in fx.send]


# -- rules -------------------------------------------------------------------------------


def test_total_order_is_peer_epoch_then_zxid_then_sid() -> None:
    assert total_order_predicate((1, 0, 2), (9, 99, 1))      # epoch first
    assert total_order_predicate((1, 5, 1), (9, 4, 1))       # then zxid
    assert total_order_predicate((2, 5, 1), (1, 5, 1))       # then sid
    assert not total_order_predicate((1, 5, 1), (1, 5, 1))   # strictly better only
    assert not total_order_predicate((9, 5, 0), (1, 5, 1))


def test_look_starts_a_round_voting_for_ourselves_and_notifies_every_other_voter() -> None:
    e = fle(2, {1, 2, 3})
    fx = e.look(last_zxid=0x100000004, peer_epoch=1, now_ms=0)
    assert e.logicalclock == 1
    assert sent_to(fx) == [1, 3]  # sorted; our own vote loops back internally
    for _, n in fx.send:
        assert n == Notification(LOOKING, 2, 0x100000004, 1, 1, 2, CONFIG)
    assert fx.decided is None and not fx.connect_all
    assert e.look(0x100000004, 1, 5).send[0][1].election_epoch == 2


def test_a_better_vote_is_adopted_and_announced() -> None:
    e = fle(1, {1, 2, 3})
    e.look(0, 0, 0)
    fx = e.step(3, looking(3), 1)
    assert e.proposal.leader == 3
    assert sent_to(fx) == [2, 3] and all(n.leader == 3 for _, n in fx.send)
    assert e.step(2, looking(2), 2).send == []  # worse: kept, not announced


def test_no_decision_without_a_quorum() -> None:
    e = fle(1, {1, 2, 3, 4, 5})
    e.look(0, 0, 0)
    e.step(5, looking(5), 1)  # {1: 5, 5: 5} is 2 of 5
    for t in range(0, 10 * FINALIZE_WAIT_MS, 50):
        assert e.tick(t).decided is None
    assert e.state == LOOKING


def test_a_quorum_decides_only_after_the_finalize_wait() -> None:
    e = fle(1, {1, 2, 3})
    e.look(0, 0, 0)
    e.step(3, looking(3), 10)  # {1: 3, 3: 3}: a quorum for 3
    assert e.next_deadline_ms == 10 + FINALIZE_WAIT_MS
    assert e.tick(10 + FINALIZE_WAIT_MS - 1).decided is None
    fx = e.tick(10 + FINALIZE_WAIT_MS)
    assert fx.decided == Vote(3, 0, 1, 0, FOLLOWING)
    assert e.state == FOLLOWING


def test_the_leader_decides_leading() -> None:
    e = fle(3, {1, 2, 3})
    e.look(0, 0, 0)
    e.step(1, looking(3), 0)
    assert e.tick(FINALIZE_WAIT_MS).decided == Vote(3, 0, 1, 0, LEADING)


def test_a_better_vote_in_the_finalize_wait_resumes_the_election() -> None:
    e = fle(1, {1, 2, 3, 4, 5})
    e.look(0, 0, 0)
    e.step(2, looking(4), 0)
    e.step(3, looking(4), 0)  # {1, 2, 3} for 4
    fx = e.step(5, looking(5), 100)
    assert e.proposal.leader == 5 and sent_to(fx) == [2, 3, 4, 5]
    assert e.tick(10_000).decided is None  # only {1, 5} vote 5 now
    assert e.state == LOOKING


def test_a_worse_notification_in_the_finalize_wait_is_dropped_and_restarts_it() -> None:
    e = fle(1, {1, 2, 3, 4, 5})
    e.look(0, 0, 0)
    e.step(4, looking(4), 0)
    e.step(3, looking(4), 0)  # {1, 3, 4} for 4: finalize until 200
    e.step(2, looking(2), 150)  # worse: dropped, wait again until 350
    assert e.tick(200).decided is None
    assert e.tick(349).decided is None
    assert e.tick(350).decided == Vote(4, 0, 1, 0, FOLLOWING)


def test_a_higher_election_epoch_resets_the_round() -> None:
    e = fle(2, {1, 2, 3, 4, 5})
    e.look(0, 0, 0)
    e.step(3, looking(3), 0)  # our proposal: 3, at round 1
    fx = e.step(1, looking(1, ee=5), 1)
    # the new round compares with our own initial vote, not with the old proposal
    assert e.logicalclock == 5 and e.proposal.leader == 2
    assert sent_to(fx) == [1, 3, 4, 5]
    assert all((n.leader, n.election_epoch) == (2, 5) for _, n in fx.send)
    e.step(3, looking(3, ee=5), 2)
    assert e.tick(1000).decided is None  # {2, 3} of round 5: 3's round-1 vote is gone
    e.step(4, looking(3, ee=5), 1001)
    assert e.tick(1001 + FINALIZE_WAIT_MS).decided == Vote(3, 0, 5, 0, FOLLOWING)


def test_a_lower_election_epoch_looking_peer_gets_our_vote_and_is_not_counted() -> None:
    e = fle(3, {1, 2, 3})
    e.look(0, 0, 0)
    e.look(0, 0, 1)  # round 2
    fx = e.step(1, looking(3, ee=1), 2)
    assert fx.send == [(1, Notification(LOOKING, 3, 0, 2, 0, 2, CONFIG))]
    assert e.tick(1000).decided is None


def test_looking_notifications_with_zxid_minus_1_are_ignored() -> None:
    e = fle(1, {1, 2, 3})
    e.look(0, 0, 0)
    assert e.step(3, looking(3, zxid=-1), 0).send == []
    assert e.proposal.leader == 1
    e2 = fle(1, {1, 2, 3})
    e2.look(-1, 0, 0)
    e2.step(3, looking(3), 0)
    assert e2.proposal.leader == 1 and e2.tick(1000).decided is None


def test_the_notification_timeout_doubles_up_to_the_max() -> None:
    e = fle(1, {1, 2, 3}, max_notification_interval_ms=1000)
    e.look(0, 0, 0)
    times = []
    t = 0
    while len(times) < 5:
        t = e.next_deadline_ms
        fx = e.tick(t)
        assert sent_to(fx) == [2, 3]
        times.append(t)
    assert times == [200, 600, 1400, 2400, 3400]
    assert e.tick(t + 999).send == []


def test_a_notification_restarts_the_timeout_without_resetting_the_backoff() -> None:
    e = fle(1, {1, 2, 3, 4, 5})
    e.look(0, 0, 0)
    e.tick(200)  # now 400 ms
    e.step(2, looking(2), 300)
    assert e.next_deadline_ms == 700


def test_timeout_with_nothing_delivered_asks_to_connect_all() -> None:
    e = fle(1, {1, 2, 3})
    e.look(0, 0, 0)
    fx = e.tick(200, have_delivered=False)
    assert fx.connect_all and fx.send == []


def test_non_voters_are_answered_with_our_current_vote_and_ignored() -> None:
    e = fle(1, {1, 2, 3}, {4})
    e.look(0x5, 1, 0)
    fx = e.step(4, looking(4, zxid=0x99, pe=9), 1)
    # currentVote is QuorumPeer's first one (ourselves), stamped with logicalclock
    assert fx.send == [(4, Notification(LOOKING, 1, 0x5, 1, 1, 2, CONFIG))]
    assert e.proposal.leader == 1
    fx = e.step(99, looking(99, zxid=0x99, pe=9), 1)  # unknown sid: the same
    assert sent_to(fx) == [99] and e.proposal.leader == 1


def test_a_vote_for_a_non_voter_is_ignored() -> None:
    e = fle(1, {1, 2, 3}, {4})
    e.look(0, 0, 0)
    assert e.step(2, looking(4, zxid=99), 0).send == []
    assert e.proposal.leader == 1


def test_following_notifications_of_this_round_decide_with_the_leader_leading() -> None:
    e = fle(1, {1, 2, 3})
    e.look(0, 0, 0)
    assert e.step(2, Notification(FOLLOWING, 3, 0, 1, 1), 0).decided is None
    fx = e.step(3, Notification(LEADING, 3, 0, 1, 1), 0)
    assert fx.decided == Vote(3, 0, 1, 1, FOLLOWING)  # no finalize wait here


def test_a_leader_a_quorum_follows_is_joined_even_in_the_finalize_wait() -> None:
    """A wiped follower (zxid 0) rejoins a running ensemble. On the new connection server 1's
    manager resends the last message it sent this sid: its LOOKING vote for itself from an
    election it has since left (QuorumCnxManager's lastMessageSent). That stale vote plus
    ours is a quorum, so we enter the finalize wait; the leader's LEADING and server 1's
    FOLLOWING answers carry the running epoch's vote, which is not better by the total
    order. ZooKeeper drops them there and follows server 1, which leads nothing, until
    initLimit runs out (20 s at the bench's settings), unless they happen to arrive before
    the stale vote. zkcompat takes them as outside the wait: a quorum following a server
    that says it is LEADING is the leader to join."""
    e = fle(2, {1, 2, 3})
    e.look(0, 0, 0)
    e.step(1, looking(1, 0x1000007F5, ee=1, pe=1), 0)  # the stale vote: finalize wait
    assert e.proposal.leader == 1
    assert e.step(3, Notification(LEADING, 3, 0, 1, 1), 10).decided is None
    fx = e.step(1, Notification(FOLLOWING, 3, 0, 1, 1), 20)
    assert fx.decided == Vote(3, 0, 1, 1, FOLLOWING)
    assert e.tick(10_000).decided is None


def test_out_of_election_needs_the_leader_itself_leading() -> None:
    e = fle(1, {1, 2, 3, 4, 5})
    e.look(0, 0, 0)
    for sid in (2, 3, 4):  # a quorum follows 5, from an earlier round
        assert e.step(sid, Notification(FOLLOWING, 5, 0, 7, 2), 0).decided is None
    fx = e.step(5, Notification(LEADING, 5, 0x200000003, 7, 2), 0)
    assert fx.decided == Vote(5, 0x200000003, 7, 2, FOLLOWING)
    assert e.logicalclock == 7


def test_out_of_election_votes_agree_on_leader_and_peer_epoch() -> None:
    e = fle(1, {1, 2, 3})
    e.look(0, 0, 0)
    e.step(2, Notification(FOLLOWING, 3, 0, 4, 1), 0)
    assert e.step(3, Notification(LEADING, 3, 0, 4, 2), 0).decided is None  # epochs differ
    # a pre-ZOOKEEPER-1732 peer (version 0) agrees on the leader alone
    fx = e.step(2, Notification(FOLLOWING, 3, 0, 4, 1, 0, b""), 0)
    assert fx.decided is not None and fx.decided.leader == 3


def test_observing_notifications_are_ignored() -> None:
    e = fle(1, {1, 2, 3})
    e.look(0, 0, 0)
    e.step(2, Notification(OBSERVING, 3, 0, 1, 0), 0)
    e.step(3, Notification(OBSERVING, 3, 0, 1, 0), 0)
    assert e.tick(1000).decided is None


def test_a_decided_server_answers_looking_peers_with_its_vote_and_nothing_else() -> None:
    e = fle(3, {1, 2, 3})
    e.look(0, 0, 0)
    e.step(1, looking(3), 0)
    e.tick(FINALIZE_WAIT_MS)
    assert e.state == LEADING
    fx = e.step(2, looking(2, ee=4), 300)
    assert fx.send == [(2, Notification(LEADING, 3, 0, 1, 0, 2, CONFIG))]
    assert e.step(2, Notification(FOLLOWING, 3, 0, 1, 0), 300).send == []
    assert e.tick(10**9).send == [] and e.next_deadline_ms is None


def test_serve_replaces_the_vote_we_answer_with() -> None:
    e = fle(2, {1, 2, 3})
    e.serve(FOLLOWING, Vote(3, 0x100000000, 6, 1, FOLLOWING))
    fx = e.step(1, looking(1, ee=9), 0)
    assert fx.send == [(1, Notification(FOLLOWING, 3, 0x100000000, 6, 1, 2, CONFIG))]
    with pytest.raises(ValueError):
        e.serve(LOOKING, Vote(1, 0, 0, 0))


def test_notifications_before_the_first_look_are_dropped() -> None:
    e = fle(1, {1, 2, 3})
    assert e.step(2, looking(2), 0) == ElectionEffects()
    assert e.tick(10**6) == ElectionEffects()


def test_an_observer_proposes_nobody_and_sends_to_voters_only() -> None:
    e = fle(4, {1, 2, 3}, {4})
    fx = e.look(0x7, 1, 0)
    assert sent_to(fx) == [1, 2, 3]
    assert all((n.leader, n.zxid, n.peer_epoch) == (LONG_MIN,) * 3 for _, n in fx.send)


def test_an_observer_observes_the_leader_a_quorum_follows() -> None:
    e = fle(4, {1, 2, 3}, {4})
    e.look(0, 0, 0)
    e.step(1, Notification(FOLLOWING, 3, 0, 2, 1), 0)
    fx = e.step(3, Notification(LEADING, 3, 0, 2, 1), 0)
    assert fx.decided == Vote(3, 0, 2, 1, OBSERVING)


def test_construction_checks_membership() -> None:
    with pytest.raises(ValueError):
        fle(1, {1, 2, 3}, {3})
    # Outside the config (a reconfig left it out, or it is about to join): a non-voting
    # participant, which proposes nobody (learningState: it follows).
    outsider = fle(9, {1, 2, 3})
    assert not outsider.participant and 9 not in outsider.observers


# -- an in-memory network ----------------------------------------------------------------


@dataclass
class Network:
    """Servers exchanging encoded notifications with random delays (so: reordering), an
    optional drop rate and cut links; time jumps to the next delivery or deadline."""

    nodes: dict[int, FastLeaderElection]
    rng: random.Random
    delay_ms: tuple[int, int] = (1, 20)
    drop: float = 0.0
    cut: set[frozenset[int]] = field(default_factory=set)
    down: set[int] = field(default_factory=set)
    now_ms: int = 0
    decided: dict[int, Vote] = field(default_factory=dict)
    delivered: int = 0
    _queue: list[tuple[int, int, int, int, bytes]] = field(default_factory=list)
    _seq: int = 0

    def apply(self, src: int, fx: ElectionEffects) -> None:
        for dst, n in fx.send:
            if dst in self.down or frozenset((src, dst)) in self.cut or self.rng.random() < self.drop:
                continue
            at = self.now_ms + self.rng.randint(*self.delay_ms)
            self._seq += 1
            self._queue.append((at, self._seq, src, dst, n.encode()))
        if fx.decided is not None:
            self.decided[src] = fx.decided

    def look(self, sid: int, zxid: int = 0, epoch: int = 0) -> None:
        self.apply(sid, self.nodes[sid].look(zxid, epoch, self.now_ms))

    def run(self, until_ms: int, stop_when_decided: set[int] | None = None) -> None:
        while self.now_ms <= until_ms:
            if stop_when_decided is not None and stop_when_decided <= self.decided.keys():
                return
            deadlines = [(e.next_deadline_ms, sid) for sid, e in self.nodes.items()
                         if sid not in self.down and e.next_deadline_ms is not None]
            next_msg = min(self._queue, default=None)
            next_tick = min(deadlines, default=None)
            if next_msg is None and next_tick is None:
                return
            if next_tick is None or (next_msg is not None and next_msg[0] <= next_tick[0]):
                self._queue.remove(next_msg)
                at, _, src, dst, raw = next_msg
                self.now_ms = max(self.now_ms, at)
                if dst not in self.down:
                    self.delivered += 1
                    self.apply(dst, self.nodes[dst].step(src, Notification.decode(raw), self.now_ms))
            else:
                at, sid = next_tick
                self.now_ms = max(self.now_ms, at)
                self.apply(sid, self.nodes[sid].tick(self.now_ms))


def _ensemble(n: int, observers: int = 0) -> dict[int, FastLeaderElection]:
    voters = set(range(1, n + 1))
    obs = set(range(n + 1, n + 1 + observers))
    return {sid: fle(sid, voters, obs) for sid in sorted(voters | obs)}


def _best(histories: dict[int, tuple[int, int]]) -> int:
    return max(histories, key=lambda sid: (histories[sid][1], histories[sid][0], sid))


@pytest.mark.parametrize("size", [3, 5, 7])
@pytest.mark.parametrize("seed", range(8))
def test_an_election_converges_to_the_highest_epoch_zxid_sid(size: int, seed: int) -> None:
    rng = random.Random(seed)
    net = Network(_ensemble(size), rng)
    histories = {sid: (rng.choice([0, 5, 9]), rng.choice([0, 1])) for sid in net.nodes}
    for sid, (counter, epoch) in histories.items():
        net.look(sid, zxid=(epoch << 32) | counter, epoch=epoch)
    net.run(60_000, stop_when_decided=set(net.nodes))
    leader = _best(histories)
    assert set(net.decided) == set(net.nodes), f"--seed {seed}"
    assert {v.leader for v in net.decided.values()} == {leader}, f"--seed {seed}"
    assert net.decided[leader].state == LEADING
    assert all(v.state == FOLLOWING for sid, v in net.decided.items() if sid != leader)


@pytest.mark.parametrize("seed", range(8))
def test_elections_with_dropped_messages_still_agree(seed: int) -> None:
    net = Network(_ensemble(5), random.Random(seed), drop=0.3)
    for sid in net.nodes:
        net.look(sid)
    net.run(600_000, stop_when_decided=set(net.nodes))
    assert set(net.decided) == set(net.nodes), f"--seed {seed}"
    leaders = {v.leader for v in net.decided.values()}
    assert len(leaders) == 1, f"--seed {seed}: {net.decided}"
    (leader,) = leaders
    assert net.decided[leader].state == LEADING


def test_a_minority_never_decides() -> None:
    net = Network(_ensemble(5), random.Random(1), down={3, 4, 5})
    for sid in (1, 2):
        net.look(sid)
    net.run(300_000)
    assert net.decided == {}
    assert net.delivered > 10  # they did talk, and kept retrying


def test_a_majority_decides_without_the_rest() -> None:
    net = Network(_ensemble(5), random.Random(2), down={4, 5})
    for sid in (1, 2, 3):
        net.look(sid)
    net.run(60_000, stop_when_decided={1, 2, 3})
    assert {v.leader for v in net.decided.values()} == {3}


def test_a_late_joiner_learns_the_existing_leader_even_with_a_better_vote() -> None:
    net = Network(_ensemble(3), random.Random(3), down={3})
    net.look(1)
    net.look(2)
    net.run(60_000, stop_when_decided={1, 2})
    assert net.decided[2].state == LEADING and net.decided[1].leader == 2
    # the new epoch is established: both answer with it (updateElectionVote)
    for sid, state in ((1, FOLLOWING), (2, LEADING)):
        v = net.decided[sid]
        net.nodes[sid].serve(state, Vote(2, v.zxid, v.election_epoch, 1, state))
    net.down.clear()
    net.look(3, zxid=0x100000000 | 50, epoch=1)  # a higher zxid and sid than leader 2
    net.run(net.now_ms + 60_000, stop_when_decided={3})
    assert net.decided[3] == Vote(2, 0, 1, 1, FOLLOWING)
    assert net.nodes[3].logicalclock == 1


def test_losing_the_leader_elects_the_next_best_in_a_new_round() -> None:
    net = Network(_ensemble(3), random.Random(4))
    for sid in net.nodes:
        net.look(sid)
    net.run(60_000, stop_when_decided=set(net.nodes))
    assert net.decided[3].state == LEADING
    net.down.add(3)
    net.decided.clear()
    for sid in (1, 2):
        net.look(sid)
    net.run(net.now_ms + 60_000, stop_when_decided={1, 2})
    assert net.decided == {1: Vote(2, 0, 2, 0, FOLLOWING), 2: Vote(2, 0, 2, 0, LEADING)}


def test_observers_observe_and_never_count() -> None:
    net = Network(_ensemble(3, observers=2), random.Random(5))
    for sid in net.nodes:
        net.look(sid)
    net.run(120_000, stop_when_decided=set(net.nodes))
    assert {sid: v.leader for sid, v in net.decided.items()} == {s: 3 for s in range(1, 6)}
    assert net.decided[4].state == net.decided[5].state == OBSERVING
    # one voter plus two observers is no quorum
    net2 = Network(_ensemble(3, observers=2), random.Random(6), down={2, 3})
    for sid in (1, 4, 5):
        net2.look(sid)
    net2.run(120_000)
    assert net2.decided == {}


def test_the_same_seed_gives_the_same_election() -> None:
    def trace(seed: int) -> tuple:
        net = Network(_ensemble(5), random.Random(seed), drop=0.2)
        for sid in net.nodes:
            net.look(sid)
        net.run(600_000, stop_when_decided=set(net.nodes))
        return net.now_ms, net.delivered, tuple(sorted(net.decided.items()))

    assert trace(11) == trace(11)


# -- the config field --------------------------------------------------------------------


def test_config_bytes_of_a_static_three_server_zoo_cfg() -> None:
    servers = [(3, "127.0.0.1", 2890, 3890), (1, "127.0.0.1", 2888, 3888),
               QuorumServer(2, "127.0.0.1", 2889, 3889)]
    assert quorum_config_bytes(servers) == (
        b"server.1=127.0.0.1:2888:3888:participant\n"
        b"server.2=127.0.0.1:2889:3889:participant\n"
        b"server.3=127.0.0.1:2890:3890:participant\n"
        b"version=0")


def test_config_bytes_print_observers_and_client_addresses() -> None:
    servers = [QuorumServer(1, "zk1", 1, 2, "participant", None, 2181),
               QuorumServer(2, "::1", 3, 4, "observer", "127.0.0.1", 2182)]
    assert quorum_config_bytes(servers) == (
        b"server.1=zk1:1:2:participant;0.0.0.0:2181\n"
        b"server.2=[::1]:3:4:observer;127.0.0.1:2182\n"
        b"version=0")


def test_config_bytes_follow_java_hashmap_order() -> None:
    servers = [QuorumServer(sid, "h", 1, 2) for sid in (17, 1, 16, 2)]
    order = [line.split(b"=")[0] for line in quorum_config_bytes(servers).split(b"\n")]
    # buckets of a 16-slot table: 16 -> 0, 17 and 1 -> 1 (in insertion order), 2 -> 2
    assert order == [b"server.16", b"server.17", b"server.1", b"server.2", b"version"]
    many = [QuorumServer(sid, "h", 1, 2) for sid in range(20, 0, -1)]  # 32 slots
    assert [line.split(b"=")[0] for line in quorum_config_bytes(many).split(b"\n")][:-1] == [
        f"server.{sid}".encode() for sid in range(1, 21)]


def test_config_bytes_take_any_object_with_the_fields() -> None:
    @dataclass(frozen=True)
    class Line:  # the shape of zkcompat.config.QuorumServer
        sid: int
        host: str
        quorum_port: int
        election_port: int
        role: str = "participant"
        client_host: str | None = None
        client_port: int | None = None

    assert quorum_config_bytes([Line(2, "h", 1, 2, "observer", None, 7)]) == (
        b"server.2=h:1:2:observer;0.0.0.0:7\nversion=0")


def test_config_bytes_refuse_unknown_roles() -> None:
    with pytest.raises(ValueError):
        quorum_config_bytes([QuorumServer(1, "h", 1, 2, "voter")])


# What java.util.Properties (OpenJDK 17) iterates, for keys loaded in this order.
ZOO_CFG_KEYS = ["tickTime", "clientPortAddress", "maxClientCnxns", "forceSync", "snapCount",
                "admin.enableServer", "4lw.commands.whitelist", "dataDir", "clientPort",
                "initLimit", "syncLimit", "server.1", "server.2", "server.3", "server.17",
                "server.4"]
JAVA_PROPERTIES_ORDER = ["dataDir", "4lw.commands.whitelist", "syncLimit", "server.17",
                         "clientPortAddress", "server.2", "forceSync", "admin.enableServer",
                         "server.1", "tickTime", "clientPort", "initLimit", "server.4",
                         "snapCount", "server.3", "maxClientCnxns"]


def test_properties_order_is_java_17s() -> None:
    assert properties_order(ZOO_CFG_KEYS) == JAVA_PROPERTIES_ORDER  # one resize at 12 keys
    assert properties_order(["server.1", "server.17", "server.33", "server.2"]) == [
        "server.33", "server.2", "server.1", "server.17"]
    assert properties_order(["a", "b", "a"]) == ["a", "b"]


def test_config_bytes_take_colliding_sids_in_properties_order() -> None:
    servers = [QuorumServer(sid, "h", 1, 2) for sid in (1, 2, 3, 17, 4)]
    names = [line.split(b"=")[0] for line in
             quorum_config_bytes(servers, ZOO_CFG_KEYS).split(b"\n")][:-1]
    assert names == [b"server.17", b"server.1", b"server.2", b"server.3", b"server.4"]
    with pytest.raises(ValueError):
        quorum_config_bytes(servers, ["server.1"])

