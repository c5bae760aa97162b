"""tree/snapstream.py: the SNAP stream (SerializeUtils.serializeSnapshot + "BenWasHere"),
written in bounded chunks and read back incrementally, whatever the chunking; malformed
streams refused with a SnapStreamError at the first bad byte, never a hang or a huge
allocation. The ZooKeeper oracles are in test_zk_snapshot_writer.py."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zkcompat.tree.acl import OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, intern_acl
from zkcompat.tree.datatree import CONTAINER_EPHEMERAL_OWNER, DataTree, ZNode, ttl_ephemeral_owner
from zkcompat.tree.digest import tree_digest
from zkcompat.tree.snapstream import (
    LENGTH_MAX_BYTES,
    OPEN_UNSAFE_ACL_ID,
    SIGNATURE,
    SnapReader,
    SnapshotWriter,
    SnapStreamError,
    java_long_hashmap_order,
    snap_stream_chunks,
    snapshot_chunks,
)

DIGEST_ACL = intern_acl(((31, "digest", "alice:Dk5QTa/0dyYsCT3S0rhGSq1Tw1w="),))
IP_ACL = intern_acl(((1, "ip", "127.0.0.1"), (31, "world", "anyone")))
ACLS = (OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, DIGEST_ACL, IP_ACL)
SESSION = 0x0100000012340000
FIELDS = ZNode.__slots__[:-1]  # every persisted field; children are derived
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def add(tree: DataTree, path: str, data=b"d", acl=OPEN_ACL_UNSAFE, owner=0, zxid=1) -> ZNode:
    node = ZNode(data, acl, zxid, 1_700_000_000_000 + zxid, owner)
    tree.nodes[path] = node
    return node


def sample_tree() -> DataTree:
    tree = DataTree()
    tree.sessions = {SESSION: 30000, SESSION + 1: 4000}
    add(tree, "/app", b"app", zxid=2)
    add(tree, "/app/null", None, DIGEST_ACL, zxid=3)
    add(tree, "/app/empty", b"", READ_ACL_UNSAFE, zxid=4)
    add(tree, "/app/bin", bytes(range(256)), IP_ACL, zxid=5)
    add(tree, "/app/eph", b"e", owner=SESSION, zxid=6)
    add(tree, "/c", b"", owner=CONTAINER_EPHEMERAL_OWNER, zxid=7)
    add(tree, "/t", b"", owner=ttl_ephemeral_owner(60000), zxid=8)
    add(tree, "/\u00e9t\u00e9", "\u4e2d".encode(), zxid=9)
    tree.nodes["/app"].cversion = 5
    tree.last_processed_zxid = 9
    tree.rebuild_indexes()
    return tree


def stream_of(tree: DataTree, **options) -> bytes:
    return b"".join(snap_stream_chunks(tree, **options))


def feed_until_done(raw: bytes, sizes=(), **options) -> tuple[SnapReader, int]:
    """Feed raw in pieces of the given sizes (then the rest) until the reader is done;
    returns the reader and how many bytes it was given."""
    reader = SnapReader(**options)
    pos = 0
    sizes = list(sizes)
    while pos < len(raw) and not reader.done:
        n = sizes.pop(0) if sizes else len(raw) - pos
        reader.feed(raw[pos:pos + n])
        pos += n
    return reader, pos


def read_all(raw: bytes, **options) -> SnapReader:
    return feed_until_done(raw, **options)[0]


def assert_same_tree(a: DataTree, b: DataTree) -> None:
    assert list(a.nodes) == list(b.nodes)
    for path, node in a.nodes.items():
        other = b.nodes[path]
        for f in FIELDS:
            assert getattr(node, f) == getattr(other, f), (path, f)
            assert type(node.data) is type(other.data), path  # None stays None
        assert (node.children or set()) == (other.children or set()), path
        assert node.digest == other.digest, path  # each loaded node's, as rebuild_indexes hashes it
    assert a.digest == b.digest == tree_digest(a)
    assert a.sessions == b.sessions
    assert a.ephemerals == b.ephemerals
    assert (a.containers, a.ttls) == (b.containers, b.ttls)


# -- the writer ---------------------------------------------------------------------------


def test_layout_of_a_tiny_tree_byte_by_byte():
    tree = DataTree()
    tree.nodes = {"/": ZNode(b"", OPEN_ACL_UNSAFE, 0, 0, 0)}
    tree.sessions = {7: 3000}
    raw = stream_of(tree)
    expected = (struct.pack(">i", 1) + struct.pack(">qi", 7, 3000)  # sessions
                + struct.pack(">i", 0)  # the ACL cache: the root's ACL is the null id -1
                + struct.pack(">i", 0) + b"" + struct.pack(">i", 0)  # path "", data b""
                + struct.pack(">qqqqqiiiqq", OPEN_UNSAFE_ACL_ID, 0, 0, 0, 0, 0, 0, 0, 0, 0)
                + struct.pack(">i", 1) + b"/"  # end of the nodes
                + struct.pack(">i", 10) + b"BenWasHere")
    assert raw == expected
    assert SIGNATURE == "BenWasHere"


def test_acl_ids_as_reference_counted_acl_cache_numbers_them():
    tree = sample_tree()
    w = SnapshotWriter(tree)
    b"".join(w.chunks())
    # /zookeeper/config (4th node) is the first ACL used: 1, as in a fresh ZooKeeper;
    # world:anyone ALL on /app gets an index of its own; -1 stays for the three built-ins.
    assert w.acl_cache == {1: READ_ACL_UNSAFE, 2: OPEN_ACL_UNSAFE, 3: DIGEST_ACL, 4: IP_ACL}


def test_given_acl_ids_are_kept_with_unused_entries_and_new_acls_after_them():
    tree = sample_tree()
    given_ids = {7: DIGEST_ACL, 3: READ_ACL_UNSAFE, 9: ((5, "world", "anyone"),)}
    w = SnapshotWriter(tree, acl_ids=given_ids)
    raw = b"".join(w.chunks()) + struct.pack(">i", 10) + b"BenWasHere"
    assert w.acl_cache == {**given_ids, 10: OPEN_ACL_UNSAFE, 11: IP_ACL}
    reader = read_all(raw)
    assert reader.acls == w.acl_cache
    assert_same_tree(tree, reader.result().tree)


def test_chunks_are_bounded_and_progress_is_reported():
    tree = sample_tree()
    for i in range(300):
        add(tree, f"/app/n{i}", bytes(200))
    add(tree, "/app/big", bytes(10_000))  # bigger than a chunk: split, not one big chunk
    tree.rebuild_indexes()
    seen = []
    chunks = list(snapshot_chunks(tree, chunk_bytes=1000,
                                  progress=lambda done, total: seen.append((done, total))))
    assert all(len(c) == 1000 for c in chunks[:-1]) and 0 < len(chunks[-1]) <= 1000
    assert seen[-1] == (len(tree.nodes), len(tree.nodes))
    assert len(seen) > 10 and seen == sorted(seen)


def test_digest_computed_while_writing_is_tree_digest():
    tree = sample_tree()
    w = SnapshotWriter(tree, digest=True)
    b"".join(w.chunks())
    assert w.digest == tree_digest(tree)


def test_digest_hashes_the_path_as_java_getbytes_not_as_the_stream_writes_it():
    """The stream writes a path outside the BMP as CESU-8 (jute's ustring), but the digest
    hashes path.getBytes(): UTF-8, a lone surrogate as "?" (DigestCalculator)."""
    tree = sample_tree()
    add(tree, "/\U0001f600", b"smile", zxid=10)
    add(tree, "/lone\udc80", b"", zxid=11)
    tree.rebuild_indexes()
    w = SnapshotWriter(tree, digest=True)
    raw = b"".join(w.chunks())
    assert "\U0001f600".encode("utf-8", "surrogatepass") not in raw  # CESU-8 in the stream
    assert w.digest == tree_digest(tree) == tree.digest


def test_order_that_is_not_parent_first_is_written_depth_first():
    tree = sample_tree()
    nodes = dict(reversed(list(tree.nodes.items())))  # children before their parents
    tree.nodes = nodes
    reader = read_all(stream_of(tree))
    out = reader.result().tree
    assert set(out.nodes) == set(tree.nodes)
    assert list(out.nodes)[:4] == ["/", "/app", "/app/bin", "/app/empty"]  # sorted DFS


def test_java_long_hashmap_order_matches_java():
    # Printed by `new HashMap<Long,Integer>(linkedHashMapOfTheseKeys).keySet()` on JDK 17:
    # 16 keys' buckets of a 16-slot table, collisions (1, 33, 17) in insertion order.
    keys = [1, 16, 0x100000012340000, 0x100000012340001, -1, 0x7FFFFFFF00000000, 33, 17]
    assert java_long_hashmap_order(keys) == [
        16, -1, 0x7FFFFFFF00000000, 1, 33, 17, 0x100000012340000, 0x100000012340001]
    assert java_long_hashmap_order([16, 1]) == [16, 1]


# -- the reader: round trips --------------------------------------------------------------

NAME = st.text(alphabet="abz09-_.\u00e9\u4e2d", min_size=1, max_size=6)
DATA = st.one_of(st.none(), st.just(b""), st.binary(max_size=80))
OWNER = st.one_of(st.just(0), st.just(CONTAINER_EPHEMERAL_OWNER),
                  st.integers(1, 10**6).map(ttl_ephemeral_owner),
                  st.sampled_from([SESSION, SESSION + 1, SESSION + 99]))
LONG = st.integers(-(2**63), 2**63 - 1)
INT = st.integers(-(2**31), 2**31 - 1)


@st.composite
def trees(draw) -> DataTree:
    tree = DataTree()
    tree.sessions = draw(st.dictionaries(LONG, INT, max_size=6))
    paths = ["/"]
    for _ in range(draw(st.integers(0, 40))):
        parent = draw(st.sampled_from(paths))
        path = ("" if parent == "/" else parent) + "/" + draw(NAME)
        if path in tree.nodes:
            continue
        node = add(tree, path, draw(DATA), draw(st.sampled_from(ACLS)), draw(OWNER))
        node.czxid, node.mzxid, node.pzxid, node.ctime, node.mtime = (
            draw(LONG), draw(LONG), draw(LONG), draw(LONG), draw(LONG))
        node.version, node.cversion, node.aversion = draw(INT), draw(INT), draw(INT)
        if node.ephemeralOwner == 0:
            paths.append(path)
    tree.rebuild_indexes()
    return tree


@SETTINGS
@given(tree=trees(), write_chunk=st.integers(1, 300),
       feed_sizes=st.lists(st.integers(1, 200), max_size=200), zxid=LONG)
def test_round_trip_in_any_chunking(tree, write_chunk, feed_sizes, zxid):
    stream = stream_of(tree, chunk_bytes=write_chunk)
    raw = stream + b"NEXT PACKET"
    reader, fed = feed_until_done(raw, feed_sizes, zxid=zxid)
    assert reader.done
    res = reader.result()
    assert_same_tree(tree, res.tree)
    assert res.tree.last_processed_zxid == zxid
    assert res.rest == raw[len(stream):fed]  # what came with the signature's last byte
    assert tree_digest(res.tree) == tree_digest(tree)


def test_rest_after_the_signature_is_handed_back_whole():
    raw = stream_of(sample_tree())
    reader = SnapReader()
    reader.feed(raw[:-3])
    assert not reader.done
    reader.feed(raw[-3:] + b"\x00\x00\x00\x10next")
    assert reader.done and reader.result().rest == b"\x00\x00\x00\x10next"
    with pytest.raises(RuntimeError, match="next QuorumPacket"):
        reader.feed(b"more")


def test_null_and_empty_data_stay_distinct():
    tree = read_all(stream_of(sample_tree())).result().tree
    assert tree.nodes["/app/null"].data is None
    assert tree.nodes["/app/empty"].data == b""
    assert tree.ephemerals == {SESSION: {"/app/eph"}}
    assert tree.containers == {"/c"} and tree.ttls == {"/t"}


def test_reader_holds_at_most_one_node():
    tree = DataTree()
    for i in range(2000):
        add(tree, f"/n{i}", bytes(100))
    add(tree, "/big", bytes(200_000))
    tree.rebuild_indexes()
    reader = SnapReader()
    most = 0
    for chunk in snap_stream_chunks(tree, chunk_bytes=4096):
        reader.feed(chunk)
        most = max(most, reader.buffered_bytes)
    assert reader.done
    assert 200_000 - 4096 < most < 200_000  # most of the big node, and nothing more


# -- the reader: malformed and truncated streams ------------------------------------------


def test_every_truncation_is_incomplete_not_an_error():
    raw = stream_of(sample_tree())
    for cut in range(len(raw)):
        reader = SnapReader()
        reader.feed(raw[:cut])
        assert not reader.done
        with pytest.raises(RuntimeError, match="incomplete"):
            reader.result()


def node_bytes(path: str, data: bytes | None, ref: int = OPEN_UNSAFE_ACL_ID) -> bytes:
    p = path.encode()
    d = struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data
    return struct.pack(">i", len(p)) + p + d + struct.pack(">qqqqqiiiqq", ref, *[0] * 9)


def root_tree() -> DataTree:
    tree = DataTree()
    tree.nodes = {"/": ZNode(b"", OPEN_ACL_UNSAFE, 0, 0, 0)}
    return tree


EMPTY_HEAD = struct.pack(">i", 0) + struct.pack(">i", 0)  # no sessions, no ACLs
ROOT = node_bytes("", b"")
END = struct.pack(">i", 1) + b"/"
SIG = struct.pack(">i", 10) + b"BenWasHere"

MALFORMED = {
    "negative session count": struct.pack(">i", -1),
    "negative ACL cache size": struct.pack(">i", 0) + struct.pack(">i", -5),
    "null ACL vector": struct.pack(">iiqi", 0, 1, 1, -1),
    "huge ACL scheme": struct.pack(">iiqii", 0, 1, 1, 1, 31) + struct.pack(">i", 0x7FFFFFFF),
    "null ACL id": struct.pack(">iiqii", 0, 1, 1, 1, 31) + struct.pack(">i", 5) + b"world"
                   + struct.pack(">i", -1),
    "huge path": EMPTY_HEAD + struct.pack(">i", 0x7FFFFFFF),
    "negative path": EMPTY_HEAD + struct.pack(">i", -1),
    "huge data": EMPTY_HEAD + struct.pack(">i", 0) + struct.pack(">i", LENGTH_MAX_BYTES + 1),
    "data length -2": EMPTY_HEAD + struct.pack(">i", 0) + struct.pack(">i", -2),
    "unknown ACL id": EMPTY_HEAD + node_bytes("", b"", ref=3),
    "child before root": EMPTY_HEAD + node_bytes("/a", b""),
    "child before parent": EMPTY_HEAD + ROOT + node_bytes("/a/b", b""),
    "relative path": EMPTY_HEAD + ROOT + node_bytes("a", b""),
    "path twice": EMPTY_HEAD + ROOT + node_bytes("/a", b"") + node_bytes("/a", b"x"),
    "root twice": EMPTY_HEAD + ROOT + node_bytes("/a", b"") + ROOT,
    "no root": EMPTY_HEAD + END,
    "wrong signature": EMPTY_HEAD + ROOT + END + struct.pack(">i", 10) + b"BenWasHerf",
    "null signature": EMPTY_HEAD + ROOT + END + struct.pack(">i", -1),
    "huge signature": EMPTY_HEAD + ROOT + END + struct.pack(">i", 0x40000000),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_stream_is_refused_at_once(name):
    raw = MALFORMED[name]
    assert EMPTY_HEAD + ROOT + END + SIG == stream_of(root_tree())  # the well-formed base
    reader = SnapReader()
    with pytest.raises(SnapStreamError, match=r"SNAP stream, byte \d+"):
        reader.feed(raw)  # no more bytes needed to tell, whatever the announced length
    with pytest.raises(SnapStreamError):  # and it stays broken
        reader.feed(b"\x00" * 64)


@pytest.mark.parametrize("name", ["huge data", "child before parent", "wrong signature"])
def test_malformed_stream_fed_byte_by_byte_is_refused(name):
    reader = SnapReader()
    with pytest.raises(SnapStreamError):
        for i in range(len(MALFORMED[name])):
            reader.feed(MALFORMED[name][i:i + 1])


def test_length_bound_is_checklengths():
    at_bound = EMPTY_HEAD + struct.pack(">i", 0) + struct.pack(">i", 10)
    reader = SnapReader(length_max_bytes=10)
    reader.feed(at_bound)  # exactly the bound: accepted, waiting for the data
    assert not reader.done
    with pytest.raises(SnapStreamError, match="Unreasonable|length 11"):
        SnapReader(length_max_bytes=10).feed(EMPTY_HEAD + struct.pack(">i", 11))
    assert LENGTH_MAX_BYTES == 0xFFFFF * 2  # jute.maxbuffer + its default extrasize


@pytest.mark.parametrize("tail", [b"", b"tail"])
def test_stream_without_signature_ends_at_the_mark(tail):
    tree = sample_tree()
    raw = b"".join(snapshot_chunks(tree)) + tail
    reader = SnapReader(signature=False)
    reader.feed(raw)
    assert reader.done and reader.result().rest == tail
    assert_same_tree(tree, reader.result().tree)


def test_children_out_of_step_never_end_a_stream():
    tree = sample_tree()
    tree.nodes = dict(reversed(list(tree.nodes.items())))
    tree.nodes["/app"].children = None  # a bug elsewhere: /app's children unreachable
    chunks = []
    with pytest.raises(AssertionError, match="walked"):
        chunks.extend(snap_stream_chunks(tree, chunk_bytes=64))
    reader = SnapReader()
    reader.feed(b"".join(chunks))
    assert not reader.done
