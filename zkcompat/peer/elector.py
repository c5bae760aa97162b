"""Runs FastLeaderElection over QuorumCnxManager on the event loop's monotonic clock: the
one place the election state machine meets time and sockets.

    elector = Elector(my_sid, servers)          # servers: zoo.cfg's server.N lines
    vote = await elector.elect(last_zxid, peer_epoch)   # one election, to its decision
    elector.serve(state, vote)                  # while following/leading/observing
    await elector.close()

Received notifications are kept (the newest RECEIVED_MAX) in `received` for tests and
diagnostics; one that does not decode is logged and skipped, as WorkerReceiver does,
without closing its connection.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import deque
from collections.abc import Callable, Sequence

from zkcompat.jute.election import Notification, ServerState
from zkcompat.jute.errors import JuteError
from zkcompat.peer.cnxmanager import QuorumCnxManager
from zkcompat.security.quorum_tls import QuorumTls
from zkcompat.zab.election import (
    FINALIZE_WAIT_MS,
    MAX_NOTIFICATION_INTERVAL_MS,
    ElectionEffects,
    FastLeaderElection,
    Vote,
)
from zkcompat.zab.membership import Membership, as_quorum_server

log = logging.getLogger(__name__)

RECEIVED_MAX = 1000
_OBSERVER = "observer"


class Elector:
    """Server my_sid's leader election among `servers` (QuorumServer tuples); cfg_keys,
    zoo.cfg's keys in file order, make the config bytes exact (quorum_config_bytes)."""

    def __init__(self, my_sid: int, servers: Sequence[object] | Membership, *,
                 finalize_wait_ms: int = FINALIZE_WAIT_MS,
                 max_notification_interval_ms: int = MAX_NOTIFICATION_INTERVAL_MS,
                 cfg_keys: Sequence[str] | None = None,
                 rng: random.Random | None = None,
                 security: QuorumTls | None = None, sasl=None,
                 on_newer_config: Callable[[Membership], None] | None = None) -> None:
        """on_newer_config (reconfigEnabled): a LOOKING server told of a later config by a
        peer's notification commits it (WorkerReceiver's processReconfig), and the round
        starts again within it."""
        if not isinstance(servers, Membership):
            servers = Membership(servers, cfg_keys=cfg_keys)
        members = [as_quorum_server(s) for s in servers.servers.values()]
        config = servers.to_bytes()
        voters = frozenset(m.sid for m in members if m.role != _OBSERVER)
        observers = frozenset(m.sid for m in members if m.role == _OBSERVER)
        self.fle = FastLeaderElection(my_sid, voters, observers, config,
                                      finalize_wait_ms=finalize_wait_ms,
                                      max_notification_interval_ms=max_notification_interval_ms)
        addresses = {m.sid: (m.host, m.election_port) for m in members}
        self.cnx = QuorumCnxManager(my_sid, addresses, self._on_message, rng=rng,
                                    security=security, sasl=sasl)
        self.my_sid = my_sid
        self.config_version = servers.version
        self.on_newer_config = on_newer_config
        self._look_args: tuple[int, int] | None = None  # elect()'s (last_zxid, peer_epoch)
        self.received: deque[tuple[int, Notification]] = deque(maxlen=RECEIVED_MAX)
        self._started = False
        self._decided: asyncio.Future[Vote] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at_ms: int | None = None

    async def elect(self, last_zxid: int, peer_epoch: int) -> Vote:
        """Look for a leader until the election decides; returns the vote, its state the
        role to take (LEADING, FOLLOWING or OBSERVING)."""
        loop = asyncio.get_running_loop()
        self._decided = loop.create_future()
        self._look_args = (last_zxid, peer_epoch)
        log.info("event=election_look sid=%d round=%d zxid=0x%x peer_epoch=%d", self.my_sid,
                 self.fle.logicalclock + 1, last_zxid, peer_epoch)
        # look() before listening: no notification can arrive before the round exists.
        self._apply(self.fle.look(last_zxid, peer_epoch, self._now_ms()))
        if not self._started:
            self._started = True
            await self.cnx.start()
        return await self._decided

    def serve(self, state: ServerState, vote: Vote) -> None:
        """We now follow/lead/observe with this vote: LOOKING peers get it as our answer."""
        self.fle.serve(state, vote)
        self._arm_timer()

    def reconfigure(self, membership: Membership) -> None:
        """Elect within this committed config from now on; connect to its new members."""
        self.fle.reconfigure(membership.voters, membership.observers, membership.to_bytes())
        self.config_version = membership.version
        for m in membership.servers.values():
            self.cnx.addresses[m.sid] = (m.host, m.election_port)

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._decided is not None and not self._decided.done():
            self._decided.cancel()
        await self.cnx.close()

    # -- plumbing --------------------------------------------------------------------

    @staticmethod
    def _now_ms() -> int:
        return int(asyncio.get_running_loop().time() * 1000)

    def _on_message(self, sid: int, payload: bytes) -> None:
        try:
            n = Notification.decode(payload)
        except JuteError as e:
            log.warning("event=election_notification_skipped sid=%d bytes=%d reason=%r",
                        sid, len(payload), str(e))
            return
        self.received.append((sid, n))
        if self.on_newer_config is not None and n.config and self._newer_config(sid, n.config):
            return
        log.debug("event=election_notification sid=%d state=%s leader=%d zxid=0x%x round=%d "
                  "peer_epoch=%d version=%d", sid, n.state.name, n.leader, n.zxid,
                  n.election_epoch, n.peer_epoch, n.version)
        self._apply(self.fle.step(sid, n, self._now_ms()))

    def _newer_config(self, sid: int, data: bytes) -> bool:
        """Commit a later config a peer's notification carries while we look; True if the
        round started again (the notification belongs to the old one)."""
        if self.fle.state != ServerState.LOOKING:
            return False
        try:
            m = Membership.parse(data)
        except ValueError as e:
            log.warning("event=election_config_unreadable sid=%d reason=%r", sid, str(e))
            return False
        if m.version <= self.config_version:
            return False
        log.info("event=election_newer_config sid=%d version=0x%x my_version=0x%x", sid,
                 m.version, self.config_version)
        self.on_newer_config(m)  # the peer commits it and calls reconfigure()
        if self._look_args is not None and self._decided is not None and not self._decided.done():
            self._apply(self.fle.look(*self._look_args, self._now_ms()))
        return True

    def _on_timer(self) -> None:
        self._timer = None
        # call_at may fire up to one clock resolution early: this is the deadline's tick.
        now_ms = max(self._now_ms(), self._timer_at_ms or 0)
        self._apply(self.fle.tick(now_ms, self.cnx.have_delivered()))

    def _apply(self, fx: ElectionEffects) -> None:
        for sid, n in fx.send:
            self.cnx.to_send(sid, n.encode())
        if fx.connect_all:
            self.cnx.connect_all()
        if fx.decided is not None:
            v = fx.decided
            log.info("event=election_decided sid=%d state=%s leader=%d zxid=0x%x round=%d "
                     "peer_epoch=%d", self.my_sid, v.state.name, v.leader, v.zxid,
                     v.election_epoch, v.peer_epoch)
            if self._decided is not None and not self._decided.done():
                self._decided.set_result(v)
        self._arm_timer()

    def _arm_timer(self) -> None:
        deadline_ms = self.fle.next_deadline_ms
        if deadline_ms == self._timer_at_ms and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at_ms = deadline_ms
        if deadline_ms is not None:
            self._timer = asyncio.get_running_loop().call_at(deadline_ms / 1000, self._on_timer)
