"""Group membership: ephemeral members of a group znode, a callback with the member list on
every change, and re-joining by itself after a session expiry."""

from __future__ import annotations

import logging
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.protocol.states import Callback, KazooState
from kazoo.recipe.watchers import ChildrenWatch

from zkcompat.recipes.errors import RecipeError

log = logging.getLogger(__name__)

MembersListener = Callable[[list[str]], object]


class MemberIdTaken(RecipeError, NodeExistsError):
    """Another session already holds this member id in the group."""


class GroupMembership:
    """One process's view of a group at `path`: join/leave as `member_id`, list members,
    watch the member list.

    `join()` creates the ephemeral `path/member_id` with `data`; a member id another live
    session holds raises MemberIdTaken. After kazoo reports LOST (the session expired,
    so the node is gone) the next CONNECTED re-creates it, unless leave() was called.
    """

    def __init__(
        self, client: KazooClient, path: str, member_id: str = "", data: bytes = b""
    ) -> None:
        if "/" in member_id:
            raise ValueError("a member id is one path component (no '/')")
        self.client = client
        self.path = path.rstrip("/")
        self.member_id = member_id
        self.data = data
        self.joined = False
        self._rejoin_pending = False
        self.rejoins = 0  # how many times the membership was re-created after a lost session

    @property
    def node_path(self) -> str:
        return f"{self.path}/{self.member_id}"

    def join(self) -> None:
        """Become a member (idempotent for this object)."""
        if not self.member_id:
            raise ValueError("join() needs a member_id")
        self.client.retry(self.client.ensure_path, self.path)
        self._create()
        self.joined = True
        self.client.add_listener(self._on_connection_state)

    def leave(self) -> None:
        """Stop being a member (and stop re-joining)."""
        self.joined = False
        self.client.remove_listener(self._on_connection_state)
        try:
            self.client.retry(self.client.delete, self.node_path)
        except NoNodeError:
            pass

    def members(self) -> list[str]:
        """The current member ids, sorted."""
        try:
            return sorted(self.client.retry(self.client.get_children, self.path))
        except NoNodeError:
            return []

    def watch(self, on_change: MembersListener) -> ChildrenWatch:
        """Call on_change(sorted member ids) now and after every change, on kazoo's callback
        thread, until it returns False (kazoo's ChildrenWatch, which re-arms itself across
        reconnects and session loss)."""
        self.client.retry(self.client.ensure_path, self.path)
        return ChildrenWatch(self.client, self.path, lambda children: on_change(sorted(children)))

    def _create(self) -> None:
        try:
            self.client.retry(self.client.create, self.node_path, self.data, ephemeral=True)
        except NodeExistsError:
            stat = self.client.retry(self.client.exists, self.node_path)
            session_id = self.client.client_id[0] if self.client.client_id else None
            if stat is None:
                return self._create()
            if stat.ephemeralOwner != session_id:
                raise MemberIdTaken(f"{self.node_path} is held by another session") from None
            # Ours already: a create retried after a connection loss had reached the server.

    def _on_connection_state(self, state: str) -> None:
        # Runs on kazoo's connection thread: decide here, do the I/O on the callback thread.
        if state == KazooState.LOST and self.joined:
            self._rejoin_pending = True
        elif state == KazooState.CONNECTED and self._rejoin_pending:
            self._rejoin_pending = False
            self.client.handler.dispatch_callback(Callback("membership", self._rejoin, ()))

    def _rejoin(self) -> None:
        if not self.joined:
            return
        try:
            self._create()
            self.rejoins += 1
        except Exception:  # noqa: BLE001 - logged; the next LOST/CONNECTED tries again
            log.exception("event=rejoin_failed path=%s", self.node_path)
            self._rejoin_pending = True
