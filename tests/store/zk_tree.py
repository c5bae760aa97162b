"""Read a whole znode tree through kazoo (data, every Stat field, ACL, children), to compare
two servers node by node. Reads as the super user, so restrictive ACLs hide nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kazoo.client import KazooClient

from zkcompat.tree.acl import digest_id

SUPER_PASSWORD = "super:imported"
SUPER_DIGEST = digest_id(SUPER_PASSWORD)  # "super:<base64 sha1>" for zoo.cfg
SUPER_CFG = {"DigestAuthenticationProvider.superDigest": SUPER_DIGEST}
REPO_ROOT = Path(__file__).resolve().parents[2]
TOOL_TIMEOUT_S = 120


def run_tool(*args: str, timeout_s: float = TOOL_TIMEOUT_S) -> subprocess.CompletedProcess:
    """`zkcompat <args>`, as `python -m zkcompat` (the checkout need not be installed)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", ""))
                                        if p)
    return subprocess.run([sys.executable, "-m", "zkcompat", *args], cwd=REPO_ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout_s,
                          stdin=subprocess.DEVNULL)


def super_client(connect_string: str, timeout_s: float = 10.0) -> KazooClient:
    client = KazooClient(hosts=connect_string, timeout=timeout_s)
    client.start(timeout=timeout_s)
    client.add_auth("digest", SUPER_PASSWORD)
    return client


def read_tree(client: KazooClient, root: str = "/") -> dict[str, tuple]:
    """path -> (data, Stat as a tuple of its 11 fields, ACL as (perms, scheme, id) tuples,
    sorted children), for every node under root, with pipelined reads."""
    out: dict[str, tuple] = {}
    level = [root]
    while level:
        gets = [(p, client.get_async(p), client.get_acls_async(p), client.get_children_async(p))
                for p in level]
        level = []
        for path, get, acls, children in gets:
            data, stat = get.get(timeout=30)
            acl, _ = acls.get(timeout=30)
            kids = sorted(children.get(timeout=30))
            out[path] = (data, tuple(stat), tuple((a.perms, a.id.scheme, a.id.id) for a in acl),
                         tuple(kids))
            base = "" if path == "/" else path
            level.extend(f"{base}/{k}" for k in kids)
    return out


STAT_FIELDS = ("czxid", "mzxid", "ctime", "mtime", "version", "cversion", "aversion",
               "ephemeralOwner", "dataLength", "numChildren", "pzxid")


def diff_trees(expected: dict[str, tuple], actual: dict[str, tuple],
               names=("zookeeper", "zkcompat")) -> list[str]:
    """Every difference, one line each (empty when identical)."""
    lines = []
    for path in sorted(set(expected) | set(actual)):
        e, a = expected.get(path), actual.get(path)
        if e is None or a is None:
            lines.append(f"{path}: only on {names[0] if a is None else names[1]}")
            continue
        if e[0] != a[0]:
            lines.append(f"{path}: data {e[0][:40]!r} vs {a[0][:40]!r}")
        for field, x, y in zip(STAT_FIELDS, e[1], a[1], strict=True):
            if x != y:
                lines.append(f"{path}: {field} {x:#x} vs {y:#x}" if "zxid" in field.lower()
                             or field == "ephemeralOwner" else f"{path}: {field} {x} vs {y}")
        if e[2] != a[2]:
            lines.append(f"{path}: acl {e[2]} vs {a[2]}")
        if e[3] != a[3]:
            lines.append(f"{path}: children {e[3]} vs {a[3]}")
    return lines
