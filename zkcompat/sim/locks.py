"""The kazoo-style lock the simulated clients run, as records, and its check.

The recipe (clients.py): create an EPHEMERAL_SEQUENTIAL node under LOCK_DIR; getChildren;
the lowest sequence number holds the lock, and that number is its fencing token. The
holder writes the protected resource with a fenced write, a multi of check(its lock node)
and setData(FENCE_PATH): it commits only while the lock node exists.

ZooKeeper cannot give mutual exclusion in wall time (a holder whose session expired may
still believe it holds the lock), so the check is on what it does give:

- Acquired(token, zxid): the getChildren reply at `zxid` showed this token lowest. Lower
  sequence numbers are created earlier and never again, so a node once lowest stays
  lowest until it is deleted: two nodes can be lowest in the same tree only in a broken
  history. Hence, ordered by the zxid of the state each was read from, tokens strictly
  increase (two acquisitions seen at one zxid must be the same token).
- Fenced(token, zxid): a fenced write acknowledged at `zxid`. It committed while its lock
  node existed, hence while it was lowest; so in zxid order the tokens never decrease.
"""

from __future__ import annotations

from dataclasses import dataclass

LOCK_DIR = "/e"
FENCE_PATH = "/f"
SEQUENCE_DIGITS = 10
FAILURES_MAX = 5


@dataclass(frozen=True, slots=True)
class Acquired:
    client: int
    session_id: int
    token: int
    zxid: int


@dataclass(frozen=True, slots=True)
class Fenced:
    client: int
    session_id: int
    token: int
    zxid: int


def sequence_of(name: str) -> int:
    """The sequence number ZooKeeper appended to a sequential node's name."""
    return int(name[-SEQUENCE_DIGITS:])


def check_acquisitions(acquired: list[Acquired]) -> list[str]:
    first: dict[int, Acquired] = {}
    for a in acquired:
        if a.token not in first or a.zxid < first[a.token].zxid:
            first[a.token] = a
    out = []
    ordered = sorted(first.values(), key=lambda a: (a.zxid, a.token))
    for prev, cur in zip(ordered, ordered[1:], strict=False):
        if cur.token < prev.token or (cur.zxid == prev.zxid and cur.token != prev.token):
            out.append(f"lock held by two nodes: token {prev.token} (client {prev.client}, "
                       f"session 0x{prev.session_id:x}) lowest at zxid 0x{prev.zxid:x}, and "
                       f"token {cur.token} (client {cur.client}, session "
                       f"0x{cur.session_id:x}) lowest at zxid 0x{cur.zxid:x}")
            if len(out) >= FAILURES_MAX:
                break
    return out


def check_fencing(fenced: list[Fenced]) -> list[str]:
    out = []
    ordered = sorted(fenced, key=lambda f: f.zxid)
    for prev, cur in zip(ordered, ordered[1:], strict=False):
        if cur.zxid == prev.zxid:
            out.append(f"two fenced writes acknowledged at one zxid 0x{cur.zxid:x}")
        elif cur.token < prev.token:
            out.append(f"fencing token went back: {prev.token} (client {prev.client}) at "
                       f"zxid 0x{prev.zxid:x}, then {cur.token} (client {cur.client}, "
                       f"session 0x{cur.session_id:x}) at zxid 0x{cur.zxid:x}")
        if len(out) >= FAILURES_MAX:
            break
    return out
