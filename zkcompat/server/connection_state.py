"""A client connection's states and the one table of the moves between them; the
connection and its handshake and output halves all go by it."""

import enum


class ConnState(enum.Enum):
    """Where a client connection is in its life (CONNECTION_TRANSITIONS: where it may go).

    HANDSHAKE: reading its ConnectRequest (or a four-letter word). WAITING: its session's
    createSession txn, or its revalidation, is under way. OPEN: the session's requests are
    read and answered. REFUSED: refused for want of authentication, it reads no more and
    closes once that refusal is written. CLOSED: nothing is read or written any more.
    """

    HANDSHAKE = "handshake"
    WAITING = "waiting"
    OPEN = "open"
    REFUSED = "refused"
    CLOSED = "closed"


HANDSHAKE, WAITING, OPEN, REFUSED, CLOSED = ConnState  # compared by identity on every frame
CONNECTION_TRANSITIONS: dict[ConnState, frozenset[ConnState]] = {
    HANDSHAKE: frozenset((WAITING, CLOSED)),
    WAITING: frozenset((OPEN, CLOSED)),
    OPEN: frozenset((REFUSED, CLOSED)),
    REFUSED: frozenset((CLOSED,)),
    CLOSED: frozenset(),
}
