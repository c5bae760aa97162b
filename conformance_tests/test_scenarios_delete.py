"""Differential scenarios: delete with versions, and its errors."""

from .harness import scenario


@scenario
def delete_with_versions(env):
    """-1 deletes any version; a matching version deletes; a stale one is BadVersion."""
    zk = env.client()
    zk.create(env.base + "/a", b"")
    zk.create(env.base + "/b", b"")
    zk.create(env.base + "/c", b"")
    env.call("set b", zk.set, env.base + "/b", b"1")
    env.call("set b again", zk.set, env.base + "/b", b"2")
    env.call("delete a version -1", zk.delete, env.base + "/a", version=-1)
    env.call("delete b stale version 1", zk.delete, env.base + "/b", version=1)
    env.call("delete b future version 3", zk.delete, env.base + "/b", version=3)
    env.call("b still there", zk.exists, env.base + "/b")
    env.call("delete b version 2", zk.delete, env.base + "/b", version=2)
    env.call("delete c version 0", zk.delete, env.base + "/c", version=0)
    env.call("parent", zk.exists, env.base)


@scenario
def delete_not_empty(env):
    """A node with children is NotEmpty; after the children go, it deletes."""
    zk = env.client()
    zk.create(env.base + "/p/c1", b"", makepath=True)
    zk.create(env.base + "/p/c2", b"")
    env.call("delete p", zk.delete, env.base + "/p")
    env.call("delete p wrong version", zk.delete, env.base + "/p", version=5)
    env.call("delete c1", zk.delete, env.base + "/p/c1")
    env.call("delete p again", zk.delete, env.base + "/p")
    env.call("delete c2", zk.delete, env.base + "/p/c2")
    env.call("p after children gone", zk.exists, env.base + "/p")
    env.call("delete p finally", zk.delete, env.base + "/p")
    env.call("parent", zk.exists, env.base)


@scenario
def delete_no_node(env):
    """Deleting a missing node (or one under a missing parent) is NoNode, any version."""
    zk = env.client()
    env.call("delete missing", zk.delete, env.base + "/missing")
    env.call("delete missing v3", zk.delete, env.base + "/missing", version=3)
    env.call("delete under missing", zk.delete, env.base + "/missing/child")
    zk.create(env.base + "/a", b"")
    env.call("delete a", zk.delete, env.base + "/a")
    env.call("delete a twice", zk.delete, env.base + "/a")
    env.call("parent", zk.exists, env.base)


@scenario
def delete_root_and_system_nodes(env):
    """ZooKeeper refuses to delete "/" and the /zookeeper system nodes."""
    zk = env.client()
    env.call("delete /", zk.delete, "/")
    env.call("delete / v0", zk.delete, "/", version=0)
    env.call("delete /zookeeper", zk.delete, "/zookeeper")
    env.call("delete /zookeeper/quota", zk.delete, "/zookeeper/quota")
    env.call("delete /zookeeper/config", zk.delete, "/zookeeper/config")
    env.call("/zookeeper children", zk.get_children, "/zookeeper")


@scenario
def delete_updates_parent(env):
    """Each delete bumps the parent's cversion and sets pzxid to the delete's zxid."""
    zk = env.client()
    for name in ("a", "b", "c"):
        zk.create(f"{env.base}/{name}", b"")
    env.call("parent before", zk.exists, env.base)
    env.call("delete b", zk.delete, env.base + "/b")
    env.call("parent after b", zk.exists, env.base)
    env.call("failed delete (NoNode)", zk.delete, env.base + "/b")
    env.call("parent after failed delete", zk.exists, env.base)
    env.call("create d", zk.create, env.base + "/d", b"", include_data=True)
    env.call("parent after d", zk.exists, env.base)


@scenario
def delete_and_recreate(env):
    """A recreated node starts over: version 0, new czxid, ctime of the new txn."""
    zk = env.client()
    zk.create(env.base + "/a", b"old")
    zk.set(env.base + "/a", b"older")
    env.call("before", zk.get, env.base + "/a")
    env.call("delete", zk.delete, env.base + "/a")
    env.call("recreate", zk.create, env.base + "/a", b"new", include_data=True)
    env.call("after", zk.get, env.base + "/a")
    env.call("delete with old version", zk.delete, env.base + "/a", version=1)
