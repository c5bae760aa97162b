"""Unit tests of the shell's parsing and formatting, each against what ZooKeeper 3.9.3's
Java prints, and of ZooKeeperMain's own commands on a stand-in session."""

from __future__ import annotations

import io
import time

import pytest
from kazoo.protocol.states import ZnodeStat
from kazoo.security import ACL, Id

from zkcompat.shell import format as fmt
from zkcompat.shell.commands import COMMANDS, Printer, QuitShell, Shell, _java_decode
from zkcompat.shell.main import parse_options
from zkcompat.shell.options import ParseError, parse, split_command
from zkcompat.shell.repl import complete_words
from zkcompat.shell.session import KeeperError

pytestmark = pytest.mark.timeout(30)


# ------------------------------------------------------------------ splitting, options
@pytest.mark.parametrize(("line", "args"), [
    ("ls /a", ["ls", "/a"]),
    ("  set  /a   'two words' ", ["set", "/a", "two words"]),
    ('create /a "x y" world:anyone:r', ["create", "/a", "x y", "world:anyone:r"]),
    ("set /a it's", ["set", "/a", "it's"]),  # a quote inside a word stays
    ('get "unbalanced', ["get", "unbalanced"]),  # Matcher.find skips the lone quote
])
def test_split_command_as_parse_command(line: str, args: list[str]) -> None:
    assert split_command(line) == args


def test_options_anywhere_and_concatenated() -> None:
    spec = COMMANDS["set"].spec
    p = parse(spec, ["set", "/a", "data", "-v", "3", "-s"])
    assert p.args == ["set", "/a", "data"] and p.value("v") == "3" and p.has("s")
    p = parse(spec, ["set", "-sv7", "/a", "d"])
    assert p.has("s") and p.value("v") == "7"
    assert parse(spec, ["set", "-v", "-1", "/a", "d"]).value("v") == "-1"  # a negative value


@pytest.mark.parametrize(("command", "tokens", "message"), [
    ("ls", ["ls", "-x", "/"], "UnrecognizedOptionException: Unrecognized option: -x"),
    ("ls", ["ls", "--long", "/"], "UnrecognizedOptionException: Unrecognized option: --long"),
    ("set", ["set", "/a", "d", "-v"], "MissingArgumentException: Missing argument for option: v"),
    ("set", ["set", "-v", "-s", "/a", "d"],
     "MissingArgumentException: Missing argument for option: v"),
    ("setquota", ["setquota", "/a"], "MissingOptionException: Missing required option: "
     "[-n num soft quota, -b bytes soft quota, -N num hard quota, -B bytes hard quota]"),
    ("setquota", ["setquota", "-n", "1", "-b", "2", "/a"], "AlreadySelectedException: The "
     "option 'b' was specified but an option from this group has already been selected: 'n'"),
])
def test_option_errors_as_commons_cli(command: str, tokens: list[str], message: str) -> None:
    with pytest.raises(ParseError) as e:
        parse(COMMANDS[command].spec, tokens)
    assert str(e.value) == f"org.apache.commons.cli.{message}"


def test_zkcli_command_line_options() -> None:
    opts = parse_options(["-server", "h:1", "-timeout", "5", "-r", "ls", "-s", "/"])
    assert (opts.server, opts.timeout, opts.read_only) == ("h:1", "5", True)
    assert opts.command == ["ls", "-s", "/"]
    assert parse_options([]).server == "localhost:2181"


def test_integer_decode_as_java() -> None:
    assert [_java_decode(t) for t in ("10", "0x10", "#10", "010", "-3")] == [10, 16, 16, 8, -3]
    with pytest.raises(ValueError):
        _java_decode("ten")


# ------------------------------------------------------------------ formats
def test_usage_strings_of_39() -> None:
    assert COMMANDS["get"].usage() == (
        "get [-s] [-w] [-b] [-x] path\n"
        " -b   Output data in base64 format\n"
        " -s   Print znode stats additionally\n"
        " -w   Watch for changes on the znode\n"
        " -x   Output data in hexdump format\n")
    assert COMMANDS["set"].usage().splitlines()[3] == " -v <arg>   Set with an expected version"
    assert COMMANDS["ls"].usage() == "ls [-s] [-w] [-R] path"


def test_stat_lines_as_stat_printer(monkeypatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    stat = ZnodeStat(czxid=0x100000002, mzxid=3, ctime=0, mtime=1764678528000, version=2,
                     cversion=-2, aversion=1, ephemeralOwner=-1, dataLength=5,
                     numChildren=0, pzxid=0x10)
    assert fmt.stat_lines(stat) == [
        "cZxid = 0x100000002", "ctime = Thu Jan 01 00:00:00 UTC 1970", "mZxid = 0x3",
        "mtime = Tue Dec 02 12:28:48 UTC 2025", "pZxid = 0x10", "cversion = -2",
        "dataVersion = 2", "aclVersion = 1", "ephemeralOwner = 0xffffffffffffffff",
        "dataLength = 5", "numChildren = 0"]
    monkeypatch.undo()
    time.tzset()


def test_acl_lines_as_jute_to_string() -> None:
    acl = [ACL(31, Id("world", "anyone")), ACL(1 | 4, Id("ip", "10.0.0.0/8,x%"))]
    assert fmt.acl_lines(acl) == ["'world,'anyone", ": cdrwa", "'ip,'10.0.0.0/8%2Cx%25",
                                  ": cr"]


def test_error_messages() -> None:
    assert fmt.wrapped_message(-101, "/x") == "Node does not exist: /x"
    assert fmt.wrapped_message(-103, "/x") == "version No is not valid : /x"
    assert fmt.wrapped_message(-114, None) == "Acl is not valid : null"
    assert fmt.wrapped_message(-6, "/t") == "KeeperErrorCode = Unimplemented for /t"
    assert fmt.keeper_message(-121, "/w") == "KeeperErrorCode = No such watcher for /w"
    assert fmt.keeper_message(-114, None) == "KeeperErrorCode = InvalidACL"


def test_event_line_of_39() -> None:
    assert (fmt.watched_event("SyncConnected", "NodeDataChanged", "/x", 12)
            == "WatchedEvent state:SyncConnected type:NodeDataChanged path:/x zxid: 12")
    assert fmt.watched_event("Closed", "None", None, -1).endswith("path:null zxid: -1")


def test_hex_dump_as_netty() -> None:
    assert fmt.hex_dump(b"") == ""
    dump = fmt.hex_dump(b"0123456789abcdef\x00hi").split("\n")
    assert dump == [
        "         +-------------------------------------------------+",
        "         |  0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f |",
        "+--------+-------------------------------------------------+----------------+",
        "|00000000| 30 31 32 33 34 35 36 37 38 39 61 62 63 64 65 66 |0123456789abcdef|",
        "|00000010| 00 68 69                                        |.hi             |",
        "+--------+-------------------------------------------------+----------------+"]


@pytest.mark.parametrize(("path", "sequential", "problem"), [
    ("/a/b", False, None),
    ("/", False, None),
    ("/a/", True, None),  # a sequential parent/ prefix is fine
    ("a", False, "Path must start with / character"),
    ("", False, "Path length must be > 0"),
    ("/a/", False, "Path must not end with / character"),
    ("/a//b", False, 'Invalid path string "/a//b" caused by empty node name specified @3'),
    ("/a/../b", False, 'Invalid path string "/a/../b" caused by relative paths not allowed @4'),
    ("/a/./b", False, 'Invalid path string "/a/./b" caused by relative paths not allowed @3'),
    ("/a\u0001", False, 'Invalid path string "/a\u0001" caused by invalid character @2'),
])
def test_validate_path_as_path_utils(path: str, sequential: bool, problem: str | None) -> None:
    assert fmt.validate_path(path, sequential) == problem


def test_stats_track_round_trip() -> None:
    track = fmt.StatsTrack("count=5,bytes=-1=;byteHardLimit=-1;countHardLimit=7")
    assert track.get("count") == 5 and track.get("countHardLimit") == 7
    assert str(track) == "count=5,bytes=-1=;byteHardLimit=-1;countHardLimit=7"
    assert str(fmt.StatsTrack("count=0,bytes=0")) == "count=0,bytes=0"


# ------------------------------------------------------------------ ZooKeeperMain
class FakeSession:
    """Stands in for Session: answers GetChildren from a dict, records nothing else."""

    def __init__(self, hosts, timeout_ms, read_only, on_event, tree=None) -> None:
        self.hosts, self.on_event = hosts, on_event
        self.tree = tree or {"/": ["apple", "apricot", "zoo"], "/apple": ["core"]}
        self.alive = True
        self.prompt_state = "CONNECTED"
        self.watcher = None

    def _server_path(self, path: str) -> str:
        return path

    def call(self, request, path=None):
        if request.path not in self.tree:
            raise KeeperError(-101, path)
        return self.tree[request.path]

    def close(self) -> None:
        self.alive = False
        self.on_event(fmt.watched_event("Closed", "None", None, -1))


def make_shell() -> tuple[Shell, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    shell = Shell("h:1", 1000, False, Printer(out, err), session_factory=FakeSession)
    return shell, out, err


def test_history_redo_and_printwatches() -> None:
    shell, out, err = make_shell()
    shell.execute_line("ls /")
    shell.execute_line("   ")  # not numbered
    shell.execute_line("printwatches off")
    shell.execute_line("printwatches")
    shell.execute_line("redo 0")
    shell.execute_line("redo 9")
    shell.execute_line("history")
    lines = out.getvalue().splitlines()
    assert lines.count("[apple, apricot, zoo]") == 2  # ls and its redo
    assert "printwatches is off" in lines
    assert lines[-6:] == ["0 - ls /", "1 - printwatches off", "2 - printwatches",
                          "3 - ls /", "4 - redo 9", "5 - history"]
    assert "Command index out of range" in err.getvalue()
    assert shell.prompt() == "[zk: h:1(CONNECTED) 6] "


def test_not_connected_after_close_and_quit() -> None:
    shell, out, err = make_shell()
    shell.execute_line("close")
    assert "WatchedEvent state:Closed type:None path:null zxid: -1" in out.getvalue()
    shell.execute_line("ls /")
    assert out.getvalue().rstrip().endswith("Not connected")
    shell.execute_line("nosuch")
    assert shell.exit_code == 127
    with pytest.raises(QuitShell):
        shell.execute_line("quit")


def test_usage_and_path_errors() -> None:
    shell, _, err = make_shell()
    shell.execute_line("ls")
    shell.execute_line("ls relative")
    shell.execute_line("ls /missing")
    assert err.getvalue().splitlines() == ["ls [-s] [-w] [-R] path",
                                           "Path must start with / character",
                                           "Node does not exist: /missing"]
    assert shell.exit_code == 1


def test_completion_of_commands_and_paths() -> None:
    shell, _, _ = make_shell()
    assert [c for c, _ in complete_words(shell, "get")] == ["get", "getAcl",
                                                            "getAllChildrenNumber",
                                                            "getEphemerals"]
    assert list(complete_words(shell, "ls /ap")) == [("/apple", -3), ("/apricot", -3)]
    assert list(complete_words(shell, "get -s /apple/")) == [("/apple/core", -7)]
    assert list(complete_words(shell, "ls /none/x")) == []
    assert list(complete_words(shell, "create /a da")) == []


def test_zkcompat_starts_without_importing_kazoo() -> None:
    """kazoo is the shell's client library, not the server's: `zkcompat serve` in an image
    without it must still start."""
    import subprocess
    import sys

    from tests.shell.helpers import shell_env

    code = "import sys, zkcompat.cli.main; sys.exit(1 if 'kazoo' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], env=shell_env(),
                          timeout=60).returncode == 0
