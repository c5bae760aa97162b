"""Differential scenarios: ephemeral nodes and their owners' sessions."""

from .harness import scenario


@scenario
def ephemeral_owner_and_visibility(env):
    """ephemeralOwner is the creating session; another session sees the node."""
    a = env.client()
    b = env.client()
    env.record("session a", env.session(a))
    env.record("session b", env.session(b))
    env.call("create ephemeral (a)", a.create, env.base + "/e", b"x", ephemeral=True)
    env.call("get from b", b.get, env.base + "/e")
    env.call("parent from b", b.exists, env.base)
    env.call("b sets a's ephemeral", b.set, env.base + "/e", b"y")
    env.call("get from a", a.get, env.base + "/e")


@scenario
def ephemeral_gone_after_close(env):
    """Closing the owner's session deletes its ephemerals (seen by a watcher)."""
    owner = env.client()
    observer = env.client()
    env.call("create e1", owner.create, env.base + "/e1", b"", ephemeral=True)
    env.call("create e2", owner.create, env.base + "/e2", b"", ephemeral=True)
    env.call("create p", owner.create, env.base + "/p", b"")
    env.call("exists e1 + watch", observer.exists, env.base + "/e1", watch=env.watcher("e1"))
    env.call(
        "children + watch", observer.get_children, env.base, watch=env.watcher("children")
    )
    owner.stop()
    owner.close()
    env.wait_events(2)
    env.call("exists e1", observer.exists, env.base + "/e1")
    env.call("exists e2", observer.exists, env.base + "/e2")
    env.call("persistent survives", observer.exists, env.base + "/p")
    env.call("children", observer.get_children, env.base)
    env.call("parent", observer.exists, env.base)


@scenario
def ephemeral_sequential(env):
    """Ephemeral-sequential nodes: sequential names, ephemeral owner, removed on close."""
    a = env.client()
    b = env.client()
    env.call("ephseq a", a.create, env.base + "/lock-", b"", ephemeral=True, sequence=True)
    env.call("ephseq b", b.create, env.base + "/lock-", b"", ephemeral=True, sequence=True)
    env.call("ephseq a 2", a.create, env.base + "/lock-", b"", ephemeral=True, sequence=True)
    env.call("children", b.get_children, env.base)
    env.call("owner of 0", b.exists, env.base + "/lock-0000000000")
    env.call("owner of 1", b.exists, env.base + "/lock-0000000001")
    env.call("watch 2", b.exists, env.base + "/lock-0000000002", watch=env.watcher("w"))
    a.stop()
    a.close()
    env.wait_events(1)
    env.call("children after a closed", b.get_children, env.base)
    env.call("next seq", b.create, env.base + "/lock-", b"", ephemeral=True, sequence=True)


@scenario
def ephemeral_delete_explicitly(env):
    """An ephemeral deleted by its owner, or by another session, is just gone."""
    a = env.client()
    b = env.client()
    env.call("create e", a.create, env.base + "/e", b"", ephemeral=True)
    env.call("create f", a.create, env.base + "/f", b"", ephemeral=True)
    env.call("owner deletes e", a.delete, env.base + "/e")
    env.call("other deletes f", b.delete, env.base + "/f")
    env.call("recreate e by b", b.create, env.base + "/e", b"", ephemeral=True)
    env.call("e now owned by b", a.exists, env.base + "/e")
    env.call("parent", a.exists, env.base)


@scenario
def ephemeral_many_then_close(env):
    """One closeSession removes all of a session's ephemerals in one txn."""
    owner = env.client()
    observer = env.client()
    for i in range(10):
        owner.create(f"{env.base}/e{i}", b"", ephemeral=True)
    env.call("parent before", observer.exists, env.base)
    observer.get_children(env.base, watch=env.watcher("children"))
    owner.stop()
    owner.close()
    env.wait_events(1)
    env.call("children after", observer.get_children, env.base)
    env.call("parent after", observer.exists, env.base)
