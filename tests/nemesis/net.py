"""Partitions between the servers of one ensemble, as nftables rules in one table of our own.

The table (`inet zkcompat_nemesis_<pid>`) has one input chain; a cut is a set of directed
links (a, b): packets from server a to server b are dropped, on the quorum and election
ports only, so clients still reach every server. Packets are dropped where they arrive, as
a lost link would lose them: the sender sees no error, its TCP connection stalls until a
timeout. close() deletes the table; no other table is ever touched.

Telling servers apart by address needs `--addresses spread` (server K on 127.0.0.K) and the
servers' outgoing links bound to their own address (the product's test hook
ZKCOMPAT_TEST_BIND_PEER_SOURCE, zkcompat/peer/links.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass

NFT_TIMEOUT_S = 10.0
NFT_MISSING = ("nft not found: install Debian's nftables (apt-get install -y nftables; "
               "scripts/install-zookeeper does)")

Link = tuple[int, int]  # (from sid, to sid): packets from the first to the second are dropped


@dataclass(frozen=True)
class Peer:
    """Where one server listens for the others."""

    sid: int
    host: str
    quorum_port: int
    election_port: int

    @property
    def ports(self) -> str:
        return f"{{ {self.quorum_port}, {self.election_port} }}"


def nft(script: str) -> None:
    """Run an nft script (-f -): all of it applies, or none of it."""
    if shutil.which("nft") is None:
        raise RuntimeError(NFT_MISSING)
    done = subprocess.run(["nft", "-f", "-"], input=script, capture_output=True, text=True,
                          timeout=NFT_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"nft failed (rc {done.returncode}): {done.stderr.strip()}\n"
                           f"script:\n{script}")


def table_names() -> list[str]:
    done = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True,
                          timeout=NFT_TIMEOUT_S, check=True)
    return [line.split()[-1] for line in done.stdout.splitlines() if line.strip()]


class Firewall:
    """One nft table cutting links among `peers`; a context manager that always deletes it."""

    def __init__(self, peers: Iterable[Peer], name: str | None = None) -> None:
        self.peers = {p.sid: p for p in peers}
        hosts = [p.host for p in self.peers.values()]
        assert len(set(hosts)) == len(hosts), f"servers share an address: {hosts}"
        assert all(h.startswith("127.") for h in hosts), f"loopback only: {hosts}"
        self.name = name or f"zkcompat_nemesis_{os.getpid()}"
        self.cut_now: frozenset[Link] = frozenset()
        self.opened = False

    def open(self) -> Firewall:
        # "add table" is a no-op on an existing table; a leftover of ours (same name) is
        # emptied by the flush.
        nft(f"add table inet {self.name}\n"
            f"add chain inet {self.name} input {{ type filter hook input priority 0; "
            f"policy accept; }}\n"
            f"flush chain inet {self.name} input\n")
        self.opened = True
        return self

    def __enter__(self) -> Firewall:
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    def rules(self, links: Iterable[Link]) -> list[str]:
        """Packets from a to b: to b's listening ports (a's connections to b), and from a's
        listening ports (replies on b's connections to a)."""
        out = []
        for a, b in sorted(set(links)):
            pa, pb = self.peers[a], self.peers[b]
            match = f"ip saddr {pa.host} ip daddr {pb.host} tcp"
            out.append(f"add rule inet {self.name} input {match} dport {pb.ports} drop")
            out.append(f"add rule inet {self.name} input {match} sport {pa.ports} drop")
        return out

    def cut(self, links: Iterable[Link]) -> None:
        """Replace the cut links with these (an empty set heals), in one nft transaction."""
        links = frozenset(links)
        assert all(a != b and a in self.peers and b in self.peers for a, b in links), links
        nft("\n".join([f"flush chain inet {self.name} input", *self.rules(links)]) + "\n")
        self.cut_now = links

    def heal(self) -> None:
        self.cut(())

    def close(self) -> None:
        if not self.opened:
            return
        if self.name in table_names():
            nft(f"delete table inet {self.name}\n")
        self.opened = False
        self.cut_now = frozenset()


# -- partitions as sets of links ----------------------------------------------------------


def both_ways(a: int, b: int) -> set[Link]:
    return {(a, b), (b, a)}


def isolate(sid: int, sids: Iterable[int]) -> set[Link]:
    """sid alone on one side, the rest on the other."""
    return {link for other in sids if other != sid for link in both_ways(sid, other)}


def bridge(middle: int, sids: Iterable[int]) -> set[Link]:
    """Every server but `middle` cut from every other; `middle` sees them all."""
    ends = sorted(s for s in sids if s != middle)
    return {link for i, a in enumerate(ends) for b in ends[i + 1:] for link in both_ways(a, b)}


def one_way(sid: int, sids: Iterable[int]) -> set[Link]:
    """Nothing from sid reaches the others; everything they send reaches it."""
    return {(sid, other) for other in sids if other != sid}
