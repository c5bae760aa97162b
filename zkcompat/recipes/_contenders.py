"""The queue under every lock and election here: ephemeral-sequential children of one znode,
each contender watching only the nearest contender ahead of it that blocks it (no herd)."""

# Node names follow kazoo's (`<uuid>__lock__<seq>`, `<uuid>__rlock__<seq>`), so kazoo's Lock,
# ReadLock, WriteLock and Election on the same path exclude ours and ours exclude theirs.

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterable

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import ZnodeStat

from zkcompat.recipes.errors import LockCancelled

LOCK_KIND = "__lock__"  # kazoo's Lock and WriteLock contenders (Curator: "-lock-")
READ_KIND = "__rlock__"  # kazoo's ReadLock contenders
SEQUENCE_DIGITS = 10  # ZooKeeper appends the parent's cversion as %010d

_CONTENDER_RE = re.compile(rf"({LOCK_KIND}|{READ_KIND})(-?\d{{{SEQUENCE_DIGITS}}})$")


class NodeVanished(Exception):
    """Our contender node is gone (its session expired): the caller must enter again."""


def parse_contender(name: str) -> tuple[str, int] | None:
    """(kind, sequence) of a contender's child name, or None if it is not a contender."""
    match = _CONTENDER_RE.search(name)
    if match is None:
        return None
    return match.group(1), int(match.group(2))


def sorted_contenders(children: Iterable[str]) -> list[tuple[int, str, str]]:
    """(sequence, kind, name) of every contender among children, first in line first."""
    out = []
    for name in children:
        parsed = parse_contender(name)
        if parsed is not None:
            out.append((parsed[1], parsed[0], name))
    out.sort()
    return out


class ContenderQueue:
    """One contender's place in line under `path`.

    `kind` names our node; we wait only for contenders ahead of us whose kind is in
    `blocking_kinds`, and of those we watch only the nearest one: its deletion is the one
    event that can make us first, so each departure wakes exactly one waiter.
    """

    def __init__(
        self,
        client: KazooClient,
        path: str,
        kind: str,
        blocking_kinds: Iterable[str],
        data: bytes = b"",
    ) -> None:
        self.client = client
        self.path = path.rstrip("/")
        self.kind = kind
        self.blocking_kinds = frozenset(blocking_kinds)
        self.data = data
        self.node: str | None = None  # our child name while we are in line
        self.stat: ZnodeStat | None = None  # our node's Stat at creation (czxid = token)
        self._create_tried = False
        self._prefix = ""
        self._wake = client.handler.event_object()

    @property
    def node_path(self) -> str | None:
        return None if self.node is None else f"{self.path}/{self.node}"

    def ensure_entered(self) -> None:
        """Create our node unless we already have one. Safe to call again after a
        connection loss: a create that reached the server before the loss is found by the
        unique prefix of its name (Curator's protection) instead of being made twice."""
        if self.node is not None:
            return
        self.client.ensure_path(self.path)
        if self._create_tried:
            for child in self.client.get_children(self.path):
                if child.startswith(self._prefix):
                    stat = self.client.exists(f"{self.path}/{child}")
                    if stat is not None:
                        self.node, self.stat = child, stat
                        return
        else:
            self._prefix = uuid.uuid4().hex + self.kind
            self._create_tried = True
        created, stat = self.client.create(
            f"{self.path}/{self._prefix}",
            self.data,
            ephemeral=True,
            sequence=True,
            include_data=True,
        )
        self.node, self.stat = created.rsplit("/", 1)[1], stat

    def forget(self) -> None:
        """Drop our place in line without touching the server (the node is already gone)."""
        self.node = None
        self.stat = None
        self._create_tried = False

    def blocking_ahead(self, children: Iterable[str]) -> list[str]:
        """The contenders ahead of us that block us, nearest last."""
        assert self.node is not None
        parsed = parse_contender(self.node)
        assert parsed is not None, self.node
        ours = parsed[1]
        return [
            name
            for seq, kind, name in sorted_contenders(children)
            if seq < ours and kind in self.blocking_kinds
        ]

    def wait_turn(self, deadline: float | None, cancelled: Callable[[], bool]) -> bool:
        """Block until no blocking contender is ahead of us; False if `deadline` (a
        time.monotonic() value) passes first. Raises NodeVanished if our node is gone."""
        assert self.node is not None
        self.client.add_listener(self._on_connection_state)
        try:
            while True:
                self._wake.clear()
                if cancelled():
                    raise LockCancelled(f"acquisition of {self.path} cancelled")
                children = self.client.get_children(self.path)
                if self.node not in children:
                    self.forget()
                    raise NodeVanished(self.path)
                ahead = self.blocking_ahead(children)
                if not ahead:
                    return True
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                if self.client.exists(f"{self.path}/{ahead[-1]}", watch=self._on_event) is None:
                    continue  # it left between our two reads
                self._wake.wait(remaining)
        finally:
            self.client.remove_listener(self._on_connection_state)

    def wake(self) -> None:
        """Interrupt wait_turn (to notice cancellation)."""
        self._wake.set()

    def leave(self) -> bool:
        """Delete our node; False if it was already gone."""
        node_path = self.node_path
        if node_path is None:
            return False
        try:
            self.client.delete(node_path)
            return True
        except NoNodeError:
            return False
        finally:
            self.forget()

    def _on_event(self, event) -> None:
        self._wake.set()

    def _on_connection_state(self, state) -> None:
        # Any change of connection state may mean our watch will never fire (a new
        # session): wake up and look again.
        self._wake.set()


def contender_identifiers(client: KazooClient, path: str) -> list[str]:
    """The data (identifier) of each contender under path, first in line first."""
    out = []
    try:
        children = client.get_children(path)
    except NoNodeError:
        return []
    for _, _, name in sorted_contenders(children):
        try:
            data, _ = client.get(f"{path}/{name}")
        except NoNodeError:
            continue
        out.append(data.decode("utf-8", errors="replace"))
    return out
