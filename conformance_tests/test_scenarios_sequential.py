"""Differential scenarios: sequential names (%010d of the parent's cversion)."""

from .harness import scenario


@scenario
def sequential_naming_basic(env):
    """Three sequential creates: suffixes 0,1,2 padded to ten digits."""
    zk = env.client()
    for i in range(3):
        env.call(f"create seq {i}", zk.create, env.base + "/job-", b"", sequence=True)
    env.call("children", zk.get_children, env.base)
    env.call("parent", zk.exists, env.base)


@scenario
def sequential_counter_survives_deletes(env):
    """The suffix comes from the parent's cversion, which deletes also bump."""
    zk = env.client()
    first = env.call("seq a", zk.create, env.base + "/n-", b"", sequence=True)
    env.call("delete a", zk.delete, first)
    env.call("seq b", zk.create, env.base + "/n-", b"", sequence=True)
    env.call("plain", zk.create, env.base + "/plain", b"")
    env.call("delete plain", zk.delete, env.base + "/plain")
    env.call("seq c", zk.create, env.base + "/n-", b"", sequence=True)
    env.call("parent", zk.exists, env.base)
    env.call("children", zk.get_children, env.base)


@scenario
def sequential_mixed_with_plain_children(env):
    """Plain creates advance the counter; different prefixes share it."""
    zk = env.client()
    env.call("plain x", zk.create, env.base + "/x", b"")
    env.call("seq a-", zk.create, env.base + "/a-", b"", sequence=True)
    env.call("plain y", zk.create, env.base + "/y", b"")
    env.call("seq b-", zk.create, env.base + "/b-", b"", sequence=True)
    env.call("seq a- again", zk.create, env.base + "/a-", b"", sequence=True)
    env.call("failed plain (exists)", zk.create, env.base + "/x", b"")
    env.call("seq after failed create", zk.create, env.base + "/a-", b"", sequence=True)
    env.call("children", zk.get_children, env.base)


@scenario
def sequential_empty_prefix_and_nesting(env):
    """A sequential create of "parent/" yields a bare ten-digit name."""
    zk = env.client()
    env.call("bare seq 1", zk.create, env.base + "/", b"", sequence=True)
    env.call("bare seq 2", zk.create, env.base + "/", b"", sequence=True)
    env.call("child dir", zk.create, env.base + "/d", b"")
    env.call("seq in child", zk.create, env.base + "/d/", b"", sequence=True)
    env.call("seq in child 2", zk.create, env.base + "/d/q-", b"", sequence=True)
    env.call("children", zk.get_children, env.base)
    env.call("children d", zk.get_children, env.base + "/d")


@scenario
def sequential_name_collision(env):
    """A plain node named like the next sequential name makes that create fail."""
    zk = env.client()
    env.call("plain s-0000000001", zk.create, env.base + "/s-0000000001", b"")
    env.call("seq s- (gets 1: collides)", zk.create, env.base + "/s-", b"", sequence=True)
    env.call("seq s- again", zk.create, env.base + "/s-", b"", sequence=True)
    env.call("children", zk.get_children, env.base)
    env.call("parent", zk.exists, env.base)


@scenario
def sequential_with_data_and_stat(env):
    """Sequential nodes carry their data; create2 returns their Stat."""
    zk = env.client()
    env.call("seq with data", zk.create, env.base + "/d-", b"payload", sequence=True)
    env.call(
        "seq create2", zk.create, env.base + "/d-", b"more", sequence=True, include_data=True
    )
    env.call("get 0", zk.get, env.base + "/d-0000000000")
    env.call("get 1", zk.get, env.base + "/d-0000000001")


@scenario
def sequential_after_many_child_ops(env):
    """cversion grows by one per child create/delete; names follow it past 10."""
    zk = env.client()
    for i in range(6):
        zk.create(f"{env.base}/t{i}", b"")
    for i in range(0, 6, 2):
        zk.delete(f"{env.base}/t{i}")
    env.call("parent", zk.exists, env.base)
    env.call("seq", zk.create, env.base + "/s-", b"", sequence=True)
    for i in range(3):
        zk.create(f"{env.base}/u{i}", b"")
    env.call("seq 2", zk.create, env.base + "/s-", b"", sequence=True)
    env.call("children", zk.get_children, env.base, include_data=True)
