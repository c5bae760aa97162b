"""The image, built with podman by scripts/build-image, run as a 3-server ensemble with the
official ZooKeeper image's variables (ZOO_MY_ID, ZOO_SERVERS) on the host's network, each
server on a loopback address of its own (127.0.0.1-3). The probes are the ones an engine
runs: the Dockerfile's HEALTHCHECK (`podman healthcheck run`) and the StatefulSet's
readiness and liveness probes (`podman exec`), read from those files. Each container and
volume is named for this run and removed by that name at the end, also on failure. Where
podman cannot run containers these tests fail with the reason; they never skip."""

from __future__ import annotations

import json
import re
import secrets
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest
from kazoo.client import KazooClient

from tests.deploy.podman import (
    Probe,
    dockerfile_healthcheck,
    four_letter_word,
    free_ports,
    healthcheck,
    podman,
    statefulset_probes,
    wait_until,
)
from zkcompat.cli import container

# Fixtures bound their own waits (below, and the image build's); a test body gets this.
pytestmark = pytest.mark.timeout(300, func_only=True)

SERVERS = (1, 2, 3)
ROLES = ("client", "quorum", "election", "admin")
WHITELIST = "ruok,srvr,mntr"
NAME_PREFIX = "zkcompat-test"
LONE_MEMBER_WAIT_S = 20.0  # a lone member's probes pass by then, or they fail
SERVING_TIMEOUT_S = 90.0  # three fresh containers elect a leader and take clients
STOP_TIMEOUT_S = 10  # podman stop's grace before SIGKILL (docker's default too)
KAZOO_TIMEOUT_S = 30.0
LOG_TAIL_LINES = 25


def _address(sid: int) -> str:
    return f"127.0.0.{sid}"


@dataclass
class Ensemble:
    image: str
    token: str = field(default_factory=lambda: secrets.token_hex(3))
    ports: dict[str, int] = field(default_factory=dict)
    containers: list[str] = field(default_factory=list)  # every name this run created
    volumes: list[str] = field(default_factory=list)
    lone: dict[str, Probe] = field(default_factory=dict)  # server 1's probes while alone
    lone_srvr: str = ""  # and what it answered srvr then

    def name(self, sid: int) -> str:
        return f"{NAME_PREFIX}-{self.token}-zoo{sid}"

    def env(self, sid: int) -> dict[str, str]:
        servers = " ".join(
            f"server.{n}={_address(n)}:{self.ports['quorum']}:{self.ports['election']};"
            f"{_address(n)}:{self.ports['client']}" for n in SERVERS)
        return {"ZOO_MY_ID": str(sid), "ZOO_SERVERS": servers,
                "ZOO_4LW_COMMANDS_WHITELIST": WHITELIST,
                "ZOO_CFG_EXTRA": f"admin.serverAddress={_address(sid)} "
                                 f"admin.serverPort={self.ports['admin']}"}

    def run(self, sid: int) -> None:
        """A new container for server `sid`, on its named /data and /datalog volumes."""
        name = self.name(sid)
        if name not in self.containers:
            self.containers.append(name)
        args = ["run", "-d", "--name", name, "--network", "host"]
        for what in ("data", "datalog"):
            volume = f"{name}-{what}"
            if volume not in self.volumes:
                self.volumes.append(volume)
            args += ["-v", f"{volume}:/{what}"]
        for key, value in self.env(sid).items():
            args += ["-e", f"{key}={value}"]
        podman(*args, self.image)

    def remove(self, sid: int) -> None:
        """Remove server `sid`'s container and its anonymous volume (/logs); the named
        volumes stay."""
        podman("rm", "-f", "-v", "-t", str(STOP_TIMEOUT_S), self.name(sid))

    def hosts(self, *sids: int) -> str:
        return ",".join(f"{_address(s)}:{self.ports['client']}" for s in sids or SERVERS)

    def mode(self, sid: int) -> str:
        answer = four_letter_word(_address(sid), self.ports["client"], "srvr")
        match = re.search(r"^Mode: (\S+)", answer, re.MULTILINE)
        return match.group(1) if match else answer.strip()[:80]

    def wait_serving(self, sids: tuple[int, ...]) -> dict[int, str]:
        """Wait until `sids` have one leader and the rest follow it; their modes."""
        def modes():
            now = {s: self.mode(s) for s in sids}
            return now if sorted(now.values()) == sorted(
                ["leader"] + ["follower"] * (len(sids) - 1)) else None
        return wait_until(modes, SERVING_TIMEOUT_S, f"servers {sids}: a leader and followers",
                          self.logs)

    def probes(self, sid: int) -> dict[str, Probe]:
        """The HEALTHCHECK and the StatefulSet's probes, run in server `sid`'s container."""
        return {"HEALTHCHECK": healthcheck(self.name(sid)),
                **statefulset_probes(self.name(sid))}

    def logs(self) -> str:
        parts = []
        for name in self.containers:
            done = podman("logs", "--tail", str(LOG_TAIL_LINES), name, check=False)
            parts.append(f"--- {name}:\n{done.stdout}{done.stderr}")
        return "\n".join(parts)

    def tear_down(self) -> None:
        for name in self.containers:
            podman("rm", "-f", "-v", "-t", "2", name, check=False)
        for volume in self.volumes:
            podman("volume", "rm", "-f", volume, check=False)
        left = podman("ps", "-a", "--format", "{{.Names}}").stdout.split()
        left += podman("volume", "ls", "--format", "{{.Name}}").stdout.split()
        leaked = sorted(set(left) & {*self.containers, *self.volumes})
        assert not leaked, f"could not remove {leaked}"


@contextmanager
def kazoo(hosts: str):
    client = KazooClient(hosts=hosts, timeout=10)
    client.start(timeout=KAZOO_TIMEOUT_S)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture(scope="module")
def ensemble(podman_image):
    """Server 1 alone first (its probes recorded), then servers 2 and 3."""
    ens = Ensemble(podman_image)
    addresses = [_address(s) for s in SERVERS]
    ens.ports = dict(zip(ROLES, free_ports(addresses, len(ROLES)), strict=True))
    try:
        ens.run(1)
        deadline = time.monotonic() + LONE_MEMBER_WAIT_S
        while True:
            ens.lone = ens.probes(1)
            if all(p.passed for p in ens.lone.values()) or time.monotonic() > deadline:
                break
            time.sleep(1)
        ens.lone_srvr = four_letter_word(_address(1), ens.ports["client"], "srvr")
        ens.run(2)
        ens.run(3)
        ens.wait_serving(SERVERS)
        yield ens
    finally:
        ens.tear_down()


def test_the_image_is_what_the_dockerfile_says(podman_image):
    image = json.loads(podman("image", "inspect", podman_image).stdout)[0]
    assert image["Healthcheck"]["Test"] == ["CMD", *dockerfile_healthcheck()]
    config = image["Config"]
    assert config["User"] == f"{container.IMAGE_UID}:{container.IMAGE_GID}"
    assert set(config["Volumes"]) == {"/data", "/datalog", "/logs"}
    env = dict(e.split("=", 1) for e in config["Env"])
    assert {k: v for k, v in env.items() if k in container.IMAGE_DEFAULTS} == \
        container.IMAGE_DEFAULTS


def test_a_lone_member_passes_the_healthcheck_and_the_statefulsets_probes(ensemble):
    """A ZooKeeper member without a quorum answers ruok with imok, so the StatefulSet's
    OrderedReady start gets past zk-0 and the HEALTHCHECK does not mark it unhealthy."""
    assert {"HEALTHCHECK", "readinessProbe"} <= set(ensemble.lone)
    failed = {k: p for k, p in ensemble.lone.items() if not p.passed}
    assert not failed, (
        f"server 1 alone for {LONE_MEMBER_WAIT_S:.0f}s, before servers 2 and 3 started: "
        f"{ {k: p.detail for k, p in failed.items()} }; srvr answered "
        f"{ensemble.lone_srvr!r}. A lone ZooKeeper member answers ruok with imok.")


def test_every_member_passes_the_probes_with_the_official_images_config(ensemble):
    probe = ("import os; print(os.getuid()); print(open('/conf/zoo.cfg').read(), end=''); "
             "print(open('/data/myid').read(), end='')")
    for sid in SERVERS:
        probes = ensemble.probes(sid)
        assert {"HEALTHCHECK", "readinessProbe"} <= set(probes)
        failed = {k: p.detail for k, p in probes.items() if not p.passed}
        assert not failed, f"server {sid}: {failed}"
        out = podman("exec", ensemble.name(sid), "python", "-c", probe).stdout
        uid, written = out.split("\n", 1)
        assert uid == str(container.IMAGE_UID)
        assert written == container.zoo_cfg(ensemble.env(sid)) + f"{sid}\n"


def test_kazoo_round_trip_through_every_member(ensemble):
    root = f"/podman-{ensemble.token}"
    for sid in SERVERS:
        with kazoo(ensemble.hosts(sid)) as client:
            client.create(f"{root}/written-via-{sid}", f"from {sid}".encode(), makepath=True)
    for sid in SERVERS:
        with kazoo(ensemble.hosts(sid)) as client:
            client.sync(root)
            assert sorted(client.get_children(root)) == [f"written-via-{s}" for s in SERVERS]
            for s in SERVERS:
                assert client.get(f"{root}/written-via-{s}")[0] == f"from {s}".encode()


def test_the_others_reelect_and_serve_when_the_leader_stops(ensemble):
    modes = ensemble.wait_serving(SERVERS)
    (leader,) = [s for s, m in modes.items() if m == "leader"]
    rest = tuple(s for s in SERVERS if s != leader)
    started = time.monotonic()
    stopped = podman("stop", "-t", str(STOP_TIMEOUT_S), ensemble.name(leader))
    # The image's stop signal ends the server; it is not killed at the timeout.
    assert time.monotonic() - started < STOP_TIMEOUT_S and "SIGKILL" not in stopped.stderr, \
        stopped.stderr
    ensemble.wait_serving(rest)
    path = f"/podman-{ensemble.token}-after-{leader}"
    for sid in rest:
        with kazoo(ensemble.hosts(sid)) as client:
            client.create(f"{path}/via-{sid}", makepath=True)
    podman("start", ensemble.name(leader))
    ensemble.wait_serving(SERVERS)
    with kazoo(ensemble.hosts(leader)) as client:
        client.sync(path)
        assert sorted(client.get_children(path)) == [f"via-{s}" for s in rest]


def test_data_in_the_volumes_survives_new_containers(ensemble):
    """Every container removed and made anew from the image: only the named volumes
    can carry the data across."""
    path = f"/podman-{ensemble.token}-survivor"
    with kazoo(ensemble.hosts()) as client:
        client.create(path, b"kept")
        mzxid = client.exists(path).mzxid
    for sid in SERVERS:
        ensemble.remove(sid)
    assert not set(podman("ps", "-a", "--format", "{{.Names}}").stdout.split()) \
        & set(ensemble.containers)
    for sid in SERVERS:
        ensemble.run(sid)
    ensemble.wait_serving(SERVERS)
    for sid in SERVERS:
        with kazoo(ensemble.hosts(sid)) as client:
            client.sync(path)
            data, stat = client.get(path)
            assert (data, stat.mzxid) == (b"kept", mzxid), f"server {sid}"
