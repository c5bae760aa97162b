"""Where ZooKeeper 3.8 (the Debian binary we test against) and 3.9 disagree.

zkcompat follows 3.9. For each difference the same script runs against both
servers and each log is compared with what its version is known to do: the
reference must still show 3.8's behaviour (so the test notices if the binary
changes under us) and zkcompat must show 3.9's. Sources, by ZooKeeper issue:

- ZOOKEEPER-4466 (3.9): one connection may hold one-shot, persistent and
  recursive watches on the same path at once; in 3.8 the mode set last on a
  path replaces the earlier one (a getData watch turns a persistent watch
  one-shot, a recursive watch swallows a child watch, ...).
- ZOOKEEPER-4471 (3.9): checkWatches/removeWatches accept PERSISTENT (4) and
  PERSISTENT_RECURSIVE (5), and CHILDREN/DATA match only one-shot watches;
  3.8 answers MarshallingError to 4 and 5 and lets DATA/CHILDREN find and
  remove persistent watches.
- ZOOKEEPER-4466 (3.9) also fixed checkWatches: 3.8 answers OK when any
  session has a watch of that type on the path, not only the asking one.
- ZOOKEEPER-4026 (3.9, and 3.8.4): a create2 op inside multi answers a
  Create2 result (type 15, path and Stat); 3.8.0 answers a create result
  (type 1, path only).
- ZOOKEEPER-4655 (3.9): a notification's reply header carries the zxid of the
  txn that fired it; 3.8 sends -1.
- ZOOKEEPER-2590 (3.9): exists needs READ on an existing node.
- ZOOKEEPER-2623 (3.9.3): a check (13) outside multi is refused with
  Unimplemented; Debian's 3.8.0 fails to answer it and closes the connection.
- ZOOKEEPER-4575 (3.9): deleteContainer (20) is decoded as a DeleteContainer
  request (the path), so a client can send it; 3.8 reads the raw request
  buffer as the path and answers BadArguments.

Notifications filtered by READ permission (CVE-2024-23944, ZOOKEEPER-4799) are
3.9 and 3.8.4 behaviour, and Debian backported it into its 3.8.0; the
differential scenarios in test_scenarios_api39.py cover it.
"""

from __future__ import annotations

import time

import pytest

from .harness import Scenario, new_base, normalised, run_scenario
from .rawclient import ConnectionClosed, RawClient, int32
from .servers import start_zkcompat
from .test_scenarios_api39 import (
    ADD_WATCH_PERSISTENT,
    ADD_WATCH_PERSISTENT_RECURSIVE,
    CONTAINER,
    EPHEMERAL,
    OP_CHECK,
    OP_CREATE,
    OP_CREATE2,
    OP_CREATE_TTL,
    OP_DELETE_CONTAINER,
    OP_MULTI,
    PERSISTENT,
    WATCHER_ANY,
    WATCHER_CHILDREN,
    WATCHER_DATA,
    WATCHER_PERSISTENT,
    WATCHER_PERSISTENT_RECURSIVE,
    Api,
    Reader,
    create_payload,
    multi_payload,
    no_read_acl,
    path_payload,
    ustring,
)

pytestmark = pytest.mark.timeout(60)

MARSHALLING = "MarshallingError(-5)"
EXIT_GRACE_S = 0.5
NO_WATCHER = "NoWatcherError(-121)"
OK = ("ok", None)


def run_both(fn, zk_servers) -> tuple[list, list]:
    """The script against ZooKeeper, then zkcompat; both normalised logs."""
    sc = Scenario(name=fn.__name__, fn=fn, doc=(fn.__doc__ or "").strip())
    base = new_base(sc.name)
    ref = normalised(run_scenario(sc, zk_servers.zookeeper, base, "reference"))
    cand = normalised(run_scenario(sc, zk_servers.zkcompat, base, "candidate"))
    return ref, cand


def entries(log: list, prefix: str = "") -> list:
    return [e for e in log if e[0].startswith(prefix)]


def assert_versions(ref: list, cand: list, expected_38: list, expected_39: list) -> None:
    assert ref == expected_38, (
        "ZooKeeper (the 3.8 reference) no longer behaves as 3.8 is known to:\n"
        + "\n".join(map(repr, ref))
    )
    assert cand == expected_39, (
        "zkcompat does not behave as ZooKeeper 3.9:\n"
        + "\n".join(
            f"{'  ' if a == b else '! '}{b!r}    (3.9: {a!r})"
            for a, b in zip(expected_39, cand, strict=False)
        )
        + (
            f"\n(length {len(cand)}, 3.9: {len(expected_39)})"
            if len(cand) != len(expected_39)
            else ""
        )
    )


# ------------------------------------------------------------------ scripts


def persistent_watcher_types(env):
    """checkWatches/removeWatches with PERSISTENT (4) and PERSISTENT_RECURSIVE (5)."""
    w = Api(env, "w")
    writer = Api(env, "writer")
    b = env.base
    for name in ("p", "r", "d"):
        writer.create(f"create {name}", f"{b}/{name}")
    w.add_watch("addWatch p persistent", f"{b}/p", ADD_WATCH_PERSISTENT)
    w.add_watch("addWatch r recursive", f"{b}/r", ADD_WATCH_PERSISTENT_RECURSIVE)
    w.get_data("getData d +watch", f"{b}/d", watch=True)
    for path in ("p", "r", "d"):
        w.check_watches(f"check {path} PERSISTENT", f"{b}/{path}", WATCHER_PERSISTENT)
        w.check_watches(f"check {path} RECURSIVE", f"{b}/{path}", WATCHER_PERSISTENT_RECURSIVE)
    w.remove_watches("remove p PERSISTENT", f"{b}/p", WATCHER_PERSISTENT)
    w.remove_watches("remove r RECURSIVE", f"{b}/r", WATCHER_PERSISTENT_RECURSIVE)
    w.remove_watches("remove r RECURSIVE again", f"{b}/r", WATCHER_PERSISTENT_RECURSIVE)
    writer.set_data("set p", f"{b}/p", b"1")
    writer.create("create r/x", f"{b}/r/x")
    w.sync()
    w.drain()


def standard_types_vs_persistent(env):
    """DATA and CHILDREN against a path that has only a persistent watch."""
    w = Api(env, "w")
    writer = Api(env, "writer")
    b = env.base
    writer.create("create p", f"{b}/p")
    w.add_watch("addWatch p persistent", f"{b}/p", ADD_WATCH_PERSISTENT)
    w.check_watches("check DATA", f"{b}/p", WATCHER_DATA)
    w.check_watches("check CHILDREN", f"{b}/p", WATCHER_CHILDREN)
    w.remove_watches("remove DATA", f"{b}/p", WATCHER_DATA)
    writer.set_data("set p", f"{b}/p", b"1")
    writer.create("create p/a", f"{b}/p/a")
    writer.create("create p/b", f"{b}/p/b")
    w.sync()
    w.check_watches("check ANY at the end", f"{b}/p", WATCHER_ANY)
    w.drain()


def one_shot_and_persistent_same_path(env):
    """A getData watch set on a path that already has a persistent watch."""
    w = Api(env, "w")
    writer = Api(env, "writer")
    b = env.base
    writer.create("create p", f"{b}/p")
    w.add_watch("addWatch p persistent", f"{b}/p", ADD_WATCH_PERSISTENT)
    w.call("getData p +watch", 4, path_payload(f"{b}/p") + b"\x01", lambda body: "data")
    writer.set_data("set 1", f"{b}/p", b"1")
    writer.set_data("set 2", f"{b}/p", b"2")
    writer.create("create p/a", f"{b}/p/a")
    writer.create("create p/b", f"{b}/p/b")
    w.sync()
    w.drain()


def recursive_and_one_shot_same_path(env):
    """A getData watch on a path that has a recursive watch, then removeWatches DATA."""
    w = Api(env, "w")
    writer = Api(env, "writer")
    b = env.base
    writer.create("create r", f"{b}/r")
    w.add_watch("addWatch r recursive", f"{b}/r", ADD_WATCH_PERSISTENT_RECURSIVE)
    w.call("getData r +watch", 4, path_payload(f"{b}/r") + b"\x01", lambda body: "data")
    w.remove_watches("remove DATA", f"{b}/r", WATCHER_DATA)
    writer.set_data("set r", f"{b}/r", b"1")
    writer.create("create r/x", f"{b}/r/x")
    w.sync()
    w.drain()


def child_watch_then_recursive_same_path(env):
    """getChildren+watch on a path, then addWatch RECURSIVE on it, one connection."""
    w = Api(env, "w")
    writer = Api(env, "writer")
    b = env.base
    writer.create("create p", f"{b}/p")
    w.get_children("getChildren p +watch", f"{b}/p", watch=True)
    w.add_watch("addWatch p recursive", f"{b}/p", ADD_WATCH_PERSISTENT_RECURSIVE)
    writer.create("create p/x", f"{b}/p/x")
    w.sync()
    w.drain()


def recursive_then_persistent_same_path(env):
    """addWatch RECURSIVE then addWatch PERSISTENT on one path, one connection."""
    w = Api(env, "w")
    writer = Api(env, "writer")
    b = env.base
    writer.create("create p", f"{b}/p")
    w.add_watch("addWatch p recursive", f"{b}/p", ADD_WATCH_PERSISTENT_RECURSIVE)
    w.add_watch("addWatch p persistent", f"{b}/p", ADD_WATCH_PERSISTENT)
    writer.create("create p/x", f"{b}/p/x")
    writer.create("create p/x/y", f"{b}/p/x/y")
    w.sync()
    w.drain()


def check_watches_of_another_session(env):
    """checkWatches on a path where only another session has a watch."""
    w = Api(env, "w")
    other = Api(env, "other")
    writer = Api(env, "writer")
    b = env.base
    writer.create("create d", f"{b}/d")
    w.get_data("getData d +watch", f"{b}/d", watch=True)
    w.get_children("getChildren d +watch", f"{b}/d", watch=True)
    other.check_watches("other: check DATA", f"{b}/d", WATCHER_DATA)
    other.check_watches("other: check CHILDREN", f"{b}/d", WATCHER_CHILDREN)
    other.check_watches("other: check ANY", f"{b}/d", WATCHER_ANY)


def create2_in_multi(env):
    """A create2 (15) op inside multi, beside a create (1)."""
    api = Api(env, "m")
    b = env.base
    result = api.call(
        "multi",
        OP_MULTI,
        multi_payload(
            [(OP_CREATE, create_payload(f"{b}/a")), (OP_CREATE2, create_payload(f"{b}/b"))]
        ),
        dec_multi_shape,
    )
    stat = api.exists("exists b", f"{b}/b")
    if result and result.value and stat and stat.value:
        env.record(
            "create2 result Stat == exists Stat",
            [r[2][1] == stat.value for r in result.value if r[0] == OP_CREATE2],
        )


def dec_multi_shape(body: bytes):
    """A MultiResponse as (type, err, path, Stat) per op, Stat kept raw for comparison."""
    r = Reader(body)
    out = []
    while True:
        op, done, err = r.int(), r.bool(), r.int()
        if done:
            return out
        if op == OP_CREATE:
            out.append((op, err, r.ustring()))
        elif op == OP_CREATE2:
            out.append((op, err, (r.ustring(), r.stat())))
        else:
            out.append((op, err, "unexpected"))
            return out


def check_outside_multi(env):
    """A check (13) sent as a request of its own."""
    api = Api(env, "c")
    b = env.base
    api.create("create n", f"{b}/n")
    api.call("check outside multi", OP_CHECK, ustring(f"{b}/n") + int32(0))
    api.call("check with a wrong version", OP_CHECK, ustring(f"{b}/n") + int32(5))
    api.call("exists afterwards", 3, path_payload(f"{b}/n") + b"\x00", lambda body: "stat")


def notification_zxid(env):
    """The zxid in a notification's reply header, against the write's own zxid."""
    w = Api(env, "w")
    writer = Api(env, "writer")
    b = env.base
    writer.create("create n", f"{b}/n")
    w.add_watch("addWatch base recursive", b, ADD_WATCH_PERSISTENT_RECURSIVE)
    set_reply = writer.set_data("set n", f"{b}/n", b"1")
    create_reply = writer.create("create m", f"{b}/m")
    w.sync()
    zxids = w.notification_zxids
    env.record("notifications", len(zxids))
    env.record("header zxid is -1", [z == -1 for z in zxids])
    env.record(
        "header zxid is the txn's zxid",
        [z == r.zxid for z, r in zip(zxids, (set_reply, create_reply), strict=False)],
    )


def exists_without_read(env):
    """exists on a node whose ACL denies READ."""
    api = Api(env, "a")
    owner = env.client()
    b = env.base
    owner.create(f"{b}/secret", b"", acl=no_read_acl())
    result = api.call(
        "exists secret", 3, path_payload(f"{b}/secret") + b"\x00", lambda body: "stat"
    )
    env.record("exists answered", result is not None)


def delete_container_from_client(env):
    """deleteContainer (20) sent by a client."""
    api = Api(env, "c")
    b = env.base
    api.create_container("container (never used)", f"{b}/c")
    api.create_container("container with a child", f"{b}/full")
    api.create("child", f"{b}/full/x")
    api.create("ephemeral", f"{b}/e", flags=EPHEMERAL)
    api.create("plain", f"{b}/p")
    for name in ("c", "full", "e", "p", "missing"):
        api.call(f"deleteContainer {name}", OP_DELETE_CONTAINER, path_payload(f"{b}/{name}"))
    api.get_children("left", b)


# -------------------------------------------------------------------- tests


def test_checkwatches_removewatches_persistent_types(zk_servers) -> None:
    """ZOOKEEPER-4471: WatcherType PERSISTENT (4) and PERSISTENT_RECURSIVE (5)."""
    ref, cand = run_both(persistent_watcher_types, zk_servers)
    labels = [e[0] for e in ref]
    common = ref[: labels.index("getData d +watch") + 1]
    checks = [
        "check p PERSISTENT",
        "check p RECURSIVE",
        "check r PERSISTENT",
        "check r RECURSIVE",
        "check d PERSISTENT",
        "check d RECURSIVE",
        "remove p PERSISTENT",
        "remove r RECURSIVE",
        "remove r RECURSIVE again",
    ]
    answers_39 = [OK, NO_WATCHER, NO_WATCHER, OK, NO_WATCHER, NO_WATCHER, OK, OK, NO_WATCHER]
    tail = entries(ref, "set p") + entries(ref, "create r/x")
    expected_38 = (
        common
        + [(c, MARSHALLING) for c in checks]
        + tail
        + [
            ("w event", ("NodeDataChanged", "SyncConnected", "<base>/p")),
            ("w event", ("NodeCreated", "SyncConnected", "<base>/r/x")),
        ]
    )
    expected_39 = common + list(zip(checks, answers_39, strict=True)) + tail
    assert_versions(ref, cand, expected_38, expected_39)


def test_standard_watcher_types_ignore_persistent_watches(zk_servers) -> None:
    """ZOOKEEPER-4471: DATA/CHILDREN match only one-shot watches in 3.9."""
    ref, cand = run_both(standard_types_vs_persistent, zk_servers)
    before = ref[:2]
    writes = entries(ref, "set p") + entries(ref, "create p/")
    expected_38 = before + [
        ("check DATA", OK),
        ("check CHILDREN", OK),
        ("remove DATA", OK),
        *writes,
        ("w event", ("NodeChildrenChanged", "SyncConnected", "<base>/p")),
        ("w event", ("NodeChildrenChanged", "SyncConnected", "<base>/p")),
        ("check ANY at the end", OK),
    ]
    expected_39 = before + [
        ("check DATA", NO_WATCHER),
        ("check CHILDREN", NO_WATCHER),
        ("remove DATA", NO_WATCHER),
        *writes,
        ("w event", ("NodeDataChanged", "SyncConnected", "<base>/p")),
        ("w event", ("NodeChildrenChanged", "SyncConnected", "<base>/p")),
        ("w event", ("NodeChildrenChanged", "SyncConnected", "<base>/p")),
        ("check ANY at the end", OK),
    ]
    assert_versions(ref, cand, expected_38, expected_39)


def test_one_shot_watch_beside_persistent_watch(zk_servers) -> None:
    """ZOOKEEPER-4466: in 3.8 the later getData watch turns the persistent data
    watch into a one-shot one; in 3.9 both stay."""
    ref, cand = run_both(one_shot_and_persistent_same_path, zk_servers)
    writes = [e for e in ref if not e[0].startswith("w event")]
    changed = ("w event", ("NodeDataChanged", "SyncConnected", "<base>/p"))
    children = ("w event", ("NodeChildrenChanged", "SyncConnected", "<base>/p"))
    expected_38 = writes + [changed, children, children]
    expected_39 = writes + [changed, changed, children, children]
    assert_versions(ref, cand, expected_38, expected_39)


def test_one_shot_watch_beside_recursive_watch(zk_servers) -> None:
    """ZOOKEEPER-4466/4471: a getData watch beside a recursive one on the same path;
    removeWatches DATA removes the one-shot only in 3.9, everything in 3.8."""
    ref, cand = run_both(recursive_and_one_shot_same_path, zk_servers)
    head = [e for e in ref if e[0] in ("create r", "addWatch r recursive", "getData r +watch")]
    writes = entries(ref, "set r") + entries(ref, "create r/x")
    expected_38 = head + [("remove DATA", OK), *writes]
    expected_39 = head + [
        ("remove DATA", OK),
        *writes,
        ("w event", ("NodeDataChanged", "SyncConnected", "<base>/r")),
        ("w event", ("NodeCreated", "SyncConnected", "<base>/r/x")),
    ]
    assert_versions(ref, cand, expected_38, expected_39)


def test_child_watch_beside_recursive_watch(zk_servers) -> None:
    """ZOOKEEPER-4466: in 3.8 the later recursive watch replaces the one-shot child
    watch on the same path (recursive watches never see NodeChildrenChanged)."""
    ref, cand = run_both(child_watch_then_recursive_same_path, zk_servers)
    head = [e for e in ref if not e[0].startswith("w event")]
    created = ("w event", ("NodeCreated", "SyncConnected", "<base>/p/x"))
    children = ("w event", ("NodeChildrenChanged", "SyncConnected", "<base>/p"))
    assert_versions(ref, cand, head + [created], head + [created, children])


def test_persistent_beside_recursive_watch(zk_servers) -> None:
    """ZOOKEEPER-4466: in 3.8 the later PERSISTENT replaces RECURSIVE on the same
    path; in 3.9 the connection keeps both."""
    ref, cand = run_both(recursive_then_persistent_same_path, zk_servers)
    head = [e for e in ref if not e[0].startswith("w event")]
    children = ("w event", ("NodeChildrenChanged", "SyncConnected", "<base>/p"))
    expected_39 = head + [
        ("w event", ("NodeCreated", "SyncConnected", "<base>/p/x")),
        children,
        ("w event", ("NodeCreated", "SyncConnected", "<base>/p/x/y")),
    ]
    assert_versions(ref, cand, head + [children], expected_39)


def test_check_watches_of_another_session(zk_servers) -> None:
    """ZOOKEEPER-4466: 3.8's containsWatcher finds any session's watch."""
    ref, cand = run_both(check_watches_of_another_session, zk_servers)
    head = ref[:3]
    checks = ["other: check DATA", "other: check CHILDREN", "other: check ANY"]
    assert_versions(
        ref, cand, head + [(c, OK) for c in checks], head + [(c, NO_WATCHER) for c in checks]
    )


def test_create2_inside_multi(zk_servers) -> None:
    """ZOOKEEPER-4026: create2 in multi answers Create2 (path + Stat) in 3.9."""
    ref, cand = run_both(create2_in_multi, zk_servers)
    exists_b = ref[1]
    expected_38 = [
        ("multi", ("ok", [(1, 0, "<base>/a"), (1, 0, "<base>/b")])),
        exists_b,
        ("create2 result Stat == exists Stat", []),
    ]
    stat = exists_b[1][1]
    expected_39 = [
        ("multi", ("ok", [(1, 0, "<base>/a"), (15, 0, ("<base>/b", stat))])),
        exists_b,
        ("create2 result Stat == exists Stat", [True]),
    ]
    assert_versions(ref, cand, expected_38, expected_39)


def test_check_outside_multi(zk_servers) -> None:
    """ZOOKEEPER-2623: 3.9.3 answers Unimplemented; 3.8.0 drops the connection."""
    ref, cand = run_both(check_outside_multi, zk_servers)
    head = ref[:1]
    closed = "connection closed"
    expected_38 = head + [
        ("check outside multi", closed),
        ("check with a wrong version", closed),
        ("exists afterwards", closed),
    ]
    expected_39 = head + [
        ("check outside multi", "UnimplementedError(-6)"),
        ("check with a wrong version", "UnimplementedError(-6)"),
        ("exists afterwards", ("ok", "stat")),
    ]
    assert_versions(ref, cand, expected_38, expected_39)


def test_notification_header_zxid(zk_servers) -> None:
    """ZOOKEEPER-4655: 3.9 puts the triggering txn's zxid in the notification header."""
    ref, cand = run_both(notification_zxid, zk_servers)
    head = ref[:-3]
    expected_38 = head + [
        ("notifications", 2),
        ("header zxid is -1", [True, True]),
        ("header zxid is the txn's zxid", [False, False]),
    ]
    expected_39 = head + [
        ("notifications", 2),
        ("header zxid is -1", [False, False]),
        ("header zxid is the txn's zxid", [True, True]),
    ]
    assert_versions(ref, cand, expected_38, expected_39)


def test_exists_needs_read(zk_servers) -> None:
    """ZOOKEEPER-2590: exists on an unreadable node is NoAuth in 3.9."""
    ref, cand = run_both(exists_without_read, zk_servers)
    expected_38 = [("exists secret", ("ok", "stat")), ("exists answered", True)]
    expected_39 = [("exists secret", "NoAuthError(-102)"), ("exists answered", True)]
    assert_versions(ref, cand, expected_38, expected_39)


def test_delete_container_sent_by_a_client(zk_servers) -> None:
    """ZOOKEEPER-4575: 3.9 decodes deleteContainer's path; it deletes any empty
    non-ephemeral node (no ACL check), NotEmpty, BadVersion for an ephemeral."""
    ref, cand = run_both(delete_container_from_client, zk_servers)
    head = ref[:5]
    bad = "BadArgumentsError(-8)"
    expected_38 = head + [
        ("deleteContainer c", bad),
        ("deleteContainer full", bad),
        ("deleteContainer e", bad),
        ("deleteContainer p", bad),
        ("deleteContainer missing", bad),
        ("left", ("ok", ["c", "e", "full", "p"])),
    ]
    expected_39 = head + [
        ("deleteContainer c", OK),
        ("deleteContainer full", "NotEmptyError(-111)"),
        ("deleteContainer e", "BadVersionError(-103)"),
        ("deleteContainer p", OK),
        ("deleteContainer missing", "NoNodeError(-101)"),
        ("left", ("ok", ["e", "full"])),
    ]
    assert_versions(ref, cand, expected_38, expected_39)


def test_createttl_with_plain_mode_and_no_ttl_does_not_kill_the_server(tmp_path) -> None:
    """createTTL with a non-TTL mode and ttl=-1 passes ZooKeeper's prep, and
    applying its CreateTTLTxn throws: ZooKeeper 3.8 and 3.9 (same code) log
    "Severe unrecoverable error" and exit, with the txn already in its log. So
    this runs against a zkcompat of its own only: it must answer, keep serving,
    and come back up on the same dataDir."""
    server = start_zkcompat(tmp_path / "zkcompat")
    answers: dict[int, object] = {}
    try:
        for flags in (PERSISTENT, EPHEMERAL, CONTAINER):
            rc = None
            try:
                rc = RawClient(server.host, server.port)
                rc.connect()
                reply = rc.request(
                    OP_CREATE_TTL, create_payload(f"/ttl-minus-one-{flags}", b"", flags, ttl=-1)
                )
                answers[flags] = reply.err
                answers[f"then exists {flags}"] = rc.exists("/").err
                rc.close_session_quietly()
            except (ConnectionClosed, OSError) as e:
                answers[flags] = f"{type(e).__name__}: {e}"
            finally:
                if rc is not None:
                    rc.close()
            time.sleep(EXIT_GRACE_S)  # a dying server may take a moment to go
            assert server.is_alive(), (
                f"zkcompat exited after flags={flags}: {answers}\n{server.log_tail()}"
            )
        server.stop()
        server = start_zkcompat(tmp_path / "zkcompat")  # replays whatever was logged
    finally:
        server.stop()
    # Nothing in ZooKeeper defines an answer; BadArguments is what a TTL of -1
    # gets everywhere else, and a plain node of the asked mode would be harmless.
    for flags in (PERSISTENT, EPHEMERAL, CONTAINER):
        assert answers[flags] in (0, -8), answers
        assert answers[f"then exists {flags}"] == 0, answers
