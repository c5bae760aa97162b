"""Barriers: kazoo's single Barrier reused, and a DoubleBarrier of our own that has
timeouts and reports failure (kazoo's enter() swallows errors and waits forever).
"""

from __future__ import annotations

import time
import uuid

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.protocol.states import EventType
from kazoo.recipe.barrier import Barrier as KazooBarrier

from zkcompat.recipes.errors import BarrierTimeout

READY_NODE = "ready"  # the child whose creation lets everyone through (ZooKeeper's recipe)
MEMBER_PREFIX = "member-"


class Barrier(KazooBarrier):
    """A barrier that holds everyone while its node exists (kazoo's recipe, unchanged):
    `create()` raises it, `remove()` lets waiters through, `wait(timeout)` blocks until it
    is gone (True) or the timeout passes (False)."""

    def __init__(self, client: KazooClient, path: str) -> None:
        super().__init__(client, path)


class DoubleBarrier:
    """ZooKeeper's double barrier: `enter()` returns once `count` members have entered,
    `leave()` once every member has left. Members are ephemeral nodes, so a member whose
    session dies counts as having left.

    Each waiter in leave() watches one node (the lowest member watches the highest, every
    other member the lowest), not the whole membership. A path can be reused for another
    round once every member's leave() has returned.
    """

    def __init__(self, client: KazooClient, path: str, count: int, identifier: str = "") -> None:
        if count < 1:
            raise ValueError("a double barrier needs at least one member")
        self.client = client
        self.path = path.rstrip("/")
        self.count = count
        self.identifier = identifier
        self.node = f"{MEMBER_PREFIX}{uuid.uuid4().hex}"
        self.node_path = f"{self.path}/{self.node}"
        self.ready_path = f"{self.path}/{READY_NODE}"
        self.participating = False

    def _members(self) -> list[str]:
        children = self.client.retry(self.client.get_children, self.path)
        return sorted(c for c in children if c.startswith(MEMBER_PREFIX))

    def enter(self, timeout: float | None = None) -> None:
        """Join, and block until `count` members have joined; BarrierTimeout (after
        leaving again) if that does not happen within the timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self.client.retry(self.client.ensure_path, self.path)
        ready = self.client.handler.event_object()

        def on_ready(event) -> None:
            if event.type == EventType.CREATED:
                ready.set()

        try:
            self.client.retry(self.client.create, self.node_path,
                              self.identifier.encode("utf-8"), ephemeral=True)
        except NodeExistsError:
            pass  # a retried create that had reached the server
        self.participating = True
        # Watch first, count second: the last member's "ready" cannot slip between.
        if self.client.retry(self.client.exists, self.ready_path, watch=on_ready) is None:
            if len(self._members()) >= self.count:
                try:
                    self.client.retry(self.client.create, self.ready_path)
                except NodeExistsError:
                    pass
            else:
                ready.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
                if not ready.is_set():
                    self._quit()
                    raise BarrierTimeout(f"{self.path}: fewer than {self.count} members "
                                         f"entered within {timeout}s")

    def leave(self, timeout: float | None = None) -> None:
        """Leave, and block until every member has left; BarrierTimeout if some member is
        still in at the timeout (we are out either way)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            self.client.retry(self.client.delete, self.ready_path)
        except NoNodeError:
            pass
        while True:
            members = self._members()
            if not members or members == [self.node]:
                self._quit()
                return
            gone = self.client.handler.event_object()

            def on_gone(event, gone=gone) -> None:
                if event.type == EventType.DELETED:
                    gone.set()

            if members[0] == self.node:
                watched = members[-1]  # lowest: wait for the highest to go
            else:
                self._quit()  # everyone else: go, then wait for the lowest
                watched = members[0]
            if self.client.retry(self.client.exists, f"{self.path}/{watched}", watch=on_gone):
                remaining = None if deadline is None else deadline - time.monotonic()
                if (remaining is not None and remaining <= 0) or not gone.wait(remaining):
                    self._quit()
                    raise BarrierTimeout(f"{self.path}: members still in after {timeout}s")

    def _quit(self) -> None:
        try:
            self.client.retry(self.client.delete, self.node_path)
        except NoNodeError:
            pass
        self.participating = False
