"""A reliable work queue: an item stays queued until the worker that claimed it completes it;
a claim is an ephemeral node, so a dead worker's items go back to the queue by themselves."""

# The layout is kazoo's LockingQueue's (`<path>/entries/entry-PPP-SEQ`, claims in
# `<path>/taken/`), so kazoo producers and consumers can share a queue with this one.

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import (
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
)

from zkcompat.recipes.errors import ClaimLost

ENTRIES = "entries"
TAKEN = "taken"
ENTRY_PREFIX = "entry"
PRIORITY_MIN = 0  # kazoo's queues: three digits, lower runs first
PRIORITY_MAX = 999
DEFAULT_PRIORITY = 100


@dataclass(frozen=True)
class WorkItem:
    """A claimed item. token (the claim node's czxid) grows with every claim of any item,
    so it can fence what a worker writes for this item, as a lock's Sequencer does."""

    name: str
    data: bytes
    token: int
    session_id: int


class WorkQueue:
    """put() items; take() claims the first unclaimed one (priority, then arrival order);
    complete() removes it; release() gives it back. A worker whose session ends gives back
    everything it had claimed. Delivery is at-least-once: make processing idempotent, or
    fence its writes with the item's token.
    """

    def __init__(self, client: KazooClient, path: str) -> None:
        self.client = client
        self.path = path.rstrip("/")
        self.entries_path = f"{self.path}/{ENTRIES}"
        self.taken_path = f"{self.path}/{TAKEN}"
        self.worker_id = uuid.uuid4().hex.encode("ascii")
        self._ensured = False
        self._wake = client.handler.event_object()
        self._take_mutex = threading.Lock()

    def _ensure(self) -> None:
        if not self._ensured:
            self.client.retry(self.client.ensure_path, self.entries_path)
            self.client.retry(self.client.ensure_path, self.taken_path)
            self._ensured = True

    def put(self, data: bytes, priority: int = DEFAULT_PRIORITY) -> str:
        """Queue data; return the item's name. Not retried on connection loss (a retry could
        queue it twice): kazoo's ConnectionLoss reaches the caller."""
        if not isinstance(data, bytes):
            raise TypeError("an item is bytes")
        if not PRIORITY_MIN <= priority <= PRIORITY_MAX:
            raise ValueError(f"priority must be within {PRIORITY_MIN}..{PRIORITY_MAX}")
        self._ensure()
        created = self.client.create(
            f"{self.entries_path}/{ENTRY_PREFIX}-{priority:03d}-", data, sequence=True
        )
        return created.rsplit("/", 1)[1]

    def __len__(self) -> int:
        """Items queued, claimed or not."""
        self._ensure()
        return self.client.retry(self.client.exists, self.entries_path).numChildren

    def take(self, timeout: float | None = None) -> WorkItem | None:
        """Claim the next unclaimed item, waiting up to timeout (forever if None) for one;
        None at the timeout."""
        self._ensure()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._take_mutex:
            while True:
                self._wake.clear()
                entries = self.client.retry(
                    self.client.get_children, self.entries_path, watch=self._on_change
                )
                taken = set(self.client.retry(self.client.get_children, self.taken_path))
                free = sorted(e for e in entries if e not in taken)
                for name in free:
                    item = self._claim(name)
                    if item is not None:
                        return item
                if entries and not free:
                    # Everything is claimed: a claim going away may free an item.
                    self.client.retry(
                        self.client.get_children, self.taken_path, watch=self._on_change
                    )
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self._wake.wait(remaining)

    def complete(self, item: WorkItem) -> None:
        """Remove a processed item, with its claim, in one transaction; ClaimLost if our
        claim is gone (the item may be in another worker's hands)."""
        claim_path = self._check_claim(item)
        entry_path = f"{self.entries_path}/{item.name}"

        def commit() -> list:
            txn = self.client.transaction()
            txn.delete(claim_path)
            txn.delete(entry_path)
            return txn.commit()

        results = self.client.retry(commit)
        if any(isinstance(r, Exception) for r in results):
            # A commit that landed before a connection loss fails when retried: the entry
            # is gone then, which is what completing it means.
            if self.client.retry(self.client.exists, entry_path) is not None:
                raise ClaimLost(f"{claim_path}: claim vanished before completion ({results})")

    def release(self, item: WorkItem) -> None:
        """Give an unprocessed item back to the queue."""
        claim_path = self._check_claim(item)
        try:
            self.client.retry(self.client.delete, claim_path)
        except NoNodeError:
            pass

    def _claim(self, name: str) -> WorkItem | None:
        claim_path = f"{self.taken_path}/{name}"
        try:
            _, stat = self.client.create(
                claim_path, self.worker_id, ephemeral=True, include_data=True
            )
        except NodeExistsError:
            return None  # another worker was first
        except (ConnectionLoss, OperationTimeoutError):
            stat = self.client.retry(self.client.exists, claim_path)
            if stat is None or stat.ephemeralOwner != self._session_id():
                return None
        try:
            data, _ = self.client.retry(self.client.get, f"{self.entries_path}/{name}")
        except NoNodeError:
            self.client.retry(self.client.delete, claim_path)  # completed meanwhile
            return None
        return WorkItem(name, data, stat.czxid, stat.ephemeralOwner)

    def _check_claim(self, item: WorkItem) -> str:
        claim_path = f"{self.taken_path}/{item.name}"
        if self._session_id() != item.session_id:
            raise ClaimLost(f"{claim_path}: the session that claimed it has ended")
        stat = self.client.retry(self.client.exists, claim_path)
        if stat is None or stat.czxid != item.token:
            raise ClaimLost(f"{claim_path}: our claim is gone")
        return claim_path

    def _session_id(self) -> int | None:
        client_id = self.client.client_id
        return client_id[0] if client_id else None

    def _on_change(self, event) -> None:
        self._wake.set()
