"""Differential scenarios: session handshake, timeouts, reattach, close and expiry.

Both servers run with tickTime=200 ms, so ZooKeeper clamps requested session
timeouts to [2 * tickTime, 20 * tickTime] = [400, 4000] ms.
"""

from .harness import scenario


@scenario
def session_timeout_negotiation(env):
    """The ConnectResponse: negotiated timeout, protocol version, password, readOnly."""
    for requested_ms in (0, 100, 399, 400, 1000, 3999, 4000, 4001, 100_000, -5):
        rc = env.raw(connect=False)
        result = rc.connect(timeout_ms=requested_ms)
        env.record(
            f"requested {requested_ms} ms",
            {
                "negotiated_ms": result.timeout_ms,
                "protocol_version": result.protocol_version,
                "passwd_len": len(result.passwd),
                "read_only": result.read_only,
            },
        )
        rc.close_session_quietly()
        rc.close()


@scenario
def session_timeout_via_kazoo(env):
    """kazoo asking 1 s and 100 s: both sessions work; the server's answer via raw."""
    for seconds in (1.0, 100.0):
        zk = env.client(timeout=seconds)
        env.record(f"{seconds} s connected", zk.connected)
        env.call(f"{seconds} s create", zk.create, f"{env.base}/t{int(seconds)}", b"")
    rc = env.raw(connect=False)
    env.record("raw 1000 ms", rc.connect(timeout_ms=1000).timeout_ms)
    rc2 = env.raw(connect=False)
    env.record("raw 100000 ms", rc2.connect(timeout_ms=100_000).timeout_ms)


@scenario
def session_reattach_with_password(env):
    """Reconnecting with the session id and password resumes the session."""
    first = env.raw(connect=False)
    r1 = first.connect(timeout_ms=4000)
    env.record("first session", env.session_id(r1.session_id))
    env.raw_call("create ephemeral", first.create, env.base + "/e", b"", 1)
    second = env.raw(connect=False)
    r2 = second.connect(timeout_ms=4000, session_id=r1.session_id, passwd=r1.passwd)
    env.record("reattached session", env.session_id(r2.session_id))
    env.record("same password", r2.passwd == r1.passwd)
    env.record("negotiated", r2.timeout_ms)
    env.raw_call("old socket after reattach", first.exists, env.base)
    env.raw_call("new socket works", second.exists, env.base + "/e")
    zk = env.client()
    env.call("ephemeral still owned", zk.exists, env.base + "/e")


@scenario
def session_reattach_refused(env):
    """Wrong password or unknown session: timeout 0, session 0, then the server hangs up."""
    owner = env.raw(connect=False)
    r1 = owner.connect(timeout_ms=4000)
    bad = env.raw(connect=False)
    r2 = bad.connect(timeout_ms=4000, session_id=r1.session_id, passwd=b"\x01" * 16)
    env.record("wrong password", (r2.timeout_ms, r2.session_id, r2.passwd))
    env.raw_call("request after refusal", bad.exists, "/")
    unknown = env.raw(connect=False)
    r3 = unknown.connect(timeout_ms=4000, session_id=0x1234_5678, passwd=b"\x00" * 16)
    env.record("unknown session", (r3.timeout_ms, r3.session_id, r3.passwd))
    env.raw_call("request after unknown", unknown.exists, "/")
    env.raw_call("owner unaffected", owner.exists, "/")


@scenario
def session_close_then_reattach(env):
    """A closed session cannot be resumed."""
    rc = env.raw(connect=False)
    r1 = rc.connect(timeout_ms=4000)
    env.raw_call("close session", rc.close_session)
    again = env.raw(connect=False)
    r2 = again.connect(timeout_ms=4000, session_id=r1.session_id, passwd=r1.passwd)
    env.record("reattach closed session", (r2.timeout_ms, r2.session_id))


@scenario
def close_session_deletes_ephemerals_watched(env):
    """Another client's data and child watches fire when a session closes."""
    owner = env.client()
    watcher = env.client()
    owner.create(env.base + "/dir", b"")
    env.call("eph", owner.create, env.base + "/dir/eph", b"", ephemeral=True)
    env.call("get + watch", watcher.get, env.base + "/dir/eph", watch=env.watcher("data"))
    env.call(
        "children + watch", watcher.get_children, env.base + "/dir", watch=env.watcher("child")
    )
    env.call("exists + watch", watcher.exists, env.base + "/dir/eph", watch=env.watcher("exists"))
    owner.stop()
    env.wait_events(3)
    env.call("gone", watcher.exists, env.base + "/dir/eph")
    env.call("dir", watcher.exists, env.base + "/dir")


@scenario(timeout_s=90)
def session_expiry_deletes_ephemerals(env):
    """A session that stops pinging expires after its timeout; its ephemerals go."""
    silent = env.raw(connect=False)
    silent.connect(timeout_ms=400)  # the minimum: expires in 0.4-0.8 s
    env.raw_call("create ephemeral", silent.create, env.base + "/e", b"", 1)
    watcher = env.client()
    env.call("watch", watcher.exists, env.base + "/e", watch=env.watcher("w"))
    env.wait_events(1, timeout=10)
    env.call("gone", watcher.exists, env.base + "/e")
    env.raw_call("expired session's socket", silent.exists, "/")


@scenario
def sync_then_read(env):
    """A second client that syncs then reads sees the first client's write."""
    writer = env.client()
    reader = env.client()
    env.call("write", writer.create, env.base + "/n", b"v1")
    env.call("sync", reader.sync, env.base + "/n")
    env.call("read", reader.get, env.base + "/n")
    env.call("write 2", writer.set, env.base + "/n", b"v2")
    env.call("sync 2", reader.sync, env.base)
    env.call("read 2", reader.get, env.base + "/n")


@scenario
def failed_writes_consume_zxids(env):
    """A failed write becomes an ErrorTxn with its own zxid; reads and sync take none.

    Measured as czxid gaps between probe creates, the smallest of three tries
    (a stray session expiring elsewhere can only widen a gap).
    """
    zk = env.client()
    zk.create(env.base + "/exists", b"")
    failing = {
        "NodeExists create": lambda: zk.create(env.base + "/exists", b""),
        "NoNode delete": lambda: zk.delete(env.base + "/missing"),
        "BadVersion setData": lambda: zk.set(env.base + "/exists", b"", version=9),
        "NoNode create parent": lambda: zk.create(env.base + "/missing/x", b""),
        "failed multi": lambda: _commit(zk, env.base + "/missing"),
        "empty multi": lambda: zk.transaction().commit(),
        "exists (read)": lambda: zk.exists(env.base + "/missing"),
        "getData (read)": lambda: zk.get(env.base + "/exists"),
        "sync": lambda: zk.sync(env.base),
        "nothing": lambda: None,
    }
    for label, action in failing.items():
        gaps = []
        for _try in range(3):
            before = zk.create(f"{env.base}/p-", b"", sequence=True, include_data=True)[1]
            try:
                action()
            except Exception:  # noqa: BLE001 - the failure is the point
                pass
            after = zk.create(f"{env.base}/p-", b"", sequence=True, include_data=True)[1]
            gaps.append(after.czxid - before.czxid - 1)
        env.record(f"zxids taken by {label}", min(gaps))


def _commit(zk, missing):
    t = zk.transaction()
    t.check(missing, 0)
    return t.commit()


@scenario
def zxid_order_across_sessions(env):
    """Writes from two sessions are totally ordered by zxid."""
    a = env.client()
    b = env.client()
    env.call("a1", a.create, env.base + "/a1", b"", include_data=True)
    env.call("b1", b.create, env.base + "/b1", b"", include_data=True)
    env.call("a set b1", a.set, env.base + "/b1", b"x")
    env.call("b set a1", b.set, env.base + "/a1", b"y")
    env.call("a1", b.exists, env.base + "/a1")
    env.call("b1", a.exists, env.base + "/b1")
    env.call("parent", a.exists, env.base)


@scenario
def client_close_and_reuse_names(env):
    """After a session closes, a new session can create the same ephemeral name."""
    first = env.client()
    env.call("create by first", first.create, env.base + "/lock", b"1", ephemeral=True)
    second = env.client()
    env.call("second collides", second.create, env.base + "/lock", b"2", ephemeral=True)
    first.stop()
    env.call("second retries", second.create, env.base + "/lock", b"2", ephemeral=True)
    env.call("owner", second.get, env.base + "/lock")
    env.record("owner is second", env.session(second))

