"""The server's own cost per request, in process: pipelined requests of one kind through
one Connection, the real pipeline and a LevelDB txn log (forceSync=no), with a transport
that only counts what it is given. No sockets, no clients, no fsync: what is left is the
loop thread's work, which is what limits a CPU-bound server.

With `--one-at-a-time` each request is sent only once the last one's reply was written,
as a 1x1 client does: then each write also pays its own loop turns and the two hand-offs
to and from the log's writer thread, which is what a single request waits for.

Timings on these shared machines vary by 15% from run to run. `scripts/icount` runs this
under valgrind twice, with two request counts, and prints the difference in instructions
per request, which repeats to about 1%: the way to tell a 3% change from noise.
"""

from __future__ import annotations

import asyncio
import gc
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import click

from bench import wire
from zkcompat.config import Config
from zkcompat.jute import records as r
from zkcompat.jute.constants import CreateMode, OpCode
from zkcompat.peer.node import GC_THRESHOLDS, build_standalone
from zkcompat.server.connection import Connection, ConnState

try:  # the loop `zkcompat serve` runs on: its own cost is part of a 1x1 request's
    from uvloop import run as _RUN
except ImportError:
    _RUN = asyncio.run
KINDS = ("get", "set", "ephemeral")
BATCH = 64  # requests per data_received, as a busy client's reads arrive


class QuietTransport(asyncio.Transport):
    """A transport with a peer address that takes every call and does nothing."""

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 40000) if name == "peername" else default

    def write(self, data) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False


class CountingTransport(QuietTransport):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.frames = 0
        self.errors = 0  # replies whose ReplyHeader.err is not 0
        self.written: asyncio.Future | None = None  # resolved by the next write, if set

    def write(self, data) -> None:
        self.writes += 1
        if self.written is not None and not self.written.done():
            self.written.set_result(None)
        view, off = memoryview(data), 0
        while off < len(view):
            n = int.from_bytes(view[off:off + 4], "big")
            if int.from_bytes(view[off + 16:off + 20], "big", signed=True):  # after xid, zxid
                self.errors += 1
            off += 4 + n
            self.frames += 1


@dataclass
class Result:
    kind: str
    requests: int  # per round
    best_us: float  # loop-thread CPU per request, the best round
    replies: int  # frames written in all rounds (every request is answered once)
    errors: int  # of those, replies with an error code


def _requests(kind: str):
    acl, data, xid, seq = wire.OPEN_ACL, b"y" * 100, 100, 0
    while True:
        xid += 1
        if kind == "get":
            yield wire.request(xid, OpCode.GET_DATA, r.GetDataRequest("/k", False))
        elif kind == "set":
            yield wire.request(xid, OpCode.SET_DATA, r.SetDataRequest("/k", data, -1))
        else:
            yield wire.request(xid, OpCode.CREATE, r.CreateRequest(
                "/e/e-", data, acl, int(CreateMode.EPHEMERAL_SEQUENTIAL)))
            xid += 1
            # The sequence number is /e's cversion, which each create moves by one.
            yield wire.request(xid, OpCode.DELETE, r.DeleteRequest(f"/e/e-{seq:010d}", -1))
            seq += 1


async def _all_answered(pipeline) -> None:
    """Wait, without spinning (a spin's cost would depend on the writer thread's timing),
    until every proposed write is durable, applied and answered."""
    while pipeline.peer.last_committed_zxid < pipeline.peer.last_proposed_zxid:
        await pipeline.txn_log.sync()  # resolved in the loop turn that applies the batch
        await asyncio.sleep(0)


async def open_session(ctx, transport: QuietTransport) -> Connection:
    """A Connection of server `ctx` on `transport`, its session open (the session's txn
    synced and applied) and its ConnectResponse written."""
    cnxn = Connection(ctx)
    cnxn.connection_made(transport)
    cnxn.data_received(wire.connect_request())
    for _ in range(2000):
        if cnxn._state is ConnState.OPEN:
            break
        await asyncio.sleep(0.001)
    else:
        raise RuntimeError("the session did not open")
    await asyncio.sleep(0)  # the outbox's turn: the ConnectResponse is written
    return cnxn


async def _one_at_a_time(cnxn, transport: CountingTransport, frames: list[bytes]) -> None:
    loop = asyncio.get_running_loop()
    for f in frames:
        transport.written = loop.create_future()
        cnxn.data_received(f)
        await transport.written
    transport.written = None


async def _run(kind: str, requests: int, rounds: int, data_dir: Path,
               one_at_a_time: bool = False) -> Result:
    ctx = build_standalone(Config(data_dir=data_dir, force_sync=False))
    transport = CountingTransport()
    cnxn = await open_session(ctx, transport)
    acl = wire.OPEN_ACL
    cnxn.data_received(wire.request(1, OpCode.CREATE, r.CreateRequest("/k", b"x" * 100, acl, 0))
                       + wire.request(2, OpCode.CREATE, r.CreateRequest("/e", b"", acl, 0)))
    pipeline = ctx.pipeline
    await _all_answered(pipeline)
    replies0, errors0 = transport.frames, transport.errors
    gen = _requests(kind)
    best = None
    for _ in range(rounds):
        if one_at_a_time:
            frames = [next(gen) for _ in range(requests // BATCH * BATCH)]
        else:
            frames = [b"".join(next(gen) for _ in range(BATCH)) for _ in range(requests // BATCH)]
        t0 = time.thread_time()
        if one_at_a_time:
            await _one_at_a_time(cnxn, transport, frames)
        else:
            for f in frames:
                cnxn.data_received(f)
                await asyncio.sleep(0)
        await _all_answered(pipeline)
        us = (time.thread_time() - t0) / (requests // BATCH * BATCH) * 1e6
        best = us if best is None else min(best, us)
    pipeline.txn_log.close()
    return Result(kind, requests // BATCH * BATCH, best, transport.frames - replies0,
                  transport.errors - errors0)


def measure(kind: str, requests: int, rounds: int, data_dir: Path | None = None,
            one_at_a_time: bool = False) -> Result:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}")
    before = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)  # as the server runs
    try:
        with tempfile.TemporaryDirectory(prefix="zkcompat-inproc-") as tmp:
            return _RUN(_run(kind, requests, rounds, data_dir or Path(tmp), one_at_a_time))
    finally:
        gc.set_threshold(*before)


@click.command()
@click.argument("kind", type=click.Choice(KINDS))
@click.option("--requests", default=16_000, show_default=True, help="per round")
@click.option("--rounds", default=7, show_default=True)
@click.option("--one-at-a-time", is_flag=True,
              help="send each request after the last reply, as a 1x1 client does")
def main(kind: str, requests: int, rounds: int, one_at_a_time: bool) -> None:
    """Loop-thread CPU per request of KIND (the best of ROUNDS), in process."""
    res = measure(kind, requests, rounds, one_at_a_time=one_at_a_time)
    click.echo(f"{kind}: {res.best_us:.2f} us of loop-thread CPU per request, best of "
               f"{rounds} rounds of {res.requests}; {res.replies} replies, {res.errors} errors")


if __name__ == "__main__":
    main()
