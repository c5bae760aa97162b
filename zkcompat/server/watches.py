"""Watches: who is told about a change, as ZooKeeper's WatchManager decides it.

Two tables, data (getData/exists/addWatch) and child (getChildren/addWatch PERSISTENT),
map a path to {watcher: modes}. A STANDARD watch is one-shot; PERSISTENT stays; a
PERSISTENT_RECURSIVE watch (data table only) also fires for every descendant, but never
with NodeChildrenChanged. A watcher is a connection: its watches go when it goes.
Triggering costs O(watchers of the path and, only while recursive watches exist, of
its ancestors), never O(all watches).
"""

from zkcompat.jute.constants import EventType, WatcherType
from zkcompat.tree.acl import PERM_READ, check_acl
from zkcompat.tree.errors import KeeperError

# Read for every event fired: module globals, as enum lookups are slow (docs/measurements.md)
_NODE_CHILDREN_CHANGED, _NODE_DELETED = EventType.NODE_CHILDREN_CHANGED, EventType.NODE_DELETED

STANDARD = 1
PERSISTENT = 2
PERSISTENT_RECURSIVE = 4


def _ref(watcher, path: str) -> None:
    wp = watcher.watched_paths
    wp[path] = wp.get(path, 0) + 1


def _unref(watcher, path: str) -> None:
    # watched_paths counts, per path, the tables holding a watch of this watcher, so a
    # long-lived connection's index shrinks as its one-shot watches fire.
    wp = watcher.watched_paths
    n = wp.get(path, 0) - 1
    if n > 0:
        wp[path] = n
    else:
        wp.pop(path, None)


def _ancestors(path: str):
    while path != "/":
        i = path.rfind("/")
        path = "/" if i == 0 else path[:i]
        yield path


class _Table:
    __slots__ = ("by_path", "recursive_count")

    def __init__(self):
        self.by_path: dict[str, dict] = {}
        self.recursive_count = 0

    def add(self, path: str, watcher, mode: int) -> None:
        modes = self.by_path.setdefault(path, {})
        old = modes.get(watcher, 0)
        if not old:
            _ref(watcher, path)
        if mode == PERSISTENT_RECURSIVE and not old & PERSISTENT_RECURSIVE:
            self.recursive_count += 1
        modes[watcher] = old | mode

    def contains(self, path: str, watcher, mode: int | None) -> bool:
        got = self.by_path.get(path, {}).get(watcher, 0)
        return bool(got) if mode is None else bool(got & mode)

    def remove(self, path: str, watcher, mode: int | None) -> bool:
        """Remove `mode` (None: every mode) of watcher on path; True if anything went."""
        modes = self.by_path.get(path)
        if modes is None or watcher not in modes:
            return False
        old = modes[watcher]
        new = 0 if mode is None else old & ~mode
        if new == old:
            return False
        if old & PERSISTENT_RECURSIVE and not new & PERSISTENT_RECURSIVE:
            self.recursive_count -= 1
        if new:
            modes[watcher] = new
        else:
            del modes[watcher]
            _unref(watcher, path)
            if not modes:
                del self.by_path[path]
        return True

    def collect(self, path: str, hit: dict, suppress) -> None:
        """Add to `hit` the watchers an event on `path` reaches; spend one-shot watches."""
        modes = self.by_path.get(path)
        if modes:
            spent = []
            for watcher, m in modes.items():
                if suppress is None or watcher not in suppress:
                    hit[watcher] = None
                if m & STANDARD:
                    spent.append(watcher)
            for watcher in spent:
                m = modes[watcher] & ~STANDARD
                if m:
                    modes[watcher] = m
                else:
                    del modes[watcher]
                    _unref(watcher, path)
            if not modes:
                del self.by_path[path]
        if self.recursive_count:
            for parent in _ancestors(path):
                pmodes = self.by_path.get(parent)
                if pmodes:
                    for watcher, m in pmodes.items():
                        if m & PERSISTENT_RECURSIVE and (suppress is None or watcher not in suppress):
                            hit[watcher] = None


class WatchManager:
    def __init__(self):
        self.data = _Table()
        self.child = _Table()

    # -- registration ---------------------------------------------------------------

    def add_data_watch(self, path: str, watcher) -> None:
        self.data.add(path, watcher, STANDARD)

    def add_child_watch(self, path: str, watcher) -> None:
        self.child.add(path, watcher, STANDARD)

    def add_persistent(self, path: str, watcher, recursive: bool) -> None:
        """addWatch: PERSISTENT watches data and children; RECURSIVE only data, deeply."""
        if recursive:
            self.data.add(path, watcher, PERSISTENT_RECURSIVE)
        else:
            self.data.add(path, watcher, PERSISTENT)
            self.child.add(path, watcher, PERSISTENT)

    def contains(self, path: str, watcher, wtype: int) -> bool:
        """checkWatches (DataTree.containsWatcher)."""
        if wtype == WatcherType.CHILDREN:
            return self.child.contains(path, watcher, STANDARD)
        if wtype == WatcherType.DATA:
            return self.data.contains(path, watcher, STANDARD)
        if wtype == WatcherType.PERSISTENT:
            return self.data.contains(path, watcher, PERSISTENT)
        if wtype == WatcherType.PERSISTENT_RECURSIVE:
            return self.data.contains(path, watcher, PERSISTENT_RECURSIVE)
        return self.child.contains(path, watcher, None) or self.data.contains(path, watcher, None)

    def remove(self, path: str, watcher, wtype: int) -> bool:
        """removeWatches (DataTree.removeWatch); False means NOWATCHER."""
        if wtype == WatcherType.CHILDREN:
            return self.child.remove(path, watcher, STANDARD)
        if wtype == WatcherType.DATA:
            return self.data.remove(path, watcher, STANDARD)
        if wtype == WatcherType.PERSISTENT:
            a = self.child.remove(path, watcher, PERSISTENT)
            b = self.data.remove(path, watcher, PERSISTENT)
            return a or b
        if wtype == WatcherType.PERSISTENT_RECURSIVE:
            return self.data.remove(path, watcher, PERSISTENT_RECURSIVE)
        a = self.child.remove(path, watcher, None)
        b = self.data.remove(path, watcher, None)
        return a or b

    def remove_watcher(self, watcher) -> None:
        """Drop every watch of a connection that went away."""
        for path in list(watcher.watched_paths):
            self.data.remove(path, watcher, None)
            self.child.remove(path, watcher, None)
        watcher.watched_paths.clear()

    # -- numbers for 4lw and metrics ------------------------------------------------

    def count(self) -> int:
        return sum(len(m) for m in self.data.by_path.values()) + sum(
            len(m) for m in self.child.by_path.values()
        )

    def paths(self) -> set[str]:
        return set(self.data.by_path) | set(self.child.by_path)

    def watchers(self) -> set:
        out = set()
        for table in (self.data, self.child):
            for modes in table.by_path.values():
                out.update(modes)
        return out

    # -- triggering -----------------------------------------------------------------

    @property
    def active(self) -> bool:
        """Whether any watch is set at all: with none, a change needs no lookups."""
        return bool(self.data.by_path or self.child.by_path)

    def trigger(self, events, zxid: int) -> None:
        """Fire the watches hit by `events` (type, path, acl), in event order.

        Each watcher hears an event once; it hears it only if the node's ACL grants it
        READ (3.9 filters notifications by permission).
        """
        for etype, path, acl in events:
            hit: dict = {}
            if etype == _NODE_CHILDREN_CHANGED:
                self.child.collect(path, hit, None)
            elif etype == _NODE_DELETED:
                self.data.collect(path, hit, None)
                self.child.collect(path, hit, hit.copy() if hit else None)
            else:
                self.data.collect(path, hit, None)
            for watcher in hit:
                if acl:
                    try:
                        check_acl(acl, PERM_READ, watcher.auth_ids)
                    except KeeperError:
                        continue
                watcher.notify(etype, path, zxid)
