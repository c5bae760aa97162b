"""One asyncio event loop on a virtual clock: callbacks run FIFO, and when none is ready
time jumps to the next timer, so a whole ensemble runs on one thread, identically from
one seed. Every callback is tagged with the simulated node it runs for, so a crash can
cancel everything that node still had scheduled.

    loop = VirtualLoop(network)        # create_server/create_connection go to `network`
    run_virtual(loop, main())          # servers read VirtualClock(loop), given in their context
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import weakref
from asyncio import base_events

# The node a callback runs for: inherited by every task and callback it schedules.
NODE: contextvars.ContextVar[Node | None] = contextvars.ContextVar("sim_node", default=None)


TASKS_PRUNE_AT = 256


class Teardown(BaseException):
    """Thrown into every coroutine left when a run ends, so each finishes there."""


def teardown(loop: VirtualLoop, nodes) -> None:
    """End every task of these nodes now, with the loop dead: their finally blocks run
    here (scheduling nothing), not when the garbage collector finds them later."""
    asyncio.events._set_running_loop(loop)
    try:
        for node in nodes:
            node.dead = True
            for task in node.tasks:
                if task.done():
                    continue
                coro = task.get_coro()
                for _ in range(TEARDOWN_THROWS_MAX):
                    try:
                        coro.throw(Teardown())
                    except BaseException:  # noqa: BLE001 - finished, one way or another
                        break
            node.tasks.clear()
    finally:
        asyncio.events._set_running_loop(None)


TEARDOWN_THROWS_MAX = 100


class Deadlock(Exception):
    """Nothing is ready and no timer is pending: the simulation can never progress."""


class Node:
    """A simulated machine's identity on the loop: its host name, what it scheduled, and
    its clocks' offsets from the loop's (the nemesis jumps them)."""

    def __init__(self, name: str):
        self.name = name
        self.handles: weakref.WeakSet = weakref.WeakSet()
        # Held until the run's teardown: a killed node's coroutines must not be collected
        # (and run their finally blocks) in the middle of the run.
        self.tasks: list[asyncio.Task] = []
        self.context = contextvars.Context()
        self.context.run(NODE.set, self)
        self.dead = False
        # SIGSTOP: while paused, what the node has ready or due waits here, in order.
        self.paused = False
        self.frozen: list[asyncio.Handle] = []
        self.frozen_timers: list[asyncio.TimerHandle] = []
        # What the server code reads as its wall clock and its monotonic clock, in ms
        # ahead of the loop's. The monotonic one only ever moves forward.
        self.wall_offset_ms = 0
        self.mono_offset_ms = 0

    def run(self, fn, *args):
        """Call fn inside this node's context (what it schedules is this node's)."""
        return self.context.run(fn, *args)

    def kill(self) -> None:
        """A crash: nothing this node scheduled runs any more."""
        self.dead = True
        self.paused = False
        for t in self.frozen_timers:
            t._scheduled = False  # off the loop's heap: its cancel must not count there
        self.frozen.clear()
        self.frozen_timers.clear()
        for h in list(self.handles):
            h.cancel()


class _VirtualSelector:
    def __init__(self, loop: VirtualLoop):
        self.loop = loop

    def select(self, timeout):
        loop = self.loop
        if timeout is None:
            raise Deadlock(f"no callback ready and no timer pending at t={loop.time():.6f}")
        if timeout > 0 and loop._scheduled:
            loop._now = max(loop._now, loop._scheduled[0]._when)
        return []


class VirtualLoop(base_events.BaseEventLoop):
    """BaseEventLoop with virtual time and the simulated network in place of sockets."""

    def __init__(self, network=None):
        super().__init__()
        self._now = 0.0
        self._selector = _VirtualSelector(self)
        self._clock_resolution = 1e-9
        self.network = network
        self._finished = False

    def time(self) -> float:
        return self._now

    def time_ms(self) -> int:
        return int(self._now * 1000)

    def _process_events(self, event_list) -> None:
        pass

    def _write_to_self(self) -> None:
        pass

    def _tag(self, handle, node) -> None:
        if node is not None:
            if node.dead:
                handle.cancel()
            else:
                node.handles.add(handle)

    def call_soon(self, callback, *args, context=None):
        if self._finished:
            return _dead_handle(self, callback, args, context)
        node = NODE.get() if context is None else context.get(NODE)
        if node is not None and node.paused:
            handle = asyncio.Handle(callback, args, self, context)
            node.frozen.append(handle)
        else:
            handle = super().call_soon(callback, *args, context=context)
        self._tag(handle, node)
        return handle

    def call_at(self, when, callback, *args, context=None):
        if self._finished:
            return _dead_handle(self, callback, args, context)
        node = NODE.get() if context is None else context.get(NODE)
        if node is not None and node.paused:
            handle = asyncio.TimerHandle(when, callback, args, self, context)
            handle._scheduled = True  # as call_at marks it: a cancel is counted on resume
            node.frozen_timers.append(handle)
        else:
            handle = super().call_at(when, callback, *args, context=context)
        self._tag(handle, node)
        return handle

    # -- SIGSTOP / SIGCONT ---------------------------------------------------------------

    def pause_node(self, node: Node) -> None:
        """Freeze `node`: nothing it has ready, nor any timer of its, runs until
        resume_node; what others send it waits (in order) as in a socket buffer."""
        if node.paused or node.dead:
            return
        node.paused = True
        ready = [h for h in self._ready if _node_of(h) is not node]
        node.frozen += [h for h in self._ready if _node_of(h) is node and not h._cancelled]
        self._ready.clear()
        self._ready.extend(ready)
        kept = [t for t in self._scheduled if _node_of(t) is not node]
        mine = [t for t in self._scheduled if _node_of(t) is node]
        for t in mine:
            if t._cancelled:
                t._scheduled = False
                self._timer_cancelled_count -= 1
        # The heap's own order for equal deadlines, then by deadline: the same every run.
        node.frozen_timers += sorted((t for t in mine if not t._cancelled),
                                     key=lambda t: t._when)
        heapq.heapify(kept)
        self._scheduled[:] = kept

    def resume_node(self, node: Node) -> None:
        """SIGCONT: what was ready runs first, then every timer that fell due meanwhile."""
        if not node.paused or node.dead:
            return
        node.paused = False
        frozen, node.frozen = node.frozen, []
        timers, node.frozen_timers = node.frozen_timers, []
        self._ready.extend(h for h in frozen if not h._cancelled)
        for t in timers:
            if t._cancelled:
                t._scheduled = False
                self._timer_cancelled_count = max(0, self._timer_cancelled_count - 1)
            else:
                heapq.heappush(self._scheduled, t)

    def close(self) -> None:
        """The run is over: what the abandoned coroutines' finally blocks schedule when
        they are collected is never run (and raises nothing)."""
        self._finished = True
        self._ready.clear()
        self._scheduled.clear()
        super().close()

    def create_task(self, coro, *, name=None, context=None):
        task = super().create_task(coro, name=name, context=context)
        node = NODE.get() if context is None else context.get(NODE)
        if node is not None:
            tasks = node.tasks
            if len(tasks) >= TASKS_PRUNE_AT and len(tasks) % TASKS_PRUNE_AT == 0:
                tasks[:] = [t for t in tasks if not t.done()]
            tasks.append(task)
        return task

    def call_soon_threadsafe(self, callback, *args, context=None):
        raise AssertionError("the simulation has one thread: call_soon_threadsafe is a bug")

    async def create_server(self, protocol_factory, host=None, port=None, **_kw):
        return self.network.listen(NODE.get(), host, port, protocol_factory)

    async def create_connection(self, protocol_factory, host=None, port=None, **_kw):
        return await self.network.connect(NODE.get(), host, port, protocol_factory)

    async def getaddrinfo(self, *args, **kwargs):
        raise AssertionError("no name resolution in the simulation")


def _node_of(handle) -> Node | None:
    ctx = handle._context
    return None if ctx is None else ctx.get(NODE)


def _dead_handle(loop, callback, args, context) -> asyncio.Handle:
    handle = asyncio.Handle(callback, args, loop, context)
    handle.cancel()
    return handle


class VirtualClock:
    """The server's clock (server/clock.Clock) on the loop's virtual time, plus the offsets
    of the node the code runs for (Node.wall_offset_ms, mono_offset_ms): every server
    context of a simulation is given one."""

    __slots__ = ("loop",)

    def __init__(self, loop: VirtualLoop):
        self.loop = loop

    def wall_ms(self) -> int:
        node = NODE.get()
        return WALL_EPOCH_MS + self.loop.time_ms() + (node.wall_offset_ms if node else 0)

    def mono_ms(self) -> int:
        node = NODE.get()
        return self.loop.time_ms() + (node.mono_offset_ms if node else 0)

    def mono_ns(self) -> int:
        node = NODE.get()
        return int(self.loop.time() * 1e9) + (node.mono_offset_ms * 1_000_000 if node else 0)


# A fixed "now" for the wall clock at virtual time 0 (2024-01-01T00:00:00Z): session ids
# and znode times come from it, so they repeat from run to run.
WALL_EPOCH_MS = 1_704_067_200_000


def run_virtual(loop: VirtualLoop, main) -> object:
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(main)
    finally:
        asyncio.set_event_loop(None)
