"""The harness's checks on trees already read: they must fail on a lost or stale write and
on two servers that disagree, or every ensemble test that relies on them proves nothing."""

from __future__ import annotations

import pytest

from .harness import Ack, AckedWrites, assert_acked_in, assert_trees_agree


class NoLogs:
    def log_tails(self) -> str:
        return "(no logs)"


def stat(version: int, mzxid: int = 1) -> tuple:
    # czxid, mzxid, ctime, mtime, version, cversion, aversion, owner, dataLength,
    # numChildren, pzxid: the order of kazoo's ZnodeStat
    return (1, mzxid, 0, 0, version, 0, 0, 0, 1, 0, 1)


def acked(*writes: tuple[str, bytes, int]) -> AckedWrites:
    out = AckedWrites()
    for path, data, version in writes:
        out.ack(Ack(path, data, version, 0.0, 0.0, "w"))
    return out


ACKED = acked(("/r/a", b"1", 0), ("/r/a", b"2", 1), ("/r/b", b"x", 0))


def test_acked_writes_found_or_overwritten_later_pass():
    trees = {1: {"/r/a": (b"2", stat(1)), "/r/b": (b"x", stat(0))},
             2: {"/r/a": (b"3", stat(2)), "/r/b": (b"x", stat(0))}}
    assert assert_acked_in(trees, ACKED, NoLogs()) == 2


@pytest.mark.parametrize("tree, why", [
    ({"/r/b": (b"x", stat(0))}, "not on server.2"),  # a znode gone
    ({"/r/a": (b"1", stat(0)), "/r/b": (b"x", stat(0))}, "acked v1"),  # an older version
    ({"/r/a": (b"?", stat(1)), "/r/b": (b"x", stat(0))}, "acked v1"),  # other data, same v
])
def test_a_lost_or_stale_acked_write_fails(tree, why):
    trees = {1: {"/r/a": (b"2", stat(1)), "/r/b": (b"x", stat(0))}, 2: tree}
    with pytest.raises(AssertionError, match=why):
        assert_acked_in(trees, ACKED, NoLogs())


def test_nothing_acknowledged_is_a_failure_not_a_pass():
    with pytest.raises(AssertionError, match="no write was ever acknowledged"):
        assert_acked_in({1: {}}, AckedWrites(), NoLogs())


def test_trees_agree_counts_and_a_differing_stat_fails():
    same = {"/r": (b"", stat(0)), "/r/a": (b"2", stat(1, mzxid=7))}
    assert assert_trees_agree({1: same, 2: dict(same)}, "/r") == 2
    other = dict(same, **{"/r/a": (b"2", stat(1, mzxid=8))})
    with pytest.raises(AssertionError, match="server.1 and server.2 disagree"):
        assert_trees_agree({1: same, 2: other}, "/r")
