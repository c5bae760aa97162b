"""The shell around a ZAB role: it carries out the role's effects, in the order
zab/peer.py states (epochs, install, persist, send, deliver, the rest), and reports the
txn log's progress back to the role. The only place a role's decisions touch the disk,
the network and the stages.
"""

import logging

from zkcompat.zab.peer import Effects

log = logging.getLogger(__name__)


def _nothing() -> None:
    pass


def _count_nothing(n: int) -> None:
    pass


class Alone:
    """The term of a standalone server: nobody to send to, no epochs of its own to write
    (the txn log's zxids say everything), never installs, serves from the start."""

    quorum_stats = None

    def write_epochs(self, accepted: int | None, current: int | None) -> None: ...

    def install(self, what) -> None: ...

    def send(self, messages: list) -> None: ...

    def serve(self) -> None: ...

    def abandon(self, reason: str) -> None: ...

    def disconnect(self, sids: list) -> None: ...

    def activate(self, membership, designated) -> None: ...


class Shell:
    """Obeys one role's effects for one term. `term` is the part that reaches beyond this
    server (peer/quorum_peer.Term: epochs, install, sends, serve, abandon)."""

    def __init__(self, role, requests, apply, txn_log, term, *, timing=None, syncs=None,
                 applied=None):
        self.role = role  # the ZAB state machine: zab.leader.Leader or zab.learner.Learner
        self.requests = requests
        self.apply = apply
        self.txn_log = txn_log
        self.term = term
        self.timing = timing  # peer/timing: the role's quorum latencies, or None
        self.syncs = syncs  # server/sync.PendingSyncs: a learner's (and a quorumSync leader's)
        self.applied = applied  # a leader's prep: told what is applied, after each batch
        self.on_applied = _count_nothing  # after each batch of applied txns, with their count
        self.on_fatal = _nothing  # the log cannot sync: stop serving
        txn_log.on_synced = self.on_persisted
        txn_log.on_sync_failed = self._on_sync_failed

    def obey(self, effects: Effects) -> None:
        """Carry out a role's effects. The hot path's values hold persist, send and deliver
        alone (three instance attributes)."""
        if self.timing is not None:
            self.timing.effects(effects)
        rare = len(vars(effects)) > 3
        if rare:
            if effects.accepted_epoch is not None or effects.current_epoch is not None:
                self.term.write_epochs(effects.accepted_epoch, effects.current_epoch)
            if effects.install:
                self.term.install(effects.install)
        if effects.persist:
            self.txn_log.append(effects.persist)  # its writer syncs them, then on_persisted
        if effects.send:
            self.term.send(effects.send)
        deliver = effects.deliver
        if deliver:
            self.apply.committed(deliver)
            # The bookkeeping that no reply depends on waits until the replies are on
            # their way.
            if self.applied is not None:
                self.applied(deliver[-1].zxid)
            self.on_applied(len(deliver))
        if rare:
            self._obey_rest(effects)

    def _obey_rest(self, effects: Effects) -> None:
        requests = self.requests
        for request in effects.requests:
            requests.learner_request(*request)
        if effects.touches:
            requests.touched(effects.touches)
        for sid, session_id, _timeout in effects.revalidate:
            requests.revalidate(sid, session_id)
        for session_id, valid in effects.revalidated:
            requests.revalidated(session_id, valid)
        for _ in range(effects.synced):
            self.syncs.synced()
        if effects.disconnect:
            self.term.disconnect(effects.disconnect)
        if effects.activate is not None:
            self.term.activate(*effects.activate)
        if effects.serve:
            self.term.serve()
        if effects.abandon:
            self.term.abandon(effects.abandon)

    def obey_all(self, effects) -> None:
        """The effects of one read's packets, in as few obey calls as possible: runs of
        plain ones (persist, send and deliver only: proposals, commits, ACKs) are merged in
        order, so a read of many proposals is one log append and a read of many commits one
        apply batch; any other effect is obeyed on its own, after the run before it."""
        persist: list = []
        send: list = []
        deliver: list = []
        for fx in effects:
            if len(vars(fx)) > 3:
                if persist or send or deliver:
                    self.obey(Effects(persist, send, deliver))
                    persist, send, deliver = [], [], []
                self.obey(fx)
                continue
            if fx.persist:
                persist += fx.persist
            if fx.send:
                send += fx.send
            if fx.deliver:
                deliver += fx.deliver
        if persist or send or deliver:
            self.obey(Effects(persist, send, deliver))

    def on_persisted(self, zxid: int) -> None:
        """The log's writer made everything up to `zxid` durable (one sync covers every txn
        appended before it began; the next gathers meanwhile)."""
        if self.timing is not None:
            self.timing.durable(zxid)
        self.obey(self.role.on_persisted(zxid))

    def _on_sync_failed(self, exc: BaseException) -> None:
        # A log we cannot sync must never acknowledge a write.
        log.error("event=txn_log_sync_failed error=%r action=stop_server", exc)
        self.on_fatal()
