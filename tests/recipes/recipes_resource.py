"""A protected resource as a separate service: an append-only ledger behind FencedResource,
served on a loopback socket so lock holders in other processes can write to it."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

from zkcompat.recipes import FencedResource, Sequencer, StaleTokenError

AUTHKEY = b"zkcompat-recipes-test"


@dataclass(frozen=True)
class Entry:
    token: int
    writer: str
    value: str


class LedgerService:
    """Accepts {"key", "sequencer", "writer", "value"} requests; appends to the ledger only if
    the sequencer's token passes the fencing check; replies {"ok": bool, "error": str}."""

    def __init__(self, resource: FencedResource) -> None:
        self.resource = resource
        self.ledger: list[Entry] = []
        self.rejected: list[dict[str, Any]] = []
        self._listener = Listener(("127.0.0.1", 0), authkey=AUTHKEY)
        self.address: tuple[str, int] = self._listener.address
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def write(self, request: dict[str, Any]) -> dict[str, Any]:
        sequencer = Sequencer.parse(request["sequencer"])
        entry = Entry(sequencer.token, request["writer"], request["value"])
        try:
            self.resource.write(request["key"], sequencer, lambda: self.ledger.append(entry))
            return {"ok": True, "error": ""}
        except StaleTokenError as e:
            self.rejected.append(request)
            return {"ok": False, "error": str(e)}

    def close(self) -> None:
        self._listener.close()

    def _serve(self) -> None:
        while True:
            try:
                conn = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn) -> None:
        with conn:
            while True:
                try:
                    request = conn.recv()
                except (EOFError, OSError):
                    return
                conn.send(self.write(request))


def ledger_client(address: tuple[str, int]) -> Connection:
    return Client(address, authkey=AUTHKEY)
