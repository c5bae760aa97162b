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
from zkcompat.sim import history as h

KEYS_PER_ROOT = 3
OP_TIMEOUT_S = 6.0  # a reply not heard by then is an unknown outcome
THINK_MAX_S = 0.05
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


@dataclass(frozen=True)
class Seen:
    """One reply of one session that showed a znode's Stat: the order checks read these."""

    client: int
    session_id: int
    index: int  # the request's place in this client's own order
    path: str
    mzxid: int | None  # None: the znode did not exist
    own_write: bool  # the client's own acknowledged setData


class Recorder:
    """The history of every client, thread-safe; ops in invocation order per client."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.operations: list[h.Operation] = []
        self.seen: list[Seen] = []
        self.unknown_errors: dict[str, int] = {}

    def add(self, op: h.Operation) -> None:
        with self.lock:
            self.operations.append(op)

    def saw(self, seen: Seen) -> None:
        with self.lock:
            self.seen.append(seen)

    def unknown(self, error: BaseException) -> None:
        with self.lock:
            name = type(error).__name__
            self.unknown_errors[name] = self.unknown_errors.get(name, 0) + 1

    def snapshot(self) -> tuple[list[h.Operation], list[Seen]]:
        with self.lock:
            return list(self.operations), list(self.seen)


def start_client(hosts: str) -> KazooClient:
    client = KazooClient(hosts=hosts, timeout=SESSION_TIMEOUT_S, randomize_hosts=False,
                         connection_retry=dict(FAST_RETRY))
    client.start(timeout=CONNECT_TIMEOUT_S)
    return client


class Worker(threading.Thread):
    """One client: one session (a new one if it expires), one request at a time."""

    def __init__(self, cid: int, hosts: str, layout: Layout, recorder: Recorder,
                 stop: threading.Event, seed: int) -> None:
        super().__init__(name=f"nemesis-client-{cid}", daemon=True)
        self.cid = cid
        self.layout = layout
        self.recorder = recorder
        self.stop_event = stop
        self.rng = random.Random(seed)
        self.client = start_client(hosts)
        self.sessions_lost = 0  # expired while the run went on (not the close at the end)
        self.client.add_listener(self._state_changed)
        self.versions: dict[str, int] = {}
        self.n = 0
        self.index = 0
        self.died: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                self.step()
                self.stop_event.wait(self.rng.uniform(0, THINK_MAX_S))
        except BaseException as e:  # a client that dies is a failed run, not a quiet one
            self.died = e
            raise

    def _state_changed(self, state: KazooState) -> None:
        if state == KazooState.LOST and not self.stop_event.is_set():
            self.sessions_lost += 1

    def close(self) -> None:
        try:
            self.client.stop()
            self.client.close()
        except Exception:  # noqa: BLE001 - teardown of a client whose servers may be gone
            pass

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
        try:
            value = run()
        except tuple(KNOWN_ERRORS) as e:
            self.recorder.add(h.Operation(self.cid, call, invoked, time.monotonic_ns(),
                                          h.Err(KNOWN_ERRORS[type(e)])))
            return None
        except (KazooException, KazooTimeoutError) as e:
            self.recorder.add(h.Operation(self.cid, call, invoked))
            self.recorder.unknown(e)
            self.stop_event.wait(ERROR_PAUSE_S)
            return None
        self.recorder.add(h.Operation(self.cid, call, invoked, time.monotonic_ns(),
                                      h.Ok(self._ok_value(call, value))))
        return value

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
            self.recorder.saw(Seen(self.cid, session, self.index, key, stat.mzxid, True))

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
        try:
            got = self.client.get_async(key).get(OP_TIMEOUT_S)
        except NoNodeError:
            self.recorder.saw(Seen(self.cid, session, self.index, key, None, False))
            return
        except (KazooException, KazooTimeoutError) as e:
            self.recorder.unknown(e)
            self.stop_event.wait(ERROR_PAUSE_S)
            return
        self._saw_read(session, key, got)

    def _saw_read(self, session: int, key: str, got) -> None:
        if got is None or self._session() != session:  # no reply, or a new session since
            return
        data, stat = got
        self.versions[key] = stat.version
        self.recorder.saw(Seen(self.cid, session, self.index, key, stat.mzxid, False))
