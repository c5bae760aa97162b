"""Differential scenarios: the wire protocol itself (framing, xids, handshake, reply zxids).

Everything here goes through RawClient: kazoo never sends these byte sequences.
"""

import struct

from .harness import error_name, scenario
from .rawclient import (
    OP_CREATE,
    OP_DELETE,
    OP_EXISTS,
    OP_GET_DATA,
    ConnectionClosed,
    acl_vector,
    boolean,
    buffer,
    int32,
    int64,
    read_stat,
    ustring,
)

OP_PING = 11  # ZooDefs.OpCode.ping
PING_XID = -2  # ClientCnxn's xid for pings
CONNECT_RESPONSE_WITHOUT_READONLY = 4 + 4 + 8 + 4 + 16  # no trailing readOnly byte


def _outcome(env, label, fn):
    """Log what fn's exchange came to: a reply's error name, or the connection closing."""
    try:
        value = fn()
    except (ConnectionClosed, ConnectionError):
        env.record(label, "connection closed")
        return None
    except TimeoutError:
        env.record(label, "no reply (timeout)")
        return None
    env.record(label, value)
    return value


@scenario
def protocol_pipelined_replies_in_order(env):
    """Forty requests sent back to back: replies come in request order, errors included."""
    rc = env.raw()
    sent = []
    for i in range(40):
        path = f"{env.base}/p{i % 3}"
        op, payload = [
            (OP_CREATE, ustring(path) + buffer(b"") + acl_vector() + int32(0)),
            (OP_GET_DATA, ustring(path) + boolean(False)),
            (OP_DELETE, ustring(path) + int32(-1)),
            (OP_EXISTS, ustring(env.base) + boolean(False)),
        ][i % 4]
        xid = rc.next_xid()
        sent.append(xid)
        rc.send_frame(int32(xid) + int32(op) + payload)
    replies = [rc.recv_reply() for _ in sent]
    env.record("xids in order", [r.xid for r in replies] == sent)
    env.record("errors", [error_name(r.err) for r in replies])


@scenario
def protocol_reply_header_zxids(env):
    """Reply headers: a write's zxid is its txn's, a failed write's is a new one, reads lag not."""
    rc = env.raw()
    created = rc.create(env.base + "/n", b"")
    stat, _ = read_stat(rc.exists(env.base + "/n").body)
    env.record("create reply zxid is the czxid", created.zxid == stat["czxid"])
    updated = rc.set_data(env.base + "/n", b"x")
    new_stat, _ = read_stat(updated.body)
    env.record("setData reply zxid is the mzxid", updated.zxid == new_stat["mzxid"])
    failed = rc.create(env.base + "/n", b"")
    env.record("failed create", error_name(failed.err))
    env.record("failed write reply zxid is newer", failed.zxid > new_stat["mzxid"])
    read = rc.get_data(env.base + "/n")
    env.record("read reply zxid >= failed write's", read.zxid >= failed.zxid)
    missing = rc.get_data(env.base + "/missing")
    env.record("failed read reply zxid >= failed write's", missing.zxid >= failed.zxid)
    after = rc.create(env.base + "/m", b"")
    env.record("next create's zxid is newer still", after.zxid > failed.zxid)
    rc.send_frame(int32(PING_XID) + int32(OP_PING))
    ping = rc.recv_reply()
    env.record("ping reply xid, err", (ping.xid, ping.err))
    env.record("ping reply zxid >= last write's", ping.zxid >= after.zxid)
    env.record("ping reply body", ping.body)


@scenario
def protocol_xids_are_echoed(env):
    """The server echoes any xid, duplicates and negatives included."""
    rc = env.raw()
    exists_root = int32(OP_EXISTS) + ustring(env.base) + boolean(False)
    for xid in (7, 7, -5, 0, 2**31 - 1):
        rc.send_frame(int32(xid) + exists_root)
        reply = rc.recv_reply()
        env.record(f"xid {xid}", (reply.xid, error_name(reply.err)))


@scenario
def protocol_unknown_opcode(env):
    """An unknown op code gets Unimplemented, then the server hangs up by itself.

    The client waits for that rather than sending another request: ZooKeeper queues its
    close behind the reply, and a request that arrives first is sometimes answered (seen
    once in CI against 3.8), so "next request" raced."""
    for op in (99, 0, -100):
        rc = env.raw()
        _outcome(env, f"op {op}", lambda rc=rc, op=op: error_name(rc.request(op, b"").err))
        _outcome(env, f"op {op}: then", lambda rc=rc: f"a frame {rc.recv_frame()!r}")


@scenario
def protocol_malformed_request_bodies(env):
    """A truncated body is a MarshallingError; trailing bytes are ignored."""
    rc = env.raw()
    _outcome(
        env,
        "truncated getData",
        lambda: error_name(rc.request(OP_GET_DATA, b"\x00\x00").err),
    )
    _outcome(env, "then exists", lambda: error_name(rc.exists(env.base).err))
    _outcome(
        env,
        "getData with trailing bytes",
        lambda: error_name(rc.request(OP_GET_DATA, ustring(env.base) + b"\x00junk").err),
    )
    _outcome(env, "then exists again", lambda: error_name(rc.exists(env.base).err))
    _outcome(
        env,
        "path length past the frame",
        lambda: error_name(rc.request(OP_EXISTS, int32(1000) + b"/x").err),
    )
    _outcome(env, "then exists once more", lambda: error_name(rc.exists(env.base).err))


@scenario
def protocol_bad_frame_lengths(env):
    """A negative, zero or oversized frame length closes just that connection."""
    bystander = env.client()
    for label, header in (
        ("negative length", struct.pack(">i", -5)),
        ("zero length", struct.pack(">i", 0)),
        ("length 2^31-1", struct.pack(">i", 2**31 - 1)),
        ("length jute.maxbuffer + 1", struct.pack(">i", 0xFFFFF + 1)),
    ):
        rc = env.raw()
        rc.send_bytes(header)
        _outcome(env, label, lambda rc=rc: error_name(rc.recv_reply().err))
    env.call("other sessions unaffected", bystander.exists, env.base)


@scenario
def protocol_connect_variants(env):
    """Handshake variants: no readOnly byte, readOnly asked, a future lastZxidSeen."""
    old = env.raw(connect=False)
    old.send_frame(int32(0) + int64(0) + int32(4000) + int64(0) + buffer(b"\x00" * 16))
    body = old.recv_frame()
    env.record("old-style connect: response length", len(body))
    env.record(
        "old-style connect: without readOnly", len(body) == CONNECT_RESPONSE_WITHOUT_READONLY
    )
    _outcome(env, "old-style session works", lambda: error_name(old.exists(env.base).err))
    old.connect_result = None
    old.send_frame(int32(1) + int32(-11))  # closeSession, so it does not linger
    _outcome(env, "old-style close", lambda: error_name(old.recv_reply().err))

    ro = env.raw(connect=False)
    result = ro.connect(timeout_ms=4000, read_only=True)
    env.record("readOnly asked: granted?", result.read_only)
    _outcome(
        env, "readOnly session can write", lambda: error_name(ro.create(env.base + "/w", b"").err)
    )

    future = env.raw(connect=False)
    _outcome(
        env,
        "lastZxidSeen ahead of the server",
        lambda: future.connect(timeout_ms=4000, last_zxid_seen=1 << 60).timeout_ms,
    )


@scenario
def protocol_requests_after_close_session(env):
    """After closeSession's reply the connection is closed; the session is gone."""
    rc = env.raw()
    env.raw_call("create ephemeral", rc.create, env.base + "/e", b"", 1)
    env.raw_call("closeSession", rc.close_session)
    env.raw_call("request after close", rc.exists, env.base)
    zk = env.client()
    env.call("ephemeral gone", zk.exists, env.base + "/e")


@scenario
def protocol_create_flags(env):
    """Create flags 0-3 are the four classic modes; others are refused (no TTL/containers here)."""
    rc = env.raw()
    for flags in (0, 1, 2, 3, 5, 6, 7, 8, 99, -1):
        env.raw_call(f"flags {flags}", rc.create, f"{env.base}/f{flags}-", b"", flags)
    zk = env.client()
    env.call("children", zk.get_children, env.base)
