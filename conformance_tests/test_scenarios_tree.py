"""Differential scenarios: tree shape limits (depth, long names, wide nodes, recursive ops)."""

from .harness import scenario


@scenario
def tree_deep_path(env):
    """A 60-level path made by makepath; every level's Stat; delete bottom-up."""
    zk = env.client()
    levels = [f"l{i}" for i in range(60)]
    deep = env.base + "/" + "/".join(levels)
    env.call("makepath 60 levels", zk.create, deep, b"bottom", makepath=True)
    env.call("bottom", zk.get, deep)
    env.call("level 1", zk.exists, env.base + "/l0")
    env.call("level 30", zk.exists, env.base + "/" + "/".join(levels[:30]))
    env.call("delete top (not empty)", zk.delete, env.base + "/l0")
    env.call("recursive delete", zk.delete, env.base + "/l0", recursive=True)
    env.call("gone", zk.exists, env.base + "/l0")
    env.call("parent", zk.exists, env.base)


@scenario
def tree_long_names(env):
    """Node names of 255, 1000 and 50000 characters."""
    zk = env.client()
    for n in (255, 1000, 50_000):
        name = "n" * n
        env.call(f"create {n}-char name", zk.create, f"{env.base}/{name}", str(n).encode())
        env.call(f"get {n}-char name", zk.get, f"{env.base}/{name}")
    env.call("children lengths", lambda: sorted(len(c) for c in zk.get_children(env.base)))


@scenario(timeout_s=120)
def tree_wide_node(env):
    """800 children made by one multi; listed, counted, then deleted by another multi."""
    zk = env.client()
    t = zk.transaction()
    for i in range(800):
        t.create(f"{env.base}/child-with-a-longish-name-{i:04d}", b"")
    env.call("multi of 800 creates: result count", lambda: len(t.commit()))
    env.call("parent", zk.exists, env.base)
    env.call("children", zk.get_children, env.base)
    t = zk.transaction()
    for i in range(0, 800, 2):
        t.delete(f"{env.base}/child-with-a-longish-name-{i:04d}")
    env.call("multi of 400 deletes: all True", lambda: set(t.commit()))
    env.call("parent after", zk.exists, env.base)
    env.call("count after", lambda: len(zk.get_children(env.base)))


@scenario
def tree_recursive_delete_and_ensure_path(env):
    """kazoo's client-side recursive delete and ensure_path against the server."""
    zk = env.client()
    for p in ("a/b/c", "a/b/d", "a/e", "f"):
        zk.create(f"{env.base}/{p}", p.encode(), makepath=True)
    env.call("children a", zk.get_children, env.base + "/a")
    env.call("delete a recursively", zk.delete, env.base + "/a", recursive=True)
    env.call("a gone", zk.exists, env.base + "/a")
    env.call("f kept", zk.get, env.base + "/f")
    env.call("ensure_path new", zk.ensure_path, env.base + "/x/y/z")
    env.call("ensure_path existing", zk.ensure_path, env.base + "/x/y")
    env.call("x/y", zk.exists, env.base + "/x/y")
    env.call("parent", zk.exists, env.base)


@scenario
def tree_children_names_sorting_bytes(env):
    """Names differing in case, digits and non-ASCII all come back (sorted by us)."""
    zk = env.client()
    names = ["B", "a", "A", "b", "10", "9", "ä", "z", "Z", "_", "~", "é"]
    for name in names:
        zk.create(f"{env.base}/{name}", b"")
    env.call("children", zk.get_children, env.base)
    env.call("parent", zk.exists, env.base)
