"""zkCli.sh, ZooKeeper's own shell, scripted on stdin against both servers.

Each script is fed to one zkCli.sh session; a `version` command after every
command marks where that command's output ends, so the transcript pairs every
command with what it printed. Zxids, times and session ids are normalised;
watch notifications (printed by the client's event thread, at any point) are
compared as their own ordered list.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from conformance_tests.deliberate import zkcli_transcript_39

ZKCLI_CANDIDATES = ("/usr/share/zookeeper/bin/zkCli.sh", "/opt/zookeeper/bin/zkCli.sh")
ZKCLI_TIMEOUT_S = 60
MARKER_COMMAND = "version"
MARKER_RE = re.compile(r"^ZooKeeper CLI version: ")
# With JLine on the classpath zkCli prints a prompt before each command's output.
PROMPT_RE = re.compile(r"^(\[zk: [^\]]*\] ?)+")
LOG_LINE_RES = (
    re.compile(r"^SLF4J: "),
    re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d"),  # log4j/logback timestamps
    re.compile(r"^\[[^\]]+\] (TRACE|DEBUG|INFO|WARN|ERROR) "),  # slf4j-simple
    re.compile(r"^log4j:"),
)
BANNER_LINES = {"Welcome to ZooKeeper!", "JLine support is disabled", "JLine support is enabled"}
ZXID_LINE_RE = re.compile(r"^([cmp]Zxid) = (0x[0-9a-f]+)$")
TIME_LINE_RE = re.compile(r"^([cm]time) = (.+)$")
# java.util.Date.toString(): "Sun Nov 29 14:08:32 UTC 2026"
JAVA_DATE_RE = re.compile(r"^[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ \d{4}$")
OWNER_LINE_RE = re.compile(r"^ephemeralOwner = (0x[0-9a-f]+)$")
LIST_LINE_RE = re.compile(r"^\[(.*)\]$")
# Commands whose output order ZooKeeper does not define (HashSet iteration, auth set).
UNORDERED_COMMANDS = ("ls -R", "getEphemerals", "whoami")

CRUD_SCRIPT = """
create $B root
create $B/p pdata
create -e $B/e edata
create -s $B/s- sdata
create -s -e $B/s- sedata
create -c $B/c
create $B/empty
ls $B
ls -s $B
ls -R $B
get $B/p
get -s $B/p
get -s $B/e
get -s $B/empty
set $B/p v1
set -s $B/p v2
set -v 2 $B/p v3
stat $B/p
stat $B
getAllChildrenNumber $B
getEphemerals $B
sync $B
delete -v 3 $B/p
create $B/tree t
create $B/tree/a
create $B/tree/a/b
create $B/tree/c
ls -R $B/tree
deleteall $B/tree
delete $B/c
ls -s $B
"""

ERRORS_SCRIPT = """
create $B root
create $B/p pdata
create -e $B/e edata
create $B/p dup
create $B/none/x
create $B/e/x
create -t 1000 $B/ttl
ls $B/missing
get $B/missing
set $B/missing x
stat $B/missing
delete $B/missing
delete $B
deleteall $B/missing
set -v 7 $B/p stale
delete -v 7 $B/p
setAcl -v 9 $B world:anyone:cdrwa
getAcl $B/missing
create $B/creator x auth::cdrwa
"""

ACL_SCRIPT = """
create $B root
getAcl $B
getAcl -s $B
create $B/ro rodata world:anyone:r
getAcl $B/ro
set $B/ro nope
get $B/ro
create $B/ro/kid x
delete $B/ro
setAcl $B/ro world:anyone:cdrwa
setAcl -v 5 $B world:anyone:cdrwa
setAcl -v 0 $B world:anyone:cdrw
getAcl -s $B
setAcl -v 1 $B world:anyone:cdrwa
create $B/ip ipdata ip:127.0.0.1:cdrwa
get $B/ip
create $B/cidr cidrdata ip:127.0.0.0/8:r
get $B/cidr
set $B/cidr nope
create $B/other otherdata ip:10.1.2.3:cdrwa
get $B/other
stat $B/other
whoami
addauth digest bob:pw
whoami
create $B/sec secret auth::cdrwa
getAcl $B/sec
get $B/sec
create $B/carol carol digest:carol:RffyCdXXV1Js0ywLAoP5/l25yKs=:cdrwa
get $B/carol
getAcl $B/carol
create $B/mixed mixed digest:carol:RffyCdXXV1Js0ywLAoP5/l25yKs=:cdrwa,world:anyone:r
get $B/mixed
getAcl $B/mixed
set $B/mixed nope
addauth digest carol:pw
get $B/carol
set $B/mixed yes
get $B/mixed
getAcl $B/mixed
create $B/tree t
create $B/tree/a a
create $B/tree/b b
setAcl -R $B/tree world:anyone:r
getAcl $B/tree/a
getAcl $B/tree/b
create $B/tree/a/x x
create $B/zero x world:anyone:zz
getAcl $B/zero
get $B/zero
"""

WATCH_SCRIPT = """
create $B root
create $B/w w0
get -w $B/w
set $B/w w1
set $B/w w2
ls -w $B
create $B/k k
create $B/k2 k
stat -w $B/k
delete $B/k
addWatch $B/w
set $B/w w3
set $B/w w4
removewatches $B/w
set $B/w w5
"""

SCRIPTS = {
    "crud": CRUD_SCRIPT,
    "errors": ERRORS_SCRIPT,
    "acl": ACL_SCRIPT,
    "watch": WATCH_SCRIPT,
}


def zkcli_path() -> str:
    for candidate in ZKCLI_CANDIDATES:
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("zkCli.sh")
    if found is None:
        pytest.fail("zkCli.sh not found: install ZooKeeper (scripts/install-zookeeper)")
    return found


def run_zkcli(connect_string: str, script: str, workdir: Path) -> tuple[list[str], list[str]]:
    """Runs one zkCli.sh session; returns (per-command transcript, watch events)."""
    if shutil.which("java") is None:
        pytest.fail("java not found on PATH: zkCli.sh needs a JRE")
    base = f"/zkcli-{uuid.uuid4().hex[:12]}"
    commands = [line.replace("$B", base) for line in script.strip().splitlines()]
    stdin = "".join(f"{command}\n{MARKER_COMMAND}\n" for command in commands) + "quit\n"
    log4j = workdir / "log4j.properties"
    log4j.write_text("log4j.rootLogger=OFF\n")
    env = dict(os.environ)
    # Keep a logging binding, if this ZooKeeper ships one, off stdout.
    env["CLIENT_JVMFLAGS"] = (
        f"-Dlog4j.configuration=file:{log4j} -Dzookeeper.root.logger=OFF "
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=off"
    )
    env["ZOO_LOG_DIR"] = str(workdir)
    proc = subprocess.run(
        [zkcli_path(), "-server", connect_string],
        input=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # error messages go to stderr; keep them in order
        text=True,
        timeout=ZKCLI_TIMEOUT_S,
        env=env,
        cwd=workdir,
    )
    output = proc.stdout.replace(base, "$BASE")
    transcript, events = split_output(output, [c.replace(base, "$BASE") for c in commands])
    return normalise(transcript), without_closing_event(events)


CLOSED_EVENT = "WatchedEvent state:Closed type:None path:null"


def without_closing_event(events: list[str]) -> list[str]:
    """Drops the Closed notification that `quit` may or may not print.

    zkCli's quit closes the handle and calls System.exit at once; the Closed
    event is printed by the client's event thread, which races the exit. It
    shows up in some runs against ZooKeeper and zkcompat alike, so it is no
    evidence either way. A Closed event anywhere but last still counts.
    """
    if events and events[-1] == CLOSED_EVENT:
        return events[:-1]
    return events


def split_output(output: str, commands: list[str]) -> tuple[list[str], list[str]]:
    """Pairs each command with its output lines; pulls out watch notifications."""
    events: list[str] = []
    blocks: list[list[str]] = [[]]
    for raw in output.splitlines():
        line = PROMPT_RE.sub("", raw).rstrip()
        if not line or line == "WATCHER::" or line in BANNER_LINES:
            continue
        if line.startswith("Connecting to "):
            continue
        if any(r.match(line) for r in LOG_LINE_RES):
            continue
        if line.startswith("WatchedEvent "):
            events.append(line)
            continue
        if MARKER_RE.match(line):
            blocks.append([])
            continue
        blocks[-1].append(line)
    transcript: list[str] = []
    for i, command in enumerate(commands):
        transcript.append(f"> {command}")
        lines = blocks[i] if i < len(blocks) else ["<no output marker: zkCli stopped early>"]
        if command.startswith(UNORDERED_COMMANDS):
            lines = sorted(lines)
        transcript.extend(f"  {line}" for line in lines)
    leftover = [line for block in blocks[len(commands) :] for line in block]
    if leftover:
        transcript.append("> (after the last command)")
        transcript.extend(f"  {line}" for line in leftover)
    return transcript, events


def normalise(transcript: list[str]) -> list[str]:
    """Zxids and session ids become ranks; dates are checked for shape and dropped."""
    zxids: set[int] = set()
    owners: set[int] = set()
    for line in transcript:
        body = line.strip()
        if m := ZXID_LINE_RE.match(body):
            zxids.add(int(m.group(2), 16))
        elif (m := OWNER_LINE_RE.match(body)) and int(m.group(1), 16) != 0:
            owners.add(int(m.group(1), 16))
    zxid_rank = {z: i for i, z in enumerate(sorted(zxids), start=1)}
    owner_rank = {o: i for i, o in enumerate(sorted(owners), start=1)}
    result = []
    for line in transcript:
        indent, body = line[: len(line) - len(line.lstrip())], line.strip()
        if m := ZXID_LINE_RE.match(body):
            body = f"{m.group(1)} = zx#{zxid_rank[int(m.group(2), 16)]}"
        elif m := TIME_LINE_RE.match(body):
            shape = "T" if JAVA_DATE_RE.match(m.group(2)) else f"not a date: {m.group(2)!r}"
            body = f"{m.group(1)} = {shape}"
        elif (m := OWNER_LINE_RE.match(body)) and int(m.group(1), 16) != 0:
            body = f"ephemeralOwner = session#{owner_rank[int(m.group(1), 16)]}"
        elif (m := LIST_LINE_RE.match(body)) and not body.startswith("[zk:"):
            body = "[" + ", ".join(sorted(filter(None, m.group(1).split(", ")))) + "]"
        result.append(indent + body)
    return result


def _diff(expected: list[str], actual: list[str], reference: str, candidate: str) -> str:
    return "\n".join(difflib.unified_diff(expected, actual, reference, candidate, lineterm="", n=3))


# What ZooKeeper 3.8 prints for a few commands of each script: keeps the
# scripts honest (a zkCli that stopped reading stdin would match itself).
ANCHORS = {
    "crud": [
        "> ls $BASE",
        "  [c, e, empty, p, s-0000000002, s-0000000003]",
        "  Created $BASE/s-0000000003",
    ],
    "errors": [
        "  Node already exists: $BASE/p",
        "  Ephemerals cannot have children: $BASE/e/x",
        "  KeeperErrorCode = Unimplemented for $BASE/ttl",
        "  version No is not valid : $BASE/p",
    ],
    "acl": [
        "  Insufficient permission : $BASE/ro",
        "  digest: bob",
        "  'digest,'bob:ikIaKsbtGweaHnb/jKn7OHqbunM=",
        # ZOOKEEPER-3260 / CVE-2019-0201: digests are redacted without ADMIN.
        "  'digest,'carol:x",
    ],
    "watch": ["  w0", "  [w]"],
}
# The watch script's notifications, one-shot and persistent, in order.
WATCH_EVENTS = [
    "WatchedEvent state:SyncConnected type:None path:null",
    "WatchedEvent state:SyncConnected type:NodeDataChanged path:$BASE/w",
    "WatchedEvent state:SyncConnected type:NodeChildrenChanged path:$BASE",
    "WatchedEvent state:SyncConnected type:NodeDeleted path:$BASE/k",
    "WatchedEvent state:SyncConnected type:NodeDataChanged path:$BASE/w",
    "WatchedEvent state:SyncConnected type:NodeDataChanged path:$BASE/w",
    "WatchedEvent state:SyncConnected type:PersistentWatchRemoved path:$BASE/w",
]


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_zkcli_script_against_zookeeper(name: str, zookeeper, tmp_path: Path) -> None:
    transcript, events = run_zkcli(zookeeper.connect_string, SCRIPTS[name], tmp_path)
    text = "\n".join(transcript)
    assert "zkCli stopped early" not in text, text
    assert "not a date" not in text, text
    for anchor in ANCHORS[name]:
        assert anchor in transcript, f"missing {anchor!r} in:\n{text}"
    assert events[0] == "WatchedEvent state:SyncConnected type:None path:null", events
    if name == "watch":
        assert events == WATCH_EVENTS


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_zkcli_script_zkcompat_matches_zookeeper(
    name: str, conformance_pair, tmp_path: Path
) -> None:
    """conformance_pair is (ZooKeeper, zkcompat); (ZooKeeper, ZooKeeper) under CONFORMANCE_SELFTEST."""
    reference, candidate = conformance_pair
    (tmp_path / "reference").mkdir()
    (tmp_path / "candidate").mkdir()
    expected, expected_events = run_zkcli(
        reference.connect_string, SCRIPTS[name], tmp_path / "reference"
    )
    actual, actual_events = run_zkcli(
        candidate.connect_string, SCRIPTS[name], tmp_path / "candidate"
    )
    kinds = (reference.kind, candidate.kind)
    if candidate.kind == "zkcompat":
        expected = zkcli_transcript_39(expected)  # see deliberate.EXISTS_NEEDS_READ
    assert actual == expected, f"zkCli output differs:\n{_diff(expected, actual, *kinds)}"
    assert actual_events == expected_events, (
        f"zkCli watch notifications differ:\n{_diff(expected_events, actual_events, *kinds)}"
    )
