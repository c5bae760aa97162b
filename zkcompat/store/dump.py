"""Human-readable views of the txn log and of snapshots, after ZooKeeper's TxnLogToolkit
(one line per txn) and SnapshotFormatter (one block per znode, then the sessions).

Pure formatting: the callers open the stores; these functions take decoded things and
yield lines, so the same format serves zkcompat's LevelDB and ZooKeeper's own files.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime

from zkcompat.jute import records as r
from zkcompat.jute.constants import Code, OpCode
from zkcompat.tree.datatree import DataTree, ZNode
from zkcompat.tree.txn import Txn

DATA_SHOWN_BYTES = 64  # longer data is cut, with the number of bytes left out

# Request.op2String
OP_NAMES = {
    OpCode.CREATE: "create",
    OpCode.CREATE2: "create2",
    OpCode.CREATE_CONTAINER: "createContainer",
    OpCode.CREATE_TTL: "createTTL",
    OpCode.DELETE: "delete",
    OpCode.DELETE_CONTAINER: "deleteContainer",
    OpCode.SET_DATA: "setData",
    OpCode.SET_ACL: "setACL",
    OpCode.CHECK: "check",
    OpCode.MULTI: "multi",
    OpCode.RECONFIG: "reconfig",
    OpCode.CREATE_SESSION: "createSession",
    OpCode.CLOSE_SESSION: "closeSession",
    OpCode.ERROR: "error",
}


def printable(text: str) -> str:
    """text as UTF-8 can print it: a lone surrogate shown as a backslash escape
    ("\\udc80") rather than failing. No client can create one (the wire decodes an
    encoded surrogate to U+FFFD, as Java does), but zkcompat's snapshots would keep one,
    and a tool that reads a store prints whatever it finds."""
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def op_name(op: int) -> str:
    return OP_NAMES.get(op, f"unknown({op})")


def format_time(ms: int) -> str:
    """Epoch milliseconds as UTC ISO 8601 (a txn's time, a znode's ctime/mtime)."""
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds") \
            .replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return f"{ms}ms"


def format_data(data: bytes | None) -> str:
    """Text if it is printable UTF-8, else 0x-hex; null and empty stay distinct."""
    if data is None:
        return "null"
    shown = data[:DATA_SHOWN_BYTES]
    try:
        text = shown.decode("utf-8")
        out = repr(text) if text.isprintable() else "0x" + shown.hex()
    except UnicodeDecodeError:
        out = "0x" + shown.hex()
    if len(data) > DATA_SHOWN_BYTES:
        out += f"...(+{len(data) - DATA_SHOWN_BYTES} bytes)"
    return out


def format_acl(acl) -> str:
    """[perms,scheme:id ...] for jute ACL records or (perms, scheme, id) tuples."""
    if acl is None:
        return "null"
    parts = []
    for a in acl:
        if isinstance(a, r.ACL):
            parts.append(f"{a.perms},{a.id.scheme}:{a.id.id}")
        else:
            perms, scheme, ident = a
            parts.append(f"{perms},{scheme}:{ident}")
    return "[" + " ".join(parts) + "]"


def _code_name(err: int) -> str:
    try:
        return Code(err).name
    except ValueError:
        return str(err)


def format_record(op: int, body) -> str:
    """The details column: TxnLogToolkit.getFormattedTxnStr's fields, comma separated."""
    if body is None:
        return ""
    if op in (OpCode.CREATE, OpCode.CREATE2):
        return (f"{body.path},{format_data(body.data)},{format_acl(body.acl)},"
                f"{'ephemeral' if body.ephemeral else 'persistent'},"
                f"parentCVersion={body.parentCVersion}")
    if op == OpCode.CREATE_CONTAINER:
        return (f"{body.path},{format_data(body.data)},{format_acl(body.acl)},"
                f"parentCVersion={body.parentCVersion}")
    if op == OpCode.CREATE_TTL:
        return (f"{body.path},{format_data(body.data)},{format_acl(body.acl)},"
                f"parentCVersion={body.parentCVersion},ttl={body.ttl}")
    if op in (OpCode.DELETE, OpCode.DELETE_CONTAINER):
        return body.path
    if op in (OpCode.SET_DATA, OpCode.RECONFIG):
        return f"{body.path},{format_data(body.data)},version={body.version}"
    if op == OpCode.SET_ACL:
        return f"{body.path},{format_acl(body.acl)},version={body.version}"
    if op == OpCode.CHECK:
        return f"{body.path},version={body.version}"
    if op == OpCode.CREATE_SESSION:
        return f"timeout={body.timeOut}"
    if op == OpCode.CLOSE_SESSION:
        paths = body.paths2Delete
        return "ephemerals=" + ("null" if paths is None else "[" + " ".join(paths) + "]")
    if op == OpCode.ERROR:
        return _code_name(body.err)
    if op == OpCode.MULTI:
        return ";".join(f"{op_name(t)}:{format_record(t, sub)}" for t, sub in body)
    return repr(body)


def format_txn(txn: Txn) -> str:
    """One TxnLogToolkit line: time, session, cxid, zxid, type, details."""
    h = txn.hdr
    return printable(f"{format_time(h.time)} session 0x{h.clientId & 0xFFFFFFFFFFFFFFFF:x} "
                     f"cxid 0x{h.cxid & 0xFFFFFFFF:x} zxid 0x{h.zxid:x} {op_name(h.type)} "
                     f"{format_record(h.type, txn.body)}").rstrip()


# -- snapshots ----------------------------------------------------------------------------


def _walk(tree: DataTree) -> Iterator[tuple[str, ZNode]]:
    """Depth first from "/", children in name order (parents before their children)."""
    stack = ["/"]
    nodes = tree.nodes
    while stack:
        path = stack.pop()
        node = nodes.get(path)
        if node is None:
            continue
        yield path, node
        if node.children:
            base = "" if path == "/" else path
            stack.extend(f"{base}/{c}" for c in sorted(node.children, reverse=True))


def format_znode(path: str, node: ZNode, with_data: bool = False) -> list[str]:
    """SnapshotFormatter.printZnode: the Stat a client sees (cversion counts changes, as
    `stat` in zkCli shows it), but ephemeralOwner as stored (containers and TTL nodes keep
    their marker there)."""
    st = node.stat()
    lines = [
        "----",
        printable(path),
        f"  cZxid = 0x{st.czxid:x}",
        f"  ctime = {format_time(st.ctime)}",
        f"  mZxid = 0x{st.mzxid:x}",
        f"  mtime = {format_time(st.mtime)}",
        f"  pZxid = 0x{st.pzxid:x}",
        f"  cversion = {st.cversion}",
        f"  dataVersion = {st.version}",
        f"  aclVersion = {st.aversion}",
        f"  ephemeralOwner = 0x{node.ephemeralOwner & 0xFFFFFFFFFFFFFFFF:x}",
        f"  dataLength = {st.dataLength}",
        f"  numChildren = {st.numChildren}",
        printable(f"  acl = {format_acl(node.acl)}"),
    ]
    if with_data:
        data = node.data
        lines.append("  data = " + ("null" if data is None else base64.b64encode(data).decode()))
    return lines


def format_snapshot(tree: DataTree, title: str, with_data: bool = False) -> Iterable[str]:
    yield title
    for path, node in _walk(tree):
        yield from format_znode(path, node, with_data)
    yield "----"
    yield "Session Details (sid, timeout, ephemeralCount):"
    for sid, timeout in sorted(tree.sessions.items()):
        count = len(tree.ephemerals.get(sid, ()))
        yield f"0x{sid & 0xFFFFFFFFFFFFFFFF:016x}, {timeout}, {count}"
    yield "----"
    yield f"nodes: {len(tree.nodes)}, sessions: {len(tree.sessions)}"
    yield f"Snapshot zxid: 0x{tree.last_processed_zxid:x} (log replay continues after it)"
