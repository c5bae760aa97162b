"""The load generator survives a server closing a session's connection in a run with a
total (loading data), as ZooKeeper followers do when they lose their leader: the session
reconnects to the next address and sends again what was outstanding. A run with a
duration still fails. A proxy in front of a real zkcompat server does the closing."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from bench import loadgen, wire
from bench.loadgen import LoadPlan, run_load
from bench.workloads import CreateWorkload

LOOPBACK = "127.0.0.1"
CUT_AFTER_BYTES = 2048  # client -> server bytes the cut connection forwards first
APPLY_WAIT_S = 0.3  # before the cut: time for the server to apply what it was sent
TOTAL_REQUESTS = 2000
RUN_TIMEOUT_S = 60


class ClosingProxy:
    """Forwards TCP connections to `upstream`, except that the first one to carry
    CUT_AFTER_BYTES from the client is cut: from then on the server's replies to it are
    dropped, and after APPLY_WAIT_S (the server applies what it was sent) both sides are
    closed, with a FIN or a reset (`how`). The requests applied whose replies were dropped
    are the ones a reconnecting client sends again. With `refuse_after_cut` the proxy stops
    listening at the cut, so nothing behind it takes a new session."""

    def __init__(self, upstream: tuple[str, int], how: str,
                 refuse_after_cut: bool = False) -> None:
        assert how in ("fin", "reset")
        self.upstream = upstream
        self.how = how
        self.refuse_after_cut = refuse_after_cut
        self.listener = socket.create_server((LOOPBACK, 0))
        self.address = self.listener.getsockname()
        self.lock = threading.Lock()
        self.cut_done = False
        self.accepted = 0
        self.sockets: list[socket.socket] = []
        self.stopping = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopping:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream, timeout=5)
            server.settimeout(None)
            with self.lock:
                self.accepted += 1
                self.sockets += [client, server]
            dropping = threading.Event()
            threading.Thread(target=self._client_to_server, args=(client, server, dropping),
                             daemon=True).start()
            threading.Thread(target=self._server_to_client, args=(server, client, dropping),
                             daemon=True).start()

    def _client_to_server(self, client, server, dropping: threading.Event) -> None:
        forwarded = 0
        try:
            while data := client.recv(1 << 16):
                server.sendall(data)
                forwarded += len(data)
                if forwarded >= CUT_AFTER_BYTES and self._take_the_cut():
                    dropping.set()
                    time.sleep(APPLY_WAIT_S)
                    self._cut(client, server)
                    return
        except OSError:
            pass
        _close(client, server)

    def _server_to_client(self, server, client, dropping: threading.Event) -> None:
        try:
            while data := server.recv(1 << 16):
                if not dropping.is_set():
                    client.sendall(data)
        except OSError:
            pass
        _close(client, server)

    def _take_the_cut(self) -> bool:
        with self.lock:
            if self.cut_done:
                return False
            self.cut_done = True
            return True

    def _cut(self, client: socket.socket, server: socket.socket) -> None:
        if self.refuse_after_cut:
            self._stop_listening()
        server.close()
        if self.how == "reset":
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
            client.close()
        else:
            client.shutdown(socket.SHUT_RDWR)
            client.close()

    def _stop_listening(self) -> None:
        # shutdown, not just close: a close leaves the thread blocked in accept listening
        self.stopping = True
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()

    def close(self) -> None:
        self._stop_listening()
        with self.lock:
            socks = list(self.sockets)
        _close(*socks)


def _close(*socks: socket.socket) -> None:
    for s in socks:
        try:
            s.close()
        except OSError:
            pass


@pytest.fixture
def proxy_factory(zkcompat_server):
    made: list[ClosingProxy] = []

    def make(how: str, refuse_after_cut: bool = False) -> ClosingProxy:
        made.append(ClosingProxy((LOOPBACK, zkcompat_server.port), how, refuse_after_cut))
        return made[-1]

    yield make
    for p in made:
        p.close()


def _children(port: int, paths: list[str]) -> int:
    s = wire.SyncSession(LOOPBACK, port)
    try:
        stats = [s.stat(p) for p in paths]
    finally:
        s.close()
    assert None not in stats
    return sum(st.numChildren for st in stats)


@pytest.mark.timeout(RUN_TIMEOUT_S)
@pytest.mark.parametrize(("how", "layout"), [
    ("fin", "server, proxy"),  # session 1 is cut and reconnects to the server itself
    ("reset", "server, proxy"),
    ("fin", "proxy"),  # it reconnects through the proxy again, which forwards it now
])
def test_a_budgeted_run_survives_a_closed_connection(zkcompat_server, proxy_factory, how,
                                                     layout):
    proxy = proxy_factory(how)
    server = (LOOPBACK, zkcompat_server.port)
    addresses = {"server, proxy": [server, proxy.address], "proxy": [proxy.address]}[layout]
    root = f"/reconnect-{how}-{layout.replace(', ', '-')}"
    wl = CreateWorkload(root=root)
    plan = LoadPlan(wl, addresses, processes=1, sessions=2, inflight=8, duration_s=None,
                    warmup_s=0.0, total_requests=TOTAL_REQUESTS)
    res = run_load(plan)
    assert proxy.cut_done
    assert res.total_replies == TOTAL_REQUESTS
    assert not res.errors
    assert res.reconnects == 1
    # the creates the server applied whose replies the proxy dropped, sent again
    assert res.resent_existing >= 1
    parents = [f"{root}/{slot.tag}" for slot in plan.slots()]
    assert _children(zkcompat_server.port, parents) == TOTAL_REQUESTS


@pytest.mark.timeout(RUN_TIMEOUT_S)
def test_a_timed_run_still_fails_on_a_closed_connection(proxy_factory):
    proxy = proxy_factory("fin")
    wl = CreateWorkload(root="/reconnect-timed")
    plan = LoadPlan(wl, [proxy.address], processes=1, sessions=2, inflight=8,
                    duration_s=1.0, warmup_s=0.2)
    with pytest.raises(RuntimeError, match="closed a session|ConnectionResetError"):
        run_load(plan)
    assert proxy.cut_done


@pytest.mark.timeout(RUN_TIMEOUT_S)
def test_a_budgeted_run_fails_when_no_server_takes_a_new_session(proxy_factory,
                                                                 monkeypatch):
    # the client process is forked, so it sees the shortened bound
    monkeypatch.setattr(loadgen, "RECONNECT_MAX_S", 1.0)
    proxy = proxy_factory("fin", refuse_after_cut=True)
    wl = CreateWorkload(root="/reconnect-refused")
    plan = LoadPlan(wl, [proxy.address], processes=1, sessions=2, inflight=8,
                    duration_s=None, warmup_s=0.0, total_requests=TOTAL_REQUESTS)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="WireError: the server closed a session and none "
                                           "took a new one within 1 s"):
        run_load(plan)
    assert proxy.cut_done and time.monotonic() - t0 < RUN_TIMEOUT_S / 2
