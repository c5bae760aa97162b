"""Mixed ensembles under the nemesis: Apache ZooKeeper 3.8 members beside zkcompat ones.

What this adds to a round: which servers are ZooKeeper (`--mix`), the LD_PRELOAD shim that
makes a ZooKeeper's peer links leave from its own address (bind_source.c; without it every
ZooKeeper link comes from 127.0.0.1 and no per-address nft rule cuts it), the words a
ZooKeeper logs where zkcompat logs its own, a timeline of who leads, and the split of what
the checks find into zkcompat's anomalies and ZooKeeper's own known ones.

ZooKeeper's known behaviour is the baseline. Its leader answers a sync at once, without
asking a quorum (Leader.processSync; ZOOKEEPER-1675), so a sync-then-read may be stale
while a deposed ZooKeeper leader still believes it leads, for its own clients and for
its followers' alike. A read that a ZooKeeper member served, or that ran while a ZooKeeper
member said it led, is "ZooKeeper-attributable". A history that is not linearizable only
because of such reads is recorded as ZooKeeper's anomaly; what remains without them is
checked as strictly as in an all-zkcompat round. The reads after the heal (one leader, a
quorum, every follower in it) are never set aside.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from zkcompat.cli.ensemble_process import server_mode
from zkcompat.sim import history as h

# --mix NAME: how many of the servers are ZooKeeper. Which ones the round's seed chooses
# (as disk_sid() does), so that over rounds either kind leads first: with every zxid 0,
# FastLeaderElection picks the highest sid. zk3 (all ZooKeeper) is the baseline: what
# ZooKeeper 3.8 shows under the same faults and checks, with no zkcompat in it.
MIXES = {"zk1": 1, "zk2": 2, "zk3": 3}
MIXED_SIZES = (3,)
# The cases a mixed round refuses: each needs a zkcompat-only hook on a server the case
# picks by its role (the leader's wall clock, one server's data on a fault-injecting disk).
ZKCOMPAT_ONLY_CASES = {
    "clock": "the wall-clock hook ZKCOMPAT_TEST_WALL_OFFSET_DIR is zkcompat's (the case "
             "jumps the leader's clock, and the leader may be ZooKeeper)",
    "disk-slow": "faultyfs and zkcompat's slow-fsync warning are zkcompat's",
    "disk-fail": "faultyfs and zkcompat's stop-on-failed-fsync are zkcompat's",
    "disk-full": "the full-disk case checks zkcompat's stop-on-failed-fsync",
}
ZOOKEEPER_TERM_ENDED = r"Peer state changed: looking"  # QuorumPeer.setPeerState, 3.8
# ZOOKEEPER-4394 (fixed after 3.8.0, apache/zookeeper#2152): a follower that gets a COMMIT
# between NEWLEADER and UPTODATE dies in Learner.syncWithLeader on this NPE, as under a
# ZooKeeper leader (which sends those too), and its sync is left half done: it re-syncs
# from a tree that may hold a txn twice or miss one (its digests then stop matching).
ZOOKEEPER_4394 = 'Cannot read field "hdr" because "pif" is null'
SHIM_SOURCE = Path(__file__).with_name("bind_source.c")
SHIM_LINE = r"nemesis_bind_source: outgoing links leave from host={host}\n"
GCC_MISSING = ("gcc not found: a mixed nemesis round builds tests/nemesis/bind_source.c "
               "(apt-get install -y gcc libc6-dev; scripts/install-zookeeper does)")
GCC_TIMEOUT_S = 60.0
# ZooKeeper's sockets are IPv4 ones, so the shim sees every bind and connect as AF_INET.
ZOOKEEPER_JVM_FLAGS = "-Djava.net.preferIPv4Stack=true"
JSTACK_TIMEOUT_S = 30.0
LEADS_POLL_S = 0.2
LEADS_MARGIN_NS = 1_000_000_000  # a read this close to a ZooKeeper's "leader" answer counts


_LIFETIME = "event=listening address="  # peer/node.py: a zkcompat process starts serving
_ELECTED = re.compile(r"event=elected leader=(\d+) ")
_SNAP_INSTALLED = re.compile(r"event=snap_installed zxid=0x([0-9a-f]+) ")
_MISMATCH = re.compile(r"event=digest_mismatch zxid=0x([0-9a-f]+) ")


def fuzzy_snap_mismatches(ens, sid: int, count: int, zookeeper: set[int]) -> str | None:
    """Why zkcompat member `sid`'s `count` digest mismatches are ZooKeeper's, if they are:
    it installed a SNAP from a ZooKeeper leader, the SNAP held txns past its own zxid (a
    ZooKeeper leader serialises its live tree: LearnerHandler sends the SNAP after it let
    go of the lock, so the snapshot is fuzzy), and the mismatches are the replay of those
    txns, which a ZooKeeper learner compares as well (the SNAP stream carries no digest to
    tell it the fuzzy range). Proven from the log (the first mismatch of this process
    comes after the SNAP, within its fuzzy range, and the count fits in that range) and the
    snapshot itself, read from a copy of the member's store. None: not shown."""
    log = ens.log_since(sid)
    log = log[log.rfind(_LIFETIME):] if _LIFETIME in log else log
    mismatch = _MISMATCH.search(log)
    if mismatch is None:
        return None
    before = log[:mismatch.start()]
    snaps = list(_SNAP_INSTALLED.finditer(before))
    leaders = list(_ELECTED.finditer(before))
    if not snaps or not leaders or int(leaders[-1].group(1)) not in zookeeper:
        return None
    snap_zxid, first = int(snaps[-1].group(1), 16), int(mismatch.group(1), 16)
    newest = _newest_zxid_in_snapshot(ens.member(sid).data_dir, snap_zxid)
    if newest is None or not (snap_zxid < first <= newest and count <= newest - snap_zxid):
        return None
    return (f"ZooKeeper's: server.{sid} (zkcompat) counted {count} digest mismatches "
            f"replaying txns from 0x{first:x} that the SNAP at 0x{snap_zxid:x} from ZooKeeper "
            f"leader server.{leaders[-1].group(1)} already held (it holds txns up to "
            f"0x{newest:x}: a fuzzy SNAP)")


def _newest_zxid_in_snapshot(data_dir: str, zxid: int) -> int | None:
    """The newest czxid/mzxid/pzxid in the member's snapshot at `zxid`, read from a copy of
    its snapshot store (the running server holds the store's lock; the store is idle
    between snapshots). None if it cannot be read."""
    from zkcompat.store.snapshot import SnapshotStore  # noqa: PLC0415 - plyvel, only here

    store_dir = Path(data_dir) / "zkcompat" / "snapshots"
    with tempfile.TemporaryDirectory(prefix="nemesis-snap-") as tmp:
        copy = Path(tmp) / "snapshots"
        try:
            shutil.copytree(store_dir, copy, ignore=shutil.ignore_patterns("LOCK"))
            store = SnapshotStore(copy)
        except Exception:  # noqa: BLE001 - no evidence, no attribution
            return None
        try:
            if zxid not in store.zxids():
                return None
            tree = store.load(zxid)
            return max(max(n.czxid, n.mzxid, n.pzxid) for n in tree.nodes.values())
        except Exception:  # noqa: BLE001 - no evidence, no attribution
            return None
        finally:
            store.close()


def broken_syncs(ens, zookeeper: set[int]) -> set[int]:
    """The ZooKeeper members whose learner sync died of ZOOKEEPER-4394 this round."""
    return {sid for sid in zookeeper if ZOOKEEPER_4394 in ens.log_since(sid)}


def kinds(mix: str | None, size: int, seed: int) -> list[str]:
    """Each server's kind; ZooKeeper on `MIXES[mix]` consecutive sids from 1 + seed % size."""
    if mix is None:
        return ["zkcompat"] * size
    check_mix(mix, size)
    first = seed % size
    zookeeper = {(first + i) % size + 1 for i in range(MIXES[mix])}
    return ["zookeeper" if sid in zookeeper else "zkcompat" for sid in range(1, size + 1)]


def check_mix(mix: str, size: int, case: str | None = None) -> None:
    """A clear refusal of what a mixed round cannot play."""
    if mix not in MIXES:
        raise ValueError(f"--mix {mix}: one of {', '.join(MIXES)}")
    if size not in MIXED_SIZES:
        raise ValueError(f"--mix {mix} runs {MIXED_SIZES[0]} servers, not {size}")
    if case in ZKCOMPAT_ONLY_CASES:
        raise ValueError(f"case {case} cannot run in a mixed ensemble: "
                         f"{ZKCOMPAT_ONLY_CASES[case]}")


def thread_dump(ens, sid: int) -> str:
    """A ZooKeeper member's threads (jstack), kept beside its log when it stopped serving:
    where its request processors wait says which side dropped what. "" for zkcompat."""
    m = ens.member(sid)
    jstack = shutil.which("jstack")
    if m.kind != "zookeeper" or jstack is None or m.pid is None:
        return ""
    out = Path(m.data_dir) / f"jstack-{time.strftime('%H%M%S')}.txt"
    try:
        done = subprocess.run([jstack, "-l", str(m.pid)], capture_output=True, text=True,
                              timeout=JSTACK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return ""
    out.write_text(done.stdout + done.stderr)
    return f" (its threads: {out})"


def shim_library() -> Path:
    """bind_source.c built once per version of its source, under the temporary folder."""
    source = SHIM_SOURCE.read_bytes()
    out = Path(tempfile.gettempdir()) / (
        f"zkcompat-nemesis-bind-source-{hashlib.sha256(source).hexdigest()[:16]}.so")
    if out.is_file():
        return out
    gcc = shutil.which("gcc")
    if gcc is None:
        raise RuntimeError(GCC_MISSING)
    building = out.with_suffix(f".{threading.get_ident()}.tmp")
    done = subprocess.run([gcc, "-shared", "-fPIC", "-O2", "-Wall", "-o", str(building),
                           str(SHIM_SOURCE), "-ldl"], capture_output=True, text=True,
                          timeout=GCC_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"gcc failed on {SHIM_SOURCE}: {done.stderr}")
    building.replace(out)
    return out


class LeadsLog:
    """Who says it leads, by srvr, polled on every server from its own thread while a round
    runs: when a ZooKeeper member said "leader" (time.monotonic_ns())."""

    def __init__(self, members: dict[int, tuple[str, int]], zookeeper: set[int]) -> None:
        self.members = {sid: m for sid, m in members.items() if sid in zookeeper}
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.leading: list[tuple[int, int]] = []  # (sid, when it answered "leader")
        self.threads = [threading.Thread(target=self._poll, args=(sid, host, port),
                                         name=f"nemesis-leads-{sid}", daemon=True)
                        for sid, (host, port) in self.members.items()]

    def __enter__(self) -> LeadsLog:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_event.set()
        for t in self.threads:
            t.join(10)

    def _poll(self, sid: int, host: str, port: int) -> None:
        while not self.stop_event.is_set():
            asked = time.monotonic_ns()
            if server_mode(port, host) == "leader":
                with self.lock:
                    self.leading.append((sid, asked))
            self.stop_event.wait(LEADS_POLL_S)

    def zookeeper_led(self, start_ns: int, end_ns: int) -> bool:
        with self.lock:
            return any(start_ns - LEADS_MARGIN_NS <= t <= end_ns + LEADS_MARGIN_NS
                       for _, t in self.leading)


def zookeeper_attributable_reads(operations: Sequence[h.Operation],
                                 served: dict[int, frozenset[str]], leads: LeadsLog | None,
                                 zookeeper_hosts: set[str]) -> list[h.Operation]:
    """The sync-then-reads a ZooKeeper may have answered stale: served by a ZooKeeper
    member (or by a server not known for certain), or run while a ZooKeeper said it led."""
    out = []
    for op in operations:
        if not isinstance(op.call, h.GetData) or op.completed_at is None:
            continue
        hosts = served.get(id(op), frozenset())
        if (not hosts or hosts & zookeeper_hosts
                or (leads is not None and leads.zookeeper_led(op.invoked_at, op.completed_at))):
            out.append(op)
    return out
