"""Differential scenarios: multi (transactions), all-or-nothing, per-op results."""

from .harness import scenario


@scenario
def multi_all_succeed(env):
    """create, setData, check and delete in one multi; all share one zxid."""
    zk = env.client()
    zk.create(env.base + "/old", b"")
    t = zk.transaction()
    t.create(env.base + "/a", b"a")
    t.create(env.base + "/a/b", b"b")
    t.set_data(env.base + "/a", b"a2")
    t.check(env.base + "/a", 1)
    t.delete(env.base + "/old")
    env.call("commit", t.commit)
    env.call("a", zk.get, env.base + "/a")
    env.call("a/b", zk.get, env.base + "/a/b")
    env.call("old", zk.exists, env.base + "/old")
    env.call("parent", zk.exists, env.base)


@scenario
def multi_one_fails_nothing_applied(env):
    """One failing op: earlier ops RolledBack, later ones RuntimeInconsistency."""
    zk = env.client()
    zk.create(env.base + "/exists", b"orig")
    t = zk.transaction()
    t.create(env.base + "/new1", b"")
    t.set_data(env.base + "/exists", b"changed")
    t.create(env.base + "/exists", b"")  # NodeExists
    t.create(env.base + "/new2", b"")
    t.delete(env.base + "/exists")
    env.call("commit", t.commit)
    env.call("new1 not created", zk.exists, env.base + "/new1")
    env.call("new2 not created", zk.exists, env.base + "/new2")
    env.call("exists unchanged", zk.get, env.base + "/exists")
    env.call("parent unchanged", zk.exists, env.base)
    env.call("children", zk.get_children, env.base)


@scenario
def multi_first_op_fails(env):
    """The failing op is first: every later op is RuntimeInconsistency."""
    zk = env.client()
    t = zk.transaction()
    t.delete(env.base + "/missing")
    t.create(env.base + "/a", b"")
    t.create(env.base + "/b", b"")
    env.call("commit", t.commit)
    env.call("a", zk.exists, env.base + "/a")


@scenario
def multi_check_versions(env):
    """check with the right version passes, with a wrong one fails the multi."""
    zk = env.client()
    zk.create(env.base + "/n", b"")
    zk.set(env.base + "/n", b"1")
    t = zk.transaction()
    t.check(env.base + "/n", 1)
    t.set_data(env.base + "/n", b"2", version=1)
    env.call("right version", t.commit)
    t = zk.transaction()
    t.check(env.base + "/n", 1)
    t.set_data(env.base + "/n", b"3")
    env.call("stale version", t.commit)
    t = zk.transaction()
    t.check(env.base + "/n", -1)
    env.call("check -1 only", t.commit)
    t = zk.transaction()
    t.check(env.base + "/missing", 0)
    env.call("check missing node", t.commit)
    env.call("n", zk.get, env.base + "/n")


@scenario
def multi_create_and_delete_same_node(env):
    """A node created and deleted in one multi never shows, but cversion moves."""
    zk = env.client()
    t = zk.transaction()
    t.create(env.base + "/tmp", b"")
    t.delete(env.base + "/tmp")
    env.call("create+delete", t.commit)
    env.call("tmp", zk.exists, env.base + "/tmp")
    env.call("parent", zk.exists, env.base)
    t = zk.transaction()
    t.create(env.base + "/p", b"")
    t.create(env.base + "/p/c", b"")
    t.delete(env.base + "/p")  # NotEmpty within the same multi
    env.call("delete non-empty in multi", t.commit)
    env.call("p", zk.exists, env.base + "/p")


@scenario
def multi_sequential_and_ephemeral(env):
    """Sequential names inside a multi see the multi's own earlier creates."""
    zk = env.client()
    zk.create(env.base + "/x", b"")
    t = zk.transaction()
    t.create(env.base + "/s-", b"", sequence=True)
    t.create(env.base + "/s-", b"", sequence=True)
    t.create(env.base + "/e", b"", ephemeral=True)
    t.create(env.base + "/es-", b"", ephemeral=True, sequence=True)
    env.call("commit", t.commit)
    env.call("children", zk.get_children, env.base, include_data=True)
    env.call("e", zk.exists, env.base + "/e")
    t = zk.transaction()
    t.create(env.base + "/s-", b"", sequence=True)
    t.create(env.base + "/e/child", b"")  # NoChildrenForEphemerals
    env.call("failing multi with sequential", t.commit)
    env.call("next sequential after failed multi", zk.create, env.base + "/s-", b"", sequence=True)


@scenario
def multi_empty(env):
    """An empty multi succeeds with no results."""
    zk = env.client()
    env.call("empty", zk.transaction().commit)
    env.call("parent", zk.exists, env.base)


@scenario
def multi_errors_per_kind(env):
    """BadVersion, NoNode, NotEmpty, NodeExists, NoChildrenForEphemerals inside a multi."""
    zk = env.client()
    zk.create(env.base + "/a/b", b"", makepath=True)
    zk.create(env.base + "/eph", b"", ephemeral=True)
    cases = {
        "BadVersion set": lambda t: t.set_data(env.base + "/a", b"", version=7),
        "BadVersion delete": lambda t: t.delete(env.base + "/a/b", version=7),
        "NoNode set": lambda t: t.set_data(env.base + "/zz", b""),
        "NoNode create parent": lambda t: t.create(env.base + "/zz/y", b""),
        "NotEmpty": lambda t: t.delete(env.base + "/a"),
        "NodeExists": lambda t: t.create(env.base + "/a", b""),
        "NoChildrenForEphemerals": lambda t: t.create(env.base + "/eph/c", b""),
        "delete root": lambda t: t.delete("/"),
    }
    for label, op in cases.items():
        t = zk.transaction()
        t.create(env.base + "/first", b"")
        op(t)
        env.call(label, t.commit)
    env.call("children", zk.get_children, env.base)
    env.call("parent", zk.exists, env.base)


@scenario
def multi_set_data_results(env):
    """Each setData result in a multi carries the Stat as of that op."""
    zk = env.client()
    zk.create(env.base + "/n", b"")
    t = zk.transaction()
    t.set_data(env.base + "/n", b"1")
    t.set_data(env.base + "/n", b"22")
    t.set_data(env.base + "/n", b"333", version=2)
    t.create(env.base + "/n/c", b"")
    env.call("commit", t.commit)
    env.call("n", zk.get, env.base + "/n")


@scenario
def multi_delete_and_recreate(env):
    """Delete and recreate one node in a multi: the new node's czxid is the multi's zxid."""
    zk = env.client()
    zk.create(env.base + "/n", b"old")
    zk.set(env.base + "/n", b"older")
    t = zk.transaction()
    t.delete(env.base + "/n", version=1)
    t.create(env.base + "/n", b"new")
    t.set_data(env.base + "/n", b"newer", version=0)
    env.call("commit", t.commit)
    env.call("n", zk.get, env.base + "/n")
    env.call("parent", zk.exists, env.base)


@scenario
def multi_delete_parent_then_create_child(env):
    """Ops see the multi's own earlier ops: a child under a just-deleted parent is NoNode."""
    zk = env.client()
    zk.create(env.base + "/p", b"")
    t = zk.transaction()
    t.delete(env.base + "/p")
    t.create(env.base + "/p/c", b"")
    env.call("delete parent, create child", t.commit)
    t = zk.transaction()
    t.create(env.base + "/q", b"")
    t.create(env.base + "/q/c", b"")
    t.delete(env.base + "/q/c")
    t.delete(env.base + "/q")
    env.call("create and delete a subtree", t.commit)
    env.call("p", zk.exists, env.base + "/p")
    env.call("q", zk.exists, env.base + "/q")
    env.call("parent", zk.exists, env.base)


@scenario
def multi_ephemerals_die_with_session(env):
    """Ephemerals created by a multi belong to the session and go when it closes."""
    owner = env.client()
    other = env.client()
    t = owner.transaction()
    t.create(env.base + "/e1", b"", ephemeral=True)
    t.create(env.base + "/e2", b"", ephemeral=True)
    t.create(env.base + "/p", b"")
    env.call("commit", t.commit)
    env.call("e1 owner", other.exists, env.base + "/e1")
    other.exists(env.base + "/e2", watch=env.watcher("e2"))
    owner.stop()
    env.wait_events(1)
    env.call("children after close", other.get_children, env.base)
