"""Differential scenarios: session handshake, timeouts, reattach, close and expiry.

Both servers run with tickTime=200 ms, so ZooKeeper clamps requested session
timeouts to [2 * tickTime, 20 * tickTime] = [400, 4000] ms.
"""

from __future__ import annotations

import threading
import time

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from .harness import SessionId, scenario
from .rawclient import ConnectionClosed, int32

TICK_TIME_MS = 200
MIN_SESSION_TIMEOUT_MS = 2 * TICK_TIME_MS
PINGED_SESSION_TIMEOUT_MS = 5 * TICK_TIME_MS
EPHEMERAL = 1  # CreateMode.EPHEMERAL's flags
OP_PING = 11
PING_XID = -2
STATE_WAIT_S = 10.0
EXPIRY_WAIT_S = 8.0  # a 400 ms session is gone well within this


class StateLog:
    """Records a kazoo client's KazooState changes; wait() for a given one."""

    def __init__(self, zk: KazooClient) -> None:
        self.states: list[str] = []
        self._cond = threading.Condition()
        zk.add_listener(self._on_state)

    def _on_state(self, state) -> None:
        with self._cond:
            self.states.append(str(state))
            self._cond.notify_all()

    def wait(self, state: KazooState, timeout_s: float = STATE_WAIT_S) -> bool:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while str(state) not in self.states:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True


def connect_outcome(result) -> dict:
    """A ConnectResponse as a log value: an expired session has timeout 0."""
    return {
        "timeout_ms": result.timeout_ms,
        "session": SessionId(result.session_id),
        "passwd_len": len(result.passwd),
    }


def still_open(rc) -> str:
    """Whether the server kept this connection: a ping answers or it does not."""
    try:
        rc.send_frame(int32(PING_XID) + int32(OP_PING))
        rc.recv_frame()
        return "open"
    except ConnectionClosed:
        return "closed"
    except OSError as e:  # reset or broken pipe: closed as well
        return f"closed ({type(e).__name__})"


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


# --------------------------------------------------- more session scenarios
# Beyond the basics above: kazoo takeover expiry, resumption by kazoo, close
# idempotence, pings on a minimum-length session, connection fate.


# ------------------------------------------------------------ ephemerals


@scenario
def session_ephemerals_vanish_at_close(env):
    """closeSession deletes the session's ephemerals (and only those), firing watches."""
    owner = env.client()
    other = env.client()
    b = env.base
    env.record("owner session", env.session(owner))
    env.call("create ephemeral", owner.create, f"{b}/e1", b"", ephemeral=True)
    env.call("create ephemeral seq", owner.create, f"{b}/s-", b"", ephemeral=True, sequence=True)
    env.call("create persistent", owner.create, f"{b}/p", b"")
    env.call("other's ephemeral", other.create, f"{b}/e2", b"", ephemeral=True)
    env.call("stat e1", other.exists, f"{b}/e1")
    env.call("parent before", other.exists, b)
    # Two labels: ZooKeeper deletes a session's ephemerals in HashSet order,
    # so only the order within each watcher is defined.
    other.exists(f"{b}/e1", watch=env.watcher("e1 exists"))
    other.get_children(b, watch=env.watcher("base children"))
    owner.stop()
    env.wait_events(2)
    env.call("children after close", other.get_children, b)
    env.call("parent after", other.exists, b)
    env.call("other's ephemeral survives", other.exists, f"{b}/e2")


@scenario(single_server=True)
def session_ephemerals_vanish_at_expiry(env):
    """kazoo's way to expire a session: a second client takes it over (same id and
    password) and closes it. The first client's next connect is told Expired."""
    owner = env.client()
    watcher = env.client()
    b = env.base
    states = StateLog(owner)
    old_id = owner.client_id
    env.record("owner session", SessionId(old_id[0]))
    env.call("create ephemeral", owner.create, f"{b}/e", b"", ephemeral=True)
    w = env.watcher("watch")
    env.call("exists+watch", watcher.exists, f"{b}/e", watch=w)
    thief = env.client(client_id=old_id)
    env.record("thief has the same session", thief.client_id[0] == old_id[0])
    thief.stop()
    env.wait_events(1)
    env.call("ephemeral gone", watcher.exists, f"{b}/e")
    env.record("owner saw LOST", states.wait(KazooState.LOST))
    env.record("owner states", states.states[:2])
    env.record("owner reconnects", states.wait(KazooState.CONNECTED))
    env.record(
        "owner got a new session", owner.client_id is not None and owner.client_id[0] != old_id[0]
    )
    env.call("owner writes again", owner.create, f"{b}/after", b"", ephemeral=True)
    env.call("its owner", watcher.exists, f"{b}/after")


@scenario
def session_expiry_when_client_goes_silent(env):
    """A session whose client stops talking expires after its timeout: its
    ephemerals go, its connection is closed, and resuming it is refused."""
    watcher = env.client()
    rc = env.raw(timeout_ms=MIN_SESSION_TIMEOUT_MS)
    sid, passwd = rc.connect_result.session_id, rc.connect_result.passwd
    env.record("negotiated", rc.connect_result.timeout_ms)
    env.raw_call("create ephemeral", rc.create, env.base + "/e", b"", EPHEMERAL)
    env.call("owner", watcher.exists, env.base + "/e")
    w = env.watcher("watch")
    env.call("exists+watch", watcher.exists, env.base + "/e", watch=w)
    env.wait_events(1, timeout=EXPIRY_WAIT_S)
    env.call("ephemeral gone", watcher.exists, env.base + "/e")
    env.record("silent connection", still_open(rc))
    again = env.raw(connect=False)
    env.record(
        "resume", connect_outcome(again.connect(timeout_ms=4000, session_id=sid, passwd=passwd))
    )
    env.record("resumed connection", still_open(again))


@scenario
def session_pings_keep_a_short_session(env):
    """A 1 s session that pings stays alive for many timeouts, ephemerals intact.

    Not the 400 ms minimum: kazoo may leave up to 0.4 s between pings (its jitter), and a
    follower reports its sessions' pings to the leader, which decides expiry, only when the
    leader pings it (every tickTime / 2). A 400 ms session on a follower is then lost now
    and then, by ZooKeeper's own ensembles too: on 2026-12-04, 3 of 304 such sessions held
    for 10 s against a ZooKeeper 3.8 ensemble, 9 of 324 against a zkcompat one, none of
    72 of 1 s on either."""
    zk = env.client(timeout=PINGED_SESSION_TIMEOUT_MS / 1000)
    states = StateLog(zk)
    sid = zk.client_id[0]
    env.call("create ephemeral", zk.create, env.base + "/e", b"", ephemeral=True)
    time.sleep(5 * PINGED_SESSION_TIMEOUT_MS / 1000)
    env.record("same session", zk.client_id is not None and zk.client_id[0] == sid)
    env.record("state changes", list(states.states))
    env.call("ephemeral still there", zk.exists, env.base + "/e")
    rc = env.raw()
    reply_frames = []
    rc.send_frame(int32(PING_XID) + int32(OP_PING))
    body = rc.recv_frame()
    reply_frames.append(("xid", int.from_bytes(body[:4], "big", signed=True), "len", len(body)))
    env.record("raw ping reply", reply_frames)


# ------------------------------------------------------------- resumption


@scenario(single_server=True)
def session_resume_with_id_and_password(env):
    """Reconnecting with the session id and password keeps the session and its ephemerals."""
    watcher = env.client()
    first = env.raw()
    sid, passwd = first.connect_result.session_id, first.connect_result.passwd
    env.record("first", connect_outcome(first.connect_result))
    env.raw_call("create ephemeral", first.create, env.base + "/e", b"", EPHEMERAL)
    first.close()
    time.sleep(0.3)
    env.call("ephemeral after disconnect", watcher.exists, env.base + "/e")
    second = env.raw(connect=False)
    env.record(
        "resumed", connect_outcome(second.connect(timeout_ms=10_000, session_id=sid, passwd=passwd))
    )
    env.raw_call("resumed session deletes its ephemeral", second.delete, env.base + "/e")
    env.raw_call("and creates another", second.create, env.base + "/e2", b"", EPHEMERAL)
    env.call("owner of e2", watcher.exists, env.base + "/e2")
    resumer = env.client(client_id=(sid, passwd))
    env.record("kazoo resumes the same session", resumer.client_id[0] == sid)
    env.call("kazoo sees e2", resumer.exists, env.base + "/e2")
    env.record("the raw connection it took over", still_open(second))


@scenario
def session_wrong_password_is_expired(env):
    """A known session id with the wrong password gets an expired-session answer
    and a closed connection. ZooKeeper drops the session's current connection
    before it checks the password, but the session and its ephemerals survive."""
    owner = env.raw()
    sid, passwd = owner.connect_result.session_id, owner.connect_result.passwd
    env.raw_call("create ephemeral", owner.create, env.base + "/e", b"", EPHEMERAL)
    wrong = bytes(b ^ 0xFF for b in passwd)
    impostor = env.raw(connect=False)
    env.record("wrong password", connect_outcome(impostor.connect(session_id=sid, passwd=wrong)))
    env.record("impostor connection", still_open(impostor))
    short = env.raw(connect=False)
    env.record("short password", connect_outcome(short.connect(session_id=sid, passwd=passwd[:8])))
    env.record("owner connection", still_open(owner))
    env.raw_call("owner's old connection", owner.exists, env.base + "/e")
    unknown = env.raw(connect=False)
    env.record(
        "unknown session id",
        connect_outcome(unknown.connect(session_id=sid + 0x7777, passwd=passwd)),
    )
    zk = env.client(client_id=(sid, wrong))
    env.record("kazoo with wrong password got a new session", zk.client_id[0] != sid)
    env.call("ephemeral kept", zk.exists, env.base + "/e")


# ------------------------------------------------------------ closeSession


@scenario
def session_close_is_final_and_idempotent(env):
    """closeSession is answered, then the connection closes; the session cannot
    be resumed; kazoo's stop()/close() may be repeated."""
    watcher = env.client()
    rc = env.raw()
    sid, passwd = rc.connect_result.session_id, rc.connect_result.passwd
    env.raw_call("create ephemeral", rc.create, env.base + "/e", b"", EPHEMERAL)
    env.raw_call("closeSession", rc.close_session)
    env.record("connection after close", still_open(rc))
    env.call("ephemeral gone", watcher.exists, env.base + "/e")
    again = env.raw(connect=False)
    env.record(
        "resume closed session", connect_outcome(again.connect(session_id=sid, passwd=passwd))
    )
    env.record("that connection", still_open(again))

    zk = env.client()
    states = StateLog(zk)
    zk.create(env.base + "/k", b"", ephemeral=True)
    env.call("stop", zk.stop)
    env.call("stop again", zk.stop)
    env.call("close", zk.close)
    env.record("kazoo states", list(states.states))
    env.call("kazoo ephemeral gone", watcher.exists, env.base + "/k")


@scenario
def session_close_by_takeover_connection(env):
    """A session taken over by a second connection can be closed from there:
    the first connection is dropped and the ephemerals go."""
    watcher = env.client()
    first = env.raw()
    sid, passwd = first.connect_result.session_id, first.connect_result.passwd
    env.raw_call("create ephemeral", first.create, env.base + "/e", b"", EPHEMERAL)
    second = env.raw(connect=False)
    env.record("takeover", connect_outcome(second.connect(session_id=sid, passwd=passwd)))
    env.record("first connection after takeover", still_open(first))
    env.raw_call("closeSession from second", second.close_session)
    env.call("ephemeral gone", watcher.exists, env.base + "/e")


@scenario
def session_ephemeral_owners(env):
    """ephemeralOwner is the creating session's id; each session has its own."""
    a = env.client()
    c = env.client()
    env.record("a", env.session(a))
    env.record("c", env.session(c))
    env.call("a creates", a.create, env.base + "/a", b"", ephemeral=True)
    env.call("c creates", c.create, env.base + "/c", b"", ephemeral=True)
    env.call("c creates seq", c.create, env.base + "/s-", b"", ephemeral=True, sequence=True)
    env.call("stat a", c.exists, env.base + "/a")
    env.call("stat c", a.exists, env.base + "/c")
    env.call("c deletes a's ephemeral", c.delete, env.base + "/a")
    env.call("a's ephemeral is gone", a.exists, env.base + "/a")
    env.call("ephemerals cannot have children", a.create, env.base + "/c/kid", b"")
    a.stop()
    env.call("c's nodes remain", c.get_children, env.base)
