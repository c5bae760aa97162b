"""Key and trust stores read again when their files change, as X509Util's
enableCertFileReloading does with its FileChangeWatchers: client.certReload for the client
port's ssl.* stores, sslQuorumReloadCertFiles for the quorum's ssl.quorum.* ones.

ZooKeeper watches each store's directory; here each store's file is looked at (os.stat)
every POLL_S, which also sees a store replaced by a rename or a moved symlink, as
Kubernetes and cert-manager replace them. What changed is read whole again; a store that
cannot be read (half written, a wrong password) leaves the contexts in use as they were,
and is tried again when its file next changes. A file that is gone is waited for, as
ZooKeeper ignores deletions. New connections get the new contexts; open ones keep theirs.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from zkcompat.security.settings import TlsSettings

log = logging.getLogger(__name__)

POLL_S = 1.0
T = TypeVar("T")


def _stamp(path: Path) -> tuple[int, int, int, int] | None:
    """What tells a file's new content from its old: None while there is no such file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns


class ReloadingStores(Generic[T]):
    """`current` is make(settings) as of the stores' files' last readable content."""

    def __init__(self, settings: TlsSettings, make: Callable[[TlsSettings], T], what: str):
        self.settings = settings
        self.what = what
        self._make = make
        self._paths = [store.location for store in (settings.key_store, settings.trust_store)
                       if store is not None]
        self._stamps = self._look()
        self.current: T = make(settings)
        self.reloads = 0

    def _look(self) -> list[tuple | None]:
        return [_stamp(path) for path in self._paths]

    def check(self) -> bool:
        """Read the stores again if a file of theirs changed since the last look; whether
        the contexts were replaced."""
        stamps = self._look()
        if stamps == self._stamps:
            return False
        self._stamps = stamps  # taken before reading: a change while reading is seen next
        if None in stamps:
            return False
        try:
            made = self._make(self.settings)
        except Exception as e:  # noqa: BLE001 - whatever a store's reader raises
            log.error("event=tls_reload_failed stores=%s reason=%r (the stores read before "
                      "stay in use)", self.what, str(e))
            return False
        self.current = made
        self.reloads += 1
        log.info("event=tls_reloaded stores=%s files=%s", self.what,
                 ",".join(str(p) for p in self._paths))
        return True

    async def run(self, poll_s: float = POLL_S) -> None:
        """Look every poll_s until cancelled."""
        while True:
            await asyncio.sleep(poll_s)
            self.check()
