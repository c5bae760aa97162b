"""The test hook ZKCOMPAT_TEST_BIND_PEER_SOURCE (peer/links.py): switched on, a server's
outgoing peer links leave from its own server.N address, which is how the nemesis tells
servers on 127.0.0.1-N apart; off (the default), the kernel chooses, as ever."""

from __future__ import annotations

import asyncio
import logging

import pytest

from zkcompat.peer import links

LISTEN_HOST = "127.0.0.1"
OWN_HOST = "127.0.0.2"  # what server.N names for this server: another loopback address


@pytest.fixture(autouse=True)
def _hook_off_afterwards(monkeypatch):
    monkeypatch.setattr(links, "_peer_source_host", None)


async def _source_seen_by_peer() -> str:
    """Open a link as a server would, to a listener; the address the listener saw."""
    seen: asyncio.Future = asyncio.get_running_loop().create_future()

    def accepted(reader, writer):
        seen.set_result(writer.get_extra_info("peername")[0])
        writer.close()

    server = await asyncio.start_server(accepted, LISTEN_HOST, 0)
    port = server.sockets[0].getsockname()[1]
    try:
        link = await links.open_link(None, LISTEN_HOST, port, 5.0, "election")
        try:
            return await asyncio.wait_for(seen, 5.0)
        finally:
            link.close()
    finally:
        server.close()
        await server.wait_closed()


def test_with_the_hook_on_links_leave_from_this_servers_own_address(caplog):
    with caplog.at_level(logging.WARNING, logger=links.__name__):
        links.bind_peer_source(OWN_HOST, environ={links.TEST_BIND_PEER_SOURCE_ENV: "1"})
    assert asyncio.run(_source_seen_by_peer()) == OWN_HOST
    assert f"event=test_hook_enabled hook=bind_peer_source host={OWN_HOST}" in caplog.text


def test_without_the_hook_nothing_is_bound_and_nothing_logged(caplog):
    with caplog.at_level(logging.WARNING, logger=links.__name__):
        links.bind_peer_source(OWN_HOST, environ={})
        links.bind_peer_source(OWN_HOST, environ={links.TEST_BIND_PEER_SOURCE_ENV: "0"})
    assert asyncio.run(_source_seen_by_peer()) == LISTEN_HOST
    assert "test_hook_enabled" not in caplog.text
