"""A connection flood, as its own process: `concurrency` loops, each opening a connection from
one of `sources` loopback addresses (127.0.0.2, ...), sending a ConnectRequest and waiting for
the ConnectResponse or the close, then dropping the socket (a session it got is left to
expire, as a flooding client leaves it), until `seconds` pass or `max_connections` were made.
Prints one JSON line of counts: sessions, refused (closed with no response), errors, timeouts.

    python flood.py HOST PORT --seconds 6 --concurrency 50 --sources 100
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import time

# ConnectRequest{protocolVersion 0, lastZxidSeen 0, timeOut, sessionId 0, passwd[16]}, framed.
SESSION_TIMEOUT_MS = 4000


def connect_request() -> bytes:
    body = (0).to_bytes(4, "big") + (0).to_bytes(8, "big") + SESSION_TIMEOUT_MS.to_bytes(4, "big") \
        + (0).to_bytes(8, "big") + (16).to_bytes(4, "big") + b"\0" * 16
    return len(body).to_bytes(4, "big") + body


REQUEST = connect_request()
ANSWER_TIMEOUT_S = 5.0


async def one(host: str, port: int, source: str, counts: dict) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    writer = None
    try:
        sock.bind((source, 0))
        await asyncio.get_running_loop().sock_connect(sock, (host, port))
        reader, writer = await asyncio.open_connection(sock=sock)
        writer.write(REQUEST)
        try:
            head = await asyncio.wait_for(reader.readexactly(4), ANSWER_TIMEOUT_S)
        except asyncio.IncompleteReadError:
            counts["refused"] += 1
            return
        except TimeoutError:
            counts["timeouts"] += 1
            return
        counts["sessions"] += 1
        del head
    except (ConnectionError, OSError):
        counts["errors"] += 1
    finally:
        if writer is not None:
            writer.transport.abort()
        else:
            sock.close()


async def flood(host: str, port: int, seconds: float, concurrency: int, sources: int,
                max_connections: int) -> dict:
    counts = {"sessions": 0, "refused": 0, "errors": 0, "timeouts": 0}
    end = time.monotonic() + seconds
    made = 0

    async def loop(i: int) -> None:
        nonlocal made
        n = i
        while time.monotonic() < end and made < max_connections:
            made += 1
            await one(host, port, f"127.0.0.{2 + n % sources}", counts)
            n += concurrency

    t0 = time.monotonic()
    await asyncio.gather(*(loop(i) for i in range(concurrency)))
    counts["connections"] = made
    counts["seconds"] = round(time.monotonic() - t0, 2)
    return counts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--sources", type=int, default=100)
    ap.add_argument("--max-connections", type=int, default=50_000)
    a = ap.parse_args()
    print(json.dumps(asyncio.run(flood(a.host, a.port, a.seconds, a.concurrency, a.sources,
                                       a.max_connections))), flush=True)


if __name__ == "__main__":
    main()
