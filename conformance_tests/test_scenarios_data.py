"""Differential scenarios: exists, getData, setData, versions and data sizes."""

import time

from .harness import scenario

# The largest request frame ZooKeeper reads (jute.maxbuffer, 0xfffff);
# a bigger frame closes the connection (NIOServerCnxn "Len error").
JUTE_MAXBUFFER = 0xFFFFF


@scenario
def exists_present_and_missing(env):
    zk = env.client()
    env.call("exists base", zk.exists, env.base)
    env.call("exists missing", zk.exists, env.base + "/nope")
    env.call("exists under missing", zk.exists, env.base + "/nope/deeper")
    zk.create(env.base + "/a", b"abc")
    env.call("exists a", zk.exists, env.base + "/a")
    env.call("exists /zookeeper/quota", zk.exists, "/zookeeper/quota")


@scenario
def set_and_get_with_versions(env):
    """setData versions: -1, matching, stale; mtime/mzxid move, ctime/czxid stay."""
    zk = env.client()
    zk.create(env.base + "/a", b"v0")
    env.call("get", zk.get, env.base + "/a")
    env.call("set any version", zk.set, env.base + "/a", b"v1", version=-1)
    env.call("set matching version 1", zk.set, env.base + "/a", b"v2", version=1)
    env.call("set stale version 1", zk.set, env.base + "/a", b"v3", version=1)
    env.call("set future version 9", zk.set, env.base + "/a", b"v3", version=9)
    env.call("set version -2", zk.set, env.base + "/a", b"v3", version=-2)
    env.call("get after", zk.get, env.base + "/a")
    env.call("same data again", zk.set, env.base + "/a", b"v2")
    env.call("parent untouched by setData", zk.exists, env.base)


@scenario
def set_data_missing_node(env):
    zk = env.client()
    env.call("set missing", zk.set, env.base + "/missing", b"x")
    env.call("set missing v0", zk.set, env.base + "/missing", b"x", version=0)
    env.call("get missing", zk.get, env.base + "/missing")
    env.call("still missing", zk.exists, env.base + "/missing")


@scenario
def data_length_tracks_data(env):
    """dataLength follows every set, including to empty and to null."""
    zk = env.client()
    zk.create(env.base + "/a", b"")
    for data in (b"x" * 10, b"", b"\x00" * 3, bytes(range(256)), None, b"end"):
        env.call(f"set {len(data) if data is not None else 'None'}", zk.set, env.base + "/a", data)
        env.call("get", zk.get, env.base + "/a")


@scenario
def version_wraps_per_node(env):
    """Versions count per node; a sibling's sets do not touch it."""
    zk = env.client()
    zk.create(env.base + "/a", b"")
    zk.create(env.base + "/b", b"")
    for i in range(25):
        zk.set(env.base + "/a", str(i).encode())
    env.call("a", zk.exists, env.base + "/a")
    env.call("b", zk.exists, env.base + "/b")
    env.call("set b v0", zk.set, env.base + "/b", b"x", version=0)
    env.call("set a v25", zk.set, env.base + "/a", b"x", version=25)


@scenario(timeout_s=90)
def large_data_near_limit(env):
    """A request frame of exactly jute.maxbuffer works; one byte more drops the connection."""
    zk = env.client()
    path = env.base + "/big"
    zk.create(path, b"")
    # setData frame: xid, type, path (len + bytes), data (len + bytes), version.
    overhead = 4 + 4 + 4 + len(path.encode()) + 4 + 4
    biggest = JUTE_MAXBUFFER - overhead
    env.call("set biggest", zk.set, path, b"a" * biggest)
    env.call("get biggest", zk.get, path)
    rc = env.raw()
    env.raw_call("raw set one byte too many", rc.set_data, path, b"b" * (biggest + 1))
    env.call("data unchanged", zk.get, path)
    env.call("create 1 MiB", zk.create, env.base + "/mib", b"c" * (1024 * 1024 - 1024))
    env.call("get 1 MiB", zk.get, env.base + "/mib")


@scenario(timeout_s=90)
def oversized_request_through_kazoo(env):
    """kazoo sees ConnectionLoss for an oversized request, then reconnects the same session."""
    zk = env.client()
    session = env.session(zk)
    env.record("session", session)
    env.call("create", zk.create, env.base + "/a", b"small")
    env.call("set 2 MiB", zk.set, env.base + "/a", b"x" * (2 * 1024 * 1024))
    deadline = time.monotonic() + 15
    while not zk.connected and time.monotonic() < deadline:
        time.sleep(0.05)
    env.record("reconnected", zk.connected)
    env.record("same session", env.session(zk) == session)
    env.call("get after", zk.get, env.base + "/a")
