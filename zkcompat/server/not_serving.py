"""A client connection to a member that is not serving (electing, or syncing with its new
leader): what NIOServerCnxn does while its ZooKeeperServer is not running.

Its first 4 bytes are read. A four-letter word is answered (ruok says imok, srvr that this
instance is not serving: admin.Admin.four_letter_word) and the connection closes; any other
4 bytes are a frame's length, and readLength closes the connection ("ZooKeeperServer not
running"), so a client tries its next server at once. The connection is chosen when it is
accepted and stays one of these, as a NIOServerCnxn keeps the server it was made with.
"""

import asyncio
import logging

from zkcompat.server.admin import ARGUMENT_BYTES
from zkcompat.server.connection import SESSIONLESS_CNXN_TIMEOUT_S

log = logging.getLogger(__name__)

FIRST_BYTES = 4  # a frame length, or a four-letter word


class NotServingConnection(asyncio.Protocol):
    """Admitted by maxClientCnxns like any connection (NIOServerCnxnFactory.doAccept); one
    that says nothing is closed after the sessionless connection timeout; bytes beyond what
    its first 4 ask for are never read."""

    def __init__(self, server):
        self.server = server  # the ServerContext: config, admin, limits
        self.transport = None
        self._host: str | None = None  # counted under this address while open
        self._head = bytearray()
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        host = peer[0] if peer else "?"
        refused = self.server.limits.admit(host, len(self.server.connections))
        if refused is not None:
            log.warning("event=too_many_connections remote=%s reason=%r", host, refused)
            transport.close()
            return
        self._host = host
        self._deadline = asyncio.get_running_loop().call_later(
            SESSIONLESS_CNXN_TIMEOUT_S, self._close, "nothing sent within the sessionless "
            "connection timeout")

    def data_received(self, data: bytes) -> None:
        if self.transport.is_closing():
            return
        self._head += data
        if len(self._head) < FIRST_BYTES:
            return
        first = bytes(self._head[:FIRST_BYTES])
        admin = self.server.admin
        if not admin.is_four_letter_word(first):
            self._close("not serving: a member electing or syncing takes no sessions")
            return
        word = first.decode("ascii")
        end = FIRST_BYTES + ARGUMENT_BYTES.get(word, 0)
        if len(self._head) < end:
            return  # stmk's mask is on its way
        text = admin.four_letter_word(word, self, bytes(self._head[FIRST_BYTES:end]))
        self.transport.write(text.encode("utf-8"))
        self._close(None)

    def connection_lost(self, exc) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if self._host is not None:
            self.server.limits.release(self._host)
            self._host = None

    def _close(self, reason: str | None) -> None:
        if reason is not None:
            peer = self.transport.get_extra_info("peername")
            log.debug("event=connection_close remote=%s reason=%r",
                      f"{peer[0]}:{peer[1]}" if peer else "?", reason)
        self.transport.close()
