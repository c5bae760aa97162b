"""Quotas: the /zookeeper/quota/<path>/zookeeper_limits and zookeeper_stats nodes.

The stats node's data is kept current by apply (every create, delete and setData under
a quota'd path), in ZooKeeper's StatsTrack text ("count=N,bytes=M"), without changing
its Stat, exactly as DataTree.updateQuotaStat does.
"""

import re

QUOTA_ROOT = "/zookeeper/quota"
LIMIT_NODE = "zookeeper_limits"
STATS_NODE = "zookeeper_stats"

_PAIRS = re.compile(r"[,;]+")


def limit_path(path: str) -> str:
    return f"{QUOTA_ROOT}{path}/{LIMIT_NODE}"


def stats_path(path: str) -> str:
    return f"{QUOTA_ROOT}{path}/{STATS_NODE}"


def parse_stats(data: bytes | None) -> dict[str, int]:
    """StatsTrack(String): "count=1,bytes=2=;countHardLimit=5" -> {...}; bad text raises ValueError."""
    out: dict[str, int] = {}
    if not data:
        return out
    for pair in _PAIRS.split(data.decode("utf-8", "replace")):
        if not pair:
            continue
        parts = pair.split("=")
        while len(parts) > 1 and parts[-1] == "":  # Java's split drops trailing empties
            parts.pop()
        if len(parts) < 2:
            raise ValueError(f"bad quota pair {pair!r}")
        out[parts[0]] = int(parts[1]) if parts[1] else -1
    return out


def format_stats(stats: dict[str, int]) -> bytes:
    """StatsTrack.toString: count and bytes first; other keys sorted after an extra '='."""
    text = f"count={stats.get('count', -1)},bytes={stats.get('bytes', -1)}"
    rest = sorted(k for k in stats if k not in ("count", "bytes"))
    if rest:
        text += "=" + "".join(f";{k}={stats[k]}" for k in rest)
    return text.encode("utf-8")


def max_prefix_with_quota(quota_paths: set[str], path: str) -> str | None:
    """The deepest quota'd path at or above `path` (never "/"), as PathTrie.findMaxPrefix."""
    if not quota_paths:
        return None
    p = path
    while p and p != "/":
        if p in quota_paths:
            return p
        i = p.rfind("/")
        p = p[:i]
    return None
