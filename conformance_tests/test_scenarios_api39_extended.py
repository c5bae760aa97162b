"""Differential scenarios that need a configured server: TTL nodes, the container
reaper and enforced quotas.

Both servers of the module's pair get, in zoo.cfg, extendedTypesEnabled=true and
enforceQuota=true (ZooKeeper turns unknown zoo.cfg keys into "zookeeper."-prefixed
system properties, which is exactly what those two read), plus the container
reaper settings. ZooKeeper reads the reaper's znode.container.* as unprefixed
system properties only, so its JVM also gets them as -D options (through
JAVA_TOOL_OPTIONS, which servers.start_zookeeper passes on); zkcompat reads the
same keys from zoo.cfg.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import Scenario, close_admin_clients, run_differential, wait_until
from .servers import ServerProcess, start_zkcompat, start_zookeeper
from .test_scenarios_api39 import (
    ADD_WATCH_PERSISTENT_RECURSIVE,
    CONTAINER,
    EPHEMERAL,
    EPHEMERAL_SEQUENTIAL,
    OP_CHECK,
    OP_CREATE,
    OP_CREATE_CONTAINER,
    OP_CREATE_TTL,
    OP_SET_DATA,
    PERSISTENT,
    PERSISTENT_SEQUENTIAL,
    PERSISTENT_SEQUENTIAL_WITH_TTL,
    PERSISTENT_WITH_TTL,
    QUOTA_EXCEEDED,
    QUOTA_ROOT,
    Api,
    create_payload,
    del_quota,
    expect,
    int32,
    list_quota,
    set_data_payload,
    set_quota,
    ustring,
)

SELFTEST = os.environ.get("CONFORMANCE_SELFTEST", "") not in ("", "0")

CHECK_INTERVAL_MS = 100  # znode.container.checkIntervalMs (ZooKeeper: 60000)
MAX_NEVER_USED_MS = 2500  # znode.container.maxNeverUsedIntervalMs (ZooKeeper 3.8/3.9: 0)
REAPER_PROPERTIES = {
    "znode.container.checkIntervalMs": CHECK_INTERVAL_MS,
    "znode.container.maxNeverUsedIntervalMs": MAX_NEVER_USED_MS,
}
EXTENDED_CFG = {"extendedTypesEnabled": "true", "enforceQuota": "true", **REAPER_PROPERTIES}
TTL_MAX_MS = 0xFF_FFFF_FFFF  # EphemeralType.TTL.maxValue(): 40 bits
GONE_WITHIN_S = 6.0  # a reaper pass every 100 ms; generous for a loaded CI box
STAYS_FOR_S = 0.8  # eight reaper passes

EXTENDED: dict[str, Scenario] = {}


def extended(fn):
    """Register fn(env) as a scenario for the configured pair (not the shared one)."""
    EXTENDED[fn.__name__] = Scenario(name=fn.__name__, fn=fn, doc=(fn.__doc__ or "").strip())
    return fn


@contextlib.contextmanager
def jvm_system_properties(props: dict[str, object]) -> Iterator[None]:
    """-D options for a JVM started inside the block (JAVA_TOOL_OPTIONS)."""
    before = os.environ.get("JAVA_TOOL_OPTIONS")
    flags = " ".join(f"-D{k}={v}" for k, v in props.items())
    os.environ["JAVA_TOOL_OPTIONS"] = f"{before} {flags}" if before else flags
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("JAVA_TOOL_OPTIONS", None)
        else:
            os.environ["JAVA_TOOL_OPTIONS"] = before


def start_extended_zookeeper(workdir: Path) -> ServerProcess:
    with jvm_system_properties(REAPER_PROPERTIES):
        return start_zookeeper(workdir, extra_cfg=EXTENDED_CFG)


class ExtendedPair:
    """The module's two configured servers. A server that died (a crash one
    scenario provoked) is replaced by a fresh one before the next scenario, so
    each scenario is judged on its own; the crash itself fails the scenario
    that caused it (run_differential checks the candidate is alive)."""

    def __init__(self, tmp_path_factory) -> None:
        self._tmp = tmp_path_factory
        self.reference = self._start("reference")
        self.candidate = self._start("candidate")

    def _start(self, side: str) -> ServerProcess:
        workdir = self._tmp.mktemp(f"{side}-extended")
        if side == "reference" or SELFTEST:
            return start_extended_zookeeper(workdir)
        return start_zkcompat(workdir, extra_cfg=EXTENDED_CFG)

    def servers(self) -> tuple[ServerProcess, ServerProcess]:
        if not self.reference.is_alive():
            self.reference = self._start("reference")
        if not self.candidate.is_alive():
            close_admin_clients()
            self.candidate = self._start("candidate")
        return self.reference, self.candidate

    def stop(self) -> None:
        close_admin_clients()
        for server in (self.reference, self.candidate):
            server.stop()


@pytest.fixture(scope="module")
def extended_pair(tmp_path_factory) -> Iterator[ExtendedPair]:
    """ZooKeeper and zkcompat (a second ZooKeeper under CONFORMANCE_SELFTEST), configured."""
    pair = ExtendedPair(tmp_path_factory)
    try:
        yield pair
    finally:
        pair.stop()


def gone(env, api: Api, label: str, path: str, within_s: float = GONE_WITHIN_S) -> None:
    """Wait for the reaper to remove path; the reference must do it in time.
    Polls on a session of its own, so no notification of api's is swallowed."""
    poller = env.raw()
    ok = wait_until(lambda: poller.exists(path).err != 0, within_s)
    poller.close_session_quietly()
    expect(env, ok, f"{label}: {path[len(env.base) :]} removed within {within_s}s")


def stays(env, api: Api, label: str, path: str, for_s: float = STAYS_FOR_S) -> None:
    time.sleep(for_s)
    api.exists(f"{label}: still there after {for_s}s", path)


# ============================================================ container reaper


@extended
def reaper_removes_emptied_container(env):
    """Once its last child is deleted, a container is deleted by the server:
    the parent's cversion and pzxid show one more delete."""
    api = Api(env, "c")
    b = env.base
    api.create_container("container", f"{b}/c")
    api.create("child", f"{b}/c/x")
    stays(env, api, "with a child", f"{b}/c")
    api.delete("delete child", f"{b}/c/x")
    gone(env, api, "emptied", f"{b}/c")
    api.exists("container", f"{b}/c")
    api.get_children2("parent after reaping", b)


@extended
def reaper_never_used_container(env):
    """A container that never had a child lives until maxNeverUsedIntervalMs."""
    api = Api(env, "c")
    b = env.base
    api.create_container("container", f"{b}/c")
    stays(env, api, "never used", f"{b}/c")
    gone(env, api, "never used, after maxNeverUsedIntervalMs", f"{b}/c")


@extended
def reaper_keeps_container_with_children(env):
    """Deleting one of two children leaves the container; the second delete reaps it."""
    api = Api(env, "c")
    b = env.base
    api.create_container("container", f"{b}/c")
    api.create("child a", f"{b}/c/a")
    api.create("child b", f"{b}/c/b")
    api.delete("delete a", f"{b}/c/a")
    stays(env, api, "one child left", f"{b}/c")
    api.delete("delete b", f"{b}/c/b")
    gone(env, api, "empty", f"{b}/c")


@extended
def reaper_cascades_up_nested_containers(env):
    """Reaping an inner container empties its container parent, which goes next;
    a plain persistent grandparent stays."""
    api = Api(env, "c")
    b = env.base
    api.create("plain", f"{b}/plain")
    api.create_container("outer", f"{b}/plain/outer")
    api.create_container("inner", f"{b}/plain/outer/inner")
    api.create("leaf", f"{b}/plain/outer/inner/leaf")
    api.delete("delete leaf", f"{b}/plain/outer/inner/leaf")
    gone(env, api, "inner", f"{b}/plain/outer/inner")
    gone(env, api, "outer", f"{b}/plain/outer")
    stays(env, api, "plain parent", f"{b}/plain")
    api.get_children2("plain", f"{b}/plain")


@extended
def reaper_after_ephemeral_child_session_ends(env):
    """A container whose only child is an ephemeral goes once that session ends."""
    api = Api(env, "c")
    owner = Api(env, "owner")
    b = env.base
    api.create_container("container", f"{b}/c")
    owner.create("ephemeral child", f"{b}/c/e", flags=EPHEMERAL)
    stays(env, api, "ephemeral alive", f"{b}/c")
    owner.rc.close_session()
    gone(env, api, "after the session", f"{b}/c")


@extended
def reaper_deletion_fires_watches(env):
    """The reaper's delete fires data, exists, child and recursive watches like a
    client delete would."""
    watcher = Api(env, "watcher")
    api = Api(env, "c")
    b = env.base
    api.create("dir", f"{b}/dir")
    api.create_container("container", f"{b}/dir/c")
    api.create("child", f"{b}/dir/c/x")
    watcher.add_watch("recursive dir", f"{b}/dir", ADD_WATCH_PERSISTENT_RECURSIVE)
    watcher.get_data("getData+watch c", f"{b}/dir/c", watch=True)
    watcher.get_children("children+watch dir", f"{b}/dir", watch=True)
    other = Api(env, "other")
    other.exists("other: exists+watch c", f"{b}/dir/c", watch=True)
    api.delete("delete child", f"{b}/dir/c/x")
    gone(env, api, "emptied", f"{b}/dir/c")
    other.sync()
    other.drain(0.1)
    watcher.sync()
    watcher.drain()


@extended
def reaper_ignores_plain_and_create_with_container_flag(env):
    """Only createContainer makes a container: a plain node, and a create (op 1)
    or create2 with CONTAINER's flag, survive losing their only child."""
    api = Api(env, "c")
    b = env.base
    api.create("plain", f"{b}/plain")
    api.create("create flag=CONTAINER", f"{b}/flag", flags=CONTAINER)
    api.create2("create2 flag=CONTAINER", f"{b}/flag2", flags=CONTAINER)
    for name in ("plain", "flag", "flag2"):
        api.create(f"{name} child", f"{b}/{name}/x")
        api.delete(f"{name} child deleted", f"{b}/{name}/x")
    api.create_container("real container", f"{b}/real")
    api.create("real child", f"{b}/real/x")
    api.delete("real child deleted", f"{b}/real/x")
    gone(env, api, "real container", f"{b}/real")
    for name in ("plain", "flag", "flag2"):
        api.exists(f"{name} survives", f"{b}/{name}")


@extended
def reaper_then_recreate(env):
    """After the reaper removed it, the same container path can be created again
    and is reaped again."""
    api = Api(env, "c")
    b = env.base
    for round_ in (1, 2):
        api.create_container(f"round {round_}: container", f"{b}/c")
        api.create(f"round {round_}: child", f"{b}/c/x")
        api.delete(f"round {round_}: delete child", f"{b}/c/x")
        gone(env, api, f"round {round_}", f"{b}/c")
    api.get_children2("parent", b)


@extended
def reaper_container_flag_ephemeral_is_container(env):
    """createContainer with EPHEMERAL's flag still makes a container (the txn type
    decides): it outlives its creator and the reaper takes it once emptied."""
    api = Api(env, "c")
    owner = Api(env, "owner")
    b = env.base
    owner.create_container("createContainer flags=EPHEMERAL", f"{b}/c", flags=EPHEMERAL)
    owner.create("child", f"{b}/c/x")
    owner.rc.close_session()
    api.exists("outlives the creator", f"{b}/c")
    api.delete("delete child", f"{b}/c/x")
    gone(env, api, "emptied", f"{b}/c")


# ==================================================================== TTL nodes


@extended
def ttl_create_and_read(env):
    """createTTL answers a Create2Response; ephemeralOwner reads as 0 everywhere;
    a TTL node may have children; it is not one of the session's ephemerals."""
    api = Api(env, "t")
    b = env.base
    api.create_ttl("createTTL 60s", f"{b}/t", 60_000, b"data")
    api.exists("exists", f"{b}/t")
    api.get_data("getData", f"{b}/t")
    api.create("child of TTL node", f"{b}/t/c")
    api.create_ttl("TTL child of TTL node", f"{b}/t/tc", 60_000)
    api.get_children2("children", f"{b}/t")
    api.get_ephemerals("ephemerals", b)
    api.create_ttl("again: NodeExists", f"{b}/t", 60_000)
    api.create_ttl("missing parent", f"{b}/nope/t", 60_000)


@extended
def ttl_sequential(env):
    """PERSISTENT_SEQUENTIAL_WITH_TTL appends the parent's cversion like any
    sequential create."""
    api = Api(env, "t")
    b = env.base
    api.create("dir", f"{b}/q")
    for i in range(3):
        api.create_ttl(f"seq {i}", f"{b}/q/n-", 60_000, flags=PERSISTENT_SEQUENTIAL_WITH_TTL)
    api.create("plain sequential between", f"{b}/q/n-", flags=PERSISTENT_SEQUENTIAL)
    api.get_children2("children", f"{b}/q")


@extended
def ttl_bad_values(env):
    """TTL must be 1..2^40-1 ms; TTL modes on create/create2 (no ttl field) and a
    ttl with a non-TTL mode on createTTL are BadArguments."""
    api = Api(env, "t")
    b = env.base
    api.create_ttl("ttl=0", f"{b}/zero", 0)
    api.create_ttl("ttl=-5", f"{b}/neg", -5)
    api.create_ttl("ttl=max+1", f"{b}/big", TTL_MAX_MS + 1)
    api.create_ttl("ttl=max", f"{b}/max", TTL_MAX_MS)
    api.create_ttl("ttl=1", f"{b}/one", 1)
    gone(env, api, "ttl=1", f"{b}/one")
    api.create("create with TTL flag", f"{b}/c1", flags=PERSISTENT_WITH_TTL)
    api.create2("create2 with TTL sequential flag", f"{b}/c2", flags=PERSISTENT_SEQUENTIAL_WITH_TTL)
    api.create_ttl("createTTL flags=PERSISTENT ttl=1000", f"{b}/p", 1000, flags=PERSISTENT)
    api.create_ttl("createTTL flags=EPHEMERAL ttl=1000", f"{b}/e", 1000, flags=EPHEMERAL)
    api.create_ttl("createTTL flags=CONTAINER ttl=1000", f"{b}/c", 1000, flags=CONTAINER)
    api.create_ttl(
        "createTTL flags=EPHEMERAL_SEQUENTIAL ttl=1000", f"{b}/es", 1000, flags=EPHEMERAL_SEQUENTIAL
    )
    api.delete("delete max", f"{b}/max")
    api.get_children("left", b)


@extended
def ttl_expires_when_childless(env):
    """A childless TTL node is deleted once mtime+ttl has passed; watches fire."""
    watcher = Api(env, "watcher")
    api = Api(env, "t")
    b = env.base
    api.create_ttl("createTTL 500ms", f"{b}/t", 500)
    watcher.exists("exists+watch", f"{b}/t", watch=True)
    watcher.get_children("children+watch base", b, watch=True)
    gone(env, api, "expired", f"{b}/t")
    watcher.sync()
    watcher.drain()
    api.get_children2("parent", b)


@extended
def ttl_child_keeps_it_alive(env):
    """A TTL node with a child outlives its TTL; once childless it expires at the
    next check (its mtime is long past)."""
    api = Api(env, "t")
    b = env.base
    api.create_ttl("createTTL 400ms", f"{b}/t", 400)
    api.create("child", f"{b}/t/c")
    stays(env, api, "with a child", f"{b}/t")
    api.delete("delete child", f"{b}/t/c")
    gone(env, api, "childless", f"{b}/t")


@extended
def ttl_set_data_extends_life(env):
    """setData moves mtime, and the TTL counts from mtime."""
    api = Api(env, "t")
    b = env.base
    api.create_ttl("createTTL 2000ms", f"{b}/t", 2000)
    time.sleep(1.0)
    api.set_data("setData at ~1s", f"{b}/t", b"touch")
    time.sleep(1.5)
    api.exists("at ~2.5s: past ctime+ttl, not mtime+ttl", f"{b}/t")
    gone(env, api, "after mtime+ttl", f"{b}/t")


@extended
def ttl_sequential_expires(env):
    """Sequential TTL nodes expire like the others; the counter keeps going."""
    api = Api(env, "t")
    b = env.base
    api.create("dir", f"{b}/q")
    api.create_ttl("seq", f"{b}/q/n-", 300, flags=PERSISTENT_SEQUENTIAL_WITH_TTL)
    gone(env, api, "expired", f"{b}/q/n-0000000000")
    api.create_ttl("seq after", f"{b}/q/n-", 60_000, flags=PERSISTENT_SEQUENTIAL_WITH_TTL)
    api.get_children2("dir", f"{b}/q")


@extended
def ttl_in_multi(env):
    """createTTL and createContainer ops inside multi; a failing multi makes neither."""
    api = Api(env, "t")
    b = env.base
    api.multi(
        "multi ok",
        [
            (OP_CREATE_TTL, create_payload(f"{b}/t", b"x", PERSISTENT_WITH_TTL, ttl=60_000)),
            (
                OP_CREATE_TTL,
                create_payload(f"{b}/s-", b"", PERSISTENT_SEQUENTIAL_WITH_TTL, ttl=60_000),
            ),
            (OP_CREATE_CONTAINER, create_payload(f"{b}/c", b"", CONTAINER)),
            (OP_SET_DATA, set_data_payload(f"{b}/t", b"y")),
        ],
    )
    api.multi(
        "multi with a bad ttl",
        [
            (OP_CREATE, create_payload(f"{b}/plain")),
            (OP_CREATE_TTL, create_payload(f"{b}/t0", b"", PERSISTENT_WITH_TTL, ttl=0)),
        ],
    )
    api.multi(
        "multi failing after a createTTL",
        [
            (OP_CREATE_TTL, create_payload(f"{b}/t2", b"", PERSISTENT_WITH_TTL, ttl=60_000)),
            (OP_CHECK, ustring(f"{b}/t") + int32(42)),
        ],
    )
    api.get_children2("children", b)


# ============================================================ enforced quotas


@extended
def quota_hard_count_limit(env):
    """With enforceQuota, a create that would take count above the hard limit is
    QuotaExceeded (the quota root counts itself); deleting makes room again."""
    zk = env.client()
    api = Api(env, "q")
    b = env.base
    zk.create(f"{b}/q", b"")
    set_quota(env, zk, f"{b}/q", count_hard=3)
    results = [api.create(f"create n{i}", f"{b}/q/n{i}") for i in range(4)]
    expect(
        env,
        results[-1] is not None and results[-1].err == QUOTA_EXCEEDED,
        "the reference enforces the hard count limit",
    )
    api.delete("delete n0", f"{b}/q/n0")
    api.create("create after making room", f"{b}/q/n9")
    api.create("sequential over the limit", f"{b}/q/s-", flags=PERSISTENT_SEQUENTIAL)
    api.create("ephemeral over the limit", f"{b}/q/e", flags=EPHEMERAL)
    api.create_container("container over the limit", f"{b}/q/c")
    api.create_ttl("ttl over the limit", f"{b}/q/t", 60_000)
    api.create("deeper over the limit", f"{b}/q/n1/deep")
    list_quota(env, zk, f"{b}/q", "final")
    api.get_children2("children", f"{b}/q")
    del_quota(zk, f"{b}/q")


@extended
def quota_hard_byte_limit(env):
    """A hard byte limit refuses a create or setData growing the subtree past it;
    shrinking and same-size writes pass."""
    zk = env.client()
    api = Api(env, "q")
    b = env.base
    zk.create(f"{b}/q", b"")
    set_quota(env, zk, f"{b}/q", bytes_hard=10)
    api.create("create 6 bytes", f"{b}/q/a", b"123456")
    api.create("create 5 more bytes", f"{b}/q/b", b"12345")
    api.create("create 4 more bytes", f"{b}/q/c", b"1234")
    api.set_data("grow a to 7", f"{b}/q/a", b"1234567")
    api.set_data("a same size", f"{b}/q/a", b"abcdef")
    api.set_data("shrink a to 1", f"{b}/q/a", b"x")
    api.set_data("grow a back to 6", f"{b}/q/a", b"123456")
    api.set_data("null data", f"{b}/q/a", None)
    api.create("null data create", f"{b}/q/n", None)
    list_quota(env, zk, f"{b}/q", "final")
    del_quota(zk, f"{b}/q")


@extended
def quota_soft_limits_pass(env):
    """Soft limits (setquota -n / -b) never refuse, even with enforceQuota."""
    zk = env.client()
    api = Api(env, "q")
    b = env.base
    zk.create(f"{b}/q", b"")
    set_quota(env, zk, f"{b}/q", count=2, bytes_=3)
    for i in range(3):
        api.create(f"create {i}", f"{b}/q/n{i}", b"12")
    api.set_data("set beyond bytes", f"{b}/q/n0", b"123456789")
    list_quota(env, zk, f"{b}/q", "beyond soft limits")
    del_quota(zk, f"{b}/q")


@extended
def quota_in_multi(env):
    """Quota checks in multi read the committed tree, not the multi's own earlier
    ops (three creates pass a limit that leaves room for two); once the tree is
    over the limit, a multi with a create fails as a whole."""
    zk = env.client()
    api = Api(env, "q")
    b = env.base
    zk.create(f"{b}/q", b"")
    set_quota(env, zk, f"{b}/q", count_hard=3)
    api.multi(
        "multi of three creates",
        [(OP_CREATE, create_payload(f"{b}/q/m{i}")) for i in range(3)],
    )
    api.multi(
        "multi of two more creates",
        [(OP_CREATE, create_payload(f"{b}/q/m{i}")) for i in range(3, 5)],
    )
    api.multi(
        "multi: set then create",
        [
            (OP_SET_DATA, set_data_payload(f"{b}/q/m0", b"x")),
            (OP_CREATE, create_payload(f"{b}/q/z")),
        ],
    )
    api.get_children2("children", f"{b}/q")
    list_quota(env, zk, f"{b}/q", "final")
    del_quota(zk, f"{b}/q")


@extended
def quota_nested_limits(env):
    """The deepest quota root decides: a full inner quota refuses, the outer one
    still takes nodes outside the inner subtree."""
    zk = env.client()
    api = Api(env, "q")
    b = env.base
    zk.create(f"{b}/outer/inner", b"", makepath=True)
    set_quota(env, zk, f"{b}/outer", count_hard=100)
    set_quota(env, zk, f"{b}/outer/inner", count_hard=1)
    api.create("in inner", f"{b}/outer/inner/x")
    api.create("in outer", f"{b}/outer/y")
    list_quota(env, zk, f"{b}/outer", "outer")
    list_quota(env, zk, f"{b}/outer/inner", "inner")
    del_quota(zk, f"{b}/outer/inner")
    api.create("in inner after its quota is gone", f"{b}/outer/inner/x")
    list_quota(env, zk, f"{b}/outer", "outer counts it now")
    del_quota(zk, f"{b}/outer")


@pytest.mark.conformance
@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(EXTENDED))
def test_api39_extended(name: str, extended_pair: ExtendedPair) -> None:
    run_differential(EXTENDED[name], *extended_pair.servers())


# ------------------------------------------------------ not differential


def _soft_quota_overrun(server: ServerProcess, base: str) -> None:
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=server.connect_string, timeout=10.0)
    zk.start(timeout=15.0)
    try:
        zk.create(f"{base}/q", b"", makepath=True)
        quota = QUOTA_ROOT + f"{base}/q"
        zk.ensure_path(quota)
        zk.create(quota + "/zookeeper_limits", b"count=2,bytes=-1")
        zk.create(quota + "/zookeeper_stats", b"count=0,bytes=0")
        for i in range(3):
            zk.create(f"{base}/q/n{i}", b"")
    finally:
        zk.stop()
        zk.close()


def _log_lines(server: ServerProcess) -> list[str]:
    return server.log_path.read_text(errors="replace").splitlines()


def test_soft_quota_overrun_logs_a_warning(extended_pair: ExtendedPair) -> None:
    """Crossing a soft limit with enforceQuota is a log line, not an error:
    ZooKeeper warns "Quota exceeded: <path> [current count=N, softCountLimit=M]";
    zkcompat must log a line naming the quota root and saying the quota is exceeded."""
    reference, candidate = extended_pair.servers()
    base = f"/soft-quota-log-{int(time.time() * 1000)}"
    for server in (reference, candidate):
        _soft_quota_overrun(server, base)
    time.sleep(0.5)  # log lines are flushed asynchronously
    ref_lines = [line for line in _log_lines(reference) if "Quota exceeded" in line]
    assert any(f"{base}/q [current count=4, softCountLimit=2]" in line for line in ref_lines), (
        f"reference ZooKeeper did not warn as expected: {ref_lines[-5:]}"
    )
    pattern = re.compile(r"quota.?exceed", re.IGNORECASE)
    cand_lines = [line for line in _log_lines(candidate) if pattern.search(line)]
    assert any(f"{base}/q" in line for line in cand_lines), (
        f"{candidate.kind} logged no quota-exceeded line naming {base}/q "
        f"(ZooKeeper: {ref_lines[-1] if ref_lines else None!r}); "
        f"quota lines seen: {cand_lines[-5:]}"
    )


def test_extended_reference_is_configured(extended_pair: ExtendedPair) -> None:
    """The reference really runs with the settings the scenarios rely on."""
    reference, _ = extended_pair.servers()
    out = (reference.workdir / "zookeeper.out").read_text(errors="replace")
    assert f"-Dznode.container.checkIntervalMs={CHECK_INTERVAL_MS}" in out, out[:500]
    log = reference.log_path.read_text(errors="replace")
    assert "zookeeper.enforceQuota = true" in log
