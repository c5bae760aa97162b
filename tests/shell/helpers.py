"""Helpers for tests/shell: how to run `zkcompat shell` as a process from this checkout."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SHELL_COMMAND = [sys.executable, "-m", "zkcompat", "shell"]


def shell_env(history_file: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", ""))
                                        if p)
    env["PYTHONUNBUFFERED"] = "1"
    env["TZ"] = "UTC"
    if history_file is not None:
        env["ZKCOMPAT_SHELL_HISTORY"] = str(history_file)
    return env
