"""A loopback TCP proxy between one client and a server, to suspend or cut that client's
connection without touching the server (or any other client)."""

from __future__ import annotations

import select
import socket
import threading

POLL_S = 0.05
CHUNK_BYTES = 65536


class TcpProxy:
    """Forwards 127.0.0.1:<port> to `upstream` ("host:port"). pause() stops moving bytes in
    both directions (the client sees a silent server and goes SUSPENDED); resume() moves
    them again; drop() closes every current connection."""

    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.split(",")[0].rpartition(":")
        self.upstream = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._moving = threading.Event()
        self._moving.set()
        self._closed = threading.Event()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._mutex = threading.Lock()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def pause(self) -> None:
        self._moving.clear()

    def resume(self) -> None:
        self._moving.set()

    def drop(self) -> None:
        with self._mutex:
            pairs, self._pairs = self._pairs, []
        for a, b in pairs:
            for s in (a, b):
                try:
                    s.close()
                except OSError:
                    pass

    def close(self) -> None:
        self._closed.set()
        self._moving.set()
        self._listener.close()
        self.drop()
        for t in self._threads:
            t.join(timeout=2.0)

    def _accept(self) -> None:
        while not self._closed.is_set():
            ready, _, _ = select.select([self._listener], [], [], POLL_S)
            if not ready:
                continue
            try:
                client, _ = self._listener.accept()
                server = socket.create_connection(self.upstream, timeout=5.0)
            except OSError:
                continue
            with self._mutex:
                self._pairs.append((client, server))
            t = threading.Thread(target=self._pump, args=(client, server), daemon=True)
            t.start()
            self._threads.append(t)

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        peer = {a: b, b: a}
        try:
            while not self._closed.is_set():
                if not self._moving.wait(POLL_S):
                    continue
                ready, _, _ = select.select([a, b], [], [], POLL_S)
                for s in ready:
                    if not self._moving.is_set():
                        break  # paused between select and recv: leave the bytes queued
                    data = s.recv(CHUNK_BYTES)
                    if not data:
                        return
                    peer[s].sendall(data)
        except (OSError, ValueError):  # ValueError: drop() closed a socket under select()
            return
        finally:
            for s in (a, b):
                try:
                    s.close()
                except OSError:
                    pass
