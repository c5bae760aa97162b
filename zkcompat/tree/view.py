"""TreeView: the tree exactly as it was at one zxid, readable over many loop turns while
apply goes on, so a SNAP can stream without stalling the server or going fuzzy.

Before apply changes a node that existed when the view was taken, it hands the view the
node's state first (DataTree.apply calls `before` of each open view). A node the view
has no saved state for is unchanged since then, and a node created since (czxid after the
view's zxid) was not there. Memory: one copy per node changed while the view is open.
ZooKeeper's LearnerHandler serialises the live tree instead (a fuzzy snapshot whose
txns the learner replays); an exact one keeps the learner's digest checks meaningful
from its first txn.
"""

from __future__ import annotations

from zkcompat.jute.constants import OpCode
from zkcompat.tree import quota
from zkcompat.tree.datatree import DataTree, ZNode
from zkcompat.tree.paths import split_parent

_CREATES = frozenset((OpCode.CREATE, OpCode.CREATE2, OpCode.CREATE_CONTAINER,
                      OpCode.CREATE_TTL))
_DELETES = frozenset((OpCode.DELETE, OpCode.DELETE_CONTAINER))
_ONE_NODE = frozenset((OpCode.SET_DATA, OpCode.RECONFIG, OpCode.SET_ACL))
_SLOTS = tuple(s for s in ZNode.__slots__ if s != "children")


class TreeView:
    """Open with TreeView(tree); read `zxid`, `paths` (every node's, parents first, as the
    tree's dict keeps them), `sessions` and node(path); close() when done."""

    __slots__ = ("tree", "zxid", "paths", "sessions", "_saved")

    def __init__(self, tree: DataTree):
        self.tree = tree
        self.zxid = tree.last_processed_zxid
        self.paths = list(tree.nodes)
        self.sessions = dict(tree.sessions)
        self._saved: dict[str, ZNode] = {}
        tree.views.append(self)

    def close(self) -> None:
        if self in self.tree.views:
            self.tree.views.remove(self)

    def node(self, path: str) -> ZNode:
        """The node at `path` as it was at the view's zxid (the path is one of `paths`)."""
        node = self._saved.get(path)
        if node is None:
            node = self.tree.nodes.get(path)
            assert node is not None and node.czxid <= self.zxid, \
                f"{path} changed under an open view without being saved"
        return node

    @property
    def saved_count(self) -> int:
        return len(self._saved)

    def before(self, txn_type: int, body, client_id: int) -> None:
        """The txn about to apply: keep the state of every node it may change."""
        nodes = self.tree.nodes
        saved = self._saved
        for path in _touched(self.tree, txn_type, body, client_id):
            if path in saved:
                continue
            node = nodes.get(path)
            if node is not None and node.czxid <= self.zxid:
                saved[path] = _copy(node)


def _copy(node: ZNode) -> ZNode:
    copy = ZNode.__new__(ZNode)
    for slot in _SLOTS:
        setattr(copy, slot, getattr(node, slot))
    copy.children = set(node.children) if node.children else None
    return copy


def _touched(tree: DataTree, txn_type: int, body, client_id: int) -> list[str]:
    """Every node apply may change for this txn: the node, its parent for creates and
    deletes, the stats node of a quota above a node whose size or count changes."""
    if txn_type in _ONE_NODE:
        paths = [body.path]
    elif txn_type in _CREATES or txn_type in _DELETES:
        paths = [body.path, split_parent(body.path)[0]]
    elif txn_type == OpCode.CLOSE_SESSION:
        listed = body.paths2Delete if body is not None and body.paths2Delete else ()
        gone = [*listed, *tree.ephemerals.get(client_id, ())]  # killSession deletes both
        paths = [p for path in gone for p in (path, split_parent(path)[0])]
    elif txn_type == OpCode.MULTI:
        return [p for sub_type, sub in body for p in _touched(tree, sub_type, sub, client_id)]
    else:
        return []  # check, error, createSession: no node changes
    if tree.quota_paths and txn_type != OpCode.SET_ACL:
        for path in paths[:]:
            prefix = quota.max_prefix_with_quota(tree.quota_paths, path)
            if prefix is not None:
                paths.append(quota.stats_path(prefix))
    return paths
