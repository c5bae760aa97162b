"""Differential scenarios: ACLs, auth schemes, NoAuth, and which error wins.

Most scenarios run on the shared servers. The super-digest ones need a server
configured with a superDigest, so they start their own pair (module fixture)
and run through the same differential harness.
"""

from __future__ import annotations

import base64
import hashlib
import os
import struct
from collections.abc import Iterator

import pytest
from kazoo.security import (
    ACL,
    CREATOR_ALL_ACL,
    OPEN_ACL_UNSAFE,
    READ_ACL_UNSAFE,
    Id,
    Permissions,
    make_acl,
    make_digest_acl,
    make_digest_acl_credential,
)

from .deliberate import exists_needs_read
from .harness import (
    REGISTRY,
    Scenario,
    close_admin_clients,
    run_differential,
    scenario,
    wait_until,
)
from .rawclient import REPLY_HEADER, ConnectionClosed, int32, ustring
from .servers import ServerProcess, start_zkcompat, start_zookeeper

# ZooDefs.OpCode.auth and the xid the Java client sends it with.
OP_AUTH = 100
AUTH_XID = -4
PERMS = {
    "r": Permissions.READ,
    "w": Permissions.WRITE,
    "c": Permissions.CREATE,
    "d": Permissions.DELETE,
    "a": Permissions.ADMIN,
}


def digest(user_password: str) -> str:
    """DigestAuthenticationProvider.generateDigest: user:base64(sha1(user:password))."""
    user = user_password.split(":", 1)[0]
    sha1 = hashlib.sha1(user_password.encode()).digest()
    return f"{user}:{base64.b64encode(sha1).decode()}"


def world(perms: int) -> list[ACL]:
    return [ACL(perms, Id("world", "anyone"))]


# ------------------------------------------------------ schemes and creation


@scenario
def acl_open_unsafe_default(env):
    """A create without an ACL is world:anyone:cdrwa; get_acls returns it with a Stat."""
    zk = env.client()
    env.call("create default", zk.create, env.base + "/a", b"")
    env.call("create explicit", zk.create, env.base + "/b", b"", acl=OPEN_ACL_UNSAFE)
    env.call("get_acls default", zk.get_acls, env.base + "/a")
    env.call("get_acls explicit", zk.get_acls, env.base + "/b")
    env.call("get_acls base", zk.get_acls, env.base)


@scenario
def acl_creator_all_needs_an_authenticated_id(env):
    """CREATOR_ALL ("auth" scheme) with no authenticated id is InvalidACL, and
    nothing is created; the ip identity every connection has does not count."""
    zk = env.client()
    env.call("create creator_all", zk.create, env.base + "/a", b"", acl=CREATOR_ALL_ACL)
    env.call("exists after", zk.exists, env.base + "/a")
    env.call("parent unchanged", zk.exists, env.base)
    env.call("set_acls creator_all", zk.set_acls, env.base, CREATOR_ALL_ACL)
    env.call("get_acls base", zk.get_acls, env.base)


@scenario(expect_39=exists_needs_read("anon exists"))
def acl_creator_all_with_digest(env):
    """With digest auth, CREATOR_ALL becomes digest:user:base64(sha1(user:password))."""
    alice = env.client(auth_data=[("digest", "alice:secret")])
    anon = env.client()
    wrong = env.client(auth_data=[("digest", "alice:wrong")])
    right = env.client(auth_data=[("digest", "alice:secret")])
    path = env.base + "/a"
    env.call("create", alice.create, path, b"data", acl=CREATOR_ALL_ACL)
    acls = env.call("get_acls", alice.get_acls, path)
    env.record("id is user:base64(sha1)", acls[0][0].id.id == digest("alice:secret"))
    env.record(
        "kazoo's credential agrees",
        acls[0][0].id.id == make_digest_acl_credential("alice", "secret"),
    )
    env.call("anon get", anon.get, path)
    env.call("wrong password get", wrong.get, path)
    env.call("right password get", right.get, path)
    env.call("right password set", right.set, path, b"new")
    env.call("anon exists", anon.exists, path)


@scenario
def acl_auth_scheme_with_several_identities(env):
    """The "auth" scheme expands to every authenticated id of the session; a
    repeated add_auth adds nothing; a colon in the password is part of it."""
    zk = env.client(
        auth_data=[("digest", "alice:secret"), ("digest", "bob:pa:ss"), ("digest", "alice:secret")]
    )
    env.call("create", zk.create, env.base + "/a", b"", acl=CREATOR_ALL_ACL)
    env.call("get_acls", zk.get_acls, env.base + "/a")
    env.record("bob's id", digest("bob:pa:ss"))
    bob = env.client(auth_data=[("digest", "bob:pa:ss")])
    env.call("bob get", bob.get, env.base + "/a")
    bob_short = env.client(auth_data=[("digest", "bob:pa")])
    env.call("bob wrong get", bob_short.get, env.base + "/a")


@scenario
def acl_digest_acl_made_by_client(env):
    """A digest ACL computed client-side (kazoo make_digest_acl) grants exactly its perms."""
    owner = env.client()
    carol = env.client(auth_data=[("digest", "carol:pw")])
    anon = env.client()
    path = env.base + "/a"
    acl = [
        make_digest_acl("carol", "pw", read=True, write=True),
        ACL(Permissions.READ, Id("world", "anyone")),
    ]
    env.call("create", owner.create, path, b"x", acl=acl)
    env.call("carol set", carol.set, path, b"carol")
    env.call("carol create child", carol.create, path + "/c", b"")
    env.call("anon get", anon.get, path)
    env.call("anon set", anon.set, path, b"anon")
    env.call("carol get_acls", carol.get_acls, path)
    env.call("anon get_acls (no admin: digest redacted)", anon.get_acls, path)
    env.call("carol delete (parent is open)", carol.delete, path)


@scenario
def acl_read_acl_unsafe(env):
    """READ_ACL_UNSAFE: reads work; writes, creates and ACL changes are NoAuth;
    deleting the node itself needs DELETE on the parent, which is open."""
    zk = env.client()
    path = env.base + "/ro"
    zk.create(path + "/child", b"c", makepath=True)
    env.call("set_acls read only", zk.set_acls, path, READ_ACL_UNSAFE)
    env.call("get", zk.get, path)
    env.call("get_children", zk.get_children, path)
    env.call("get_acls", zk.get_acls, path)
    env.call("set", zk.set, path, b"x")
    env.call("create child", zk.create, path + "/new", b"")
    env.call("delete child", zk.delete, path + "/child")
    env.call("set_acls back", zk.set_acls, path, OPEN_ACL_UNSAFE)
    env.call("child is still open", zk.set, path + "/child", b"writable")
    env.call("create read-only leaf", zk.create, env.base + "/leaf", b"", acl=READ_ACL_UNSAFE)
    env.call("delete read-only leaf", zk.delete, env.base + "/leaf")


@scenario(expect_39=exists_needs_read("w: exists", "c: exists", "d: exists", "a: exists"))
def acl_permission_matrix(env):
    """Each single permission grants exactly its operations (world:anyone:<p>)."""
    zk = env.client()
    for name, perm in PERMS.items():
        node = f"{env.base}/{name}"
        zk.create(node + "/victim", b"", makepath=True)
        zk.set_acls(node, world(perm))
    for name, perm in PERMS.items():
        node = f"{env.base}/{name}"
        env.call(f"{name}: get", zk.get, node)
        env.call(f"{name}: get_children", zk.get_children, node)
        env.call(f"{name}: exists", zk.exists, node)
        env.call(f"{name}: get_acls", zk.get_acls, node)
        env.call(f"{name}: set", zk.set, node, b"x")
        env.call(f"{name}: create child", zk.create, node + "/new", b"")
        env.call(f"{name}: delete child", zk.delete, node + "/victim")
        env.call(f"{name}: set_acls", zk.set_acls, node, world(perm))
        env.call(f"{name}: sync", zk.sync, node)


@scenario
def acl_no_inheritance(env):
    """ACLs are per node: a child stays open under a parent nobody may read."""
    zk = env.client()
    parent = env.base + "/p"
    zk.create(parent + "/open", b"child", makepath=True)
    env.call("lock parent", zk.set_acls, parent, [make_digest_acl("nobody", "x", all=True)])
    env.call("get parent", zk.get, parent)
    env.call("get_children parent", zk.get_children, parent)
    env.call("get child", zk.get, parent + "/open")
    env.call("set child", zk.set, parent + "/open", b"still mine")
    env.call("create grandchild", zk.create, parent + "/open/g", b"")
    env.call("delete child (parent denies DELETE)", zk.delete, parent + "/open")


@scenario
def acl_change_applies_to_connected_sessions(env):
    """A session already connected is judged by the ACL as it is now."""
    admin = env.client()
    reader = env.client()
    path = env.base + "/a"
    admin.create(path, b"v")
    env.call("read before", reader.get, path)
    env.call("restrict", admin.set_acls, path, [make_digest_acl("dave", "pw", all=True)])
    env.call("read after", reader.get, path)
    env.call("admin lost admin too", admin.set_acls, path, OPEN_ACL_UNSAFE)
    env.call("add_auth dave", reader.add_auth, "digest", "dave:pw")
    env.call("read with auth", reader.get, path)
    env.call("reopen", reader.set_acls, path, OPEN_ACL_UNSAFE)
    env.call("admin reads again", admin.get, path)


# ----------------------------------------------------------- ACL versions


@scenario
def acl_set_acls_versions(env):
    """setACL checks aversion (BadVersion), bumps it, leaves version/mzxid alone."""
    zk = env.client()
    path = env.base + "/a"
    zk.create(path, b"")
    env.call("set_acls v0", zk.set_acls, path, OPEN_ACL_UNSAFE, version=0)
    env.call("set_acls stale v0", zk.set_acls, path, OPEN_ACL_UNSAFE, version=0)
    env.call("set_acls future v5", zk.set_acls, path, OPEN_ACL_UNSAFE, version=5)
    env.call("set_acls any", zk.set_acls, path, OPEN_ACL_UNSAFE, version=-1)
    env.call("get_acls", zk.get_acls, path)
    restricted = READ_ACL_UNSAFE + [make_digest_acl("e", "pw", all=True)]
    env.call("restrict v2", zk.set_acls, path, restricted, version=2)
    env.call("no admin: stale version", zk.set_acls, path, OPEN_ACL_UNSAFE, version=0)
    env.call("no admin: right version", zk.set_acls, path, OPEN_ACL_UNSAFE, version=3)
    env.call("get_acls without admin", zk.get_acls, path)
    zk.add_auth("digest", "e:pw")
    env.call("admin again: stale version", zk.set_acls, path, OPEN_ACL_UNSAFE, version=0)
    env.call("admin again: right version", zk.set_acls, path, OPEN_ACL_UNSAFE, version=3)
    env.call("get_acls after", zk.get_acls, path)
    env.call("set_acls missing node", zk.set_acls, env.base + "/missing", OPEN_ACL_UNSAFE)
    tx = zk.transaction()
    tx.check(path, 0)
    tx.set_data(path, b"tx")
    env.call("check uses data version, not aversion", tx.commit)


# ------------------------------------------------------------------ ip scheme


@scenario
def acl_ip_scheme(env):
    """ip:127.0.0.1, CIDR 127.0.0.0/8 and /32 match a loopback client; others do not."""
    zk = env.client()
    cases = {
        "host": make_acl("ip", "127.0.0.1", all=True),
        "cidr8 read": make_acl("ip", "127.0.0.0/8", read=True),
        "cidr32": make_acl("ip", "127.0.0.1/32", all=True),
        "other host": make_acl("ip", "10.1.2.3", all=True),
        "other net": make_acl("ip", "10.0.0.0/8", all=True),
        "cidr0": make_acl("ip", "0.0.0.0/0", read=True),
    }
    for name, acl in cases.items():
        node = f"{env.base}/{name.replace(' ', '_')}"
        env.call(f"{name}: create", zk.create, node, b"data", acl=[acl])
        env.call(f"{name}: get", zk.get, node)
        env.call(f"{name}: set", zk.set, node, b"new")
        env.call(f"{name}: get_acls", zk.get_acls, node)


@scenario
def acl_invalid_ids(env):
    """Malformed ids and unknown schemes are InvalidACL; nothing is created."""
    zk = env.client()
    cases = {
        "world someone": ACL(Permissions.ALL, Id("world", "someone")),
        "unknown scheme": ACL(Permissions.ALL, Id("nosuchscheme", "x")),
        "digest without hash": ACL(Permissions.ALL, Id("digest", "alice")),
        "ip not an address": ACL(Permissions.ALL, Id("ip", "not.an.ip")),
        "ip bad octet": ACL(Permissions.ALL, Id("ip", "300.1.1.1")),
        "ip bad prefix": ACL(Permissions.ALL, Id("ip", "127.0.0.1/33")),
        "super scheme": ACL(Permissions.ALL, Id("super", "")),
    }
    for i, (name, acl) in enumerate(cases.items()):
        env.call(f"{name}: create", zk.create, f"{env.base}/n{i}", b"", acl=[acl])
        env.call(f"{name}: set_acls", zk.set_acls, env.base, [acl])
    env.call("children", zk.get_children, env.base)
    env.call("base acl unchanged", zk.get_acls, env.base)


@scenario
def acl_empty_acl_list(env):
    """An empty ACL vector (kazoo would substitute its default) is InvalidACL."""
    rc = env.raw()
    env.raw_call("create empty acl", rc.create, env.base + "/a", b"", 0, ())
    env.raw_call("create open acl", rc.create, env.base + "/b", b"", 0)
    env.raw_call("exists a", rc.exists, env.base + "/a")


# ---------------------------------------------------------------- auth


@scenario
def acl_bad_auth_scheme_auth_failed(env):
    """An auth packet with an unknown scheme: AuthFailed, then the server closes."""
    rc = env.raw()
    rc.send_frame(
        int32(AUTH_XID) + int32(OP_AUTH) + int32(0) + ustring("nosuchscheme") + ustring("x")
    )
    frames = []
    try:
        while True:
            body = rc.recv_frame()
            xid, _, err = REPLY_HEADER.unpack_from(body, 0)
            if xid == -1:
                etype, state = struct.unpack_from(">ii", body, REPLY_HEADER.size)
                frames.append(("notification", etype, state))
            else:
                frames.append(("reply", xid, err))
    except ConnectionClosed:
        frames.append("closed")
    except TimeoutError:
        frames.append("still open after 5 s")
    env.record("frames", frames)
    zk = env.client()
    env.call("kazoo add_auth bad scheme", zk.add_auth, "nosuchscheme", "x")
    # kazoo fails the call before its connection thread moves the state to
    # LOST, so reading the state at once races that thread.
    wait_until(lambda: zk.state != "CONNECTED", timeout_s=5.0)
    env.record("kazoo state after", str(zk.state))


@scenario
def acl_digest_auth_wrong_password_is_not_an_error(env):
    """A wrong digest password is accepted as an auth packet; it just grants nothing."""
    owner = env.client(auth_data=[("digest", "frank:right")])
    path = env.base + "/a"
    owner.create(path, b"", acl=CREATOR_ALL_ACL)
    zk = env.client()
    env.call("add_auth wrong", zk.add_auth, "digest", "frank:wrong")
    env.call("get", zk.get, path)
    env.call("add_auth right", zk.add_auth, "digest", "frank:right")
    env.call("get after right", zk.get, path)
    env.call("add_auth no colon", zk.add_auth, "digest", "justaname")
    env.call("still connected get", zk.get, path)


# ------------------------------------------------------ error precedence


@scenario
def acl_error_precedence(env):
    """Which error wins when several apply: ZooKeeper checks the parent's ACL
    before existence and versions, and the node's ACL before its version."""
    owner = env.client(auth_data=[("digest", "gina:pw")])
    anon = env.client()
    b = env.base
    locked = make_digest_acl("gina", "pw", all=True)
    owner.create(f"{b}/locked/child", b"", makepath=True, acl=[locked])
    owner.create(f"{b}/locked/full/x", b"", makepath=True)
    owner.set_acls(f"{b}/locked", [locked])
    owner.create(f"{b}/open", b"")
    owner.create(f"{b}/open/locked_leaf", b"", acl=[locked])

    env.call("create existing under locked parent", anon.create, f"{b}/locked/child", b"")
    env.call("create under missing parent", anon.create, f"{b}/missing/x", b"")
    env.call("delete missing under locked parent", anon.delete, f"{b}/locked/nothing")
    env.call("delete bad version under locked parent", anon.delete, f"{b}/locked/child", version=9)
    env.call("delete not-empty under locked parent", anon.delete, f"{b}/locked/full")
    env.call("set locked leaf bad version", anon.set, f"{b}/open/locked_leaf", b"", version=9)
    env.call(
        "set_acls locked leaf bad version",
        anon.set_acls,
        f"{b}/open/locked_leaf",
        OPEN_ACL_UNSAFE,
        version=9,
    )
    env.call("get missing under locked", anon.get, f"{b}/locked/nothing")
    env.call("set missing", anon.set, f"{b}/open/nothing", b"", version=9)
    env.call("delete locked leaf (parent open)", anon.delete, f"{b}/open/locked_leaf", version=9)
    env.call("owner delete not-empty bad version", owner.delete, f"{b}/locked/full", version=9)
    env.call("owner delete not-empty", owner.delete, f"{b}/locked/full")
    env.call(
        "create ephemeral child under locked", anon.create, f"{b}/locked/e", b"", ephemeral=True
    )
    tx = anon.transaction()
    tx.create(f"{b}/open/ok", b"")
    tx.set_data(f"{b}/open/locked_leaf", b"x")
    tx.create(f"{b}/open/never", b"")
    env.call("multi with a NoAuth op", tx.commit)
    env.call("multi left nothing", anon.get_children, f"{b}/open")


# ---------------------------------------------------------- super digest

SUPER_PASSWORD = "super:s3cret"
SUPER_DIGEST = digest(SUPER_PASSWORD)
# ZooKeeper turns unknown zoo.cfg keys into "zookeeper.<key>" system
# properties; zkcompat reads superDigest. Each ignores the other's key.
SUPER_CFG = {
    "DigestAuthenticationProvider.superDigest": SUPER_DIGEST,
    "superDigest": SUPER_DIGEST,
}
SELFTEST = os.environ.get("CONFORMANCE_SELFTEST", "") not in ("", "0")


def super_reads_everything(env):
    """super (the configured superDigest) passes every ACL check."""
    owner = env.client(auth_data=[("digest", "hank:pw")])
    root = env.client(auth_data=[("digest", SUPER_PASSWORD)])
    anon = env.client()
    path = env.base + "/private"
    owner.create(path + "/kid", b"", makepath=True, acl=CREATOR_ALL_ACL)
    owner.set_acls(path, CREATOR_ALL_ACL)
    env.call("anon get", anon.get, path)
    env.call("super get", root.get, path)
    env.call("super get_children", root.get_children, path)
    env.call("super get_acls", root.get_acls, path)
    env.call("super set", root.set, path, b"super was here")
    env.call("super create child", root.create, path + "/by_super", b"", acl=CREATOR_ALL_ACL)
    env.call("super child acl", root.get_acls, path + "/by_super")
    env.call("super delete child", root.delete, path + "/kid")
    env.call("super set_acls", root.set_acls, path, READ_ACL_UNSAFE)
    env.call("anon get now", anon.get, path)


def super_wrong_password(env):
    """A wrong super password is an ordinary, powerless digest identity."""
    owner = env.client(auth_data=[("digest", "ivy:pw")])
    fake = env.client(auth_data=[("digest", "super:guess")])
    path = env.base + "/private"
    owner.create(path, b"", acl=CREATOR_ALL_ACL)
    env.call("fake super get", fake.get, path)
    env.call("fake super set_acls", fake.set_acls, path, OPEN_ACL_UNSAFE)
    env.call(
        "fake super creates with auth", fake.create, env.base + "/fake", b"", acl=CREATOR_ALL_ACL
    )
    env.call("its acl", fake.get_acls, env.base + "/fake")


SUPER_SCENARIOS = {
    f.__name__: Scenario(name=f.__name__, fn=f, doc=f.__doc__ or "")
    for f in (super_reads_everything, super_wrong_password)
}


@pytest.fixture(scope="module")
def super_digest_pair(tmp_path_factory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """A ZooKeeper and a zkcompat (a second ZooKeeper under CONFORMANCE_SELFTEST) with a superDigest."""
    started: list[ServerProcess] = []
    try:
        started.append(start_zookeeper(tmp_path_factory.mktemp("zk-super"), extra_cfg=SUPER_CFG))
        start_candidate = start_zookeeper if SELFTEST else start_zkcompat
        started.append(
            start_candidate(tmp_path_factory.mktemp("candidate-super"), extra_cfg=SUPER_CFG)
        )
        yield started[0], started[1]
    finally:
        close_admin_clients()
        for server in started:
            server.stop()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(SUPER_SCENARIOS))
def test_acl_super_digest(name: str, super_digest_pair) -> None:
    assert not any(key.endswith(f".{name}") for key in REGISTRY)  # not on the shared pair
    run_differential(SUPER_SCENARIOS[name], *super_digest_pair)
