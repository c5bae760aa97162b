"""Helpers shared by the recipe tests: bounded waiting."""

from __future__ import annotations

import time
from collections.abc import Callable

WAIT_S = 20.0  # bound on every wait for another thread, process or the server


def wait_for(predicate: Callable[[], object], timeout_s: float = WAIT_S, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.02)
