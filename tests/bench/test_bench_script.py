"""scripts/bench installs nothing to print its help or to refuse bad arguments, also in a
fresh clone without .venv, and says what it will install before a real run installs it.

Installers are replaced on PATH by stubs that record their call and fail loudly (apt-get,
apt, sudo, dpkg, pip, pip3), and `python3 -m venv` and `python3 -m pip` fail the same way,
so a test fails if any of them runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT_TIMEOUT_S = 60
INSTALLERS = ("apt-get", "apt", "sudo", "dpkg", "pip", "pip3")
STUB_EXIT = 97  # what a stub installer exits with: nothing else in the run uses it
# A clone without .venv needs no more than these to answer --help.
CLONE_PARTS = ("scripts", "bench", "zkcompat", "setup.cfg", "pyproject.toml")


def _stubs(directory: Path) -> tuple[Path, Path]:
    """A bin directory of failing installers and python3 / python3.11 wrappers whose
    `-m venv` and `-m pip` fail alike; the file each stub appends its command line to."""
    bin_dir = directory / "bin"
    bin_dir.mkdir()
    calls = directory / "installer-calls"
    for name in INSTALLERS:
        stub = bin_dir / name
        stub.write_text(f'#!/bin/sh\necho "{name} $*" >> {calls}\n'
                        f'echo "STUB {name} CALLED" >&2\nexit {STUB_EXIT}\n')
        stub.chmod(0o755)
    for name in ("python3", "python3.11"):
        wrapper = bin_dir / name
        wrapper.write_text(
            "#!/bin/sh\n"
            'if [ "$1" = -m ] && { [ "$2" = venv ] || [ "$2" = pip ]; }; then\n'
            f'  echo "python3 $*" >> {calls}\n'
            f'  echo "STUB python3 -m $2 CALLED" >&2\n  exit {STUB_EXIT}\nfi\n'
            f'exec {sys.executable} "$@"\n')
        wrapper.chmod(0o755)
    return bin_dir, calls


def _fresh_clone(directory: Path) -> Path:
    """The parts of a checkout that scripts/bench reads, without .venv."""
    clone = directory / "clone"
    clone.mkdir()
    for part in CLONE_PARTS:
        src = REPO_ROOT / part
        if src.is_dir():
            shutil.copytree(src, clone / part,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, clone / part)
    assert not (clone / ".venv").exists()
    return clone


def _run(root: Path, bin_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHON")}
    env["PATH"] = f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"
    return subprocess.run([str(root / "scripts" / "bench"), *args], capture_output=True,
                          text=True, env=env, cwd=root, timeout=SCRIPT_TIMEOUT_S,
                          stdin=subprocess.DEVNULL)


@pytest.fixture
def clone(tmp_path) -> Path:
    return _fresh_clone(tmp_path)


@pytest.fixture
def stubs(tmp_path) -> tuple[Path, Path]:
    return _stubs(tmp_path)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_installs_nothing(clone, stubs, flag):
    bin_dir, calls = stubs
    done = _run(clone, bin_dir, flag)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: scripts/bench"), done.stdout
    assert "--workloads" in done.stdout and "--ensemble" in done.stdout
    assert not calls.exists(), calls.read_text()
    assert "STUB" not in done.stderr and not (clone / ".venv").exists()


@pytest.mark.parametrize("args, complaint", [
    (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    (["--levels", "3y3"], "--levels"),
    (["--servers", "mysql"], "unknown server 'mysql'"),
])
def test_bad_arguments_install_nothing(clone, stubs, args, complaint):
    bin_dir, calls = stubs
    done = _run(clone, bin_dir, *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.startswith("usage: scripts/bench") and complaint in done.stderr
    assert not calls.exists(), calls.read_text()
    assert "STUB" not in done.stderr and not (clone / ".venv").exists()


def test_dry_run_installs_nothing(clone, stubs):
    bin_dir, calls = stubs
    done = _run(clone, bin_dir, "--quick", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert '"mode": "quick"' in done.stdout
    assert not calls.exists(), calls.read_text()


def test_a_real_run_says_what_it_installs_before_installing(clone, stubs):
    """Without .venv a real run must install: the line saying so comes before the first
    installer is called (here the stubbed `python3 -m venv`, which stops the run)."""
    bin_dir, calls = stubs
    done = _run(clone, bin_dir, "--servers", "zkcompat", "--workloads", "get",
                "--levels", "1x1", "--fanout", "0", "--idle", "0", "--no-recovery")
    assert done.returncode != 0
    lines = done.stderr.splitlines()
    plan = [i for i, line in enumerate(lines) if line.startswith("scripts/bench: installing")]
    stub = [i for i, line in enumerate(lines) if line.startswith("STUB")]
    assert plan and stub and plan[0] < stub[0], done.stderr
    assert ".venv" in lines[plan[0]], lines[plan[0]]
    # --servers zkcompat runs no ZooKeeper: no Debian package is wanted for it.
    assert "apt-get" not in lines[plan[0]] and "apt-get" not in calls.read_text()
