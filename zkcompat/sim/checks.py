"""The checks a run must pass at its end (some are also checked as the run goes, in
cluster.py: replies in session order, no zxid going backwards for a session, the same
digest at the same zxid, one leader per epoch). Each returns failure messages."""

from __future__ import annotations

from zkcompat.sim.history import Znode, describe
from zkcompat.sim.linearizability import check

# The tree clients start from: "/" and the setup directories, created before any history.
SEARCH_STEPS_MAX = 200_000


def initial_tree(setup_paths) -> dict[str, Znode]:
    tree = {"/": Znode()}
    for p in setup_paths:
        tree[p] = Znode(b"")
    return tree


def check_linearizable(operations, setup_paths) -> list[str]:
    result = check(operations, initial_tree(setup_paths), search_steps_max=SEARCH_STEPS_MAX)
    if result.linearizable:
        return []
    if result.verdict.name == "UNKNOWN":
        return []  # a budget exhausted is no verdict; the trace says so
    return ["history is not linearizable:\n" + result.explain()]


def check_configs_agree(servers) -> list[str]:
    """Every live server ends with the same committed config, and its /zookeeper/config
    shows it (ZOOKEEPER-2865: configs left inconsistent by a reconfig)."""
    out = []
    servers = [s for s in servers if s.peer is not None]  # a restart under way has none yet
    configs = {s.host: s.peer.membership for s in servers}
    if not configs:
        return out
    first_host, first = next(iter(configs.items()))
    for host, m in configs.items():
        if m != first:
            out.append(f"committed configs differ: {first_host} has {first!r}, {host} has {m!r}")
    for s in servers:
        node = s.peer.tree.get("/zookeeper/config")
        if node is None or node.data != s.peer.membership.to_bytes():
            out.append(f"{s.host}'s /zookeeper/config is not its committed config")
    return out


def check_acked_writes(acked, servers) -> list[str]:
    """Every write a client heard OK for is, at its zxid, in every live server's history."""
    out = []
    for w in acked:
        want = (w.session_id, w.cxid)
        for s in servers:
            got = s.chain.get(w.zxid)
            if got is None or got[:2] != want:
                what = "missing" if got is None else f"replaced by session 0x{got[0]:x} cxid={got[1]}"
                out.append(f"acknowledged write lost on {s.host}: client {w.client} session "
                           f"0x{w.session_id:x} cxid={w.cxid} zxid=0x{w.zxid:x} {w.call} — {what}")
                break
        if len(out) >= 5:
            break
    return out


def check_chains_agree(servers) -> list[str]:
    """Replicas never hold different txns at one zxid."""
    out = []
    for i, a in enumerate(servers):
        for b in servers[i + 1:]:
            for zxid in sorted(set(a.chain) & set(b.chain)):
                if a.chain[zxid] != b.chain[zxid]:
                    out.append(f"{a.host} and {b.host} hold different txns at zxid 0x{zxid:x}: "
                               f"{a.chain[zxid]} vs {b.chain[zxid]}")
                    break
    return out


def check_converged(servers) -> list[str]:
    zxids = {s.host: s.tree.last_processed_zxid for s in servers if s.tree is not None}
    modes = {s.host: s.mode for s in servers}
    if len(set(zxids.values())) != 1 or len(zxids) != len(servers) or \
            sum(1 for m in modes.values() if m == "leader") != 1:
        return [f"ensemble did not converge after every fault healed: zxids="
                f"{ {h: hex(z) for h, z in zxids.items()} } modes={modes}"]
    return []


def describe_history(operations, limit: int = 40) -> list[str]:
    return [describe(op) for op in operations[-limit:]]
