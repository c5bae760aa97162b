"""Watches: who is told about a change. One-shot data, exists and child watches.

A watcher is a connection (as ZooKeeper's ServerCnxn is its own Watcher): its watches
go when it goes, and the client re-registers them with SetWatches on reconnect.
Triggering costs O(watchers of the changed path), never O(all watches).
"""

from zkcompat.jute.constants import EventType


class WatchManager:
    def __init__(self):
        self.data_watches: dict[str, set] = {}  # getData / exists watches, by path
        self.child_watches: dict[str, set] = {}  # getChildren watches, by path

    def add_data_watch(self, path: str, watcher) -> None:
        self.data_watches.setdefault(path, set()).add(watcher)
        watcher.watched_paths.add(path)

    def add_child_watch(self, path: str, watcher) -> None:
        self.child_watches.setdefault(path, set()).add(watcher)
        watcher.watched_paths.add(path)

    def remove_watcher(self, watcher) -> None:
        """Drop every watch of a connection that went away."""
        for path in watcher.watched_paths:
            for table in (self.data_watches, self.child_watches):
                ws = table.get(path)
                if ws is not None:
                    ws.discard(watcher)
                    if not ws:
                        del table[path]
        watcher.watched_paths.clear()

    def count(self) -> int:
        return sum(len(ws) for ws in self.data_watches.values()) + sum(
            len(ws) for ws in self.child_watches.values()
        )

    def trigger(self, events: list[tuple[int, str]], zxid: int) -> None:
        """Fire and forget the watches hit by `events`, in event order."""
        data, child = self.data_watches, self.child_watches
        for etype, path in events:
            if etype == EventType.NODE_CHILDREN_CHANGED:
                hit = child.pop(path, None)
            elif etype == EventType.NODE_DELETED:
                # Data and child watchers of the deleted node; each connection told once.
                hit = data.pop(path, None)
                more = child.pop(path, None)
                if more:
                    hit = more if hit is None else hit | more
            else:
                hit = data.pop(path, None)
            if hit:
                for watcher in hit:
                    watcher.notify(etype, path, zxid)
                    if watcher not in data.get(path, ()) and watcher not in child.get(path, ()):
                        watcher.watched_paths.discard(path)
