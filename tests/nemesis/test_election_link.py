"""An election connection whose packets are lost for a while (nftables drops them, as a
partition would) is dropped and opened again, so the first message after the heal arrives
at once. Before UNACKED_TIMEOUT_MS (zkcompat/peer/cnxmanager.py) such a connection lived
on, its bytes waiting on TCP's retransmission backoff: a 5-server bridge of 30 s elected
nobody for 25 s after the heal (scripts/nemesis --servers 5 --case bridge --seed 5002)."""

from __future__ import annotations

import asyncio
import os
import shutil
import time

import pytest

from bench.servers import HOST, free_port
from tests.nemesis import net
from zkcompat.peer.cnxmanager import QuorumCnxManager

UNACKED_MS = 1000  # the servers' own is 5 s; short here, so the test is
CUT_S = 4.0  # past UNACKED_MS, with messages sent into the cut all along
WAIT_S = 5.0
SEND_EVERY_S = 0.2

pytestmark = pytest.mark.timeout(60)


async def until(cond, what: str, within_s: float = WAIT_S) -> float:
    """Seconds until cond() holds; fails after within_s."""
    started = time.monotonic()
    while not cond():
        assert time.monotonic() - started < within_s, f"no {what} within {within_s}s"
        await asyncio.sleep(0.02)
    return time.monotonic() - started


def drop_ports(table: str, ports: list[int]) -> str:
    """An nft script: a table of ours dropping every TCP packet to or from these ports."""
    listed = ", ".join(map(str, ports))
    return (f"add table inet {table}\n"
            f"add chain inet {table} input {{ type filter hook input priority 0; "
            f"policy accept; }}\n"
            f"add rule inet {table} input tcp dport {{ {listed} }} drop\n"
            f"add rule inet {table} input tcp sport {{ {listed} }} drop\n")


def test_a_link_that_lost_its_packets_is_opened_again_and_delivers_after_the_heal():
    if shutil.which("nft") is None:
        pytest.fail(net.NFT_MISSING)
    table = f"zkcompat_election_link_{os.getpid()}"
    addresses = {1: (HOST, free_port()), 2: (HOST, free_port())}
    got: dict[int, list[bytes]] = {1: [], 2: []}

    async def scenario() -> None:
        cnx = {sid: QuorumCnxManager(sid, addresses, lambda frm, p, me=sid: got[me].append(p),
                                     connect_timeout_ms=500, reconnect_max_ms=500,
                                     unacked_timeout_ms=UNACKED_MS)
               for sid in addresses}
        try:
            for c in cnx.values():
                await c.start()
            cnx[1].to_send(2, b"before")
            await until(lambda: b"before" in got[2], "message before the cut")
            assert cnx[1].connected(2) and cnx[2].connected(1)
            net.nft(drop_ports(table, [port for _, port in addresses.values()]))
            try:
                n = 0
                cut_until = time.monotonic() + CUT_S
                while time.monotonic() < cut_until:
                    n += 1
                    cnx[1].to_send(2, b"cut %d" % n)  # as an elector resends its vote
                    cnx[2].to_send(1, b"cut %d" % n)
                    await asyncio.sleep(SEND_EVERY_S)
                assert not (cnx[1].connected(2) and cnx[2].connected(1)), (
                    f"the connection outlived {CUT_S}s of lost packets "
                    f"(unacked timeout {UNACKED_MS} ms)")
            finally:
                net.nft(f"delete table inet {table}\n")
            cnx[1].to_send(2, b"after")
            took = await until(lambda: b"after" in got[2], "message after the heal")
            print(f"delivered {took:.2f}s after the heal")
        finally:
            for c in cnx.values():
                await c.close()

    try:
        asyncio.run(asyncio.wait_for(scenario(), 45))
    finally:
        if table in net.table_names():
            net.nft(f"delete table inet {table}\n")
