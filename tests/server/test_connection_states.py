"""A client connection's states: the transitions of CONNECTION_TRANSITIONS, and only those
(an illegal change is our bug: an assertion), and a client that goes away while its
session is being created stays closed when the session's txn is applied."""

from __future__ import annotations

import asyncio

import pytest

from bench import wire
from bench.inproc import QuietTransport
from zkcompat.config import Config
from zkcompat.peer.node import build_standalone
from zkcompat.server.connection import (
    CLOSED,
    CONNECTION_TRANSITIONS,
    HANDSHAKE,
    OPEN,
    WAITING,
    Connection,
    ConnState,
)


@pytest.fixture
def ctx(tmp_path):
    ctx = build_standalone(Config(data_dir=tmp_path, force_sync=False))
    yield ctx
    ctx.snapshotter.close()
    ctx.datadir.close()


def test_every_state_is_reached_from_the_handshake_and_can_close():
    seen, todo = {HANDSHAKE}, [HANDSHAKE]
    while todo:
        for nxt in CONNECTION_TRANSITIONS[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    assert seen == set(ConnState)
    assert CONNECTION_TRANSITIONS[CLOSED] == frozenset()
    assert all(CLOSED in after for state, after in CONNECTION_TRANSITIONS.items()
               if state is not CLOSED)


def test_an_illegal_transition_is_an_assertion_and_changes_nothing(ctx):
    cnxn = Connection(ctx)
    with pytest.raises(AssertionError, match="HANDSHAKE -> OPEN"):
        cnxn._become(OPEN)
    assert cnxn._state is HANDSHAKE


def test_a_client_gone_before_its_session_opened_stays_closed(ctx):
    async def go():
        cnxn = Connection(ctx)
        cnxn.connection_made(QuietTransport())
        cnxn.data_received(wire.connect_request())
        waiting = cnxn._state
        cnxn.connection_lost(None)  # before the createSession txn is applied
        peer = ctx.pipeline.peer
        for _ in range(1000):
            if ctx.pipeline.tracker.sessions and peer.last_committed_zxid >= 1:
                break
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.01)
        return waiting, cnxn._state, list(cnxn._out)

    waiting, state, unsent = asyncio.run(go())
    assert waiting is WAITING
    assert state is CLOSED and unsent == []
