"""Differential scenarios: create (persistent, create2, errors, data null vs empty)."""

from .harness import scenario


@scenario
def create_persistent_stats(env):
    """The new node's Stat, and the parent's cversion/pzxid/numChildren after."""
    zk = env.client()
    env.call("parent before", zk.exists, env.base)
    env.call("create", zk.create, env.base + "/a", b"hello")
    env.call("get new node", zk.get, env.base + "/a")
    env.call("parent after", zk.exists, env.base)
    env.call("create second", zk.create, env.base + "/b", b"")
    env.call("parent after second", zk.exists, env.base)
    env.call("children", zk.get_children, env.base)


@scenario
def create_data_none_vs_empty(env):
    """A null data buffer stays null (getData returns null), b"" stays empty."""
    zk = env.client()
    env.call("create None", zk.create, env.base + "/none", None)
    env.call("create empty", zk.create, env.base + "/empty", b"")
    env.call("create zero byte", zk.create, env.base + "/zero", b"\x00")
    env.call("get None", zk.get, env.base + "/none")
    env.call("get empty", zk.get, env.base + "/empty")
    env.call("get zero byte", zk.get, env.base + "/zero")
    env.call("set None", zk.set, env.base + "/empty", None)
    env.call("get after set None", zk.get, env.base + "/empty")
    env.call("set empty", zk.set, env.base + "/none", b"")
    env.call("get after set empty", zk.get, env.base + "/none")


@scenario
def create2_returns_stat(env):
    """create2 (include_data) returns the same Stat a later exists sees."""
    zk = env.client()
    env.call("create2", zk.create, env.base + "/a", b"abc", include_data=True)
    env.call("exists", zk.exists, env.base + "/a")
    env.call("create2 sequential", zk.create, env.base + "/s-", b"", sequence=True, include_data=True)
    env.call("create2 ephemeral", zk.create, env.base + "/e", b"e", ephemeral=True, include_data=True)
    env.call("create2 exists", zk.create, env.base + "/a", b"abc", include_data=True)
    env.call("create2 no parent", zk.create, env.base + "/x/y", include_data=True)
    env.call("parent", zk.exists, env.base)


@scenario
def create_node_exists(env):
    """NodeExists leaves node and parent untouched; the failed txn still takes a zxid."""
    zk = env.client()
    env.call("create", zk.create, env.base + "/a", b"one")
    env.call("parent", zk.exists, env.base)
    env.call("create again", zk.create, env.base + "/a", b"two")
    env.call("create ephemeral again", zk.create, env.base + "/a", b"two", ephemeral=True)
    env.call("get", zk.get, env.base + "/a")
    env.call("parent unchanged", zk.exists, env.base)
    env.call("create next", zk.create, env.base + "/b")
    env.call("parent after next", zk.exists, env.base)


@scenario
def create_no_parent(env):
    """NoNode for a missing parent; makepath creates the chain."""
    zk = env.client()
    env.call("create deep", zk.create, env.base + "/x/y", b"")
    env.call("create deeper", zk.create, env.base + "/x/y/z", b"")
    env.call("exists x", zk.exists, env.base + "/x")
    env.call("makepath", zk.create, env.base + "/x/y/z", b"leaf", makepath=True)
    env.call("get x", zk.get, env.base + "/x")
    env.call("get x/y", zk.get, env.base + "/x/y")
    env.call("get x/y/z", zk.get, env.base + "/x/y/z")
    env.call("ensure_path existing", zk.ensure_path, env.base + "/x/y")


@scenario
def create_under_ephemeral(env):
    """Ephemerals cannot have children, not even ephemeral or sequential ones."""
    zk = env.client()
    env.call("create ephemeral", zk.create, env.base + "/e", b"", ephemeral=True)
    env.call("child", zk.create, env.base + "/e/c", b"")
    env.call("ephemeral child", zk.create, env.base + "/e/c", b"", ephemeral=True)
    env.call("sequential child", zk.create, env.base + "/e/s-", b"", sequence=True)
    env.call("create2 child", zk.create, env.base + "/e/c", b"", include_data=True)
    env.call("ephemeral unchanged", zk.exists, env.base + "/e")
    env.call("children", zk.get_children, env.base + "/e")


@scenario
def create_root_and_existing_system_nodes(env):
    """create("/") and create("/zookeeper") answer NodeExists."""
    zk = env.client()
    env.call("create /", zk.create, "/", b"")
    env.call("create /zookeeper", zk.create, "/zookeeper", b"")
    env.call("create /zookeeper/quota", zk.create, "/zookeeper/quota", b"")
    env.call("create /zookeeper/config", zk.create, "/zookeeper/config", b"")


@scenario
def create_unicode_paths(env):
    """Non-ASCII names round-trip as UTF-8 in paths and child lists."""
    zk = env.client()
    names = ["ü", "日本語", "emoji-\U0001f600", "mixed ä space", "Ωmega"]
    for name in names:
        env.call(f"create {name}", zk.create, f"{env.base}/{name}", name.encode())
    env.call("children", zk.get_children, env.base)
    for name in names:
        env.call(f"get {name}", zk.get, f"{env.base}/{name}")
    env.call("sequential unicode", zk.create, env.base + "/ß-", b"", sequence=True)
    env.call("nested", zk.create, env.base + "/ü/ü", b"")
    env.call("parent", zk.exists, env.base)


@scenario
def create_names_that_look_special(env):
    """Names like ".a", "..a", "a.", "-", "zookeeper" are ordinary names."""
    zk = env.client()
    for name in [".a", "..a", "a.", "...", "-", "zookeeper", "a b", "a:b", "a@b", "%s"]:
        env.call(f"create {name}", zk.create, f"{env.base}/{name}", b"")
    env.call("children", zk.get_children, env.base)
    env.call("parent", zk.exists, env.base)


@scenario
def create_many_then_stat(env):
    """Creating 30 children: cversion, numChildren and pzxid track each one."""
    zk = env.client()
    for i in range(30):
        zk.create(f"{env.base}/c{i}", str(i).encode())
    env.call("parent", zk.exists, env.base)
    env.call("last child", zk.exists, f"{env.base}/c29")
    env.call("first child", zk.exists, f"{env.base}/c0")
    env.call("children", zk.get_children, env.base, include_data=True)
