"""Differential scenarios: the same client calls against ZooKeeper and zkcompat.

A scenario is a plain function of one argument, the `Env` of one side:

    @scenario
    def create_then_get(env):
        zk = env.client()
        env.call("create", zk.create, env.base + "/a", b"x")
        env.call("get", zk.get, env.base + "/a")

conftest.py turns every function decorated with @scenario into one pytest test
that runs it against the reference (real ZooKeeper), then against the candidate
(zkcompat; a second ZooKeeper with CONFORMANCE_SELFTEST=1), and asserts that the
two normalised logs are equal. Normalisation keeps what a client may rely on and
drops what legitimately differs between two correct servers:

- Stat zxids (czxid, mzxid, pzxid) become their rank among all zxids in this
  scenario's log ("z1", "z2", ...; 0 stays 0): order and equality compare,
  gaps and raw values do not.
- ctime/mtime become "t(zK)": the time of the txn whose zxid has rank K.
  Ranking raw times instead would be flaky, because two txns land in the same
  millisecond on one run and not on the next. A time that is not the same for
  every Stat naming that zxid, that goes backwards as zxids go forward, or that
  is not near the wall clock of the run is kept raw (so it shows in the diff).
- ephemeralOwner and session ids become "session#K" in order of first
  appearance (0 stays 0).
- Strings under env.base become "<base>/...".
- getChildren results are sorted: ZooKeeper promises no order.
- Long byte strings become ("bytes", length, sha1 prefix); long strings keep
  their head plus length and sha1 prefix.

Watch events go to a per-scenario queue and enter the log at env.wait_events()
(and at scenario end), grouped by watcher label in label-creation order and
in arrival order within a label. Arrival order across two sessions is not
something ZooKeeper promises; within one label it is compared exactly.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import EXCEPTIONS, KazooException
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import ZnodeStat

from .rawclient import ConnectionClosed, RawClient
from .servers import EnsembleProcess, ServerProcess

SCENARIO_TIMEOUT_S = 60  # per scenario, both sides; pytest-timeout enforces it
CALL_TIMEOUT_S = 10.0  # one client call; a hung server must not hang the suite
EVENT_SETTLE_S = 0.2  # after the expected events, wait this long for extra ones
LONG_BYTES = 64  # byte strings longer than this are logged as (length, digest)
LONG_STRING = 300  # strings longer than this are logged as head + (length, digest)
TIME_SLACK_MS = 10_000  # ctime/mtime must be within the run's wall clock +- this
BASE_ROOT = "/conformance"
BASE_TOKEN = "<base>"

# ZooKeeper's EphemeralType: the owner of a container node, and TTL nodes
# (top byte 0xFF, the TTL in the low bits).
CONTAINER_EPHEMERAL_OWNER = -(2**63)
TTL_OWNER_MASK = 0xFF << 56


class SessionId(int):
    """An int the log should treat as a session id."""


class Zxid(int):
    """An int the log should treat as a zxid."""


@dataclass(frozen=True)
class Scenario:
    name: str
    fn: Callable[[Env], None]
    timeout_s: int = SCENARIO_TIMEOUT_S
    doc: str = ""
    # Where zkcompat follows 3.9 on purpose (conformance_tests/deliberate.py): turns the
    # reference's raw log into what 3.9 answers, before normalisation.
    expect_39: Callable[[list], list] | None = None
    # About one server's own connection table (a session taken over on the same server
    # drops its old connection): against an ensemble its clients all use its first server.
    single_server: bool = False
    # Why the scenario compares nothing against an ensemble, whose reference is a standalone
    # ZooKeeper: what it records differs by design between the two (and where the
    # ensemble's behaviour is tested instead). None: it compares in both modes.
    standalone_only: str | None = None


# In an ensemble /zookeeper/config holds the membership (initConfigInZKDatabase), a
# standalone server's is empty: tests/ensemble/test_reconfig.py checks an ensemble's against
# what ZooKeeper 3.8's ensembles show.
ENSEMBLE_CONFIG = "an ensemble's /zookeeper/config holds its membership (tests/ensemble/test_reconfig.py)"

REGISTRY: dict[str, Scenario] = {}


def scenario(fn: Callable | None = None, *, name: str | None = None, timeout_s: int | None = None,
             expect_39: Callable[[list], list] | None = None, single_server: bool = False,
             standalone_only: str | None = None):
    """Register fn(env) as a differential scenario (one pytest test)."""

    def register(f: Callable) -> Callable:
        sc = Scenario(
            name=name or f.__name__,
            fn=f,
            timeout_s=timeout_s or SCENARIO_TIMEOUT_S,
            doc=(f.__doc__ or "").strip(),
            expect_39=expect_39,
            single_server=single_server,
            standalone_only=standalone_only,
        )
        key = f"{f.__module__}.{sc.name}"
        if key in REGISTRY and REGISTRY[key].fn is not f:
            raise ValueError(f"scenario {key} registered twice")
        REGISTRY[key] = sc
        f.__conformance_scenario__ = sc
        return f

    return register(fn) if fn is not None else register


class ScenarioError(AssertionError):
    """The scenario itself is wrong (it fails against the reference ZooKeeper)."""


# ------------------------------------------------------------------ the env


@dataclass
class _Event:
    label: str
    type: str
    state: str
    path: str | None


@dataclass
class Env:
    """What a scenario sees of one server."""

    server: ServerProcess
    base: str
    side: str  # "reference" or "candidate"
    single_server: bool = False
    log: list[tuple] = field(default_factory=list)
    _clients: list[KazooClient] = field(default_factory=list)
    _raw: list[RawClient] = field(default_factory=list)
    _events: list[_Event] = field(default_factory=list)
    _events_logged: int = 0
    _labels: list[str] = field(default_factory=list)
    _cond: threading.Condition = field(default_factory=threading.Condition)
    problems: list[str] = field(default_factory=list)
    start_ms: int = 0
    end_ms: int = 0

    # clients -----------------------------------------------------------

    def client(self, timeout: float = 10.0, start_timeout: float = 10.0, **kw) -> KazooClient:
        """A started, connected KazooClient (session timeout `timeout` seconds)."""
        hosts = (f"{self.server.host}:{self.server.port}" if self.single_server
                 else self.server.connect_string)
        zk = KazooClient(hosts=hosts, timeout=timeout, **kw)
        self._clients.append(zk)
        zk.start(timeout=start_timeout)
        return zk

    def raw(self, timeout_ms: int = 10_000, connect: bool = True) -> RawClient:
        """A RawClient for requests kazoo refuses to send; connected unless told."""
        rc = RawClient(self.server.host, self.server.port)
        self._raw.append(rc)
        if connect:
            rc.connect(timeout_ms=timeout_ms)
        return rc

    @staticmethod
    def session(zk: KazooClient) -> SessionId:
        """zk's session id, marked so the log shows it as "session#K"."""
        return SessionId(zk.client_id[0])

    @staticmethod
    def session_id(sid: int) -> SessionId:
        """A raw session id (e.g. from RawClient.connect), marked for the log."""
        return SessionId(sid)

    def close(self) -> None:
        for zk in self._clients:
            try:
                zk.stop()
                zk.close()
            except Exception:  # noqa: BLE001 - best effort teardown
                pass
        for rc in self._raw:
            # An abandoned session would expire seconds later, in the middle of
            # a later scenario, and take a zxid there.
            rc.close_session_quietly()
            rc.close()

    # recording ---------------------------------------------------------

    def record(self, label: str, value: Any) -> None:
        self.log.append((label, value))

    def call(self, label: str, fn: Callable, *args, **kw) -> Any:
        """fn(*args, **kw); logs (label, result) or (label, "error", Class, code)."""
        try:
            result = _call_with_timeout(fn, args, kw)
        except (KazooException, KazooTimeoutError, ValueError, TypeError) as e:
            self.log.append((label, "error", type(e).__name__, getattr(e, "code", None)))
            return None
        if getattr(fn, "__name__", "") in ("get_children", "get_children_async"):
            result = _sort_children(result)
        self.log.append((label, result))
        return result

    def raw_call(self, label: str, fn: Callable, *args, **kw):
        """A RawClient op; logs (label, "raw", error name) and returns the Reply."""
        try:
            reply = fn(*args, **kw)
        except TimeoutError:
            self.log.append((label, "raw", "no reply (timeout)"))
            return None
        except (ConnectionClosed, ConnectionError):
            # Reset or EOF, while sending or receiving: the server hung up.
            self.log.append((label, "raw", "connection closed"))
            return None
        self.log.append((label, "raw", error_name(reply.err)))
        return reply

    # watches -----------------------------------------------------------

    def watcher(self, label: str) -> Callable:
        """A kazoo watch callback that queues (label, type, state, path)."""
        if label not in self._labels:
            self._labels.append(label)

        def on_event(event) -> None:
            with self._cond:
                self._events.append(_Event(label, event.type, event.state, event.path))
                self._cond.notify_all()

        return on_event

    def wait_events(self, n: int, timeout: float = 5.0) -> None:
        """Wait for n events in total, settle briefly, then log the new ones."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self._events) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            have = len(self._events)
        if have < n:
            self.log.append(("wait_events", f"timeout: {have} of {n} events"))
            self.problems.append(f"wait_events({n}) timed out with {have} events")
        time.sleep(EVENT_SETTLE_S)
        self._flush_events()

    def _flush_events(self) -> None:
        with self._cond:
            new = self._events[self._events_logged :]
            self._events_logged = len(self._events)
        for label in self._labels:
            for ev in new:
                if ev.label == label:
                    self.log.append((label, "event", ev.type, ev.state, ev.path))


def _sort_children(result):
    if isinstance(result, list):
        return sorted(result)
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], list):
        return (sorted(result[0]), result[1])
    return result


def _call_with_timeout(fn: Callable, args: tuple, kw: dict):
    """Use kazoo's _async twin when there is one, so a hung server costs seconds."""
    owner = getattr(fn, "__self__", None)
    name = getattr(fn, "__name__", "")
    twin = getattr(owner, name + "_async", None) if owner is not None else None
    if twin is None or kw.get("recursive"):
        return fn(*args, **kw)
    return twin(*args, **kw).get(timeout=CALL_TIMEOUT_S)


def wait_until(predicate: Callable[[], bool], timeout_s: float, poll_s: float = 0.05) -> bool:
    """Poll until predicate() holds (True) or timeout_s passes (False)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)


def error_name(err: int) -> str:
    if err == 0:
        return "ok"
    klass = EXCEPTIONS.get(err)
    return f"{klass.__name__}({err})" if klass else f"error({err})"


# ------------------------------------------------------------ normalisation


class NormStat(dict):
    """A normalised Stat; a dict for comparison, shown compactly."""

    def __repr__(self) -> str:
        return "Stat(" + " ".join(f"{k}={v}" for k, v in self.items()) + ")"


_STAT_ZXIDS = ("czxid", "mzxid", "pzxid")


def _walk(value: Any):
    """Every Stat and marker int inside a logged value, in order."""
    if isinstance(value, ZnodeStat):
        yield value
    elif isinstance(value, (SessionId, Zxid)):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _walk(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _walk(v)


@dataclass
class Normaliser:
    base: str
    start_ms: int
    end_ms: int
    zxid_rank: dict[int, int] = field(default_factory=dict)
    zxid_time: dict[int, int] = field(default_factory=dict)
    bad_time_zxids: set[int] = field(default_factory=set)
    sessions: dict[int, int] = field(default_factory=dict)

    def prepare(self, log: list[tuple]) -> None:
        zxids: set[int] = set()
        times: dict[int, set[int]] = {}
        for entry in log:
            for item in _walk(entry):
                if isinstance(item, ZnodeStat):
                    zxids.update(getattr(item, f) for f in _STAT_ZXIDS)
                    times.setdefault(item.czxid, set()).add(item.ctime)
                    times.setdefault(item.mzxid, set()).add(item.mtime)
                    self._session(item.ephemeralOwner)
                elif isinstance(item, Zxid):
                    zxids.add(int(item))
                elif isinstance(item, SessionId):
                    self._session(int(item))
        zxids.discard(0)
        self.zxid_rank = {z: i for i, z in enumerate(sorted(zxids), start=1)}
        for z, ts in times.items():
            if z == 0:
                if ts != {0}:
                    self.bad_time_zxids.add(z)
                continue
            if len(ts) != 1:
                self.bad_time_zxids.add(z)
                continue
            (t,) = ts
            if not self.start_ms - TIME_SLACK_MS <= t <= self.end_ms + TIME_SLACK_MS:
                self.bad_time_zxids.add(z)
            self.zxid_time[z] = t
        # Txn times never go backwards as zxids go forward.
        ordered = sorted(self.zxid_time.items())
        for (z1, t1), (z2, t2) in itertools.pairwise(ordered):
            if t2 < t1:
                self.bad_time_zxids.update((z1, z2))

    def _session(self, sid: int) -> None:
        if sid and not self._special_owner(sid) and sid not in self.sessions:
            self.sessions[sid] = len(self.sessions) + 1

    @staticmethod
    def _special_owner(owner: int) -> str | None:
        if owner == CONTAINER_EPHEMERAL_OWNER:
            return "container"
        if owner & TTL_OWNER_MASK == TTL_OWNER_MASK and owner < 0:
            return f"ttl({owner & ~TTL_OWNER_MASK & (2**56 - 1)})"
        return None

    def zxid(self, z: int) -> str | int:
        return 0 if z == 0 else f"z{self.zxid_rank[z]}"

    def time(self, t: int, z: int) -> str | int:
        if z in self.bad_time_zxids:
            return f"t!{t}"
        if z == 0:
            return 0
        return f"t({self.zxid(z)})"

    def session(self, sid: int) -> str | int:
        if sid == 0:
            return 0
        special = self._special_owner(sid)
        return special or f"session#{self.sessions[sid]}"

    def stat(self, s: ZnodeStat) -> NormStat:
        return NormStat(
            czxid=self.zxid(s.czxid),
            mzxid=self.zxid(s.mzxid),
            pzxid=self.zxid(s.pzxid),
            ctime=self.time(s.ctime, s.czxid),
            mtime=self.time(s.mtime, s.mzxid),
            version=s.version,
            cversion=s.cversion,
            aversion=s.aversion,
            ephemeralOwner=self.session(s.ephemeralOwner),
            dataLength=s.dataLength,
            numChildren=s.numChildren,
        )

    def value(self, v: Any) -> Any:
        if isinstance(v, ZnodeStat):
            return self.stat(v)
        if isinstance(v, SessionId):
            return self.session(int(v))
        if isinstance(v, Zxid):
            return self.zxid(int(v))
        if isinstance(v, BaseException):
            return ("error", type(v).__name__, getattr(v, "code", None))
        if isinstance(v, str):
            v = self.path(v)
            if len(v) > LONG_STRING:  # keeps a diff readable; the digest still compares
                digest = hashlib.sha1(v.encode("utf-8", "surrogatepass")).hexdigest()[:12]
                return f"{v[:60]}...<{len(v)} chars, sha1 {digest}>"
            return v
        if isinstance(v, (bytes, bytearray)):
            v = bytes(v)
            if len(v) > LONG_BYTES:
                return ("bytes", len(v), hashlib.sha1(v).hexdigest()[:12])
            return v
        if isinstance(v, dict):
            return {self.value(k): self.value(x) for k, x in v.items()}
        if isinstance(v, tuple) and hasattr(v, "_fields"):  # other namedtuples
            return (type(v).__name__, *(self.value(x) for x in v))
        if isinstance(v, tuple):
            return tuple(self.value(x) for x in v)
        if isinstance(v, list):
            return [self.value(x) for x in v]
        return v

    def path(self, s: str) -> str:
        if s == self.base or s.startswith(self.base + "/"):
            return BASE_TOKEN + s[len(self.base) :]
        return s

    def log(self, log: list[tuple]) -> list[tuple]:
        self.prepare(log)
        return [self.value(entry) for entry in log]


# --------------------------------------------------------------- running


_base_counter = itertools.count(1)
_admin_clients: dict[str, KazooClient] = {}
_admin_lock = threading.Lock()


def _admin(server: ServerProcess) -> KazooClient:
    """A long-lived client per server, used only to create scenario bases."""
    with _admin_lock:
        zk = _admin_clients.get(server.connect_string)
        if zk is None or not zk.connected:
            if zk is not None:
                zk.stop()
                zk.close()
            zk = KazooClient(hosts=server.connect_string, timeout=10.0)
            zk.start(timeout=15.0)
            _admin_clients[server.connect_string] = zk
        return zk


def close_admin_clients() -> None:
    with _admin_lock:
        for zk in _admin_clients.values():
            try:
                zk.stop()
                zk.close()
            except Exception:  # noqa: BLE001 - best effort teardown
                pass
        _admin_clients.clear()


def new_base(name: str) -> str:
    return f"{BASE_ROOT}/{name}-{next(_base_counter)}"


def run_scenario(sc: Scenario, server: ServerProcess, base: str, side: str) -> Env:
    """Run sc against one server; the returned Env holds the raw log."""
    start_ms = int(time.time() * 1000)
    _admin(server).create(base, makepath=True)
    env = Env(server=server, base=base, side=side, single_server=sc.single_server,
              start_ms=start_ms)
    try:
        sc.fn(env)
    except Exception as e:
        if side == "reference":
            raise
        env.log.append(("scenario raised", type(e).__name__, str(e)[:200]))
    finally:
        if env._labels:
            time.sleep(EVENT_SETTLE_S)
            env._flush_events()
        env.close()
    env.end_ms = int(time.time() * 1000)
    return env


def normalised(env: Env) -> list[tuple]:
    return Normaliser(env.base, env.start_ms, env.end_ms).log(env.log)


def run_differential(sc: Scenario, reference: ServerProcess, candidate: ServerProcess) -> None:
    """Run sc on both servers; raise AssertionError with a side-by-side diff."""
    __tracebackhide__ = True  # the diff is the message; harness frames add nothing
    if sc.standalone_only and isinstance(candidate, EnsembleProcess):
        pytest.skip(f"standalone only: {sc.standalone_only}")
    base = new_base(sc.name)
    ref_env = run_scenario(sc, reference, base, "reference")
    if ref_env.problems:
        raise ScenarioError(
            f"scenario {sc.name} misbehaves against the reference ZooKeeper: "
            + "; ".join(ref_env.problems)
        )
    if not ref_env.log:
        raise ScenarioError(f"scenario {sc.name} recorded nothing: it compares nothing")
    try:
        cand_env = run_scenario(sc, candidate, base, "candidate")
    except Exception as e:  # outside the scenario body: e.g. creating the base
        raise AssertionError(
            f"scenario {sc.name}: {candidate.kind} failed around the scenario "
            f"({type(e).__name__}: {e}); {candidate!r}\n"
            f"--- {candidate.kind} log tail ({candidate.log_path}) ---\n{candidate.log_tail(30)}"
        ) from e
    if not candidate.is_alive():
        raise AssertionError(
            f"scenario {sc.name}: {candidate.kind} exited (rc {candidate.returncode})\n"
            f"--- {candidate.kind} log tail ({candidate.log_path}) ---\n{candidate.log_tail(30)}"
        )
    if sc.expect_39 is not None and candidate.kind == "zkcompat":
        ref_env.log = sc.expect_39(ref_env.log)
    ref_log = normalised(ref_env)
    cand_log = normalised(cand_env)
    if ref_log != cand_log:
        raise AssertionError(format_difference(sc, ref_log, cand_log, reference, candidate))


# ---------------------------------------------------------------- display


def format_entry(entry: tuple) -> str:
    label, *rest = entry
    if len(rest) == 1:
        return f"{label}: {rest[0]!r}"
    return f"{label}: " + " ".join(repr(x) if not isinstance(x, str) else x for x in rest)


def side_by_side(left: list[str], right: list[str], width: int = 78) -> str:
    """Two aligned columns; '|' marks a changed line, '<' '>' one-sided lines."""
    out = []

    def rows(a: str | None, b: str | None, mark: str) -> None:
        la = textwrap.wrap(a, width) or [""] if a is not None else [""]
        lb = textwrap.wrap(b, width) or [""] if b is not None else [""]
        for i in range(max(len(la), len(lb))):
            ca = la[i] if i < len(la) else ""
            cb = lb[i] if i < len(lb) else ""
            m = mark if i == 0 else " "
            out.append(f"{ca:<{width}} {m} {cb}")

    matcher = difflib.SequenceMatcher(a=left, b=right, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for a in left[i1:i2]:
                rows(a, a, " ")
        elif tag == "replace":
            for a, b in itertools.zip_longest(left[i1:i2], right[j1:j2]):
                rows(a, b, "|" if a is not None and b is not None else ("<" if b is None else ">"))
        elif tag == "delete":
            for a in left[i1:i2]:
                rows(a, None, "<")
        elif tag == "insert":
            for b in right[j1:j2]:
                rows(None, b, ">")
    return "\n".join(out)


def format_difference(
    sc: Scenario,
    ref_log: list[tuple],
    cand_log: list[tuple],
    reference: ServerProcess,
    candidate: ServerProcess,
    width: int = 78,
) -> str:
    left = [format_entry(e) for e in ref_log]
    right = [format_entry(e) for e in cand_log]
    first = next(
        (i for i, (a, b) in enumerate(zip(ref_log, cand_log, strict=False)) if a != b),
        min(len(ref_log), len(cand_log)),
    )
    header = f"{reference.kind} {reference.connect_string}"
    header2 = f"{candidate.kind} {candidate.connect_string}"
    lines = [
        f"scenario {sc.name}: {candidate.kind} differs from {reference.kind} at entry {first}",
        f"  {reference.kind}: {left[first] if first < len(left) else '(end of log)'}",
        f"  {candidate.kind}: {right[first] if first < len(right) else '(end of log)'}",
        "",
        f"{header:<{width}}   {header2}",
        f"{'-' * width}   {'-' * width}",
        side_by_side(left, right, width),
        "",
        f"--- {candidate.kind} log tail ({candidate.log_path}) ---",
        candidate.log_tail(20),
    ]
    return "\n".join(lines)
