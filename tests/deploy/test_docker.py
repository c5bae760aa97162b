"""The Dockerfile builds and a compose ensemble of three of its containers answers kazoo.

No registry is reachable here, so the base image is this machine's Python with zkcompat's
dependencies (tests/deploy/local_base.py, `docker import`), given to the Dockerfile as its
BASE_IMAGE build argument. The test starts its own dockerd (private socket and data root,
no bridge, no iptables) and stops it by PID; the containers use the host's network and bind
127.0.0.1-3 only. Where dockerd cannot run, the test skips and says why (pytest -ra).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from kazoo.client import KazooClient

from conformance_tests.servers import free_port
from tests.deploy.local_base import REPO_ROOT, build_tar
from zkcompat.cli import container

pytestmark = pytest.mark.timeout(300)

DOCKERD_START_TIMEOUT_S = 30.0
BUILD_TIMEOUT_S = 180.0
HEALTHY_TIMEOUT_S = 90.0
BASE_TAG = "zkcompat-test-base:py311"
IMAGE_TAG = "zkcompat:test"
PROJECT = "zkcompattest"
SERVERS = (1, 2, 3)


def _skip(reason: str):
    print(f"SKIP docker test: {reason}")
    pytest.skip(reason)


class Docker:
    def __init__(self, socket_path: Path, workdir: Path) -> None:
        self.env = {**os.environ, "DOCKER_HOST": f"unix://{socket_path}", "DOCKER_BUILDKIT": "0",
                    "COMPOSE_DOCKER_CLI_BUILD": "0"}
        self.workdir = workdir

    def run(self, *args: str, timeout: float = 60.0, check: bool = True,
            tool: str = "docker") -> subprocess.CompletedProcess:
        done = subprocess.run([tool, *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL, cwd=self.workdir)
        if check and done.returncode != 0:
            raise AssertionError(f"{tool} {' '.join(args)} failed ({done.returncode}):\n"
                                 f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return done


@pytest.fixture(scope="module")
def docker():
    if shutil.which("docker") is None:
        _skip("no docker CLI on this machine (apt-get install docker.io)")
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        _skip("dockerd is not installed (apt-get install docker.io)")
    if os.geteuid() != 0:
        _skip(f"dockerd needs root and this test runs as uid {os.geteuid()}")
    # A short path: containerd's sockets live under the exec root (108-byte limit).
    base = Path(tempfile.mkdtemp(prefix="zkd-", dir="/tmp"))
    sock = base / "docker.sock"
    log_path = base / "dockerd.log"
    with open(log_path, "wb") as log:
        popen = subprocess.Popen(
            [dockerd, f"--host=unix://{sock}", f"--data-root={base / 'root'}",
             f"--exec-root={base / 'x'}", f"--pidfile={base / 'dockerd.pid'}",
             "--bridge=none", "--iptables=false", "--ip-forward=false", "--ip-masq=false"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
    client = Docker(sock, base)
    try:
        deadline = time.monotonic() + DOCKERD_START_TIMEOUT_S
        while client.run("version", check=False, timeout=10).returncode != 0:
            if popen.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace").strip().splitlines()[-3:]
                _skip(f"dockerd did not start (rc {popen.poll()}): {' | '.join(tail)}")
            time.sleep(0.5)
        yield client
    finally:
        if popen.poll() is None:
            popen.terminate()
            try:
                popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait(timeout=10)
        _unmount_under(base)
        shutil.rmtree(base, ignore_errors=True)


def _unmount_under(base: Path) -> None:
    """dockerd leaves mounts in its exec root (netns/default): unmount them, deepest first."""
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    for point in sorted((m for m in mounts if m.startswith(f"{base}/")), reverse=True):
        subprocess.run(["umount", "-l", point], check=False, timeout=30)


def _service_env(sid: int, ports: dict[str, int]) -> dict[str, str]:
    servers = " ".join(f"server.{n}=127.0.0.{n}:{ports['quorum']}:{ports['election']};"
                       f"127.0.0.{n}:{ports['client']}" for n in SERVERS)
    return {"ZOO_MY_ID": str(sid), "ZOO_SERVERS": servers,
            "ZOO_4LW_COMMANDS_WHITELIST": "ruok,srvr,mntr",
            "ZOO_CFG_EXTRA": f"admin.serverAddress=127.0.0.{sid} "
                             f"admin.serverPort={ports['admin']}"}


def _compose_file(path: Path, ports: dict[str, int]) -> Path:
    services = {f"zoo{sid}": {"image": IMAGE_TAG, "network_mode": "host",
                              "environment": _service_env(sid, ports)} for sid in SERVERS}
    path.write_text(yaml.safe_dump({"services": services}))
    return path


def _health(docker: Docker, name: str) -> str:
    out = docker.run("inspect", "--format", "{{json .State.Health.Status}}", name).stdout
    return json.loads(out)


def _container_names(docker: Docker, compose: Path | None) -> dict[int, str]:
    if compose is None:
        return {sid: f"{PROJECT}_zoo{sid}" for sid in SERVERS}
    ids = docker.run("-f", str(compose), "-p", PROJECT, "ps", "-q", tool="docker-compose")
    names = {}
    for cid in ids.stdout.split():
        name = docker.run("inspect", "--format", "{{.Name}}", cid).stdout.strip().lstrip("/")
        service = docker.run("inspect", "--format",
                             '{{index .Config.Labels "com.docker.compose.service"}}',
                             cid).stdout.strip()
        names[int(service.removeprefix("zoo"))] = name
    return names


def test_image_builds_and_a_compose_ensemble_answers_kazoo(docker, tmp_path):
    started = time.monotonic()
    tar = build_tar(Path(docker.workdir) / "rootfs.tar")
    docker.run("import", "--change", "ENV PATH=/usr/local/bin:/usr/bin:/bin", str(tar),
               BASE_TAG, timeout=120)
    docker.run("build", "--build-arg", f"BASE_IMAGE={BASE_TAG}",
               "--build-arg", "INSTALL_DEPENDENCIES=no", "-t", IMAGE_TAG, str(REPO_ROOT),
               timeout=BUILD_TIMEOUT_S)
    image = json.loads(docker.run("image", "inspect", IMAGE_TAG).stdout)[0]["Config"]
    image_env = dict(e.split("=", 1) for e in image["Env"])
    assert {k: v for k, v in image_env.items() if k in container.IMAGE_DEFAULTS} == \
        container.IMAGE_DEFAULTS
    assert image["User"] == "1000:1000"
    assert set(image["Volumes"]) == {"/data", "/datalog", "/logs"}
    assert image["Healthcheck"]["Test"] == ["CMD", "python", "-m", "zkcompat.cli.container", "ruok"]
    # The repository's own compose file is one docker-compose accepts.
    compose_tool = shutil.which("docker-compose")
    if compose_tool:
        docker.run("-f", str(REPO_ROOT / "docker-compose.yml"), "config", "-q",
                   tool="docker-compose")

    ports = {k: free_port() for k in ("client", "quorum", "election", "admin")}
    compose = _compose_file(tmp_path / "compose.yml", ports) if compose_tool else None
    try:
        if compose is not None:
            docker.run("-f", str(compose), "-p", PROJECT, "up", "-d", tool="docker-compose",
                       timeout=120)
        else:  # no docker-compose here: the same three services by docker run
            for sid in SERVERS:
                env_args = [a for k, v in _service_env(sid, ports).items()
                            for a in ("-e", f"{k}={v}")]
                docker.run("run", "-d", "--name", f"{PROJECT}_zoo{sid}", "--network", "host",
                           *env_args, IMAGE_TAG)
        names = _container_names(docker, compose)
        assert sorted(names) == list(SERVERS)

        hosts = ",".join(f"127.0.0.{sid}:{ports['client']}" for sid in SERVERS)
        client = KazooClient(hosts=hosts, timeout=10)
        client.start(timeout=60)
        try:
            client.create("/from-docker", b"hello", makepath=True)
            for sid in SERVERS:
                reader = KazooClient(hosts=f"127.0.0.{sid}:{ports['client']}", timeout=10)
                reader.start(timeout=30)
                try:
                    reader.sync("/")
                    assert reader.get("/from-docker")[0] == b"hello"
                finally:
                    reader.stop()
                    reader.close()
        finally:
            client.stop()
            client.close()

        deadline = time.monotonic() + HEALTHY_TIMEOUT_S
        while {_health(docker, n) for n in names.values()} != {"healthy"}:
            assert time.monotonic() < deadline, {n: _health(docker, n) for n in names.values()}
            time.sleep(1)
        for sid, name in names.items():
            probe = ("import os; print(os.getuid()); print(open('/conf/zoo.cfg').read(), "
                     "end=''); print(open('/data/myid').read(), end='')")
            out = docker.run("exec", name, "python", "-c", probe).stdout
            uid, rest = out.split("\n", 1)
            assert uid == "1000"
            assert rest == container.zoo_cfg(_service_env(sid, ports)) + f"{sid}\n"
    except BaseException:
        for sid in SERVERS:  # what each container said, for the failure's report
            logs = docker.run("logs", "--tail", "30", f"{PROJECT}_zoo{sid}_1" if compose
                              else f"{PROJECT}_zoo{sid}", check=False)
            print(f"--- zoo{sid}:\n{logs.stdout[-3000:]}{logs.stderr[-3000:]}")
        raise
    finally:
        if compose is not None:
            docker.run("-f", str(compose), "-p", PROJECT, "down", "-v", "-t", "10",
                       tool="docker-compose", check=False, timeout=120)
        else:
            for sid in SERVERS:
                docker.run("rm", "-f", "-v", f"{PROJECT}_zoo{sid}", check=False)
    print(f"docker test: image built and ensemble checked in {time.monotonic() - started:.0f}s")
