"""The server's clocks: wall time for what replicas record (znode times, session ids) and
monotonic time for what a server decides alone (session expiry, latencies).

Every stage takes its clock from the server's context; the simulator hands in a virtual
one. A wall-clock jump therefore never expires a session: expiry reads mono_ms.
"""

import time


class Clock:
    """The operating system's clocks, in the units the server uses."""

    __slots__ = ()

    @staticmethod
    def wall_ms() -> int:
        return time.time_ns() // 1_000_000

    @staticmethod
    def mono_ms() -> int:
        return time.monotonic_ns() // 1_000_000

    @staticmethod
    def mono_ns() -> int:
        return time.monotonic_ns()


SYSTEM_CLOCK = Clock()
