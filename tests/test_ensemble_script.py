"""scripts/ensemble end to end: start 3, status, kill the leader, a new leader, start-server
brings it back as a follower, stop-server and stop leave no process and no open port.

test_ensemble_script_zookeeper runs the script on real ZooKeeper 3.8 (the hidden --kind
zookeeper); test_ensemble_script_zkcompat runs the same exercise on zkcompat's own servers,
and passes once zkcompat replicates.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest
from kazoo.client import KazooClient

from zkcompat.cli import ensemble_plan
from zkcompat.cli.ensemble_plan import plan, prepare, write_files
from zkcompat.cli.ensemble_process import START_MODES, is_ours, spawn, wait_serving
from zkcompat.cli.ensemble_state import Ensemble, Member, load_state, save_state, update_member

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRIPT = REPO_ROOT / "scripts" / "ensemble"
COMMAND_TIMEOUT_S = 200.0  # start waits up to 120 s for the servers itself
ELECTION_TIMEOUT_S = 60.0  # a new leader after the old one is killed
CLIENT_TIMEOUT_S = 15.0
CONNECT_LINE = re.compile(r"connect: (127\.0\.0\.1:\d+)(,127\.0\.0\.1:\d+)*")
STATUS_LINE = re.compile(r"server\.(\d+) (127\.0\.0\.1:\d+) (\S+|not serving)")


def _run(directory: Path, *args: str, ok: bool = True,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([str(SCRIPT), *args, "--dir", str(directory)], capture_output=True,
                          text=True, timeout=COMMAND_TIMEOUT_S, stdin=subprocess.DEVNULL,
                          env=None if env is None else {**os.environ, **env})
    if ok:
        assert done.returncode == 0, (f"ensemble {' '.join(args)}: rc {done.returncode}\n"
                                      f"{done.stdout}\n{done.stderr}\n{_logs(directory)}")
    return done


def _logs(directory: Path, lines: int = 15) -> str:
    out = []
    for log in sorted(directory.glob("*/server.log")):
        tail = log.read_text(errors="replace").splitlines()[-lines:]
        out.append(f"--- {log} ---\n" + "\n".join(tail))
    return "\n".join(out)


def _status(directory: Path) -> dict[int, tuple[str, str]]:
    lines = _run(directory, "status").stdout.splitlines()
    found = [STATUS_LINE.fullmatch(line) for line in lines]
    assert all(found), lines
    return {int(m.group(1)): (m.group(2), m.group(3)) for m in found}


def _modes(status: dict[int, tuple[str, str]]) -> dict[int, str]:
    return {sid: mode for sid, (_, mode) in status.items()}


def _wait_modes(directory: Path, want, timeout_s: float = ELECTION_TIMEOUT_S) -> dict[int, str]:
    deadline = time.monotonic() + timeout_s
    while True:
        modes = _modes(_status(directory))
        if want(modes):
            return modes
        assert time.monotonic() < deadline, f"status stayed {modes}\n{_logs(directory)}"
        time.sleep(0.5)


def _one_leader(modes: dict[int, str], down: int | None = None) -> bool:
    up = {sid: mode for sid, mode in modes.items() if sid != down}
    return (sorted(up.values()) == ["follower"] * (len(up) - 1) + ["leader"]
            and (down is None or modes[down] == "down"))


def _recorded_pids(directory: Path) -> dict[int, int]:
    state = json.loads((directory / "ensemble.json").read_text())
    return {int(k): m["pid"] for k, m in state["members"].items()}


def _gone(pid: int) -> bool:
    """Exited: no such process, or a zombie nobody has reaped yet."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X")


def _refuses(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=1.0):
            return False
    except OSError:
        return True


def _client(hosts: str) -> KazooClient:
    zk = KazooClient(hosts=hosts, timeout=10.0)
    zk.start(timeout=CLIENT_TIMEOUT_S)
    return zk


def _cleanup(directory: Path) -> None:
    """Whatever the test did, end what it started: `stop`, then SIGKILL by recorded PID
    (only while /proc shows it is still that server)."""
    if not (directory / "ensemble.json").exists():
        return
    subprocess.run([str(SCRIPT), "stop", "--dir", str(directory)], capture_output=True,
                   timeout=COMMAND_TIMEOUT_S)
    state = load_state(directory)
    for m in state.members.values() if state else ():
        if is_ours(m.pid, m.cfg):
            os.kill(m.pid, signal.SIGKILL)


# --set: a key of ours, and one that overrides a default (initLimit=10); both kinds obey both
# and `conf` shows them. The JVM flags: words each kind's server can be seen to get.
SETTINGS = ("--set", "maxSessionTimeout=30000", "--set", "initLimit=12")
SET_LINES = ("maxSessionTimeout=30000", "initLimit=12")
JVM_FLAGS = {"SERVER_JVMFLAGS": "-Dzkcompat.test.server=1 -Xmx256m",
             "JVMFLAGS": "-Dzkcompat.test.jvm=1"}


def _four_letter(address: str, word: bytes) -> str:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5.0) as s:
        s.sendall(word)
        return b"".join(iter(lambda: s.recv(4096), b"")).decode()


def _check_settings_and_flags(directory: Path, addresses: list[str]) -> None:
    """Every zoo.cfg has the --set lines, in place of the defaults they replace, and every
    server runs with them; SERVER_JVMFLAGS then JVMFLAGS reached each server: on java's
    command line after our -Xmx1g for ZooKeeper, in the environment for zkcompat."""
    state = json.loads((directory / "ensemble.json").read_text())["members"]
    for sid, address in zip((1, 2, 3), addresses, strict=True):
        cfg = (directory / f"zoo{sid}.cfg").read_text().splitlines()
        assert all(line in cfg for line in SET_LINES) and "initLimit=10" not in cfg, cfg
        conf = _four_letter(address, b"conf").splitlines()
        assert all(line in conf for line in SET_LINES), conf
        pid = state[str(sid)]["pid"]
        if state[str(sid)]["kind"] == "zookeeper":
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
            flags = " ".join(JVM_FLAGS.values()).split()
            at = argv.index(flags[0])
            assert argv[at:at + len(flags)] == flags and argv.index("-Xmx1g") < at, argv
        else:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            for name, value in JVM_FLAGS.items():
                assert f"{name}={value}".encode() in environ, name


def _check_start(directory: Path, done: subprocess.CompletedProcess) -> list[str]:
    lines = done.stdout.splitlines()
    assert len(lines) == 1 and CONNECT_LINE.fullmatch(lines[0]), done.stdout
    addresses = lines[0].removeprefix("connect: ").split(",")
    assert len(addresses) == 3
    state = json.loads((directory / "ensemble.json").read_text())
    ports = [p for m in state["members"].values()
             for p in (m["client_port"], m["quorum_port"], m["election_port"])]
    assert len(set(ports)) == 9, ports
    for sid in (1, 2, 3):
        assert (directory / str(sid) / "myid").read_text().strip() == str(sid)
        assert (directory / str(sid) / "server.log").exists()
        cfg = (directory / f"zoo{sid}.cfg").read_text()
        for line in ("4lw.commands.whitelist=*", "syncLimit=5",
                     "tickTime=2000", f"dataDir={directory / str(sid)}"):
            assert line in cfg.splitlines(), cfg
        assert all(f"server.{k}=127.0.0.1:" in cfg for k in (1, 2, 3)), cfg
    return addresses


def _exercise(directory: Path, *start_args: str) -> None:
    try:
        addresses = _check_start(directory, _run(directory, "start", "3", *start_args,
                                                 *SETTINGS, env=JVM_FLAGS))
        _check_settings_and_flags(directory, addresses)
        status = _status(directory)
        assert [status[sid][0] for sid in (1, 2, 3)] == addresses
        modes = _wait_modes(directory, _one_leader)
        leader = next(sid for sid, mode in modes.items() if mode == "leader")

        zk = _client(",".join(addresses))
        try:
            zk.create("/ensemble-script", b"before the crash")
        finally:
            zk.stop()
            zk.close()

        leader_pid = _recorded_pids(directory)[leader]
        _run(directory, "kill", str(leader))
        assert _gone(leader_pid)
        modes = _wait_modes(directory, lambda m: _one_leader(m, down=leader))
        assert modes[leader] == "down"

        restarted = _run(directory, "start-server", str(leader))
        assert _recorded_pids(directory)[leader] != leader_pid
        assert restarted.stdout.split()[-1] == "follower", restarted.stdout
        modes = _wait_modes(directory, _one_leader)
        assert modes[leader] == "follower"
        zk = _client(status[leader][0])  # the restarted server alone: it has the data
        try:
            assert zk.get("/ensemble-script")[0] == b"before the crash"
        finally:
            zk.stop()
            zk.close()

        follower = next(sid for sid, mode in modes.items() if mode == "follower")
        follower_pid = _recorded_pids(directory)[follower]
        _run(directory, "stop-server", str(follower))
        assert _gone(follower_pid) and _refuses(status[follower][0])

        pids = _recorded_pids(directory)
        _run(directory, "stop")
        assert all(_gone(pid) for pid in pids.values()), pids
        assert all(_refuses(address) for address in addresses)
        assert set(_modes(_status(directory)).values()) == {"down"}
    finally:
        _cleanup(directory)


@pytest.mark.timeout(400)
def test_ensemble_script_zookeeper(tmp_path):
    _exercise(tmp_path / "ensemble", "--kind", "zookeeper")


@pytest.mark.timeout(400)
def test_ensemble_script_zkcompat(tmp_path):
    """The same exercise on zkcompat's servers: passes once zkcompat replicates."""
    _exercise(tmp_path / "ensemble")


@pytest.mark.timeout(120)
def test_start_that_times_out_names_the_servers_and_fails(tmp_path):
    directory = tmp_path / "ensemble"
    try:
        done = _run(directory, "start", "3", "--kind", "zookeeper", "--timeout", "0.2", ok=False)
        assert done.returncode != 0 and done.stdout == ""
        named = re.findall(r"^server\.(\d) 127\.0\.0\.1:\d+ did not come up", done.stderr,
                           re.MULTILINE)
        assert named and set(named) <= {"1", "2", "3"}, done.stderr
        assert _run(directory, "start", "3", "--kind", "zookeeper", ok=False).returncode != 0
    finally:
        _cleanup(directory)
    assert all(_gone(pid) for pid in _recorded_pids(directory).values())


@pytest.mark.timeout(60)
def test_only_recorded_processes_of_ours_are_signalled(tmp_path):
    """A recorded PID whose command line does not name the server's zoo.cfg (a recycled
    PID) is never signalled: not by kill, stop-server or stop."""
    directory = tmp_path / "ensemble"
    directory.mkdir()
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ens = Ensemble("zkcompat")
        for sid in (1, 2, 3):
            ens.members[sid] = Member(
                sid, client_port=1, quorum_port=2, election_port=3,
                cfg=str(directory / f"zoo{sid}.cfg"), data_dir=str(directory / str(sid)),
                pid=bystander.pid)
        save_state(directory, ens)
        assert not is_ours(bystander.pid, ens.members[1].cfg)
        _run(directory, "kill", "1")
        _run(directory, "stop-server", "2")
        _run(directory, "stop")
        assert bystander.poll() is None
        assert set(_modes(_status(directory)).values()) == {"down"}
    finally:
        bystander.kill()
        bystander.wait()


def test_bad_arguments_are_refused(tmp_path):
    directory = tmp_path / "ensemble"
    assert _run(directory, "start", "4", ok=False).returncode == 2  # click: 3, 5 or 7
    for bad, why in (("tickTime", "expected KEY=VALUE"), ("=5", "expected KEY=VALUE"),
                     ("dataDir=/elsewhere", "written by `ensemble` itself"),
                     ("clientPort=2181", "written by `ensemble` itself"),
                     ("server.4=127.0.0.1:1:2", "written by `ensemble` itself")):
        done = _run(directory, "start", "3", "--set", bad, ok=False)
        assert done.returncode == 2 and why in done.stderr, (bad, done.stderr)
    assert not (directory / "ensemble.json").exists()
    missing = _run(directory, "status", ok=False)
    assert missing.returncode == 1 and "no ensemble" in missing.stderr


# -- --base-port: every port of the ensemble in one known range ------------------------------

BASE_PORT_SPAN = 12  # 3 servers x (client, quorum, election, admin)


def _free_range(span: int) -> int:
    """A port P with P .. P+span-1 all free a moment ago."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + span > 65536:
            continue
        try:
            held = []
            for port in range(base, base + span):
                s = socket.socket()
                held.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise AssertionError(f"no {span} consecutive free ports")


def _admin(port: int, command: str) -> dict:
    import urllib.request  # noqa: PLC0415

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/commands/{command}",
                                timeout=5.0) as reply:
        return json.loads(reply.read())


@pytest.mark.timeout(300)
def test_base_port_puts_every_port_in_one_range(tmp_path):
    directory = tmp_path / "ensemble"
    base = _free_range(BASE_PORT_SPAN)
    clients = [base, base + 1, base + 2]
    try:
        done = _run(directory, "start", "3", "--base-port", str(base))
        assert done.stdout.strip() == "connect: " + ",".join(f"127.0.0.1:{p}" for p in clients)
        state = json.loads((directory / "ensemble.json").read_text())["members"]
        for sid in (1, 2, 3):
            m = state[str(sid)]
            want = (base + sid - 1, base + 3 + sid - 1, base + 6 + sid - 1, base + 9 + sid - 1)
            assert (m["client_port"], m["quorum_port"], m["election_port"],
                    m["admin_port"]) == want, m
            cfg = (directory / f"zoo{sid}.cfg").read_text().splitlines()
            assert f"admin.serverPort={want[3]}" in cfg and "admin.enableServer=true" in cfg
            for k in (1, 2, 3):
                assert (f"server.{k}=127.0.0.1:{base + 3 + k - 1}:{base + 6 + k - 1};"
                        f"127.0.0.1:{base + k - 1}") in cfg, cfg
            assert _admin(want[3], "ruok")["error"] is None
            assert _admin(want[3], "conf")["client_port"] == want[0]
        zk = _client(",".join(f"127.0.0.1:{p}" for p in clients))
        try:
            zk.create("/base-port", b"in range")
        finally:
            zk.stop()
            zk.close()
        _run(directory, "stop")
        # Started again, it keeps its ports; another --base-port for it is refused.
        again = _run(directory, "start", "3", "--base-port", str(base + 1), ok=False)
        assert again.returncode != 0 and f"--base-port {base}" in again.stderr, again.stderr
    finally:
        _cleanup(directory)


def test_base_port_refuses_a_range_it_cannot_have(tmp_path):
    directory = tmp_path / "ensemble"
    base = _free_range(BASE_PORT_SPAN)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", base + 7))  # server.2's election port
        taken.listen()
        done = _run(directory, "start", "3", "--base-port", str(base), ok=False)
    assert done.returncode != 0 and done.stdout == ""
    assert (f"port {base + 7} (server.2's election port) is in use; choose another "
            "--base-port") in done.stderr, done.stderr
    state = load_state(directory)
    assert state is None or all(m.pid is None for m in state.members.values())
    done = _run(directory, "start", "3", "--base-port", "65530", ok=False)
    assert done.returncode == 2 and "65524" in done.stderr, done.stderr  # 65535 - 12 + 1


def test_help_says_which_port_each_server_gets():
    done = subprocess.run([str(SCRIPT), "start", "--help"], capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT_S)
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    assert "--base-port" in text and "client P+K-1, quorum P+N+K-1" in text, done.stdout
    assert "spread: server K alone on 127.0.0.K" in text, done.stdout


def test_set_on_a_restart_is_added_to_what_each_server_had(tmp_path):
    """A stopped ensemble started again with --set keeps its other settings, and gets the
    new key in every zoo.cfg (written at each start)."""
    directory = tmp_path / "ensemble"
    directory.mkdir()
    ens = plan(directory, 3, "zookeeper,zookeeper,zkcompat", {"tickTime": "500"})
    save_state(directory, ens)
    again = prepare(directory, 3, "zookeeper,zookeeper,zkcompat", {"reconfigEnabled": "true"})
    write_files(again)
    for m in again.members.values():
        assert m.settings == {"tickTime": "500", "reconfigEnabled": "true"}
        cfg = Path(m.cfg).read_text().splitlines()
        assert "tickTime=500" in cfg and "reconfigEnabled=true" in cfg, cfg
    with pytest.raises(click.ClickException, match="3-server zookeeper,zookeeper,zkcompat"):
        prepare(directory, 3, "zkcompat", {})


def test_start_server_kind_replaces_a_server_with_the_other_kind(tmp_path):
    """The record of `start-server K --kind`: server K's kind, and the ensemble's kinds,
    which `start` compares with its --kind on a restart. (tests/ensemble/test_migration.py
    replaces every server of running ensembles so.)"""
    directory = tmp_path / "ensemble"
    directory.mkdir()
    save_state(directory, plan(directory, 3, "zookeeper", {}))
    update_member(directory, 1, kind="zkcompat")
    state = load_state(directory)
    assert [m.kind for m in state.members.values()] == ["zkcompat", "zookeeper", "zookeeper"]
    assert state.kind == "zkcompat,zookeeper,zookeeper"
    prepare(directory, 3, "zkcompat,zookeeper,zookeeper", {})
    for sid in (2, 3):
        update_member(directory, sid, kind="zkcompat")
    assert load_state(directory).kind == "zkcompat"


def test_help_documents_set_kind_and_the_jvm_flags():
    done = subprocess.run([str(SCRIPT), "start", "--help"], capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT_S)
    text = " ".join(done.stdout.split())
    for words in ("--set KEY=VALUE", "--kind", "SERVER_JVMFLAGS, JVMFLAGS",
                  "repeat it for more keys"):
        assert words in text, (words, done.stdout)
    done = subprocess.run([str(SCRIPT), "start-server", "--help"], capture_output=True,
                          text=True, timeout=COMMAND_TIMEOUT_S)
    assert "--kind [zkcompat|zookeeper]" in done.stdout, done.stdout


@pytest.mark.timeout(120)
def test_a_server_just_spawned_is_not_taken_for_one_that_exited(tmp_path):
    """Right after Popen returns, /proc/PID/cmdline can still be empty (the kernel wakes the
    vfork parent before the new program's arguments are in place), so the server does not
    look like ours yet: start and start-server waited for it as "process exited" and
    failed at once (seen in tests/ensemble/test_migration.py under load). Only a process
    that is gone, or a zombie, has exited."""
    port = _free_range(1)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text(f"tickTime=2000\ndataDir={data_dir}\nclientPort={port}\n"
                   "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
                   "4lw.commands.whitelist=*\n")
    member = Member(1, port, 0, 0, cfg=str(cfg), data_dir=str(data_dir))
    for _ in range(3):
        member.pid = spawn("zkcompat", member)
        try:
            assert wait_serving([member], START_MODES, 60.0) == {}
        finally:
            os.kill(member.pid, signal.SIGKILL)
            os.waitpid(member.pid, 0)
    # and one that has exited is told at once
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    member.pid = gone.pid
    started = time.monotonic()
    assert wait_serving([member], START_MODES, 30.0) == {
        1: "process exited"}
    assert time.monotonic() - started < 5.0


def test_free_ports_skips_the_ports_it_is_told_to_avoid(monkeypatch):
    """The kernel hands a closed port out again: free_ports(avoid=...) must pass over one
    that an ensemble already has, or a metrics port lands on a quorum port (stop 31)."""
    handed_out = iter([7001, 7002, 7003, 7004])

    class FakeSocket:
        def bind(self, address):
            self.port = next(handed_out)

        def getsockname(self):
            return ("127.0.0.1", self.port)

        def close(self):
            pass

    monkeypatch.setattr(ensemble_plan.socket, "socket", FakeSocket)
    assert ensemble_plan.free_ports(2, avoid={7001, 7003}) == [7002, 7004]
