"""Syncs waiting for the leader: a sync holds back its session's later reads, as a write
does, until the leader's answer (a SYNC packet, or a quorum round with quorumSync) says
every write committed before it has been applied here."""

from collections import deque

from zkcompat.server.request import Request
from zkcompat.server.sessions import Session


class PendingSyncs:
    """The syncs this server sent, oldest first: the leader answers them in that order."""

    def __init__(self, apply):
        self.apply = apply  # the stage that answers a sync and the reads behind it
        self._syncs: deque[Request] = deque()

    def wait(self, session: Session, req: Request) -> None:
        req.is_write = True  # until answered it holds back the session's later reads
        session.queue.append(req)
        self._syncs.append(req)

    def synced(self) -> None:
        """The leader answered our oldest sync: everything committed before it is applied."""
        if not self._syncs:
            # A SYNC for a request this server never sent: the leader's bug, not ours.
            return
        req = self._syncs.popleft()
        req.is_write = False
        apply = self.apply
        session = apply.tracker.sessions.get(req.session_id)
        if session is not None and session.queue and session.queue[0] is req:
            apply.drain(session)
