"""Differential scenarios: invalid paths, and the /zookeeper system subtree.

kazoo normalises paths before sending them ("//" collapses, a trailing "/"
goes, "a" becomes "/a") and raises ValueError for "." and ".." components, so
the server's own answers are checked through RawClient (env.raw()).
"""

from .harness import ENSEMBLE_CONFIG, scenario

# Not under any base: never sent as a sequential create, which could make a
# real node at the root (a sequential "/.." is the valid "/..0000000007").
ROOT_LEVEL_PATHS = ["a", "a/b", "//", "/..", "/.", ""]
# Appended to a base that has a child "a", so a missing parent is not the
# first thing the server notices.
UNDER_BASE_PATHS = [
    "/a/",
    "/a//b",
    "//a",
    "/./a",
    "/a/.",
    "/a/..",
    "/a/./b",
    "/a/../a",
    "/a\x00b",
    "/a\x01",
    "/a\x1f",
    "/\x7f",
    "/\x9f",
    "/\ud7ff",
    "/\ue000",
    "/\ufff0",
    "/\uffff",
]


def _raw_ops(env, rc, path: str, label: str, sequential: bool) -> None:
    env.raw_call(f"{label} create", rc.create, path, b"")
    env.raw_call(f"{label} create2", rc.create2, path, b"")
    env.raw_call(f"{label} create ephemeral", rc.create, path, b"", 1)
    if sequential:
        env.raw_call(f"{label} create sequential", rc.create, path, b"", 2)
    env.raw_call(f"{label} setData", rc.set_data, path, b"x")
    env.raw_call(f"{label} delete", rc.delete, path)
    env.raw_call(f"{label} exists", rc.exists, path)
    env.raw_call(f"{label} getData", rc.get_data, path)
    env.raw_call(f"{label} getChildren", rc.get_children, path)


@scenario(timeout_s=120)
def invalid_paths_raw(env):
    """What the server answers for each kind of malformed path, per op."""
    rc = env.raw()
    env.raw_call("create a", rc.create, env.base + "/a", b"")
    for path in ROOT_LEVEL_PATHS:
        _raw_ops(env, rc, path, repr(path), sequential=False)
    for suffix in UNDER_BASE_PATHS:
        _raw_ops(env, rc, env.base + suffix, repr("<base>" + suffix), sequential=True)
    env.raw_call("connection still usable", rc.exists, env.base)
    zk = env.client()
    env.call("what got created", zk.get_children, env.base)
    env.call("what got created under a", zk.get_children, env.base + "/a")


@scenario
def invalid_paths_via_kazoo(env):
    """What kazoo does with paths it rewrites or refuses before sending."""
    zk = env.client()
    env.call("trailing slash (kazoo strips)", zk.create, env.base + "/t/", b"")
    env.call("double slash (kazoo collapses)", zk.create, env.base + "//dd", b"")
    env.call("dot component (kazoo refuses)", zk.create, env.base + "/./x", b"")
    env.call("dotdot component (kazoo refuses)", zk.get, env.base + "/../x")
    env.call("null char", zk.create, env.base + "/nul\x00", b"")
    env.call("control char", zk.create, env.base + "/ctl\x01", b"")
    env.call("children", zk.get_children, env.base)


@scenario
def null_path_raw(env):
    """A null path string (length -1) gets an error reply, not a crash."""
    rc = env.raw()
    for op in ("create", "delete", "exists", "get_data", "get_children"):
        env.raw_call(f"{op} null path", getattr(rc, op), None)
    env.raw_call("after", rc.exists, env.base)


@scenario
def empty_path_reads_root(env):
    """ZooKeeper's DataTree maps "" to the root node too: reads of "" succeed."""
    rc = env.raw()
    for op in ("exists", "get_data", "get_children", "sync"):
        env.raw_call(f"{op} ''", getattr(rc, op), "")
    env.raw_call("create ''", rc.create, "", b"")
    env.raw_call("delete ''", rc.delete, "")
    env.raw_call("setData ''", rc.set_data, "", b"x")




@scenario(standalone_only=ENSEMBLE_CONFIG)
def system_nodes_data_and_stat(env):
    """/zookeeper, /zookeeper/quota, /zookeeper/config: data, Stat, children."""
    zk = env.client()
    env.call("get /zookeeper/quota", zk.get, "/zookeeper/quota")
    env.call("get /zookeeper/config", zk.get, "/zookeeper/config")
    env.call("exists /zookeeper/config", zk.exists, "/zookeeper/config")
    env.call("children /zookeeper", zk.get_children, "/zookeeper")
    env.call("acl /zookeeper/config", zk.get_acls, "/zookeeper/config")
    env.call("acl /zookeeper/quota", zk.get_acls, "/zookeeper/quota")


@scenario(standalone_only=ENSEMBLE_CONFIG)
def system_nodes_writes(env):
    """Writes under /zookeeper: which ZooKeeper allows and which it refuses."""
    zk = env.client()
    name = env.base.rsplit("/", 1)[1]
    env.call("create /zookeeper/<x>", zk.create, "/zookeeper/" + name, b"")
    env.call("delete /zookeeper/<x>", zk.delete, "/zookeeper/" + name)
    env.call("create under config", zk.create, "/zookeeper/config/" + name, b"")
    env.call("set config", zk.set, "/zookeeper/config", b"server.1=x")
    env.call("set config version 5", zk.set, "/zookeeper/config", b"", version=5)
    env.call("delete config", zk.delete, "/zookeeper/config")
    env.call("delete quota", zk.delete, "/zookeeper/quota")
    env.call("config after", zk.get, "/zookeeper/config")
    env.call("children after", zk.get_children, "/zookeeper")


@scenario
def sync_paths(env):
    """sync answers with the path it was given, present or not."""
    zk = env.client()
    env.call("sync base", zk.sync, env.base)
    env.call("sync missing", zk.sync, env.base + "/missing")
    env.call("sync /", zk.sync, "/")
    rc = env.raw()
    env.raw_call("raw sync relative", rc.sync, "relative")
