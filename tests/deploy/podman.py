"""podman for the deploy tests: the image scripts/build-image makes, podman commands with a
time bound each, and the probe commands as the Dockerfile and the StatefulSet state them
(read from those files, so a test runs what an operator's engine would run)."""

from __future__ import annotations

import json
import re
import shlex
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
# crun fails on these machines' hybrid cgroups; runc works (scripts/build-image).
PODMAN = ("podman", "--runtime", "runc")
# A cold build installs podman and makes the Debian base (about 4 minutes here); a warm one
# takes seconds. scripts/test runs it before pytest, so a test normally finds it warm.
BUILD_TIMEOUT_S = 1500.0
PODMAN_TIMEOUT_S = 120.0
OUTPUT_TAIL_CHARS = 3000
K8S_PROBE_TIMEOUT_DEFAULT_S = 1  # a probe's timeoutSeconds when unset (Kubernetes API)


def podman(*args: str, timeout: float = PODMAN_TIMEOUT_S, check: bool = True,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run podman; on failure (with check) an AssertionError that quotes its output."""
    return run([*PODMAN, *args], timeout=timeout, check=check, env=env)


def run(argv: Sequence[str], timeout: float, check: bool = True,
        env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, env=env, cwd=cwd)
    except FileNotFoundError as e:
        raise AssertionError(f"{argv[0]} is not installed ({e}): scripts/build-image "
                             "installs podman") from None
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"{shlex.join(argv)} did not finish in {timeout:.0f}s:\n"
                             f"{_text(e.stdout)[-OUTPUT_TAIL_CHARS:]}"
                             f"{_text(e.stderr)[-OUTPUT_TAIL_CHARS:]}") from None
    if check and done.returncode != 0:
        raise AssertionError(f"{shlex.join(argv)} failed ({done.returncode}):\n"
                             f"{done.stdout[-OUTPUT_TAIL_CHARS:]}"
                             f"{done.stderr[-OUTPUT_TAIL_CHARS:]}")
    return done


def _text(out: bytes | str | None) -> str:
    return out.decode(errors="replace") if isinstance(out, bytes) else (out or "")


def build_image(work_dir: Path) -> str:
    """scripts/build-image; the ID of the image it built (an ID, not a tag, so a build from
    another checkout that moves zkcompat:latest meanwhile changes nothing here)."""
    iid_file = work_dir / "iid"
    done = run([str(REPO_ROOT / "scripts" / "build-image"), "--iidfile", str(iid_file)],
               timeout=BUILD_TIMEOUT_S, check=False)
    print(done.stderr)  # the script's step timings, in the test's captured output
    if done.returncode != 0:
        raise AssertionError("scripts/build-image could not build or run the image "
                             f"(exit {done.returncode}):\n{done.stderr[-OUTPUT_TAIL_CHARS:]}")
    return iid_file.read_text().strip()


def dockerfile_healthcheck() -> list[str]:
    """The HEALTHCHECK's CMD, in exec form, as the Dockerfile states it."""
    text = (REPO_ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    match = re.search(r"^HEALTHCHECK\b.*?\bCMD\s+(\[.*\])\s*$", text, re.MULTILINE)
    assert match, "the Dockerfile has no HEALTHCHECK ... CMD [...] in exec form"
    return json.loads(match.group(1))


def statefulset_container() -> dict:
    """The zkcompat container of deploy/k8s/zkcompat.yaml's StatefulSet."""
    docs = yaml.safe_load_all((REPO_ROOT / "deploy" / "k8s" / "zkcompat.yaml").read_text())
    (sts,) = [d for d in docs if d["kind"] == "StatefulSet"]
    (spec,) = sts["spec"]["template"]["spec"]["containers"]
    return spec


@dataclass
class Probe:
    passed: bool
    detail: str
    seconds: float = 0.0


def healthcheck(name: str) -> Probe:
    """The image's HEALTHCHECK, run by podman as its timer would."""
    started = time.monotonic()
    done = podman("healthcheck", "run", name, check=False, timeout=60)
    return Probe(done.returncode == 0, (done.stdout + done.stderr).strip(),
                 time.monotonic() - started)


def statefulset_probes(name: str) -> dict[str, Probe]:
    """The StatefulSet's exec probes (readiness, liveness) run in container `name`, as the
    kubelet runs them; one that outlasts its timeoutSeconds fails, as there."""
    results = {}
    for kind in ("readinessProbe", "livenessProbe", "startupProbe"):
        probe = statefulset_container().get(kind)
        if probe is None:
            continue
        timeout_s = probe.get("timeoutSeconds", K8S_PROBE_TIMEOUT_DEFAULT_S)
        started = time.monotonic()
        done = podman("exec", name, *probe["exec"]["command"], check=False, timeout=60)
        seconds = time.monotonic() - started
        detail = (done.stdout + done.stderr).strip()
        if seconds > timeout_s:  # podman exec's own start-up counts against it here
            detail += f" (took {seconds:.1f}s, timeoutSeconds {timeout_s})"
        results[kind] = Probe(done.returncode == 0 and seconds <= timeout_s, detail, seconds)
    return results


def free_ports(addresses: Sequence[str], count: int) -> list[int]:
    """`count` TCP ports that were free a moment ago on every one of `addresses`."""
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as s:
            s.bind((addresses[0], 0))
            port = s.getsockname()[1]
        if port not in ports and all(_bindable(a, port) for a in addresses):
            ports.append(port)
    return ports


def _bindable(address: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((address, port))
        except OSError:
            return False
    return True


def four_letter_word(host: str, port: int, word: str, timeout_s: float = 5.0) -> str:
    """The answer to a four-letter word; an OSError's text when there is none."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as s:
            s.settimeout(timeout_s)
            s.sendall(word.encode())
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")
    except OSError as e:
        return f"({type(e).__name__}: {e})"


def wait_until(check: Callable[[], object], timeout_s: float, what: str,
               diagnose: Callable[[], str] = lambda: "", interval_s: float = 0.5) -> object:
    """Poll `check` until it returns something truthy; fail after `timeout_s` saying what
    was awaited, what `check` returned last, and `diagnose()` (container logs)."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:.0f}s: {what} (last: {result!r})\n"
                                 f"{diagnose()}")
        time.sleep(interval_s)
