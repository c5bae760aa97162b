"""What a leader knows of one connected learner."""

from __future__ import annotations

from collections import deque


class LearnerInfo:
    """What the leader knows of one connected learner (LearnerHandler's state)."""

    __slots__ = ("sid", "observer", "accepted_epoch", "phase", "last_zxid", "heard",
                 "forwarding", "acked", "pings", "confirmed")

    def __init__(self, sid: int, observer: bool, accepted_epoch: int, now: int):
        self.sid = sid
        self.observer = observer
        self.accepted_epoch = accepted_epoch
        self.phase = "info"  # info -> epoch -> newleader -> uptodate
        self.last_zxid = -1
        self.heard = now  # the half tick we last heard from it
        self.forwarding = False  # receives every new proposal and commit
        self.acked = 0  # the highest zxid it has ACKed (it logs in order)
        # quorumSync: the rounds of the PINGs sent to it and not yet answered, oldest first
        # (a learner answers every PING, in order: Learner.ping), and the newest it answered.
        self.pings: deque[int] = deque()
        self.confirmed = 0
