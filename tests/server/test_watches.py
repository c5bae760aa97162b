"""WatchManager: one-shot, persistent and recursive watches, dedup and READ filtering."""

from zkcompat.jute.constants import EventType, WatcherType
from zkcompat.server.watches import WatchManager
from zkcompat.tree.acl import OPEN_ACL_UNSAFE

CREATED, DELETED, CHANGED, CHILDREN = (EventType.NODE_CREATED, EventType.NODE_DELETED,
                                      EventType.NODE_DATA_CHANGED, EventType.NODE_CHILDREN_CHANGED)


class W:
    def __init__(self, auth=(("ip", "127.0.0.1"),)):
        self.auth_ids = list(auth)
        self.watched_paths = {}
        self.got = []

    def notify(self, etype, path, zxid):
        self.got.append((etype, path))


def fire(wm, *events):
    wm.trigger([(t, p, OPEN_ACL_UNSAFE) for t, p in events], 1)


def test_one_shot_fires_once_and_index_shrinks():
    wm, w = WatchManager(), W()
    wm.add_data_watch("/a", w)
    fire(wm, (CHANGED, "/a"))
    fire(wm, (CHANGED, "/a"))
    assert w.got == [(CHANGED, "/a")]
    assert w.watched_paths == {} and wm.count() == 0


def test_delete_reaches_data_and_child_watchers_once():
    wm, w, v = WatchManager(), W(), W()
    wm.add_data_watch("/a", w)
    wm.add_child_watch("/a", w)
    wm.add_child_watch("/a", v)
    fire(wm, (DELETED, "/a"))
    assert w.got == [(DELETED, "/a")] and v.got == [(DELETED, "/a")]


def test_persistent_and_recursive():
    wm, p, rec = WatchManager(), W(), W()
    wm.add_persistent("/a", p, recursive=False)
    wm.add_persistent("/a", rec, recursive=True)
    fire(wm, (CREATED, "/a/b"), (CHILDREN, "/a"), (CHANGED, "/a"), (CHANGED, "/a/b/c"))
    fire(wm, (CHANGED, "/a"))
    assert p.got == [(CHILDREN, "/a"), (CHANGED, "/a"), (CHANGED, "/a")]
    # Recursive: every descendant, never NodeChildrenChanged.
    assert rec.got == [(CREATED, "/a/b"), (CHANGED, "/a"), (CHANGED, "/a/b/c"), (CHANGED, "/a")]


def test_remove_and_check_by_type():
    wm, w = WatchManager(), W()
    wm.add_data_watch("/a", w)
    wm.add_persistent("/a", w, recursive=True)
    assert wm.contains("/a", w, WatcherType.DATA)
    assert not wm.contains("/a", w, WatcherType.CHILDREN)
    assert wm.remove("/a", w, WatcherType.DATA)
    assert not wm.remove("/a", w, WatcherType.DATA)
    assert wm.contains("/a", w, WatcherType.PERSISTENT_RECURSIVE)
    assert wm.remove("/a", w, WatcherType.ANY)
    assert wm.count() == 0 and w.watched_paths == {}
    fire(wm, (CHANGED, "/a/x"))
    assert w.got == []


def test_notification_needs_read_permission():
    wm, anon = WatchManager(), W()
    wm.add_data_watch("/s", anon)
    wm.trigger([(CHANGED, "/s", ((31, "digest", "bob:x"),))], 1)
    assert anon.got == []


def test_connection_gone_drops_everything():
    wm, w = WatchManager(), W()
    wm.add_data_watch("/a", w)
    wm.add_child_watch("/b", w)
    wm.add_persistent("/", w, recursive=True)
    wm.remove_watcher(w)
    assert wm.count() == 0
    fire(wm, (CHANGED, "/a"))
    assert w.got == []


def test_children_wire_cache_follows_every_change():
    from zkcompat.jute import records as r
    from zkcompat.jute.constants import OpCode
    from zkcompat.server.reads import _children_wire
    from zkcompat.tree.datatree import DataTree
    from zkcompat.tree.txn import Txn

    world = [r.ACL(31, r.Id("world", "anyone"))]
    tree = DataTree()

    def apply(zxid, op, body):
        tree.apply(Txn(r.TxnHeader(1, 1, zxid, zxid, op), body))

    def names():
        wire = _children_wire("/p", tree.nodes["/p"])
        return sorted(r.GetChildrenResponse.from_bytes(wire).children)

    apply(1, OpCode.CREATE, r.CreateTxn("/p", b"", world, False, -1))
    assert names() == []
    apply(2, OpCode.CREATE, r.CreateTxn("/p/a", b"", world, False, -1))
    assert names() == ["a"]
    # One multi: a create and a delete under the same zxid keep the count the same.
    apply(3, OpCode.MULTI, [(OpCode.CREATE, r.CreateTxn("/p/b", b"", world, False, -1)),
                           (OpCode.DELETE, r.DeleteTxn("/p/a"))])
    assert names() == ["b"]
    apply(4, OpCode.DELETE, r.DeleteTxn("/p/b"))
    apply(5, OpCode.DELETE, r.DeleteTxn("/p"))
    apply(6, OpCode.CREATE, r.CreateTxn("/p", b"", world, False, -1))
    assert names() == []
