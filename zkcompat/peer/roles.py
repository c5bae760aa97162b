"""Each role's chain of stages, wired in one short function: what a request meets on a
standalone server, a leader, a follower or observer, and a read-only server.

    standalone  connection → LeaderRequests (prep) → Shell → Leader → txn log → Apply
    leader      the same, its Shell also sending PROPOSALs and COMMITs to learners
    follower    connection → LearnerRequests (forward) → Shell → Learner → the leader;
                the commit comes back: Learner → Shell → Apply
    read-only   connection → ReadOnlyRequests → Apply (writes refused)
"""

from zkcompat.peer.shell import Alone, Shell
from zkcompat.peer.timing import LeaderTiming, LearnerTiming
from zkcompat.server.apply import Apply
from zkcompat.server.leader_requests import LeaderRequests
from zkcompat.server.learner_requests import LearnerRequests
from zkcompat.server.pipeline import Pipeline
from zkcompat.server.prep import Prep
from zkcompat.server.readonly_requests import ReadOnlyRequests
from zkcompat.server.reconfig import Reconfigurer
from zkcompat.server.sessions import SessionTracker
from zkcompat.server.sync import PendingSyncs
from zkcompat.zab.leader import Leader

# A standalone ZooKeeper tracks sessions as server 1 (createSessionTrackerServerId),
# whatever its myid says; an ensemble member uses its myid.
STANDALONE_SERVER_ID = 1


def standalone(ctx, tree, leader: Leader, term=None) -> Pipeline:
    """An ensemble of one: the leader's chain, committing on its own durable write. (A
    term's leader with no other voter has this chain too: it waits for no ACK to time.)"""
    apply = _apply(ctx, tree)
    requests = LeaderRequests(_prep(ctx, tree, leader), apply, leader, ctx.clock)
    shell = Shell(leader, requests, apply, ctx.datadir.txnlog, term or Alone(),
                  applied=requests.applied)
    requests.obey = shell.obey
    return Pipeline(requests, apply, shell, ctx.datadir.txnlog)


def leader(ctx, tree, leader: Leader, term) -> Pipeline:
    """An ensemble's leader: a standalone server's chain, timing its txns' ACKs and commits;
    with quorumSync its clients' syncs wait for a quorum round, as its learners' do."""
    if len(leader.membership.servers) == 1 and not leader.quorum_sync:
        return standalone(ctx, tree, leader, term)
    apply = _apply(ctx, tree)
    syncs = PendingSyncs(apply) if leader.quorum_sync else None
    requests = LeaderRequests(_prep(ctx, tree, leader), apply, leader, ctx.clock, syncs,
                              quorum_sync=leader.quorum_sync)
    timing = LeaderTiming(term.quorum_stats, ctx.clock.wall_ms)
    shell = Shell(leader, requests, apply, ctx.datadir.txnlog, term, timing=timing,
                  syncs=syncs, applied=requests.applied)
    requests.obey = shell.obey
    return Pipeline(requests, apply, shell, ctx.datadir.txnlog)


def learner(ctx, tree, learner, term) -> Pipeline:
    """A follower or an observer (the Learner's own flag tells its protocol apart): writes
    and syncs forwarded to the leader, applied when they come back committed."""
    apply = _apply(ctx, tree)
    syncs = PendingSyncs(apply)
    requests = LearnerRequests(apply, learner, ctx.clock, syncs)
    timing = LearnerTiming(learner, term.quorum_stats, ctx.clock.wall_ms)
    shell = Shell(learner, requests, apply, ctx.datadir.txnlog, term, timing=timing,
                  syncs=syncs)
    requests.obey = shell.obey
    learner.touched = requests.touched  # the sessions its PING replies report
    return Pipeline(requests, apply, shell, ctx.datadir.txnlog)


def read_only(ctx, tree) -> Pipeline:
    """readonlymode.enabled with no quorum: reads from the local tree, writes refused."""
    apply = _apply(ctx, tree)
    return Pipeline(ReadOnlyRequests(apply, ctx.clock), apply, None, ctx.datadir.txnlog)


def for_role(ctx, tree, role, term) -> Pipeline:
    """The chain of the role a QuorumPeer's term plays (None: read-only)."""
    if role is None:
        return read_only(ctx, tree)
    if isinstance(role, Leader):
        return leader(ctx, tree, role, term)
    return learner(ctx, tree, role, term)


def _apply(ctx, tree) -> Apply:
    config = ctx.config
    server_id = config.server_id if config.is_ensemble else STANDALONE_SERVER_ID
    tracker = SessionTracker(config.tick_time_ms, server_id, ctx.clock.wall_ms())
    return Apply(tree, tracker)


def _prep(ctx, tree, leader: Leader) -> Prep:
    config = ctx.config
    reconfigurer = Reconfigurer(leader if config.is_ensemble else None, config.reconfig_enabled,
                                config.standalone_enabled)
    return Prep(tree, leader.next_zxid, ctx.clock.wall_ms, config.extended_types_enabled,
                config.enforce_quota, reconfigurer)
