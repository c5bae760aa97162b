"""Loaded by every Python the nemesis starts (its PYTHONPATH names this folder); acts only in
`zkcompat serve --config CFG` with ZKCOMPAT_NEMESIS_BIND_SOURCE=1 in the environment.

There it binds each outgoing connection to a peer to this server's own address from its
server.N line, as a server on its own host would send from it. Loopback otherwise sends
every connection from 127.0.0.1, and a firewall rule could not tell the servers apart
(`--addresses spread` puts server K on 127.0.0.K). Nothing of zkcompat is changed but
the loop that `zkcompat.peer.links` reaches through `asyncio.get_running_loop()`.
"""

from __future__ import annotations

import os
import sys

ENV_FLAG = "ZKCOMPAT_NEMESIS_BIND_SOURCE"


def _own_host(cfg_path: str) -> str | None:
    """server.<myid>'s host: myid from dataDir/myid, as zkcompat reads it."""
    settings = {}
    for line in open(cfg_path, encoding="utf-8"):
        key, sep, value = line.strip().partition("=")
        if sep and not key.startswith("#"):
            settings[key.strip()] = value.strip()
    myid = open(os.path.join(settings["dataDir"], "myid"), encoding="utf-8").read().strip()
    server = settings.get(f"server.{myid}")
    return None if server is None else server.split(":", 1)[0]


class _BoundLoop:
    """The running loop, whose create_connection binds to `host` unless told otherwise."""

    def __init__(self, loop, host: str) -> None:
        self._loop = loop
        self._host = host

    def __getattr__(self, name):
        return getattr(self._loop, name)

    def create_connection(self, *args, **kwargs):
        if kwargs.get("sock") is None and kwargs.get("local_addr") is None:
            kwargs["local_addr"] = (self._host, 0)
        return self._loop.create_connection(*args, **kwargs)


class _AsyncioForLinks:
    """asyncio as zkcompat.peer.links sees it: the same, but for get_running_loop."""

    def __init__(self, asyncio_module, host: str) -> None:
        self._asyncio = asyncio_module
        self._host = host

    def __getattr__(self, name):
        return getattr(self._asyncio, name)

    def get_running_loop(self):
        return _BoundLoop(self._asyncio.get_running_loop(), self._host)


def _install() -> None:
    argv = getattr(sys, "orig_argv", [])
    if os.environ.get(ENV_FLAG) != "1" or "serve" not in argv or "--config" not in argv:
        return
    host = _own_host(argv[argv.index("--config") + 1])
    if host is None or not host.startswith("127."):
        return
    import asyncio  # noqa: PLC0415

    from zkcompat.peer import links  # noqa: PLC0415

    links.asyncio = _AsyncioForLinks(asyncio, host)
    print(f"nemesis: connections to peers leave from {host}", file=sys.stderr, flush=True)


_install()
