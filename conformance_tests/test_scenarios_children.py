"""Differential scenarios: getChildren/getChildren2 and child bookkeeping."""

from .harness import ENSEMBLE_CONFIG, scenario


@scenario
def get_children_and_children2(env):
    """getChildren lists names; getChildren2 adds the parent's Stat."""
    zk = env.client()
    for name in ("b", "a", "c"):
        zk.create(f"{env.base}/{name}", name.encode())
    env.call("getChildren", zk.get_children, env.base)
    env.call("getChildren2", zk.get_children, env.base, include_data=True)
    env.call("getChildren2 of a leaf", zk.get_children, env.base + "/a", include_data=True)
    env.call("getChildren of a leaf", zk.get_children, env.base + "/a")
    env.call("getChildren missing", zk.get_children, env.base + "/missing")
    env.call("getChildren2 missing", zk.get_children, env.base + "/missing", include_data=True)


@scenario
def children_bookkeeping_many_ops(env):
    """cversion, pzxid and numChildren after a mix of creates, deletes and sets."""
    zk = env.client()
    for i in range(20):
        zk.create(f"{env.base}/n{i:02d}", b"")
    env.call("after 20 creates", zk.exists, env.base)
    for i in range(0, 20, 3):
        zk.delete(f"{env.base}/n{i:02d}")
    env.call("after 7 deletes", zk.exists, env.base)
    env.call("set child", zk.set, env.base + "/n01", b"data")
    env.call("parent after child setData", zk.exists, env.base)
    env.call("set parent", zk.set, env.base, b"parent data")
    env.call("parent after own setData", zk.exists, env.base)
    env.call("grandchild", zk.create, env.base + "/n01/g", b"")
    env.call("parent after grandchild", zk.exists, env.base)
    env.call("child after grandchild", zk.exists, env.base + "/n01")
    env.call("children", zk.get_children, env.base, include_data=True)


@scenario(standalone_only=ENSEMBLE_CONFIG)
def children_of_system_nodes(env):
    zk = env.client()
    env.call("/zookeeper", zk.get_children, "/zookeeper")
    env.call("/zookeeper with stat", zk.get_children, "/zookeeper", include_data=True)
    env.call("/zookeeper/quota", zk.get_children, "/zookeeper/quota")
    env.call("/zookeeper/config", zk.get_children, "/zookeeper/config", include_data=True)


@scenario
def children_after_ephemeral_and_sequential(env):
    """Ephemeral and sequential children are ordinary entries in the list."""
    a = env.client()
    b = env.client()
    a.create(env.base + "/plain", b"")
    a.create(env.base + "/eph", b"", ephemeral=True)
    a.create(env.base + "/seq-", b"", sequence=True)
    b.create(env.base + "/beph-", b"", ephemeral=True, sequence=True)
    env.call("children from a", a.get_children, env.base, include_data=True)
    env.call("children from b", b.get_children, env.base)
    b.stop()
    b.close()
    env.call("children after b closed", a.get_children, env.base, include_data=True)
