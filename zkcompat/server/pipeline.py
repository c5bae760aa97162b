"""One role's chain of stages, as the role's wiring (peer/roles.py) built it: what client
connections, the expirer, the reaper and the admin commands reach a server through.

    connection ─► requests (leader: prep, propose │ learner: forward │ read-only: refuse)
                     │ writes                    reads │
                     ▼                                 ▼
               shell ─► ZAB role ─► txn log ─► shell ─► apply (tree, watches, replies)

It holds no logic of its own: each entry point is the stage's own bound method.
"""


class Pipeline:
    __slots__ = ("requests", "apply", "shell", "txn_log", "submit", "create_session", "reopen",
                 "session_for_reconnect", "expire_sessions", "watches", "outbox", "tracker",
                 "stats", "peer", "leading", "read_only")

    def __init__(self, requests, apply, shell, txn_log):
        self.requests = requests  # the role's first stage
        self.apply = apply  # the last stage: tree, watches, replies in session order
        self.shell = shell  # obeys the ZAB role's effects (None on a read-only server)
        self.txn_log = txn_log
        self.submit = requests.submit
        self.create_session = requests.create_session
        self.reopen = requests.reopen
        self.session_for_reconnect = requests.session_for_reconnect
        self.expire_sessions = requests.expire_sessions
        self.watches = apply.watches
        self.outbox = apply.outbox
        self.tracker = apply.tracker
        self.stats = apply.stats
        self.peer = requests.peer  # the ZAB role (None on a read-only server)
        self.leading = requests.leading  # prep runs here; only a leader expires sessions
        self.read_only = requests.read_only

    @property
    def tree(self):
        return self.apply.tree

    def set_tree(self, tree) -> None:
        """A learner's history replaced by the leader's (TRUNC or SNAP)."""
        self.apply.tree = tree

    def restore_sessions(self) -> None:
        self.requests.restore_sessions()

    def hook(self, on_applied, on_fatal) -> None:
        """What the server around it hears: each applied batch's size, and a fatal error
        (the log cannot sync, or apply failed), after which nothing may be acknowledged."""
        self.apply.on_fatal = on_fatal
        if self.shell is not None:
            self.shell.on_applied = on_applied
            self.shell.on_fatal = on_fatal
