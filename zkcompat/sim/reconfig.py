"""The reconfig fault (nemesis kind "reconfig"): a super session asks the serving leader
to change the membership, while the other faults go on.

From the fault's pick: remove a voter (the leader itself a third of the time), as long as
a majority of the ensemble's servers still votes; or add back a server a reconfig left
out, as a participant or, a quarter of the time, an observer; or turn an observer into a
participant; or, with servers left out, replace all but one voter by them at once
(newMembers): the change where a new config's quorum can miss the old quorum entirely,
so a reconfig the old quorum alone acknowledged would lose writes. The server to add may be down, partitioned or paused: ZooKeeper then refuses
with NewConfigNoQuorum unless a quorum of the new config is synced without it. The
outcome (committed, refused, or unknown with the connection gone) is traced; the checks
that follow the run (linearizability, acknowledged writes, digests, and that every server
ends with the same committed config) decide whether it did harm.
"""

from __future__ import annotations

import random

from zkcompat.jute import records as r
from zkcompat.jute.constants import Code, OpCode
from zkcompat.sim.bare_session import BareSession
from zkcompat.sim.server import CLIENT_PORT, ELECTION_PORT, QUORUM_PORT, host_of

SUPER_AUTH = b"super:test"  # the servers' SUPER_DIGEST (sim/server.py)
AUTH_XID = -4
CONNECT_TIMEOUT_S = 1.0
REPLY_TIMEOUT_S = 4.0


def server_spec(sid: int, role: str) -> str:
    return f"server.{sid}={host_of(sid)}:{QUORUM_PORT}:{ELECTION_PORT}:{role};{CLIENT_PORT}"


def choose(cluster, pick: int) -> tuple[str | None, str | None, str | None] | None:
    """(joining, leaving, newMembers) for this pick, from the serving leader's committed
    config; None when there is no leader or nothing the rules allow."""
    leader = cluster.serving_leader()
    if leader is None or leader.peer is None:
        return None
    rng = random.Random(pick)
    current = leader.peer.membership
    voters = sorted(current.voters)
    observers = sorted(current.observers)
    absent = [s.sid for s in cluster.servers if s.sid not in current.servers]
    min_voters = len(cluster.servers) // 2 + 1
    roll = rng.random()
    spare = absent + observers
    if len(spare) >= 2 and len(voters) >= 3 and roll < 0.3:
        kept = rng.choice(voters)
        new = rng.sample(spare, min(len(spare), len(voters) - 1))
        lines = [server_spec(kept, "participant")] + [server_spec(s, "participant") for s in new]
        return None, None, ",".join(lines)
    if absent and (roll < 0.6 or len(voters) <= min_voters):
        role = "observer" if rng.random() < 0.25 else "participant"
        return server_spec(rng.choice(absent), role), None, None
    if observers and roll < 0.75:
        return server_spec(rng.choice(observers), "participant"), None, None
    if len(voters) <= min_voters:
        return None
    if rng.random() < 1 / 3:
        return None, str(leader.sid), None
    return None, str(rng.choice(voters)), None


async def reconfig_once(cluster, pick: int) -> None:
    change = choose(cluster, pick)
    if change is None:
        cluster.trace("nemesis reconfig: nothing to change")
        return
    joining, leaving, members = change
    leader = cluster.serving_leader()
    cluster.trace(f"nemesis reconfig via {leader.host}: joining={joining} leaving={leaving} "
                  f"members={members}")
    outcome = await _ask(leader.host, r.ReconfigRequest(joining, leaving, members, -1))
    cluster.trace(f"nemesis reconfig outcome: {outcome}")


async def _ask(host: str, request) -> str:
    session = await BareSession.open(host, CONNECT_TIMEOUT_S, REPLY_TIMEOUT_S)
    if session is None:
        return "no connection"
    try:
        session.send(AUTH_XID, OpCode.AUTH, r.AuthPacket(0, "digest", SUPER_AUTH))
        session.send(1, OpCode.RECONFIG, request)
        for _ in range(2):  # the auth, then the reconfig
            data = await session.reply(REPLY_TIMEOUT_S)
            if data is None:
                return "unknown: connection lost"
        err = int.from_bytes(data[12:16], "big", signed=True)
        return "committed" if err == 0 else f"refused {Code(err).name}"
    except TimeoutError:
        return "unknown: no reply"
    finally:
        session.close()
