"""The "Locks that are safe" example in docs/recipes.md runs as written against a fresh server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance_tests.servers import ServerProcess, start_zkcompat

REPO_ROOT = Path(__file__).resolve().parents[2]
HEADING = "## Locks that are safe"
SOURCES = (REPO_ROOT / "docs" / "recipes.md",)
RUN_TIMEOUT_S = 60


def readme_example() -> str:
    for source in SOURCES:
        if source.exists() and HEADING in (text := source.read_text()):
            section = text[text.index(HEADING):]
            match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
            assert match, f"no python block after {HEADING!r} in {source}"
            return match.group(1)
    raise AssertionError(f"no {HEADING!r} section in {[str(s) for s in SOURCES]}")


@pytest.fixture(scope="module")
def fresh_server(tmp_path_factory) -> Iterator[ServerProcess]:
    server = start_zkcompat(tmp_path_factory.mktemp("readme-zkcompat"), 2000)
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.timeout(RUN_TIMEOUT_S + 30)
def test_readme_example_runs(fresh_server, tmp_path):
    script = tmp_path / "readme_example.py"
    script.write_text(readme_example())
    env = dict(os.environ, ZKCOMPAT_HOSTS=fresh_server.connect_string)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            env=env, timeout=RUN_TIMEOUT_S)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "rejected: stale fencing token" in result.stdout
    assert "{'job-1': 'done by a', 'job-2': 'done by b'}" in result.stdout
