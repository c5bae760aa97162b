"""What each client connection saw of one-shot watches, and the check of ZooKeeper's two
watch guarantees over it: a client sees a watch event before it sees the data of the
change (in its session's order), and a one-shot watch fires at most once.

The log is per connection (the simulated clients do not replay watches with SetWatches
on a reconnect, so a watch lives and dies with the connection it was set on):

    WatchSet(conn, token, path)           a getData/exists that sets a watch was sent
    Seen(conn, path, state, token, armed) a reply in that connection's order revealed the
                                          znode's state: (exists, version or None); token
                                          names the watch-setting read it answers, armed
                                          says whether the server left a watch (getData on
                                          a missing znode leaves none; exists always does)
    Event(conn, path, type)               a watch notification arrived

Why the check is sound: a connection talks to one server, which answers its requests and
sends its notifications in the order it applies txns. So once a reply has armed a watch
showing state s, any later reply on that connection showing another state means a change
was applied in between, which fired the watch and queued its event first. And an event
consumes every registration whose reply came before it; a read still unanswered when the
event arrives was read after the change and arms a fresh watch.
"""

from __future__ import annotations

from dataclasses import dataclass

State = tuple[bool, int | None]  # (exists, version; None when the reply did not say)


@dataclass(frozen=True, slots=True)
class WatchSet:
    conn: int
    token: int
    path: str


@dataclass(frozen=True, slots=True)
class Seen:
    conn: int
    path: str
    state: State
    token: int | None = None
    armed: bool = False


@dataclass(frozen=True, slots=True)
class Event:
    conn: int
    path: str
    type: int


WatchRecord = WatchSet | Seen | Event
FAILURES_MAX = 5


def differs(a: State, b: State) -> bool:
    if a[0] != b[0]:
        return True
    return a[0] and a[1] is not None and b[1] is not None and a[1] != b[1]


class _PathWatch:
    """One connection's view of one path."""

    __slots__ = ("outstanding", "replied", "armed_state")

    def __init__(self):
        self.outstanding: set[int] = set()  # watch-setting reads sent, not answered
        self.replied = 0  # answered registrations no event has consumed yet
        self.armed_state: State | None = None  # what the first of them showed


def check_watches(log: list[WatchRecord]) -> list[str]:
    out: list[str] = []
    watches: dict[tuple[int, str], _PathWatch] = {}
    for i, rec in enumerate(log):
        w = watches.setdefault((rec.conn, rec.path), _PathWatch())
        if isinstance(rec, WatchSet):
            w.outstanding.add(rec.token)
        elif isinstance(rec, Seen):
            if w.armed_state is not None and differs(w.armed_state, rec.state):
                out.append(f"connection {rec.conn}: a reply showed {rec.path} as {rec.state} "
                           f"before the event of the watch set when it was "
                           f"{w.armed_state} (record {i})")
                w.armed_state = rec.state  # report each change once
            if rec.token is not None and rec.token in w.outstanding:
                w.outstanding.discard(rec.token)
                if rec.armed:
                    w.replied += 1
                    if w.armed_state is None:
                        w.armed_state = rec.state
        else:
            if w.replied == 0:
                out.append(f"connection {rec.conn}: watch event type={rec.type} on "
                           f"{rec.path} with no watch armed (a one-shot watch fired twice, "
                           f"or one never set) (record {i})")
            w.replied = 0
            w.armed_state = None
        if len(out) >= FAILURES_MAX:
            break
    return out
