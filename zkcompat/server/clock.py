"""The server's clocks: wall time for what replicas record (znode times, session ids, the
TTL and container reaper, as ZooKeeper's ContainerManager) and monotonic time for what a
server decides alone (session expiry, election and sync timeouts, latencies on one server).

Every stage takes its clock from the server's context; the simulator hands in a virtual
one. A wall-clock jump therefore never expires a session: expiry reads mono_ms.

`ShiftedClock` is a test hook for real processes: the wall clock jumps by what a file
says, while the monotonic clock runs on, as when an operator or NTP steps the system
clock. Only tests turn it on (TEST_WALL_OFFSET_DIR_ENV); a server that has it says so at
start (libfaketime cannot do this here: faking only the wall clock breaks time.sleep).
"""

import os
import time
from pathlib import Path

# A directory; server N reads its wall-clock offset, in milliseconds, from the file
# `server.N` in it (a standalone server: `server.0`). No file, or no number in it: 0.
TEST_WALL_OFFSET_DIR_ENV = "ZKCOMPAT_TEST_WALL_OFFSET_DIR"
RECHECK_NS = 20_000_000  # how often, at most, the offset file is looked at


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


class ShiftedClock(Clock):
    """The system's clocks, with the wall clock moved by the number of milliseconds in
    `offset_file` (reread when it changes, at most every RECHECK_NS)."""

    __slots__ = ("offset_file", "_offset_ms", "_mtime_ns", "_checked_ns")

    def __init__(self, offset_file: Path) -> None:
        self.offset_file = offset_file
        self._offset_ms = 0
        self._mtime_ns: int | None = None
        self._checked_ns = 0

    def offset_ms(self) -> int:
        now = time.monotonic_ns()
        if now - self._checked_ns >= RECHECK_NS:
            self._checked_ns = now
            try:
                mtime = self.offset_file.stat().st_mtime_ns
                if mtime != self._mtime_ns:
                    self._mtime_ns = mtime
                    self._offset_ms = int(self.offset_file.read_text().strip() or 0)
            except (OSError, ValueError):
                self._mtime_ns, self._offset_ms = None, 0
        return self._offset_ms

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset_ms()


def clock_for(server_id: int, environ=os.environ) -> Clock:
    """The system clock, or the test hook's shifted one when the environment asks."""
    directory = environ.get(TEST_WALL_OFFSET_DIR_ENV)
    if not directory:
        return SYSTEM_CLOCK
    return ShiftedClock(Path(directory) / f"server.{server_id}")
