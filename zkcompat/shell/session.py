"""One zkCli connection on kazoo: ZooKeeper's default-watcher semantics (ZKWatchManager),
state events, and blocking calls of raw requests. Every event reaches `on_event` as the
line WatchedEvent.toString() gives, from kazoo's callback thread, in arrival order."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.protocol.serialization import Watch
from kazoo.protocol.states import KeeperState
from kazoo.retry import KazooRetry

from zkcompat.shell import format as fmt
from zkcompat.shell import wire

# EventType names and wire values (Watcher.Event.EventType)
EVENT_TYPES = {1: "NodeCreated", 2: "NodeDeleted", 3: "NodeDataChanged",
               4: "NodeChildrenChanged"}
CREATED, DELETED, CHANGED, CHILD = 1, 2, 3, 4
# KeeperState names for kazoo's client states (Watcher.Event.KeeperState)
EVENT_STATES = {
    KeeperState.CONNECTED: "SyncConnected",
    KeeperState.CONNECTED_RO: "ConnectedReadOnly",
    KeeperState.CONNECTING: "Disconnected",
    KeeperState.EXPIRED_SESSION: "Expired",
    KeeperState.AUTH_FAILED: "AuthFailed",
    KeeperState.CLOSED: "Closed",
}
# ZooKeeper.States names, for the prompt
PROMPT_STATES = {
    KeeperState.CONNECTED: "CONNECTED",
    KeeperState.CONNECTED_RO: "CONNECTEDREADONLY",
    KeeperState.CONNECTING: "CONNECTING",
    KeeperState.EXPIRED_SESSION: "CLOSED",
    KeeperState.AUTH_FAILED: "AUTH_FAILED",
    KeeperState.CLOSED: "CLOSED",
}
NO_ZXID = -1  # WatchedEvent.NO_ZXID
# kazoo logs every failed connection attempt as a warning; the Java client's log does not
# reach zkCli's terminal (Debian's zkCli.sh has no SLF4J binding), and the shell reports
# what matters itself (ConnectionLoss, the state events).
logging.getLogger("kazoo").addHandler(logging.NullHandler())
logging.getLogger("kazoo").propagate = False
CLOSE_WAIT_S = 5.0
RECONNECT_DELAY_S = 0.1
RECONNECT_DELAY_MAX_S = 1.0


class KeeperError(Exception):
    """A reply's non-zero err, with the client path it was for."""

    def __init__(self, code: int, path: str | None) -> None:
        super().__init__(fmt.keeper_message(code, path))
        self.code = code
        self.path = path


def _ancestors(path: str):
    """PathParentIterator.forAll: the path itself, then each parent up to "/"."""
    yield path
    while path != "/":
        path = path.rsplit("/", 1)[0] or "/"
        yield path


class Session:
    """A KazooClient that behaves, for the shell, like ZooKeeper's Java client with zkCli's
    default watcher. alive is False once closed, expired or refused auth (zkCli's
    "Not connected")."""

    def __init__(self, hosts: str, timeout_ms: int, read_only: bool,
                 on_event: Callable[[str], None]) -> None:
        self.hosts = hosts
        self.timeout_ms = timeout_ms
        self.on_event = on_event
        self.persistent: set[str] = set()
        self.recursive: set[str] = set()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._was_connected = False
        # Connection attempts that ended (refused, timed out, or a connection lost), and
        # the condition a request waits on for the session or for one of those.
        self._attempts_ended = 0
        self._connection_news = threading.Condition()
        retry = KazooRetry(max_tries=-1, delay=RECONNECT_DELAY_S, max_delay=RECONNECT_DELAY_MAX_S)
        self.client = KazooClient(hosts=hosts, timeout=timeout_ms / 1000.0, read_only=read_only,
                                  connection_retry=retry)
        conn = self.client._connection
        read_header = conn._read_header

        def remember_header(timeout):
            header, buffer, offset = read_header(timeout)
            conn._zkshell_zxid = header.zxid
            return header, buffer, offset

        conn._read_header = remember_header
        connect_attempt = conn._connect_attempt

        def counted_attempt(*args):
            try:
                return connect_attempt(*args)
            finally:
                with self._connection_news:
                    self._attempts_ended += 1
                    self._connection_news.notify_all()

        conn._connect_attempt = counted_attempt
        conn._read_watch_event = self._read_watch_event
        self.client.add_listener(self._on_state)
        self.client.start_async()

    # -------------------------------------------------------------- state
    @property
    def alive(self) -> bool:
        return not self._closed.is_set()

    @property
    def prompt_state(self) -> str:
        state = self.client.client_state
        if state == KeeperState.CLOSED and self.alive:
            return "CONNECTING"  # kazoo says CLOSED until its first connection attempt
        return PROMPT_STATES.get(state, str(state))

    def _on_state(self, _kazoo_state) -> None:
        with self._connection_news:
            self._connection_news.notify_all()
        state = self.client.client_state
        name = EVENT_STATES.get(state)
        if name is None:
            return
        if state in (KeeperState.CONNECTED, KeeperState.CONNECTED_RO):
            if self._was_connected and (self.persistent or self.recursive):
                self.client.handler.spawn(self._restore_persistent)
            self._was_connected = True
        line = fmt.watched_event(name, "None", None, NO_ZXID)
        if state not in (KeeperState.CLOSED, KeeperState.EXPIRED_SESSION,
                         KeeperState.AUTH_FAILED):
            self._dispatch(line)
            return
        # kazoo stops its callback thread before it reports CLOSED: print from here.
        self.on_event(line)
        if state == KeeperState.EXPIRED_SESSION:
            # The Java client's ZooKeeper object is dead after expiry; kazoo would open a
            # new session by itself.
            threading.Thread(target=self.client.stop, daemon=True).start()
        self._closed.set()

    def _restore_persistent(self) -> None:
        # kazoo sends no SetWatches on reconnect; the Java client's SetWatches2 would carry
        # these, so re-add them.
        for paths, mode in ((self.persistent, 0), (self.recursive, 1)):
            for path in list(paths):
                try:
                    self.call(wire.AddWatch(path, mode, self._added))
                except (KeeperError, KazooException):
                    pass

    def _dispatch(self, line: str) -> None:
        self.client.handler.dispatch_callback(_callback(self.on_event, line))

    # -------------------------------------------------------------- watches
    def _one_shot(self, _event) -> None:
        """The watcher object kazoo registers for every one-shot watch; kazoo's own dispatch
        is replaced by _read_watch_event, so this sees only kazoo's resets."""

    def _read_watch_event(self, buffer, offset) -> None:
        """ZKWatchManager.materialize with one (default) watcher: print the event once if
        any watch of the session matches it. Runs in kazoo's reader thread."""
        client = self.client
        watch, _ = Watch.deserialize(buffer, offset)
        zxid = getattr(client._connection, "_zkshell_zxid", NO_ZXID)
        path = watch.path
        hit = False
        if watch.type in (CREATED, CHANGED, DELETED):
            hit |= bool(client._data_watchers.pop(path, None))
        if watch.type in (CHILD, DELETED):
            hit |= bool(client._child_watchers.pop(path, None))
        with self._lock:
            hit |= path in self.persistent
            if watch.type != CHILD:
                hit |= any(p in self.recursive for p in _ancestors(path))
        if not hit or client._stopped.is_set() or watch.type not in EVENT_TYPES:
            return
        state = EVENT_STATES.get(client.client_state, "SyncConnected")
        self._dispatch(fmt.watched_event(state, EVENT_TYPES[watch.type],
                                         client.unchroot(path), zxid))

    def _added(self, path: str, mode: int) -> None:
        with self._lock:
            (self.persistent if mode == 0 else self.recursive).add(path)

    def remove_watches(self, path: str, watcher_type: str, local: bool) -> None:
        """ZooKeeper.removeAllWatches(path, type, local) with WatchDeregistration's events."""
        server_path = self._server_path(path)
        code = wire.WATCHER_TYPES[watcher_type]
        try:
            self.call(wire.RemoveWatches(server_path, code, self._removed(watcher_type)), path)
        except KeeperError:
            if not local:
                raise
            if not self._removed(watcher_type)(server_path, code):
                raise

    def _removed(self, watcher_type: str):
        def remove(server_path: str, _code: int) -> bool:
            c = self.client
            removed_child = removed_data = removed_persistent = False
            if watcher_type in ("Children", "Any"):
                removed_child = bool(c._child_watchers.pop(server_path, None))
            if watcher_type in ("Data", "Any"):
                removed_data = bool(c._data_watchers.pop(server_path, None))
            with self._lock:
                if watcher_type in ("Persistent", "Any") and server_path in self.persistent:
                    self.persistent.discard(server_path)
                    removed_persistent = True
                if (watcher_type in ("PersistentRecursive", "Any")
                        and server_path in self.recursive):
                    self.recursive.discard(server_path)
                    removed_persistent = True
            client_path = c.unchroot(server_path)
            for removed, kind in ((removed_child, "ChildWatchRemoved"),
                                  (removed_data, "DataWatchRemoved"),
                                  (removed_persistent, "PersistentWatchRemoved")):
                if removed:
                    self._dispatch(fmt.watched_event("SyncConnected", kind, client_path,
                                                     NO_ZXID))
            return removed_child or removed_data or removed_persistent
        return remove

    @property
    def watcher(self):
        return self._one_shot

    # -------------------------------------------------------------- calls
    def _server_path(self, path: str) -> str:
        chroot = self.client.chroot
        if not chroot:
            return path
        return chroot if path == "/" else chroot + path

    def call(self, request, path: str | None = None):
        """Send one request and wait for its reply; KeeperError(code, path) on err."""
        if not self.alive:
            raise KeeperError(fmt.SESSIONEXPIRED, path)
        # kazoo refuses a request before its first connection; the Java client queues it,
        # and fails it with ConnectionLoss as soon as a connection attempt fails.
        if not self._connected_or_attempt_failed(self.timeout_ms / 1000.0):
            raise KeeperError(fmt.CONNECTIONLOSS, path)
        result = self.client.handler.async_result()
        self.client._call(request, result)
        try:
            return result.get(timeout=max(2 * self.timeout_ms / 1000.0, 30.0))
        except KazooException as e:
            code = getattr(e, "code", None)
            if isinstance(code, int):
                raise KeeperError(code, path) from None
            raise KeeperError(fmt.CONNECTIONLOSS, path) from None
        except self.client.handler.timeout_exception:
            raise KeeperError(fmt.CONNECTIONLOSS, path) from None

    def _connected_or_attempt_failed(self, timeout_s: float) -> bool:
        """Whether the session is connected, once it is or once a connection attempt
        ends without it (ClientCnxn.SendThread's cleanup fails every queued packet with
        ConnectionLoss), or after timeout_s."""
        live = self.client._live
        with self._connection_news:
            ended = self._attempts_ended
            self._connection_news.wait_for(
                lambda: live.is_set() or self._attempts_ended != ended or not self.alive,
                timeout_s)
        return live.is_set()

    def close(self) -> None:
        """ZooKeeper.close(): the Closed event is printed before this returns."""
        if not self._closed.is_set():
            # The Java client's closeSession waits for the connection like any request,
            # so a session still connecting is established (and announced) first.
            self._connected_or_attempt_failed(min(self.timeout_ms / 1000.0, CLOSE_WAIT_S))
            try:
                self.client.stop()
            finally:
                # kazoo reports no CLOSED for a session that never connected (its state
                # starts as LOST): then the event is ours to print, at once.
                if not self._closed.wait(CLOSE_WAIT_S if self._was_connected else 0):
                    self.on_event(fmt.watched_event("Closed", "None", None, NO_ZXID))
                    self._closed.set()
        self.client.close()


def _callback(func, *args):
    from kazoo.protocol.states import Callback

    return Callback("shell", func, args)
