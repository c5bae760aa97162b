"""What a ZooKeeper 3.8 server's digest mismatches mean, read from its log.

A leader's proposals carry its tree digest after each txn, and a learner compares its own
after applying (DataTree.compareDigest). A mismatch means the replicas differ, with one
exception that is ZooKeeper's own: a fuzzy snapshot whose digest is older than its tree.

ZooKeeper ends a snapshot with the digest of the last txn processTxn logged
(DataTree.serializeZxidDigest). The snapshot thread serialises the live tree, though, and a
txn applying meanwhile changes nodes before it logs its digest: the file then holds txn D+1
while its digest is D's. Loading it, ZooKeeper compares the tree with that digest when the
replay reaches D, and counts a mismatch nothing in the replicated data caused:
- when D is the file's own zxid, at once (FileSnap.deserialize): one mismatch, no
  "First digest mismatch" line;
- when D is later, as the replay applies D: compareSnapshotDigests counts one, and
  compareDigest a second with a "First digest mismatch on txn" line naming D.
The replay of D+1 then finds its node there already and the tree is exact again.
Seen in CI: snapshot.100000043 held 0x100000044's create, and snapshot.10000004c (digest
0x100000051) held 0x100000052's."""

from __future__ import annotations

import re
from pathlib import Path

from zkcompat.store.zkformat import read_snapshot

LIFETIME = "Reading configuration from:"
LOADING = re.compile(r"Reading snapshot (\S+)\n(?:.*\n)*?.*Snapshot loaded in")
DIGEST_ZXID = re.compile(r"The digest in the snapshot has digest version of \d+, "
                         r"with zxid as 0x([0-9a-f]+)")
FIRST = re.compile(r"First digest mismatch on txn: -?\d+,-?\d+,(\d+),")
COUNTED = "Digests are not matching"
COUNTED_VALUE = re.compile(COUNTED + r"\. Value is Zxid\. (?:Last )?[Vv]alue:(\d+)")


def own_fuzzy_mismatches(log: str) -> int:
    """The mismatches ZooKeeper's current lifetime counted (zk_digest_mismatches_count)
    while loading a fuzzy snapshot of its own, 0 if none. Raises AssertionError, with the
    log around it, for any mismatch in any lifetime that is not that."""
    own = 0
    for lifetime in log.split(LIFETIME)[1:] or [log]:
        own = _lifetime(lifetime)
    return own


def _lifetime(log: str) -> int:
    loading = LOADING.search(log)
    head = loading.group(0) if loading else ""
    rest = log.replace(head, "", 1)
    at = rest.find("First digest mismatch")
    assert at < 0, report(rest, at)
    if COUNTED not in head:
        at = rest.find(COUNTED)
        assert at < 0, report(rest, at)
        return 0
    digest = DIGEST_ZXID.search(head)
    assert digest, report(head, head.find(COUNTED))
    digest_zxid = int(digest.group(1), 16)
    for counted in COUNTED_VALUE.finditer(log):  # a rate-limited line may come later
        assert int(counted.group(1)) == digest_zxid, report(log, counted.start())
    first = FIRST.search(head)
    if first:  # counted as the replay applied D: then it must be D
        assert int(first.group(1)) == digest_zxid, report(head, first.start())
    snapshot = Path(loading.group(1))
    if snapshot.exists():  # else purged since: the log's evidence above stands
        snap = read_snapshot(snapshot)
        past = [path for path, n in snap.nodes.items()
                if max(n.czxid, n.mzxid, n.pzxid) > digest_zxid]
        assert past, f"ZooKeeper's {snapshot.name} disagrees with its digest at 0x{digest_zxid:x}"
    return 2 if first else 1


def report(log: str, at: int) -> str:
    """The mismatch line first (a CI report may keep only the head of the message), then
    what the learner did about sync before it, which says whether a DIFF, a SNAP or a
    proposal after them brought the txn, then the log around it."""
    end = log.find("\n", at)
    line = log[at:end if end >= 0 else len(log)]
    sync_words = ("DIFF", "SNAP", "TRUNC", "snapshot", "NEWLEADER", "UPTODATE", "Learner",
                  "leader", "zxid", "Reading", "loaded")
    before = [ln for ln in log[:at].splitlines() if any(w in ln for w in sync_words)][-40:]
    return "\n".join([line, "--- sync lines before it ---", *before,
                      "--- the log around it ---",
                      log[max(0, at - 3000):at + 2000]])
