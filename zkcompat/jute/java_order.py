"""The order java.util.Properties iterates its keys in (Java 17), which is the order
ZooKeeper writes a config's server lines in (QuorumMaj(Properties)) and the order zkCli's
`config -c` lists client addresses in (ConfigUtils.getClientConfigStr)."""

from __future__ import annotations

from collections.abc import Sequence

_INT_MASK = 0xFFFFFFFF
# java.util.Properties() is a ConcurrentHashMap(8): a 16-bin table resized at 3/4 full.
_CHM_CAPACITY = 16
_CHM_HASH_BITS = 0x7FFFFFFF
_CHM_TREEIFY_THRESHOLD = 8


def properties_order(keys: Sequence[str]) -> list[str]:
    """The order a java.util.Properties (Java 17) iterates keys put in this order, as
    Properties.load puts a file's keys: ConcurrentHashMap bins in index order, each bin
    in insertion order except as transfer() rearranges it on a resize. A bin of more than
    TREEIFY_THRESHOLD keys (which Java turns into a tree or a bigger table) is refused."""
    table: list[list[tuple[int, str]]] = [[] for _ in range(_CHM_CAPACITY)]
    count = 0
    for key in keys:
        h = _chm_spread(_java_string_hash(key))
        bin_ = table[h & (len(table) - 1)]
        if any(k == key for _, k in bin_):
            continue  # a repeated key keeps its place
        if len(bin_) >= _CHM_TREEIFY_THRESHOLD:
            raise ValueError(f"{key!r}: bin of {len(bin_) + 1} keys is not modelled")
        bin_.append((h, key))
        count += 1
        while count >= len(table) - (len(table) >> 2):
            table = _chm_transfer(table)
    return [key for bin_ in table for _, key in bin_]


def _chm_transfer(table: list[list[tuple[int, str]]]) -> list[list[tuple[int, str]]]:
    """ConcurrentHashMap.transfer for one thread: each bin splits by the new hash bit;
    the longest tail on one side is kept as is, the nodes before it are prepended."""
    n = len(table)
    out: list[list[tuple[int, str]]] = [[] for _ in range(2 * n)]
    for i, bin_ in enumerate(table):
        if not bin_:
            continue
        run_start = len(bin_) - 1
        run_bit = bin_[run_start][0] & n
        while run_start > 0 and bin_[run_start - 1][0] & n == run_bit:
            run_start -= 1
        sides: dict[int, list[tuple[int, str]]] = {0: [], n: []}
        sides[run_bit] = list(bin_[run_start:])
        for node in bin_[:run_start]:
            sides[node[0] & n].insert(0, node)
        out[i], out[i + n] = sides[0], sides[n]
    return out


def _java_string_hash(text: str) -> int:
    h = 0
    units = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & _INT_MASK
    return h


def _chm_spread(h: int) -> int:
    return (h ^ (h >> 16)) & _CHM_HASH_BITS
