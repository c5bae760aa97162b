"""A member without a quorum, against ZooKeeper 3.8's: server 1 of a 3-server zoo.cfg
started alone, once as a real ZooKeeper (QuorumPeerMain, its Jetty AdminServer on) and
once as zkcompat. Neither ever serves; both must still answer every four-letter word and
every AdminServer command as ZooKeeper does without a running ZooKeeperServer (ruok says
imok, srvr that the instance is not serving), close a client's ConnectRequest, and show as
`not serving` in `ensemble status`.

What is normalised, because it must differ: the JVM's own facts (envi and environment
list java.* entries, system_properties is the JVM's properties), and the body of the one
HTTP 500 (Jetty's page carries a Java stack trace). Everything else is compared exactly.
"""

from __future__ import annotations

import json
import re
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest
from click.testing import CliRunner

from conformance_tests.servers import HOST
from zkcompat.cli import launch
from zkcompat.cli.ensemble import ensemble
from zkcompat.cli.ensemble_plan import plan, write_files
from zkcompat.cli.ensemble_process import is_ours, port_refuses, spawn, stop_members
from zkcompat.cli.ensemble_state import Member, save_state
from zkcompat.server.admin import NOT_SERVING
from zkcompat.server.adminhttp import BY_NAME

from .conftest import SERVLET_API_JAR

pytestmark = pytest.mark.timeout(180)  # a ZooKeeper JVM beside a zkcompat, on 2 cores

START_TIMEOUT_S = 90.0
IO_TIMEOUT_S = 5.0
# ZooKeeper 3.9's four-letter words (FourLetterCommands.cmd2String), all but one
# whitelisted: `dump` shows the whitelist is checked before whether a server runs.
WORDS = ("ruok", "srvr", "stat", "isro", "mntr", "conf", "cons", "crst", "srst", "dirs",
         "wchs", "wchc", "wchp", "gtmk", "stmk", "hash", "envi")
NOT_WHITELISTED = "dump"
SETTINGS = {"tickTime": 500, "initLimit": 10, "syncLimit": 4,
            "4lw.commands.whitelist": ",".join(WORDS)}
TRACE_MASK = 0x1FF  # any mask but the default (ZooTrace's 306)
DEFAULT_TRACE_MASK = 306
# A ConnectRequest (protocolVersion, lastZxidSeen, timeOut, sessionId, passwd, readOnly).
CONNECT_REQUEST = (b"\0" * 4 + b"\0" * 8 + (10_000).to_bytes(4, "big") + b"\0" * 8
                   + (16).to_bytes(4, "big") + b"\0" * 16 + b"\0")
JVM_ONLY = ("java.",)  # envi and environment entries only a JVM has
NOT_COMPARED = {"system_properties", "sysp"}  # a JVM's properties against a Python's
H2 = re.compile(r"<h2>HTTP ERROR 500 .*</h2>")
URI_ROW = re.compile(r"<tr><th>URI:</th><td>(.*)</td></tr>")


@dataclass
class Lone:
    """Server 1 of a 3-server ensemble, started alone."""

    kind: str
    directory: Path
    member: Member
    admin_port: int

    def send(self, data: bytes) -> tuple[bytes, float]:
        """What the server writes back to `data` until it closes, and how long that took."""
        t0 = time.monotonic()
        out = b""
        with socket.create_connection((HOST, self.member.client_port),
                                      timeout=IO_TIMEOUT_S) as s:
            s.sendall(data)
            while True:
                try:
                    chunk = s.recv(65536)
                except ConnectionResetError:
                    break
                if not chunk:
                    break
                out += chunk
        return out, time.monotonic() - t0

    def flw(self, word: str, argument: bytes = b"") -> str:
        return self.send(word.encode("ascii") + argument)[0].decode("utf-8", "replace")

    def admin(self, path: str) -> tuple[int, str, str]:
        """(status, content type, body) of GET /commands/PATH."""
        url = f"http://{HOST}:{self.admin_port}/commands/{path}"
        try:
            with urllib.request.urlopen(url, timeout=IO_TIMEOUT_S) as r:
                return r.status, r.headers.get_content_type(), r.read().decode("iso-8859-1")
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get_content_type(), e.read().decode("iso-8859-1")


def _start_lone(directory: Path, kind: str) -> Lone:
    ens = plan(directory, 3, kind, {})
    admin_port = ens.members[1].admin_port
    for m in ens.members.values():
        m.settings = dict(SETTINGS)
    write_files(ens)
    m = ens.members[1]
    with mock.patch.object(launch, "ZOOKEEPER_LOGGING_JARS",
                           (*launch.ZOOKEEPER_LOGGING_JARS, SERVLET_API_JAR)):
        m.pid = spawn(m.kind, m)
    save_state(directory, ens)
    lone = Lone(kind, directory, m, admin_port)
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:  # up once both ports take connections: the AdminServer answers gtmk
        time.sleep(0.2)  # /proc/PID/cmdline reads empty while the process still execs
        try:
            if lone.admin("gtmk")[0] == 200 and not port_refuses(m.client_port):
                return lone
        except OSError:
            pass
        assert is_ours(m.pid, m.cfg), f"{kind} exited:\n{m.log_path.read_text()}"
        assert time.monotonic() < deadline, f"{kind} not up:\n{m.log_path.read_text()}"


@pytest.fixture(scope="module")
def lone(tmp_path_factory) -> Iterator[dict[str, Lone]]:
    started: list[Lone] = []
    try:
        for kind in ("zookeeper", "zkcompat"):
            started.append(_start_lone(tmp_path_factory.mktemp(f"lone-{kind}").resolve(), kind))
        yield {s.kind: s for s in started}
    finally:
        left = stop_members([s.member for s in started])
        assert not left, left


# -- the client port ---------------------------------------------------------------------


def test_ruok_and_srvr(lone):
    """The issue's two answers, spelt out: what the rest are compared against is real."""
    for server in lone.values():
        assert server.flw("ruok") == "imok", server.kind
        assert server.flw("srvr") == NOT_SERVING + "\n", server.kind


@pytest.mark.parametrize("word", [w for w in WORDS if w not in ("stmk", "envi")]
                         + [NOT_WHITELISTED])
def test_four_letter_word(word, lone):
    zk, ours = lone["zookeeper"].flw(word), lone["zkcompat"].flw(word)
    assert zk, f"ZooKeeper's lone member closed {word} without an answer"
    assert ours == zk


def test_envi(lone):
    def keys(text: str) -> list[str]:
        lines = text.splitlines()
        assert lines[0] == "Environment:", text
        return [line.split("=", 1)[0] for line in lines[1:]
                if not line.startswith(JVM_ONLY)]

    assert keys(lone["zkcompat"].flw("envi")) == keys(lone["zookeeper"].flw("envi"))


def test_stmk_sets_the_trace_mask_gtmk_reads(lone):
    mask = TRACE_MASK.to_bytes(8, "big")
    default = DEFAULT_TRACE_MASK.to_bytes(8, "big")
    answers = {}
    for kind, server in lone.items():
        answers[kind] = [server.flw("stmk", mask), server.flw("gtmk"),
                         server.flw("stmk", default), server.flw("gtmk")]
    assert answers["zookeeper"] == [str(TRACE_MASK), str(TRACE_MASK),
                                    str(DEFAULT_TRACE_MASK), str(DEFAULT_TRACE_MASK)]
    assert answers["zkcompat"] == answers["zookeeper"]


def test_a_connect_request_is_closed_unanswered(lone):
    """readLength: not a four-letter word, and no server to take it: closed at once (well
    before the sessionless connection timeout), so the client tries its next server."""
    frame = len(CONNECT_REQUEST).to_bytes(4, "big") + CONNECT_REQUEST
    for server in lone.values():
        out, took_s = server.send(frame)
        assert out == b"", server.kind
        assert took_s < IO_TIMEOUT_S, (server.kind, took_s)


# -- the AdminServer ---------------------------------------------------------------------


def _command_names(zookeeper: Lone) -> list[str]:
    status, _, links = zookeeper.admin("")
    assert status == 200
    listed = re.findall(r'<a href="/commands/([^"]+)">', links)
    assert "monitor" in listed and "ruok" in listed, links
    return sorted(set(listed) | set(BY_NAME))


def test_every_admin_command(lone):
    """Every name either server knows (ZooKeeper's links, zkcompat's names and aliases), an
    unknown one, and set_trace_mask with arguments good and bad."""
    zk, ours = lone["zookeeper"], lone["zkcompat"]
    paths = _command_names(zk) + ["no_such_command", f"set_trace_mask?traceMask={TRACE_MASK}",
                                  f"stmk?traceMask={DEFAULT_TRACE_MASK}",
                                  "set_trace_mask?traceMask=x"]
    differ = {}
    for path in paths:
        theirs, mine = zk.admin(path), ours.admin(path)
        if theirs[:2] != mine[:2]:
            differ[path] = (theirs, mine)
        elif theirs[0] == 500:
            _same_error_page(path, theirs[2], mine[2])
        elif not _same_json(path, json.loads(theirs[2]), json.loads(mine[2])):
            differ[path] = (theirs[2], mine[2])
    assert not differ, differ


def _same_json(path: str, zk: dict, ours: dict) -> bool:
    name = path.split("?")[0]
    if name in NOT_COMPARED:
        return ours["error"] is None and ours["command"] == zk["command"]
    if BY_NAME.get(name) is BY_NAME["environment"]:
        zk = {k: v for k, v in zk.items() if not k.startswith(JVM_ONLY)}
        return list(ours) == list(zk) and ours["error"] is zk["error"] is None
    return list(ours.items()) == list(zk.items())


def _same_error_page(path: str, zk: str, ours: str) -> None:
    """MonitorCommand's NullPointerException: Jetty's error page, whose message and stack
    trace are Java's; its heading and its URI row are the same."""
    for page in (zk, ours):
        assert H2.search(page), (path, page)
    assert URI_ROW.findall(ours) == URI_ROW.findall(zk), (path, ours)


# -- what operators run against it ---------------------------------------------------------


def test_ensemble_status_says_not_serving(lone):
    for server in lone.values():
        done = CliRunner().invoke(ensemble, ["status", "--dir", str(server.directory)])
        assert done.exit_code == 0, done.output
        modes = [line.split(" ", 2)[2] for line in done.output.splitlines()]
        assert modes == ["not serving", "down", "down"], (server.kind, done.output)
