"""Sessions are durable: after kill -9 and a restart, a client that comes back within its
timeout keeps its session and its ephemerals; one that does not is expired, a full
timeout after the restart (as a new ZooKeeper leader does it), and its ephemerals go."""

from __future__ import annotations

import time

from kazoo.client import KazooClient, KazooState

from .harness import TICK_TIME_MS, Node, wait_for

SESSION_TIMEOUT_S = 4.0  # the most tickTime 200 allows (20 ticks)
EXPIRY_SLACK_S = 3.0  # session tracker buckets (a tick) plus a loaded CI box


def test_sessions_and_ephemerals_survive_kill9_and_expire_without_their_client(tmp_path):
    node = Node(tmp_path / "node")
    node.start()
    states: list[str] = []
    returns = KazooClient(hosts=node.connect_string, timeout=SESSION_TIMEOUT_S)
    returns.add_listener(lambda s: states.append(s))
    returns.start(timeout=10)
    gone = KazooClient(hosts=node.connect_string, timeout=SESSION_TIMEOUT_S)
    gone.start(timeout=10)
    reader = None
    try:
        returns_sid = returns.client_id[0]
        gone_sid = gone.client_id[0]
        returns.create("/s", b"")
        returns.create("/s/returns", b"r", ephemeral=True)
        seq = returns.create("/s/returns-seq-", b"", ephemeral=True, sequence=True)
        gone.create("/s/gone", b"g", ephemeral=True)
        gone.create("/s/gone-too", b"g", ephemeral=True)

        node.kill()
        gone.stop()  # never comes back (it cannot send closeSession: the server is down)
        node.start()
        restarted = time.monotonic()

        reader = KazooClient(hosts=node.connect_string, timeout=10)
        reader.start(timeout=10)
        # Right after the restart every session is there, with its ephemerals.
        stat = reader.exists("/s/gone")
        assert stat is not None and stat.ephemeralOwner == gone_sid
        assert reader.exists("/s/returns").ephemeralOwner == returns_sid
        assert reader.exists(seq).ephemeralOwner == returns_sid

        wait_for(lambda: returns.state == KazooState.CONNECTED and states[-1:] ==
                 [KazooState.CONNECTED], SESSION_TIMEOUT_S, what="the returning client reconnected")
        assert returns.client_id[0] == returns_sid
        # Still there after half a timeout: the restart gave every session a full timeout.
        time.sleep(max(0.0, restarted + SESSION_TIMEOUT_S / 2 - time.monotonic()))
        assert reader.exists("/s/gone") is not None, "expired before its timeout ran out"

        gone_at = wait_for(lambda: reader.exists("/s/gone") is None and time.monotonic(),
                           SESSION_TIMEOUT_S + EXPIRY_SLACK_S, what="the absent session expired")
        assert gone_at - restarted >= SESSION_TIMEOUT_S - TICK_TIME_MS / 1000 * 2
        assert reader.exists("/s/gone-too") is None
        assert sorted(reader.get_children("/s")) == sorted(["returns", seq.rsplit("/", 1)[1]])
        assert KazooState.LOST not in states, states
        assert returns.get("/s/returns")[1].ephemeralOwner == returns_sid

        # And the session that came back survives a second crash too, then ends cleanly.
        node.kill()
        node.start()
        wait_for(lambda: returns.state == KazooState.CONNECTED, SESSION_TIMEOUT_S,
                 what="the returning client reconnected again")
        reader.stop()
        reader.close()
        reader = KazooClient(hosts=node.connect_string, timeout=10)
        reader.start(timeout=10)
        assert reader.exists("/s/returns").ephemeralOwner == returns_sid
        assert KazooState.LOST not in states, states
        returns.stop()
        assert reader.exists("/s/returns") is None and reader.exists(seq) is None
    finally:
        for c in (returns, gone, reader):
            if c is not None:
                c.stop()  # a no-op on a stopped client
                c.close()
        node.stop()
