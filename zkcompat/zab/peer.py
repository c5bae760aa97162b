"""What every ZAB role shares: zxids and the Effects value a role's step returns.

The shell must obey the order of an Effects value:
  1. accepted_epoch, current_epoch: write these durably (fsync) before anything else;
  2. install: replace the local history (TRUNC or SNAP from a leader) before the rest;
  3. persist: append these txns to the log (durable later, reported by on_persisted);
  4. send:    then send these messages, in order, per destination;
  5. deliver: committed txns, in zxid order, to apply to the tree;
  6. the rest (requests, touches, syncs, revalidations, serve, abandon) after that.
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

    def __init__(self, persist=None, send=None, deliver=None):
        self.persist: list = persist or []
        self.send: list = send or []
        self.deliver: list = deliver or []

    def __bool__(self) -> bool:
        return bool(self.persist or self.send or self.deliver or self.accepted_epoch is not None
                    or self.current_epoch is not None or self.install or self.serve
                    or self.abandon or self.requests or self.touches or self.revalidate
                    or self.synced or self.revalidated or self.disconnect)

    def __repr__(self) -> str:
        shown = {k: v for k, v in vars(self).items() if v}
        return f"Effects({shown})"
