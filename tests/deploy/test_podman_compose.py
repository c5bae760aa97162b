"""The repository's docker-compose.yml, run as it is by podman-compose (PyPI) on the image
scripts/build-image makes: three services on a compose network of their own, each reaching
the others by service name, client ports published on 127.0.0.1 (free ones, through the
file's ZOO1_PORT..ZOO3_PORT). The Dockerfile's HEALTHCHECK and the StatefulSet's probes
pass in every container, and kazoo writes through one port and reads through the others.
Everything of the project (containers, their anonymous volumes, named volumes, the pod and
the network) is removed at the end by the names this run gave it, also on failure."""

from __future__ import annotations

import json
import os
import secrets
import sys

import pytest
from kazoo.client import KazooClient

from tests.deploy.podman import (
    REPO_ROOT,
    free_ports,
    healthcheck,
    podman,
    run,
    statefulset_probes,
    wait_until,
)

pytestmark = pytest.mark.timeout(300, func_only=True)

SERVICES = ("zoo1", "zoo2", "zoo3")
COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
COMPOSE_TIMEOUT_S = 180.0
READY_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 10
PROJECT_LABEL = "io.podman.compose.project"
SERVICE_LABEL = "com.docker.compose.service"


class Compose:
    def __init__(self, image: str) -> None:
        self.project = f"zkcompattest{secrets.token_hex(3)}"
        ports = free_ports(["127.0.0.1"], len(SERVICES))
        self.ports = dict(zip(SERVICES, ports, strict=True))
        self.env = {**os.environ, "ZKCOMPAT_IMAGE": image.removeprefix("sha256:"),
                    **{f"ZOO{n}_PORT": str(p) for n, p in enumerate(ports, start=1)}}

    def __call__(self, *args: str, check: bool = True):
        # podman-compose as a module of the test environment (setup.cfg's test extra);
        # its podman gets --runtime runc, as scripts/build-image's does.
        try:
            import podman_compose  # noqa: F401, PLC0415
        except ImportError as e:
            raise AssertionError(f"podman-compose is not installed ({e}): "
                                 "pip install -e '.[test]'") from None
        return run([sys.executable, "-m", "podman_compose", "--podman-args=--runtime runc",
                    "-p", self.project, "-f", str(COMPOSE_FILE), *args],
                   timeout=COMPOSE_TIMEOUT_S, check=check, env=self.env, cwd=REPO_ROOT)

    def containers(self) -> dict[str, dict]:
        """This project's containers by service, as podman inspect describes them."""
        ids = podman("ps", "-a", "-q", "--filter", f"label={PROJECT_LABEL}={self.project}")
        if not ids.stdout.split():
            return {}
        found = json.loads(podman("inspect", *ids.stdout.split()).stdout)
        return {c["Config"]["Labels"][SERVICE_LABEL]: c for c in found}

    def logs(self) -> str:
        parts = []
        for service, c in self.containers().items():
            done = podman("logs", "--tail", "25", c["Id"], check=False)
            parts.append(f"--- {service}:\n{done.stdout}{done.stderr}")
        return "\n".join(parts)


def _volumes(c: dict) -> list[str]:
    """A container's volumes: the project's named ones and its anonymous one (/logs),
    which `down -v` leaves behind."""
    return [m["Name"] for m in c.get("Mounts", []) if m.get("Type") == "volume"]


def _left(project: str) -> list[str]:
    """Whatever of `project` podman still has."""
    left = []
    label = f"label={PROJECT_LABEL}={project}"
    for kind, args in (("container", ("ps", "-a", "--filter", label, "--format", "{{.Names}}")),
                       ("volume", ("volume", "ls", "--filter", label, "--format", "{{.Name}}")),
                       ("pod", ("pod", "ps", "--filter", f"name=pod_{project}",
                                "--format", "{{.Name}}")),
                       ("network", ("network", "ls", "--format", "{{.Name}}"))):
        names = podman(*args).stdout.split()
        left += [f"{kind} {n}" for n in names if kind != "network" or n.startswith(project)]
    return left


def test_compose_file_runs_and_passes_the_probes(podman_image):
    compose = Compose(podman_image)
    volumes: set[str] = set()
    try:
        compose("up", "-d")
        found = compose.containers()
        assert sorted(found) == list(SERVICES), compose.logs()
        for c in found.values():
            volumes.update(_volumes(c))

        failed: dict[str, dict[str, str]] = {}

        def all_pass() -> bool:
            failed.clear()
            for service, c in found.items():
                probes = {"HEALTHCHECK": healthcheck(c["Id"]), **statefulset_probes(c["Id"])}
                assert {"HEALTHCHECK", "readinessProbe"} <= set(probes)
                if bad := {k: p.detail for k, p in probes.items() if not p.passed}:
                    failed[service] = bad
            return not failed
        wait_until(all_pass, READY_TIMEOUT_S,
                   "every service passes the HEALTHCHECK and the StatefulSet's probes",
                   lambda: f"failing: {failed}\n{compose.logs()}", interval_s=2)

        hosts = {s: f"127.0.0.1:{p}" for s, p in compose.ports.items()}
        writer = KazooClient(hosts=hosts["zoo1"], timeout=10)
        writer.start(timeout=30)
        try:
            writer.create(f"/{compose.project}", b"via zoo1")
        finally:
            writer.stop()
            writer.close()
        for service in SERVICES[1:]:
            reader = KazooClient(hosts=hosts[service], timeout=10)
            reader.start(timeout=30)
            try:
                reader.sync("/")
                assert reader.get(f"/{compose.project}")[0] == b"via zoo1", service
            finally:
                reader.stop()
                reader.close()

        compose("down", "-v", "-t", str(STOP_TIMEOUT_S))
    finally:
        # Whatever down left (or all of it, when the test failed before down), by ID/name.
        for c in compose.containers().values():
            volumes.update(_volumes(c))
            podman("rm", "-f", "-v", "-t", "2", c["Id"], check=False)
        for volume in sorted(volumes):
            podman("volume", "rm", "-f", volume, check=False)
        for volume in podman("volume", "ls", "--filter", f"label={PROJECT_LABEL}="
                             f"{compose.project}", "--format", "{{.Name}}").stdout.split():
            podman("volume", "rm", "-f", volume, check=False)
        podman("pod", "rm", "-f", "--ignore", f"pod_{compose.project}", check=False)
        podman("network", "rm", "-f", f"{compose.project}_default", check=False)
    left = _left(compose.project) + [f"volume {v}" for v in sorted(volumes) if podman(
        "volume", "exists", v, check=False).returncode == 0]
    assert not left, f"left behind: {left}"
