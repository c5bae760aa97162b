"""Clients of a real ensemble that record what they asked, when, and what they heard.

Each Worker is one kazoo session on its own thread, one request at a time: writes, CAS
(setData with the version it last saw), creates and deletes of a few keys, sequential
creates, sync-then-getData, and plain getData. Every request but the plain read goes into a
linearizability history as the simulator's own records (zkcompat.sim.history), timed with
time.monotonic_ns(); a ConnectionLoss, an OperationTimeout, an expired session or a reply
that never came in time is an unknown outcome. Every reply's Stat goes into a session log
for the order checks (checks.py).
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
)
from kazoo.handlers.threading import KazooTimeoutError

from zkcompat.jute.constants import Code
from zkcompat.recipes.errors import RecipeError
from zkcompat.recipes.lock import FencedLock
from zkcompat.sim import history as h

KEYS_PER_ROOT = 3
OP_TIMEOUT_S = 6.0  # a reply not heard by then is an unknown outcome
THINK_MAX_S = 0.05
LOCK_ACQUIRE_S = 6.0  # an acquire() that waits longer gives up (and tries again)
LOCK_HOLD_MAX_S = 0.1  # held this long at most, around the fenced write
ERROR_PAUSE_S = 0.2  # after an unknown outcome, before the next request
SESSION_TIMEOUT_S = 5.0
CONNECT_TIMEOUT_S = 20.0
FAST_RETRY = {"max_tries": -1, "delay": 0.1, "backoff": 1.5, "max_delay": 1.0}

# kazoo's exception for each error reply the model knows; any other failure is unknown.
KNOWN_ERRORS = {NoNodeError: Code.NONODE, NodeExistsError: Code.NODEEXISTS,
                BadVersionError: Code.BADVERSION}


@dataclass(frozen=True)
class Layout:
    """The znodes one run works on: a root, its keys, and a folder of sequential nodes."""

    root: str

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(f"{self.root}/k{i}" for i in range(KEYS_PER_ROOT))

    @property
    def queue(self) -> str:
        return f"{self.root}/q"

    @property
    def seq_prefix(self) -> str:
        return f"{self.queue}/s-"

    @property
    def setup_paths(self) -> tuple[str, ...]:
        """Created before any client starts: the checker's initial tree (with "/")."""
        return (self.root, self.queue)

    @property
    def lock(self) -> str:
        return f"{self.root}/lock"

    @property
    def fenced(self) -> str:
        """What lock holders write their token to, fenced by their lock node."""
        return f"{self.root}/fenced"


@dataclass(frozen=True)
class Holding:
    """One client held the lock from `acquired` to `ended` (monotonic ns): acquire()
    returned, then release() was called or its connection went SUSPENDED/LOST."""

    client: int
    token: int  # the czxid of its lock node (Sequencer.token)
    acquired: int
    ended: int


@dataclass(frozen=True)
class FencedWrite:
    """multi(check the lock node, setData fenced := token); ok None: unknown outcome."""

    client: int
    token: int
    invoked: int
    completed: int | None
    ok: bool | None


@dataclass(frozen=True)
class Seen:
    """One reply of one session that showed a znode's Stat: the order checks read these."""

    client: int
    session_id: int
    index: int  # the request's place in this client's own order
    path: str
    mzxid: int | None  # None: the znode did not exist
    own_write: bool  # the client's own acknowledged setData
    served: frozenset[str] = frozenset()  # the server(s) it may have come from (host)


class Recorder:
    """The history of every client, thread-safe; ops in invocation order per client."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.operations: list[h.Operation] = []
        self.seen: list[Seen] = []
        self.holdings: list[Holding] = []
        self.fenced: list[FencedWrite] = []
        self.unknown_errors: dict[str, int] = {}
        # id(op) -> the server(s) whose connection its reply may have come on (host);
        # empty: not known. A mixed round tells ZooKeeper's replies from zkcompat's by it.
        self.served: dict[int, frozenset[str]] = {}

    def add(self, op: h.Operation, served: frozenset[str] = frozenset()) -> None:
        with self.lock:
            self.operations.append(op)
            if served:
                self.served[id(op)] = served

    def saw(self, seen: Seen) -> None:
        with self.lock:
            self.seen.append(seen)

    def held(self, holding: Holding) -> None:
        with self.lock:
            self.holdings.append(holding)

    def fenced_write(self, write: FencedWrite) -> None:
        with self.lock:
            self.fenced.append(write)

    def unknown(self, error: BaseException) -> None:
        with self.lock:
            name = type(error).__name__
            self.unknown_errors[name] = self.unknown_errors.get(name, 0) + 1

    def snapshot(self) -> tuple[list[h.Operation], list[Seen]]:
        with self.lock:
            return list(self.operations), list(self.seen)

    def served_by(self) -> dict[int, frozenset[str]]:
        with self.lock:
            return dict(self.served)


def start_client(hosts: str) -> KazooClient:
    client = KazooClient(hosts=hosts, timeout=SESSION_TIMEOUT_S, randomize_hosts=False,
                         connection_retry=dict(FAST_RETRY))
    client.start(timeout=CONNECT_TIMEOUT_S)
    return client


class Client(threading.Thread):
    """One recording client on its own thread and session: step() until the run stops."""

    kind = "client"

    def __init__(self, cid: int, hosts: str, layout: Layout, recorder: Recorder,
                 stop: threading.Event, seed: int) -> None:
        super().__init__(name=f"nemesis-{self.kind}-{cid}", daemon=True)
        self.cid = cid
        self.layout = layout
        self.recorder = recorder
        self.stop_event = stop
        self.rng = random.Random(seed)
        self.client = start_client(hosts)
        self.sessions_lost = 0  # expired while the run went on (not the close at the end)
        self.client.add_listener(self._state_changed)
        self.died: BaseException | None = None

    def _state_changed(self, state: KazooState) -> None:
        if state == KazooState.LOST and not self.stop_event.is_set():
            self.sessions_lost += 1

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                self.step()
                self.stop_event.wait(self.rng.uniform(0, THINK_MAX_S))
        except BaseException as e:  # a client that dies is a failed run, not a quiet one
            self.died = e
            raise

    def step(self) -> None:
        raise NotImplementedError

    def server(self) -> str | None:
        """The host of the server this session's connection is on now, if it has one."""
        sock = getattr(self.client._connection, "_socket", None)
        try:
            return sock.getpeername()[0] if sock is not None else None
        except OSError:
            return None

    def close(self) -> None:
        try:
            self.client.stop()
            self.client.close()
        except Exception:  # noqa: BLE001 - teardown of a client whose servers may be gone
            pass


class Worker(Client):
    """One client: one session (a new one if it expires), one request at a time."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.versions: dict[str, int] = {}
        self.n = 0
        self.index = 0
        self.last_served: frozenset[str] = frozenset()

    # -- one request ------------------------------------------------------------------

    def step(self) -> None:
        self.index += 1
        x = self.rng.random()
        key = self.rng.choice(self.layout.keys)
        if x < 0.25:
            self.set_data(key)
        elif x < 0.35:
            self.create(key)
        elif x < 0.40:
            self.delete(key)
        elif x < 0.55:
            self.create_sequential()
        elif x < 0.80:
            self.sync_read(key)
        else:
            self.plain_read(key)

    def _data(self) -> bytes:
        self.n += 1
        return f"c{self.cid}.{self.n}".encode()

    def _session(self) -> int:
        return self.client.client_id[0] if self.client.client_id else 0

    def _call(self, call: h.Call, run) -> object | None:
        """Run one request; record it with its outcome. The reply's value, or None."""
        invoked = time.monotonic_ns()
        before = self.server()
        try:
            value = run()
        except tuple(KNOWN_ERRORS) as e:
            self.recorder.add(h.Operation(self.cid, call, invoked, time.monotonic_ns(),
                                          h.Err(KNOWN_ERRORS[type(e)])), self._served(before))
            return None
        except (KazooException, KazooTimeoutError) as e:
            self.recorder.add(h.Operation(self.cid, call, invoked))
            self.recorder.unknown(e)
            self.stop_event.wait(ERROR_PAUSE_S)
            return None
        self.recorder.add(h.Operation(self.cid, call, invoked, time.monotonic_ns(),
                                      h.Ok(self._ok_value(call, value))), self._served(before))
        return value

    def _served(self, before: str | None) -> frozenset[str]:
        """Where a reply came from: the connection's server before and after the request
        (both, if a reconnect came between; nothing if neither is known)."""
        self.last_served = frozenset(s for s in (before, self.server()) if s is not None)
        return self.last_served

    @staticmethod
    def _ok_value(call: h.Call, value: object) -> object:
        if isinstance(call, h.SetData):
            return value.version
        if isinstance(call, h.GetData):
            data, stat = value
            return (data, stat.version)
        if isinstance(call, h.Delete):
            return None
        return value  # a create's path

    def _version(self, path: str) -> int:
        if self.rng.random() < 0.5:
            return h.ANY_VERSION
        return self.versions.get(path, 0)

    def set_data(self, key: str) -> None:
        data, version = self._data(), self._version(key)
        session = self._session()
        stat = self._call(h.SetData(key, data, version),
                          lambda: self.client.set_async(key, data, version).get(OP_TIMEOUT_S))
        if stat is None:
            return
        self.versions[key] = stat.version
        if self._session() == session:
            self.recorder.saw(Seen(self.cid, session, self.index, key, stat.mzxid, True,
                                   self.last_served))

    def create(self, key: str) -> None:
        data = self._data()
        if self._call(h.Create(key, data),
                      lambda: self.client.create_async(key, data).get(OP_TIMEOUT_S)):
            self.versions[key] = 0

    def delete(self, key: str) -> None:
        self._call(h.Delete(key), lambda: self.client.delete_async(key).get(OP_TIMEOUT_S))

    def create_sequential(self) -> None:
        data = self._data()
        prefix = self.layout.seq_prefix
        self._call(h.CreateSequential(prefix, data),
                   lambda: self.client.create_async(prefix, data, sequence=True)
                   .get(OP_TIMEOUT_S))

    def sync_read(self, key: str) -> None:
        """sync, then getData on the same session: the sync's invocation is the read's."""
        session = self._session()

        def run():
            self.client.sync_async(key).get(OP_TIMEOUT_S)
            return self.client.get_async(key).get(OP_TIMEOUT_S)

        got = self._call(h.GetData(key), run)
        self._saw_read(session, key, got)

    def plain_read(self, key: str) -> None:
        """Served by whichever server the session is on: no linearizability, only order."""
        session = self._session()
        before = self.server()
        try:
            got = self.client.get_async(key).get(OP_TIMEOUT_S)
        except NoNodeError:
            self.recorder.saw(Seen(self.cid, session, self.index, key, None, False,
                                   self._served(before)))
            return
        except (KazooException, KazooTimeoutError) as e:
            self.recorder.unknown(e)
            self.stop_event.wait(ERROR_PAUSE_S)
            return
        self._served(before)
        self._saw_read(session, key, got)

    def _saw_read(self, session: int, key: str, got) -> None:
        if got is None or self._session() != session:  # no reply, or a new session since
            return
        data, stat = got
        self.versions[key] = stat.version
        self.recorder.saw(Seen(self.cid, session, self.index, key, stat.mzxid, False,
                               self.last_served))


class LockWorker(Client):
    """One client that takes the lock, writes its token fenced by it, and releases it."""

    kind = "locker"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.lock = FencedLock(self.client, self.layout.lock, identifier=f"c{self.cid}")
        self.trouble_ns: int | None = None  # the first SUSPENDED/LOST while holding
        self.holding = False

    def _state_changed(self, state: KazooState) -> None:
        # kazoo's connection thread, at the moment the lock recipe sees it too
        if state != KazooState.CONNECTED and self.holding and self.trouble_ns is None:
            self.trouble_ns = time.monotonic_ns()
        super()._state_changed(state)

    def step(self) -> None:
        try:
            sequencer = self.lock.acquire(timeout=LOCK_ACQUIRE_S)
        except (RecipeError, KazooException, KazooTimeoutError) as e:
            self.recorder.unknown(e)  # not acquired: it does nothing under the lock
            self.stop_event.wait(ERROR_PAUSE_S)
            return
        acquired = time.monotonic_ns()
        self.trouble_ns, self.holding = None, True
        if self.client.state != KazooState.CONNECTED:  # trouble before the listener looked
            self.trouble_ns = acquired
        try:
            self.stop_event.wait(self.rng.uniform(0, LOCK_HOLD_MAX_S / 2))
            if self.lock.is_held and self.trouble_ns is None:
                self._fenced_write(sequencer)
            self.stop_event.wait(self.rng.uniform(0, LOCK_HOLD_MAX_S / 2))
        finally:
            released = time.monotonic_ns()
            self.holding = False
            trouble = self.trouble_ns
            self.recorder.held(Holding(self.cid, sequencer.token, acquired,
                                       released if trouble is None else min(trouble, released)))
            try:
                self.lock.release()
            except (RecipeError, KazooException, KazooTimeoutError) as e:
                self.recorder.unknown(e)  # the session's end releases it

    def _fenced_write(self, sequencer) -> None:
        txn = self.client.transaction()
        txn.check(f"{sequencer.lock_path}/{sequencer.node}", -1)
        txn.set_data(self.layout.fenced, str(sequencer.token).encode())
        invoked = time.monotonic_ns()
        try:
            results = txn.commit_async().get(OP_TIMEOUT_S)
        except (KazooException, KazooTimeoutError) as e:
            self.recorder.unknown(e)
            self.recorder.fenced_write(FencedWrite(self.cid, sequencer.token, invoked, None,
                                                   None))
            return
        ok = not any(isinstance(r, Exception) for r in results)
        self.recorder.fenced_write(FencedWrite(self.cid, sequencer.token, invoked,
                                               time.monotonic_ns(), ok))
