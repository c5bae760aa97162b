"""tree/view.py: a SNAP written from a TreeView while txns keep applying is byte for byte
the SNAP of the tree as it was when the view was taken. Txns of every write kind come from
the real Prep (tests/server/test_prep_digest.py's generator) and apply at random points
between the writer's chunks and slice points, as the leader's loop interleaves them."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.server.test_prep_digest import SESSIONS, WORLD, Leader, _request
from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.tree.snapstream import SnapReader, snap_stream_chunks
from zkcompat.tree.view import TreeView

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _write(leader: Leader, data, count: int) -> None:
    for _ in range(count):
        leader.submit(data.draw(st.sampled_from(SESSIONS)), *_request(data.draw, leader))
    leader.apply(len(leader.outstanding))


SLICE = 2  # a slice point every two nodes, so a small tree has many


@SETTINGS
@given(st.data())
def test_a_view_streams_the_tree_as_it_was_whatever_applies_meanwhile(data):
    leader = Leader()
    _write(leader, data, data.draw(st.integers(0, 40)))
    tree = leader.tree
    expected = b"".join(snap_stream_chunks(tree, chunk_bytes=64))
    view = TreeView(tree)
    got = []
    changed = 0
    for chunk in snap_stream_chunks(tree, chunk_bytes=64, view=view, slice_nodes=SLICE):
        got.append(chunk)
        if data.draw(st.integers(0, 2)) == 0:
            before = tree.last_processed_zxid
            _write(leader, data, data.draw(st.integers(1, 4)))
            changed += tree.last_processed_zxid - before
    view.close()
    assert b"".join(got) == expected
    assert not tree.views
    reader = SnapReader(view.zxid)
    reader.feed(b"".join(got))
    assert reader.done and len(reader.result().tree.nodes) == len(view.paths)


def test_the_writer_yields_slice_points_and_the_view_keeps_only_changed_nodes():
    leader = Leader()
    for i in range(30):
        leader.submit(SESSIONS[0], *_create(f"/n{i}"))
    leader.apply(len(leader.outstanding))
    tree = leader.tree
    expected = b"".join(snap_stream_chunks(tree))
    view = TreeView(tree)
    chunks = snap_stream_chunks(tree, view=view, slice_nodes=SLICE)
    assert next(chunks) == b""  # a slice point before any byte: the loop may run here
    for i in range(5):
        leader.submit(SESSIONS[0], *_set(f"/n{i}"))
        leader.submit(SESSIONS[0], *_create(f"/new{i}"))
    leader.submit(SESSIONS[0], *_delete("/n29"))
    leader.apply(len(leader.outstanding))
    assert b"".join(chunks) == expected
    # Five nodes set, one deleted, and the root (its children changed): seven copies.
    assert view.saved_count == 7
    view.close()


def _create(path):
    return OpCode.CREATE, r.CreateRequest(path, b"v", WORLD, 0)


def _set(path):
    return OpCode.SET_DATA, r.SetDataRequest(path, b"changed", -1)


def _delete(path):
    return OpCode.DELETE, r.DeleteRequest(path, -1)


def test_a_quota_stats_node_is_seen_as_it_was():
    """A create under a quota'd path changes the quota's stats node in place."""
    leader = Leader()
    for path in ("/q", "/zookeeper/quota/q", "/zookeeper/quota/q/zookeeper_limits",
                 "/zookeeper/quota/q/zookeeper_stats", "/q/a"):
        leader.submit(SESSIONS[0], *_create(path))
    leader.apply(len(leader.outstanding))
    tree = leader.tree
    assert tree.quota_paths == {"/q"}
    expected = b"".join(snap_stream_chunks(tree))
    view = TreeView(tree)
    chunks = snap_stream_chunks(tree, view=view, slice_nodes=SLICE)
    next(chunks)
    leader.submit(SESSIONS[0], *_create("/q/b"))
    leader.submit(SESSIONS[0], *_set("/q/a"))
    leader.apply(len(leader.outstanding))
    assert b"".join(chunks) == expected
    view.close()
