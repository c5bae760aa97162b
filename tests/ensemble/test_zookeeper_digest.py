"""The reader of ZooKeeper's digest mismatches lets through only those of its own fuzzy
snapshots (zookeeper_digest.py), in log lines as ZooKeeper 3.8 writes them."""

from __future__ import annotations

import pytest

from .zookeeper_digest import own_fuzzy_mismatches

START = "INFO  [main] Reading configuration from: /d/zoo1.cfg\n"
CLEAN_LOAD = ("INFO  [main] Reading snapshot /nonexistent/snapshot.10000004c\n"
              "INFO  [main] The digest in the snapshot has digest version of 2, with zxid as "
              "0x100000051, and digest value as 144744189011\n"
              "INFO  [main] Snapshot loaded in 20 ms, highest zxid is 0x100000077\n")
D = 0x100000051
COUNTED = f"WARN  [main] Message:Digests are not matching. Value is Zxid. Value:{D}\n"
FIRST = f"ERROR [main] First digest mismatch on txn: 2618531,6,{D},1796538123601,1\n"
FLUSHED = f"WARN  [main] Message: Digests are not matching. Value is Zxid. Last value:{D}\n"
LIVE = "INFO  [QuorumPeer] Learner received UPTODATE message\n"


def load(*mismatch: str) -> str:
    head, loaded = CLEAN_LOAD.rsplit("INFO  [main] Snapshot loaded", 1)
    return head + "".join(mismatch) + "INFO  [main] Snapshot loaded" + loaded


def test_no_mismatch_counts_none():
    assert own_fuzzy_mismatches(START + LIVE + START + CLEAN_LOAD + LIVE) == 0


def test_digest_of_the_files_own_zxid_counts_one():
    assert own_fuzzy_mismatches(START + load(COUNTED) + LIVE) == 1


def test_digest_of_a_later_txn_counts_two_at_that_txn():
    assert own_fuzzy_mismatches(START + load(COUNTED, FIRST, FLUSHED) + LIVE) == 2


def test_only_the_current_lifetime_is_counted():
    assert own_fuzzy_mismatches(START + load(COUNTED, FIRST) + LIVE + START + LIVE) == 0


@pytest.mark.parametrize("log", [
    START + LIVE + FIRST,  # a proposal's digest differed: the replicas differ
    START + load() + LIVE + COUNTED,
    START + load(COUNTED, FIRST.replace(str(D), str(D + 1))),  # not at the digest's txn
    START + load(COUNTED) + LIVE + COUNTED.replace(str(D), str(D + 7)),
    START + LIVE + FIRST + START + CLEAN_LOAD,  # in an earlier lifetime
], ids=["live", "live-counted", "other-txn", "later-counted", "earlier-lifetime"])
def test_any_other_mismatch_fails(log):
    with pytest.raises(AssertionError):
        own_fuzzy_mismatches(log)
