"""The README's Quick start, client and ensemble blocks run as written, so they cannot go
stale (docs/testing.md, "The README's commands").

A block is marked by an HTML comment on the line before its fence:

    <!-- runnable -->                      run it (bash -euo pipefail, or python); it must
                                           exit 0 within BLOCK_TIMEOUT_S
    <!-- runnable: background, port P -->  a server that runs until stopped: started, waited
                                           for until 127.0.0.1:P accepts, and stopped by its
                                           PID with SIGINT (Ctrl-C) after the last block
    <!-- output -->                        a fence right after a runnable block: each of its
                                           lines appears, in order, among the lines that block
                                           printed (stdout and stderr)
    <!-- not run: why -->                  shown, not run

Every shell or python block of the sections in SECTIONS must carry one of these marks, and
each of those sections must have a runnable block: a README whose commands are not run
fails here, as does one whose commands fail.

The blocks run in order, in a scratch checkout (a copy of scripts/ and the packaging files,
with a .venv made from this interpreter's packages and this tree's zkcompat, so nothing is
installed and the real checkout gets no ./data or ./ensemble), inside a network namespace of
their own (unshare --net), where the README's ports (2181, 8080, 7000) are free whatever
else runs on this machine. Every process left in that namespace at the end was started
here, and is killed by its PID.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import site
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
README = REPO_ROOT / "README.md"
SECTIONS = ("Quick start", "Connecting a client", "A local ensemble")
RUN_LANGUAGES = ("sh", "bash", "python")
BLOCK_TIMEOUT_S = 300.0  # `scripts/ensemble start` alone waits up to 120 s for its servers
SERVE_TIMEOUT_S = 60.0  # a background server's port accepts
STOP_TIMEOUT_S = 30.0  # a background server exits after SIGINT
NAMESPACE_TIMEOUT_S = 10.0
NAMESPACE_HOLD_S = 1500  # the namespace's holder ends by itself after this, whatever happens
PROBE_INTERVAL_S = 0.25
# What Ctrl-C may end a server with: 0, or the conventions for death by SIGINT.
SIGINT_EXITS = (0, 130, -signal.SIGINT)

MARK = re.compile(r"<!--\s*(runnable(?::\s*(?P<args>[^>]*?))?|output|not run:[^>]*?)\s*-->")
FENCE = re.compile(r"^```(\w*)\s*$")
BACKGROUND = re.compile(r"background,\s*port\s+(\d+)")


@dataclass
class Block:
    section: str
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    mark: str  # "runnable", "background", "output", "not run" or "" (none)
    port: int | None = None
    expected: list[str] | None = None  # the output block that follows it, if any

    def where(self) -> str:
        return f"README.md:{self.line} ({self.section!r})"


def parse(text: str) -> list[Block]:
    """Every fenced block, with the section it is in and its mark."""
    blocks: list[Block] = []
    lines = text.splitlines()
    section = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section = line[3:].strip()
        fence = FENCE.match(line)
        if not fence:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        assert end < len(lines), f"README.md:{i + 1}: a fence that is never closed"
        before = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        mark, port = "", None
        found = MARK.fullmatch(before)
        if found:
            word = found.group(1)
            if word.startswith("not run:"):
                mark = "not run"
            elif word == "output":
                mark = "output"
            elif found.group("args"):
                background = BACKGROUND.fullmatch(found.group("args").strip())
                assert background, f"README.md:{i}: unknown runnable mark {before!r}"
                mark, port = "background", int(background.group(1))
            else:
                mark = "runnable"
        blocks.append(Block(section, i + 1, fence.group(1), "\n".join(lines[i + 1:end]) + "\n",
                            mark, port))
        i = end + 1
    return blocks


def plan(text: str) -> list[Block]:
    """The blocks to run, in order, each with its expected output; fails on a README whose
    sections have an unmarked block or nothing to run."""
    blocks = parse(text)
    headings = {b.section for b in blocks} | set(re.findall(r"^## (.+?)\s*$", text, re.M))
    missing = [s for s in SECTIONS if s not in headings]
    assert not missing, f"README.md has no section {missing} (tests/test_readme.py SECTIONS)"
    unmarked = [b.where() for b in blocks
                if b.section in SECTIONS and b.lang in RUN_LANGUAGES and not b.mark]
    assert not unmarked, ("shell or python blocks with neither <!-- runnable --> nor "
                          f"<!-- not run: why -->: {unmarked}")
    runnable: list[Block] = []
    for k, b in enumerate(blocks):
        if b.mark in ("runnable", "background"):
            assert b.lang in RUN_LANGUAGES, f"{b.where()}: cannot run a {b.lang!r} block"
            runnable.append(b)
        elif b.mark == "output":
            previous = blocks[k - 1] if k else None
            assert previous is not None and previous.mark == "runnable", (
                f"{b.where()}: an output block must follow a runnable one")
            previous.expected = [ln.strip() for ln in b.text.splitlines() if ln.strip()]
    for section in SECTIONS:
        assert any(b.section == section for b in runnable), (
            f"README.md section {section!r} has no runnable block")
    return runnable


# -- the scratch checkout ---------------------------------------------------------------------


def _venv_stamp(root: Path) -> str:
    """scripts/lib.sh's record of the packaging metadata .venv was installed from."""
    return hashlib.sha256((root / "setup.cfg").read_bytes()
                          + (root / "pyproject.toml").read_bytes()).hexdigest()


def make_checkout(base: Path) -> Path:
    """scripts/ and the packaging files copied, and a .venv that is this interpreter's
    environment with this tree's zkcompat first on its path: scripts/lib.sh finds it up to
    date and installs nothing."""
    lib = (REPO_ROOT / "scripts" / "lib.sh").read_text()
    assert 'cat "$root/setup.cfg" "$root/pyproject.toml" | sha256sum' in lib, (
        "scripts/lib.sh records its install differently now: update _venv_stamp here")
    root = base / "checkout"
    shutil.copytree(REPO_ROOT / "scripts", root / "scripts")
    for name in ("setup.cfg", "pyproject.toml"):
        shutil.copy2(REPO_ROOT / name, root / name)
    venv = root / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=60, capture_output=True)
    site_dirs = sorted(venv.glob("lib/python*/site-packages"))
    assert len(site_dirs) == 1, site_dirs
    paths = [str(REPO_ROOT), *site.getsitepackages()]
    (site_dirs[0] / "zkcompat-readme-test.pth").write_text("\n".join(paths) + "\n")
    command = venv / "bin" / "zkcompat"
    command.write_text(f'#!/bin/sh\nexec "{venv}/bin/python" -m zkcompat "$@"\n')
    command.chmod(0o755)
    (venv / ".zkcompat-run-stamp").write_text(_venv_stamp(root) + "\n")
    return root


def block_env(base: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "XDG_RUNTIME_DIR")}
    tmp = base / "tmp"
    tmp.mkdir(exist_ok=True)
    env["TMPDIR"] = str(tmp)  # scripts/run writes its embedded zoo.cfg there
    env["PYTHONUNBUFFERED"] = "1"
    return env


# -- the network namespace --------------------------------------------------------------------


class Namespace:
    """A network namespace held open by a `sleep` started here; commands enter it by
    nsenter. Its loopback is brought up, and nothing else is in it."""

    def __init__(self) -> None:
        for tool in ("unshare", "nsenter"):
            assert shutil.which(tool), f"{tool} (util-linux) is needed to run the README"
        self.ip = shutil.which("ip") or next(
            (p for p in ("/usr/sbin/ip", "/sbin/ip") if Path(p).exists()), None)
        assert self.ip, "ip (iproute2) is needed to bring up the namespace's loopback"
        user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
        self.holder = subprocess.Popen(["unshare", "--net", *user, "--", "sleep",
                                        str(NAMESPACE_HOLD_S)], start_new_session=True,
                                       stderr=subprocess.PIPE, text=True)
        self.enter = ["nsenter", f"--target={self.holder.pid}", "--net",
                      *([] if not user else ["--user", "--preserve-credentials"]), "--"]
        try:
            self._set_up()
        except BaseException:
            self.holder.kill()
            self.holder.wait(timeout=NAMESPACE_TIMEOUT_S)
            raise

    def _set_up(self) -> None:
        """Wait until the holder is in its own namespace, then bring up its loopback."""
        own = os.readlink("/proc/self/ns/net")
        deadline = time.monotonic() + NAMESPACE_TIMEOUT_S
        while True:
            if self.holder.poll() is not None:
                raise AssertionError("cannot make a network namespace (unshare --net): "
                                     + self.holder.stderr.read())
            try:
                self.net = os.readlink(f"/proc/{self.holder.pid}/ns/net")
            except OSError:
                self.net = own
            if self.net != own:
                break
            assert time.monotonic() < deadline, "unshare --net made no namespace in time"
            time.sleep(0.05)
        subprocess.run([*self.enter, self.ip, "link", "set", "lo", "up"], check=True,
                       timeout=NAMESPACE_TIMEOUT_S, capture_output=True)

    def accepts(self, port: int) -> bool:
        probe = f"exec 3<>/dev/tcp/127.0.0.1/{port}"
        return subprocess.run([*self.enter, "bash", "-c", probe], capture_output=True,
                              timeout=NAMESPACE_TIMEOUT_S).returncode == 0

    def pids(self) -> list[int]:
        """Processes in the namespace other than its holder: all started by this test."""
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != self.holder.pid:
                try:
                    if os.readlink(entry / "ns" / "net") == self.net:
                        found.append(int(entry.name))
                except OSError:
                    pass
        return found

    def close(self) -> None:
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.holder.kill()
        self.holder.wait(timeout=NAMESPACE_TIMEOUT_S)


# -- running the blocks -----------------------------------------------------------------------


def command(block: Block, root: Path) -> list[str]:
    if block.lang == "python":
        return [str(root / ".venv" / "bin" / "python"), "-c", block.text]
    return ["bash", "-euo", "pipefail", "-c", block.text]


def contains_in_order(output: str, expected: list[str]) -> bool:
    lines = iter(line.strip() for line in output.splitlines())
    return all(any(line == want for line in lines) for want in expected)


def run_block(block: Block, ns: Namespace, root: Path, env: dict[str, str]) -> None:
    try:
        done = subprocess.run([*ns.enter, *command(block, root)], cwd=root, env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"{block.where()} still ran after {BLOCK_TIMEOUT_S:.0f} s:\n"
                             f"{block.text}\n{e.output or ''}") from None
    assert done.returncode == 0, (f"{block.where()} exited {done.returncode}:\n{block.text}\n"
                                  f"--- its output ---\n{done.stdout}")
    if block.expected:
        assert contains_in_order(done.stdout, block.expected), (
            f"{block.where()}: the output block's lines {block.expected} are not, in order, "
            f"in what it printed:\n{done.stdout}")


@dataclass
class Server:
    block: Block
    process: subprocess.Popen
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


def start_background(block: Block, ns: Namespace, root: Path, env: dict[str, str],
                     logs: Path) -> Server:
    log = logs / f"background-{block.line}.log"
    with open(log, "w") as out:
        process = subprocess.Popen([*ns.enter, *command(block, root)], cwd=root, env=env,
                                   stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    server = Server(block, process, log)
    deadline = time.monotonic() + SERVE_TIMEOUT_S
    while not ns.accepts(block.port):
        assert process.poll() is None, (f"{block.where()} exited {process.returncode} before "
                                        f"127.0.0.1:{block.port} accepted:\n{server.output()}")
        assert time.monotonic() < deadline, (f"{block.where()}: 127.0.0.1:{block.port} did not "
                                             f"accept within {SERVE_TIMEOUT_S:.0f} s:\n"
                                             f"{server.output()}")
        time.sleep(PROBE_INTERVAL_S)
    return server


def stop_background(server: Server) -> None:
    """Ctrl-C, as the README says: SIGINT to the process group the test started."""
    process = server.process
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=STOP_TIMEOUT_S)
        raise AssertionError(f"{server.block.where()} did not stop within "
                             f"{STOP_TIMEOUT_S:.0f} s of SIGINT:\n{server.output()}") from None
    assert process.returncode in SIGINT_EXITS, (
        f"{server.block.where()} exited {process.returncode} on SIGINT:\n{server.output()}")


# -- the tests --------------------------------------------------------------------------------


@pytest.mark.timeout(900)
def test_readme_blocks_run_as_written(tmp_path):
    blocks = plan(README.read_text())
    root = make_checkout(tmp_path)
    env = block_env(tmp_path)
    ns = Namespace()
    servers: list[Server] = []
    try:
        for block in blocks:
            if block.mark == "background":
                servers.append(start_background(block, ns, root, env, tmp_path))
            else:
                run_block(block, ns, root, env)
        for server in servers:
            stop_background(server)
        left = ns.pids()
        assert not left, f"processes the README started and did not stop: {left}"
    finally:
        for server in servers:
            if server.process.poll() is None:
                os.killpg(server.process.pid, signal.SIGKILL)
                server.process.wait(timeout=STOP_TIMEOUT_S)
        ns.close()


MINIMAL = """# x
## Quick start
<!-- runnable: background, port 2181 -->
```sh
scripts/run
```
## Connecting a client
<!-- runnable -->
```python
print("ready")
```
<!-- output -->
```text
ready
```
## A local ensemble
<!-- runnable -->
```sh
scripts/ensemble start 3
```
"""


def test_plan_reads_the_marks():
    blocks = plan(MINIMAL)
    assert [(b.section, b.mark, b.port) for b in blocks] == [
        ("Quick start", "background", 2181), ("Connecting a client", "runnable", None),
        ("A local ensemble", "runnable", None)]
    assert blocks[1].expected == ["ready"]


@pytest.mark.parametrize("readme, complaint", [
    (MINIMAL.replace("<!-- runnable -->\n```sh\nscripts/ensemble",
                     "<!-- not run: no -->\n```sh\nscripts/ensemble"),
     "'A local ensemble' has no runnable block"),
    (MINIMAL.replace("<!-- runnable -->\n```sh", "```sh"), "neither <!-- runnable -->"),
    (MINIMAL.replace("## A local ensemble", "## Ensembles"), "no section ['A local ensemble']"),
    (re.sub(r"<!-- runnable[^>]*-->", "<!-- not run: shown only -->",
            MINIMAL.replace("<!-- output -->\n```text\nready\n```\n", "")),
     "'Quick start' has no runnable block"),
    (MINIMAL.replace("<!-- runnable -->\n```python", "<!-- not run: x -->\n```python"),
     "an output block must follow a runnable one"),
])
def test_plan_refuses_a_readme_that_runs_nothing_or_hides_a_block(readme, complaint):
    with pytest.raises(AssertionError, match=re.escape(complaint)):
        plan(readme)


def test_output_lines_must_appear_in_order():
    assert contains_in_order("a\n  Created /x\nnoise\nworld\n", ["Created /x", "world"])
    assert not contains_in_order("world\nCreated /x\n", ["Created /x", "world"])
    assert not contains_in_order("worldly\n", ["world"])
