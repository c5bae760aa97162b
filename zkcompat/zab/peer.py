"""What every ZAB role shares: zxids and the Effects value a role's step returns.

The shell must obey the order of an Effects value:
  1. accepted_epoch, current_epoch: write these durably (fsync) before anything else;
  2. install: replace the local history (TRUNC or SNAP from a leader) before the rest;
  3. persist: append these txns to the log (durable later, reported by on_persisted);
  4. send:    then send these messages, in order, per destination;
  5. deliver: committed txns, in zxid order, to apply to the tree;
  6. the rest (requests, touches, syncs, revalidations, activate, serve, abandon) after that.
"""

EPOCH_SHIFT = 32
COUNTER_MASK = 0xFFFFFFFF


def make_zxid(epoch: int, counter: int) -> int:
    """zxid = epoch << 32 | counter, as ZooKeeper's ZxidUtils.makeZxid."""
    return (epoch << EPOCH_SHIFT) | (counter & COUNTER_MASK)


def zxid_epoch(zxid: int) -> int:
    return zxid >> EPOCH_SHIFT


class Effects:
    """Duties for the shell. The hot path builds it with persist or deliver alone, so the
    rarer duties are class-level defaults an instance overrides when it has them."""

    accepted_epoch: int | None = None
    current_epoch: int | None = None
    install = None  # ("trunc", zxid) or ("snap", zxid, tree)
    serve = False  # the role is established: serve clients from now on
    abandon: str | None = None  # give up this role (the reason, for the log): back to LOOKING
    requests: list = ()  # leader: (sid, sessionId, cxid, type, body, authinfo) from learners
    touches: list = ()  # leader: (sessionId, timeout) learners saw active
    revalidate: list = ()  # leader: (sid, sessionId, timeout) to answer
    synced: int = 0  # learner: SYNCs the leader answered, in request order
    revalidated: list = ()  # learner: (sessionId, valid)
    disconnect: list = ()  # leader: learners to drop
    # (Membership, designated leader sid or None): this config is committed now; the shell
    # records it (zoo.cfg.dynamic.<version>, the election's view) and, if our role or our
    # leader changes with it, ends the term (QuorumPeer.processReconfig).
    activate: tuple | None = None

    def __init__(self, persist=None, send=None, deliver=None):
        self.persist: list = persist or []
        self.send: list = send or []
        self.deliver: list = deliver or []

    def __bool__(self) -> bool:
        return bool(self.persist or self.send or self.deliver or self.accepted_epoch is not None
                    or self.current_epoch is not None or self.install or self.serve
                    or self.abandon or self.requests or self.touches or self.revalidate
                    or self.synced or self.revalidated or self.disconnect or self.activate)

    def __repr__(self) -> str:
        shown = {k: v for k, v in vars(self).items() if v}
        return f"Effects({shown})"


class ZabCounters:
    """ZooKeeper's ServerMetrics counters of the ZAB roles, which the roles add to as they
    step (no clock needed). One lives as long as the server, across its terms: quorum.py
    gives each role the server's; a role built without one (a standalone server's Leader,
    a test's) keeps a private one nobody reports."""

    __slots__ = ("proposal_count", "snap_count", "diff_count",
                 "learner_proposal_received_count", "learner_commit_received_count")

    def __init__(self):
        self.proposal_count = 0  # Leader.propose: txns proposed
        self.snap_count = 0  # LearnerHandler: learners synced by SNAP
        self.diff_count = 0  # ... and by anything else (DIFF or TRUNC, as ZooKeeper counts)
        self.learner_proposal_received_count = 0  # Follower: PROPOSALs in broadcast
        self.learner_commit_received_count = 0  # Follower: COMMITs; Observer: INFORMs

    def synced(self, mode: str) -> None:
        if mode == "snap":
            self.snap_count += 1
        else:
            self.diff_count += 1


class BufferStats:
    """The last, smallest and largest of some sizes since start or reset, -1 before the
    first (ZooKeeper's quorum.BufferStats: the leader's proposal sizes)."""

    __slots__ = ("last", "min", "max")

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.last = self.min = self.max = -1

    def add(self, sizes: list[int]) -> None:
        self.last = sizes[-1]
        low, high = min(sizes), max(sizes)
        if self.min == -1 or low < self.min:
            self.min = low
        if high > self.max:
            self.max = high

    def __str__(self) -> str:
        return f"{self.last}/{self.min}/{self.max}"
