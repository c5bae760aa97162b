"""The same scripts through Debian's zkCli.sh (ZooKeeper 3.8) against real ZooKeeper and
through `zkcompat shell` against zkcompat, compared line by line after the normalisation
of conformance_tests/test_zkcli.py (zxids and session ids as ranks, dates by shape).

zkcompat shell follows ZooKeeper 3.9's zkCli; what 3.9 prints differently from 3.8 is
rewritten explicitly here (DIFFERENCES_39), so each difference is checked, not ignored.
"""

from __future__ import annotations

import difflib
import re
import subprocess
import uuid
from pathlib import Path

import pytest

from conformance_tests.deliberate import zkcli_transcript_39
from conformance_tests.test_zkcli import (
    MARKER_COMMAND,
    SCRIPTS,
    normalise,
    run_zkcli,
    split_output,
    without_closing_event,
)
from tests.shell.helpers import SHELL_COMMAND, shell_env

pytestmark = pytest.mark.timeout(180)
SHELL_TIMEOUT_S = 60

# What the shell does beyond the conformance scripts: its own commands, usage errors,
# option parsing, quotas, recursion.
SHELL_SCRIPT = """
create $B root
create $B/a adata
create $B/a/x
create $B/b
ls -R $B
ls
get
set $B/a
create
frobnicate $B
ls -x $B
ls -sx $B
set -v $B/a data
set $B/a data -v
create -c -e $B/bad
create -t abc $B/bad
create -e -t 5 $B/bad
create -c -t 5 $B/bad
create -t 0 $B/bad
create $B/bad x junk
create relative
create $B/
create $B//x
get $B/a/
ls $B watch
delete $B/b 0
getAcl -s $B/a
setAcl -s $B/a world:anyone:cdrwa
set -s $B/a adata2
getAllChildrenNumber $B
getAllChildrenNumber
getEphemerals $B
sync $B
addWatch -m NONSENSE $B
addWatch $B extra
removewatches $B
removewatches $B -d
printwatches
printwatches off
printwatches
printwatches on
setquota $B/a
setquota -n 0 $B/a
setquota -b -1 $B/a
setquota -n x $B/a
setquota -n 2 -b 3 $B/a
setquota -n 10 $B/a
setquota -n 5 $B/missing
listquota $B/a
setquota -b 100 $B/a
listquota $B/a
setquota -n 1 $B/a/x
delquota -n $B/a
listquota $B/a
delquota $B/a
listquota $B/a
delquota $B/a
deleteall -b x $B
history
redo 1
redo 999
redo -1
deleteall $B
ls $B
config
config -c
whoami
"""
# close and connect are not in the scripts: after close every command, the `version`
# marker too, prints "Not connected", so the transcript cannot be split. test_terminal.py
# checks them.
SCRIPTS_HERE = {**SCRIPTS, "shell": SHELL_SCRIPT}

# ZooKeeper 3.9's CliCommand passes its Options to the usage of get and set, so a usage
# error prints commons-cli's option table (the blank line after it is dropped by
# split_output); get gained -b/-x and set -b, and set's syntax line was reordered.
GET_USAGE_38 = "  get [-s] [-w] path"
GET_USAGE_39 = ["  get [-s] [-w] [-b] [-x] path",
                "   -b   Output data in base64 format",
                "   -s   Print znode stats additionally",
                "   -w   Watch for changes on the znode",
                "   -x   Output data in hexdump format"]
SET_USAGE_38 = "  set [-s] [-v version] path data"
SET_USAGE_39 = ["  set path data [-s] [-v version] [-b]",
                "   -b         Supply data in base64 format",
                "   -s         Print znode stats additionally",
                "   -v <arg>   Set with an expected version"]
# The usage() list of all commands names get and set by their 3.9 syntax.
USAGE_LIST_38_39 = {"  \tget [-s] [-w] path": "  \tget [-s] [-w] [-b] [-x] path",
                    "  \tset [-s] [-v version] path data": "  \tset path data [-s] [-v version] [-b]"}
# WatchedEvent.toString gained " zxid: N" in 3.9 (ZOOKEEPER-4655): -1 for state events
# and removed-watch events, the txn's zxid for node events.
EVENT_ZXID_RE = re.compile(r"^(WatchedEvent .*) zxid: (-?\d+)$")
NODE_EVENT_TYPES = ("NodeCreated", "NodeDeleted", "NodeDataChanged", "NodeChildrenChanged")
DIFFERENCES_39 = {
    "usage-get-set": "get/set usage errors print 3.9's syntax and commons-cli option table",
    "event-zxid": "WatchedEvent lines end in ' zxid: N' in 3.9",
    "exists-needs-read": "stat of an unreadable node: see conformance_tests/deliberate.py",
}


def transcript_39(lines: list[str]) -> list[str]:
    """3.8's transcript rewritten to what 3.9's zkCli prints (DIFFERENCES_39)."""
    out: list[str] = []
    for line in zkcli_transcript_39(lines):
        if line == GET_USAGE_38:
            out.extend(GET_USAGE_39)
        elif line == SET_USAGE_38:
            out.extend(SET_USAGE_39)
        else:
            out.append(USAGE_LIST_38_39.get(line, line))
    return out


def events_38(events: list[str]) -> list[str]:
    """The shell's 3.9 event lines with their zxid checked and removed, as 3.8 prints them."""
    out = []
    for event in events:
        m = EVENT_ZXID_RE.match(event)
        assert m, f"no zxid in {event!r}"
        node_event = any(f"type:{t} " in event for t in NODE_EVENT_TYPES)
        zxid = int(m.group(2))
        assert (zxid > 0) if node_event else (zxid == -1), event
        out.append(m.group(1))
    return out


def run_shell(connect_string: str, script: str) -> tuple[list[str], list[str]]:
    """zkcompat shell with the script on stdin, split and normalised as run_zkcli does."""
    base = f"/zkcli-{uuid.uuid4().hex[:12]}"
    commands = [line.replace("$B", base) for line in script.strip().splitlines()]
    stdin = "".join(f"{command}\n{MARKER_COMMAND}\n" for command in commands) + "quit\n"
    proc = subprocess.run([*SHELL_COMMAND, "-server", connect_string], input=stdin,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=SHELL_TIMEOUT_S, env=shell_env())
    assert proc.returncode == 0, proc.stdout
    output = proc.stdout.replace(base, "$BASE")
    transcript, events = split_output(output, [c.replace(base, "$BASE") for c in commands])
    return normalise(transcript), events


def _diff(expected: list[str], actual: list[str]) -> str:
    return "\n".join(difflib.unified_diff(expected, actual, "zkCli.sh+ZooKeeper",
                                          "zkcompat shell+zkcompat", lineterm="", n=3))


@pytest.mark.parametrize("name", sorted(SCRIPTS_HERE))
def test_shell_prints_what_zkcli_prints(name: str, zk_servers, tmp_path: Path) -> None:
    expected, expected_events = run_zkcli(zk_servers.zookeeper.connect_string,
                                          SCRIPTS_HERE[name], tmp_path)
    actual, actual_events = run_shell(zk_servers.zkcompat.connect_string, SCRIPTS_HERE[name])
    text = "\n".join(expected)
    assert "zkCli stopped early" not in text, text
    expected = transcript_39(expected)
    assert actual == expected, f"output differs:\n{_diff(expected, actual)}"
    # zkCli's closing Closed event races its exit and run_zkcli drops it; the shell prints
    # it every time: compared alike.
    assert without_closing_event(events_38(actual_events)) == expected_events, (
        f"watch events differ:\n{_diff(expected_events, actual_events)}")


def test_the_shell_script_is_not_vacuous(zk_servers, tmp_path: Path) -> None:
    """The extra script makes real zkCli print what it is meant to exercise. The shell
    runs it on zkcompat too: the pair is shared by the conformance suite, whose later
    scenarios compare /zookeeper/quota's Stat, so both servers must see the same writes."""
    transcript, _ = run_zkcli(zk_servers.zookeeper.connect_string, SHELL_SCRIPT, tmp_path)
    run_shell(zk_servers.zkcompat.connect_string, SHELL_SCRIPT)
    for anchor in ("  Command not found: Command not found frobnicate",
                   "  org.apache.commons.cli.UnrecognizedOptionException: Unrecognized option: -x",
                   "  org.apache.commons.cli.MissingArgumentException: Missing argument for option: v",
                   "  Output quota for $BASE/a count=10,bytes=-1=;byteHardLimit=-1;countHardLimit=-1",
                   "  printwatches is off",
                   "  Command index out of range",
                   "  Path must start with / character"):
        assert anchor in transcript, f"missing {anchor!r} in:\n" + "\n".join(transcript)
