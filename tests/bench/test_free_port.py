"""bench.servers.free_port: the harness's ports (47 callers in the tests) never repeat."""

from __future__ import annotations

import socket

from bench import servers


class _KernelGivingBack:
    """A socket whose bind to port 0 gets the ports listed, in turn: the kernel handing
    out again a port it has just closed."""

    ports: list[int] = []

    def __init__(self, *_args) -> None:
        self.port = 0

    def __enter__(self):
        return self

    def __exit__(self, *_exc) -> None:
        pass

    def bind(self, _address) -> None:
        self.port = _KernelGivingBack.ports.pop(0)

    def getsockname(self):
        return (servers.HOST, self.port)


def test_a_port_the_kernel_gives_again_is_not_handed_out_twice(monkeypatch):
    first = servers.free_port()
    _KernelGivingBack.ports = [first, first, 1]  # 1: never handed out (privileged)
    monkeypatch.setattr(servers.socket, "socket", _KernelGivingBack)
    assert servers.free_port() == 1
    assert _KernelGivingBack.ports == []


def test_real_ports_are_distinct_and_bindable():
    ports = [servers.free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    with socket.socket() as s:
        s.bind((servers.HOST, ports[-1]))
