"""zkCli's commands (ZooKeeper 3.9.3's ZooKeeperMain and org.apache.zookeeper.cli.*): parse
a line, run it against a Session, print what zkCli prints, to the stream zkCli prints it on.
Nothing here knows about terminals; repl.py and main.py feed it lines."""

from __future__ import annotations

import base64
import binascii
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from kazoo.protocol.serialization import (
    Delete,
    Exists,
    GetACL,
    GetChildren,
    GetChildren2,
    GetData,
    SetACL,
    SetData,
    Sync,
    Transaction,
)
from kazoo.security import ACL, Id

from zkcompat import __version__
from zkcompat.jute.constants import CreateMode, OpCode
from zkcompat.shell import format as fmt
from zkcompat.shell import wire
from zkcompat.shell.options import Opt, OptionSpec, Parsed, ParseError, parse, split_command
from zkcompat.shell.session import KeeperError, Session

OPEN_ACL_UNSAFE = [ACL(31, Id("world", "anyone"))]
QUOTA_ZOOKEEPER = "/zookeeper/quota"  # Quotas.quotaZookeeper
PROC_ZOOKEEPER = "/zookeeper"
LIMIT_NODE = "zookeeper_limits"
STAT_NODE = "zookeeper_stats"
CONFIG_NODE = "/zookeeper/config"  # ZooDefs.CONFIG_NODE
TTL_MAX = 0xFFFFFFFFFF  # EphemeralType.TTL.maxValue()
DELETEALL_BATCH_DEFAULT = 1000
HISTORY_SHOWN = 10  # ZooKeeperMain's `history` shows the last 10 and itself
EXIT_OK = 0
EXIT_ERROR = 1  # CliException.DEFAULT_EXCEPTION_EXIT_CODE
EXIT_NOT_FOUND = 127  # CommandNotFoundException
JAVA_INT = re.compile(r"^[+-]?\d+$")


class CliError(Exception):
    """A CliException: its message goes to stderr and its exit code becomes the shell's."""

    def __init__(self, message: str, exit_code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class QuitShell(Exception):
    """`quit`: the caller exits with code."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def wrap(e: KeeperError) -> CliError:
    return CliError(fmt.wrapped_message(e.code, e.path))


def java_int(text: str | None, bits: int = 32) -> int:
    """Integer.parseInt / Long.parseLong; zkCli lets their exception escape, we print it."""
    if text is not None and JAVA_INT.match(text):
        value = int(text)
        if -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            return value
    raise CliError(f'java.lang.NumberFormatException: For input string: "{text}"')


@dataclass(frozen=True)
class Command:
    name: str
    option_str: str
    spec: OptionSpec
    run: Callable[[Shell, Parsed, list[str]], None]
    usage_table: bool = False  # 3.9 passes Options to CliCommand for get and set only

    def usage(self) -> str:
        text = f"{self.name} {self.option_str}"
        if self.usage_table and self.spec.options:
            text += "\n" + fmt.help_options(
                [(o.key, o.has_arg, o.description) for o in self.spec.options])
        return text


class Printer:
    """stdout and stderr lines, one lock, so event lines never split a command's line."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self._out, self._err = out, err
        self.lock = threading.RLock()

    def out(self, text: str = "", end: str = "\n") -> None:
        with self.lock:
            self._out.write(text + end)
            self._out.flush()

    def err(self, text: str, end: str = "\n") -> None:
        with self.lock:
            self._err.write(text + end)
            self._err.flush()


class Shell:
    """ZooKeeperMain: history, redo, printwatches, connect, quit, and the CliCommands."""

    def __init__(self, server: str, timeout_ms: int, read_only: bool, printer: Printer,
                 session_factory: Callable[..., Session] = Session) -> None:
        self.printer = printer
        self.timeout_ms = timeout_ms
        self.read_only = read_only
        self.session_factory = session_factory
        self.history: dict[int, str] = {}
        self.command_count = 0
        self.print_watches = True
        self.exit_code = EXIT_OK
        self.session: Session | None = None
        self.host = ""
        self.connect(server)

    # ---------------------------------------------------------------- wiring
    def on_event(self, line: str) -> None:
        if self.print_watches:
            with self.printer.lock:
                self.printer.out("\nWATCHER::")
                self.printer.out("\n" + line)

    def connect(self, host: str) -> None:
        if self.session is not None and self.session.alive:
            self.session.close()
        self.host = host
        self.session = self.session_factory(host, self.timeout_ms, self.read_only,
                                            self.on_event)

    def close(self) -> None:
        if self.session is not None and self.session.alive:
            self.session.close()

    def prompt(self) -> str:
        state = self.session.prompt_state if self.session else "CLOSED"
        return f"[zk: {self.host}({state}) {self.command_count}] "

    # ---------------------------------------------------------------- lines
    def execute_line(self, line: str) -> None:
        """executeLine: a non-empty line is numbered, remembered and run."""
        if not line.strip():
            return
        self.history[self.command_count] = line
        self.process_cmd(split_command(line))
        self.command_count += 1

    def process_cmd(self, args: list[str]) -> None:
        try:
            self.process_zk_cmd(args)
            self.exit_code = EXIT_OK
        except CliError as e:
            self.exit_code = e.exit_code
            self.printer.err(str(e))

    def usage(self) -> None:
        self.printer.err("ZooKeeper -server host:port -client-configuration properties-file "
                         "cmd args")
        for name in sorted(USAGE_LIST):
            self.printer.err(f"\t{name} {USAGE_LIST[name]}")

    def process_zk_cmd(self, args: list[str]) -> None:
        if not args:
            self.usage()
            raise CliError("No command entered")
        cmd = args[0]
        if cmd not in USAGE_LIST:
            self.usage()
            # CommandNotFoundException("Command not found " + cmd) prefixes "Command not found: "
            raise CliError(f"Command not found: Command not found {cmd}", EXIT_NOT_FOUND)
        if cmd == "quit":
            self.close()
            raise QuitShell(self.exit_code)
        if cmd == "redo" and len(args) >= 2:
            self._redo(args[1])
        elif cmd == "history":
            for i in range(self.command_count - HISTORY_SHOWN, self.command_count + 1):
                if i >= 0:
                    self.printer.out(f"{i} - {self.history.get(i)}")
        elif cmd == "printwatches":
            if len(args) == 1:
                self.printer.out(f"printwatches is {'on' if self.print_watches else 'off'}")
            else:
                self.print_watches = args[1] == "on"
        elif cmd == "connect":
            self.connect(args[1] if len(args) >= 2 else self.host)
        # Below commands all need a live connection (zkCli checks even after history etc.)
        if self.session is None or not self.session.alive:
            self.printer.out("Not connected")
            return
        command = COMMANDS.get(cmd)
        if command is not None:
            try:
                parsed = parse(command.spec, args)
            except ParseError as e:
                raise CliError(str(e)) from None
            command.run(self, parsed, args)

    def _redo(self, index_text: str) -> None:
        try:
            i = _java_decode(index_text)
        except ValueError:
            raise CliError(f'java.lang.NumberFormatException: For input string: '
                           f'"{index_text}"') from None
        if self.command_count <= i or i < 0:
            raise CliError("Command index out of range")
        line = self.history[i]
        args = split_command(line)
        if args and args[0] == "redo":
            raise CliError("No redoing redos")
        self.history[self.command_count] = line
        self.process_cmd(args)

    # ---------------------------------------------------------------- helpers
    @property
    def s(self) -> Session:
        assert self.session is not None
        return self.session

    def call(self, request, path: str | None):
        try:
            return self.s.call(request, path)
        except KeeperError as e:
            raise wrap(e) from None

    def server_path(self, path: str) -> str:
        return self.s._server_path(path)

    def print_stat(self, stat) -> None:
        for line in fmt.stat_lines(stat):
            self.printer.out(line)


def _java_decode(text: str) -> int:
    """Integer.decode: optional sign, then 0x/0X/# hex, 0 octal, or decimal."""
    m = re.match(r"^([+-]?)(0[xX]|#|0(?=\d))?(\w+)$", text)
    if not m:
        raise ValueError(text)
    base = {"0x": 16, "0X": 16, "#": 16, "0": 8}.get(m.group(2) or "", 10)
    value = int(m.group(3), base)
    return -value if m.group(1) == "-" else value


def _check_path(path: str, sequential: bool = False) -> None:
    """PathUtils.validatePath in the Java client: MalformedPathException(message)."""
    problem = fmt.validate_path(path, sequential)
    if problem:
        raise CliError(problem)


def _deprecated(shell: Shell, spec: OptionSpec, args: list[str], parsed: Parsed,
                text: str, rewrite: bool = True) -> Parsed:
    """retainCompatibility: `cmd path watch` means -w, with a warning."""
    if len(parsed.args) <= 2:
        return parsed
    if rewrite:
        args[2] = "-w"
    shell.printer.err(text)
    try:
        return parse(spec, args)
    except ParseError as e:
        raise CliError(str(e)) from None


# -------------------------------------------------------------------- the commands
LS = OptionSpec([Opt("?", False, "help"), Opt("s", False, "stat"), Opt("w", False, "watch"),
                 Opt("R", False, "recurse")])


def run_ls(shell: Shell, p: Parsed, args: list[str]) -> None:
    if p.has("?"):
        shell.printer.out("usage: ls [options] path")
        shell.printer.out(fmt.help_options([(o.key, o.has_arg, o.description)
                                            for o in LS.options]), end="")
    p = _deprecated(shell, LS, args, p,
                    "'ls path [watch]' has been deprecated. Please use 'ls [-w] path' instead.")
    if len(p.args) < 2:
        raise CliError(COMMANDS["ls"].usage())
    path = p.args[1]
    watch = shell.s.watcher if p.has("w") else None
    _check_path(path)
    if p.has("R"):
        _visit_dfs(shell, path, watch, shell.printer.out)
        return
    sp = shell.server_path(path)
    if p.has("s"):
        children, stat = shell.call(GetChildren2(sp, watch), path)
    else:
        children, stat = shell.call(GetChildren(sp, watch), path), None
    shell.printer.out("[" + ", ".join(sorted(children)) + "]")
    if stat is not None:
        shell.print_stat(stat)


def _visit_dfs(shell: Shell, path: str, watch, visit: Callable[[str], None]) -> None:
    """ZKUtil.visitSubTreeDFS: the root's getData, then children sorted, level by level."""
    shell.call(GetData(shell.server_path(path), watch), path)
    visit(path)

    def helper(node: str) -> None:
        try:
            children = sorted(shell.s.call(GetChildren(shell.server_path(node), watch), node))
        except KeeperError as e:
            if e.code == fmt.NONODE:
                return
            raise wrap(e) from None
        base = node if node == "/" else node + "/"
        for child in children:
            visit(base + child)
        for child in children:
            helper(base + child)

    helper(path)


GET = OptionSpec([Opt("s", False, "Print znode stats additionally"),
                  Opt("w", False, "Watch for changes on the znode"),
                  Opt("b", False, "Output data in base64 format"),
                  Opt("x", False, "Output data in hexdump format")])


def run_get(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["get"].usage())
    p = _deprecated(shell, GET, args, p, "'get path [watch]' has been deprecated. "
                    "Please use 'get [-s] [-w] path' instead.")
    path = p.args[1]
    _check_path(path)
    watch = shell.s.watcher if p.has("w") else None
    data, stat = shell.call(GetData(shell.server_path(path), watch), path)
    data = b"null" if data is None else data
    if p.has("x"):
        shell.printer.out(fmt.hex_dump(data))
    elif p.has("b"):
        shell.printer.out(base64.b64encode(data).decode("ascii"))
    else:
        shell.printer.out(data.decode("utf-8", errors="replace"))
    if p.has("s"):
        shell.print_stat(stat)


SET = OptionSpec([Opt("s", False, "Print znode stats additionally"),
                  Opt("v", True, "Set with an expected version"),
                  Opt("b", False, "Supply data in base64 format")])


def run_set(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 3:
        raise CliError(COMMANDS["set"].usage())
    path = p.args[1]
    if p.has("b"):
        try:
            data = base64.b64decode(p.args[2], validate=True)
        except binascii.Error as e:
            raise CliError(f"java.lang.IllegalArgumentException: {e}") from None
    else:
        data = p.args[2].encode("utf-8")
    version = java_int(p.value("v")) if p.has("v") else -1
    _check_path(path)
    stat = shell.call(SetData(shell.server_path(path), data, version), path)
    if p.has("s"):
        shell.print_stat(stat)


CREATE = OptionSpec([Opt("e", False, "ephemeral"), Opt("s", False, "sequential"),
                     Opt("c", False, "container"), Opt("t", True, "ttl")])


def parse_acl(shell: Shell, text: str) -> list[ACL]:
    """AclParser.parse: bad entries are reported on stderr and skipped."""
    acl = []
    for a in text.split(","):
        first, last = a.find(":"), a.rfind(":")
        if first == -1 or first == last:
            shell.printer.err(f"{a} does not have the form scheme:id:perm")
            continue
        perms = 0
        for ch in a[last + 1:]:
            bit = {"r": fmt.READ, "w": fmt.WRITE, "c": fmt.CREATE, "d": fmt.DELETE,
                   "a": fmt.ADMIN}.get(ch)
            if bit is None:
                shell.printer.err(f"Unknown perm type: {ch}")
            else:
                perms |= bit
        acl.append(ACL(perms, Id(a[:first], a[first + 1:last])))
    return acl


def run_create(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["create"].usage())
    e, s, c, t = p.has("e"), p.has("s"), p.has("c"), p.has("t")
    if c and (e or s):
        raise CliError("-c cannot be combined with -s or -e. Containers cannot be ephemeral "
                       "or sequential.")
    ttl = 0
    if t:
        try:
            ttl = java_int(p.value("t"), bits=64)
        except CliError:
            raise CliError("-t argument must be a long value") from None
    if t and e:
        raise CliError("TTLs cannot be used with Ephemeral znodes")
    if t and c:
        raise CliError("TTLs cannot be used with Container znodes")
    if e:
        flags = int(CreateMode.EPHEMERAL_SEQUENTIAL) if s else int(CreateMode.EPHEMERAL)
    elif s:
        flags = int(CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL) if t else int(CreateMode.PERSISTENT_SEQUENTIAL)
    elif c:
        flags = int(CreateMode.CONTAINER)
    else:
        flags = int(CreateMode.PERSISTENT_WITH_TTL) if t else int(CreateMode.PERSISTENT)
    if t and not 0 < ttl <= TTL_MAX:
        raise CliError(f"ttl must be positive and cannot be larger than: {TTL_MAX}")
    path = p.args[1]
    data = p.args[2].encode("utf-8") if len(p.args) > 2 else None
    acl = parse_acl(shell, p.args[3]) if len(p.args) > 3 else OPEN_ACL_UNSAFE
    _check_path(path, sequential=s)
    if not acl:
        # ZooKeeper.validateACL: InvalidACLException() has no path
        shell.printer.err(fmt.keeper_message(fmt.INVALIDACL, None))
        raise CliError(fmt.wrapped_message(fmt.INVALIDACL, None))
    sp = shell.server_path(path)
    if t:
        request = wire.CreateTTL(sp, data, acl, flags, ttl)
    else:
        request = wire.CreateAny(int(OpCode.CREATE_CONTAINER if c else OpCode.CREATE), sp, data, acl, flags)
    try:
        new_path, _ = shell.s.call(request, path)
    except KeeperError as err:
        if err.code == fmt.INVALIDACL:
            shell.printer.err(str(err))
        if err.code == -120:
            shell.printer.err("Unable to create ephemeral node on a local session")
        raise wrap(err) from None
    shell.printer.err(f"Created {shell.s.client.unchroot(new_path)}")


DELETE = OptionSpec([Opt("v", True, "version")])


def run_delete(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["delete"].usage())
    p = _deprecated(shell, DELETE, args, p, "'delete path [version]' has been deprecated. "
                    "Please use 'delete [-v version] path' instead.", rewrite=False)
    path = p.args[1]
    version = java_int(p.value("v")) if p.has("v") else -1
    _check_path(path)
    shell.call(Delete(shell.server_path(path), version), path)


DELETEALL = OptionSpec([Opt("b", True, "batch size")])


def run_deleteall(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["deleteall"].usage())
    try:
        batch = java_int(p.value("b")) if p.has("b") else DELETEALL_BATCH_DEFAULT
    except CliError:
        raise CliError("-b argument must be an int value") from None
    path = p.args[1]
    _check_path(path)
    # ZKUtil.listSubTreeBFS, then deletes leaves first
    tree, queue = [path], [path]
    while queue:
        node = queue.pop(0)
        for child in shell.call(GetChildren(shell.server_path(node), None), node):
            child_path = ("" if node == "/" else node) + "/" + child
            queue.append(child_path)
            tree.append(child_path)
    if batch <= 0:
        for node in reversed(tree):
            shell.call(Delete(shell.server_path(node), -1), node)
        return
    ok = True
    ops: list = []
    for i in range(len(tree) - 1, -1, -1):
        ops.append(Delete(shell.server_path(tree[i]), -1))
        if len(ops) == batch or i == 0:
            if not ok:
                break
            try:
                results = shell.s.call(Transaction(ops), tree[i])
                ok = ok and not any(isinstance(r, Exception) for r in results)
            except KeeperError:
                ok = False
            ops = []
    if not ok:
        shell.printer.err("Failed to delete some node(s) in the subtree!")


STAT = OptionSpec([Opt("w", False, "watch")])


def run_stat(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["stat"].usage())
    p = _deprecated(shell, STAT, args, p, "'stat path [watch]' has been deprecated. "
                    "Please use 'stat [-w] path' instead.")
    path = p.args[1]
    _check_path(path)
    watch = shell.s.watcher if p.has("w") else None
    stat = shell.call(Exists(shell.server_path(path), watch), path)
    if stat is None:
        raise CliError(fmt.wrapped_message(fmt.NONODE, path))
    shell.print_stat(stat)


GETACL = OptionSpec([Opt("s", False, "stats")])


def run_getacl(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["getAcl"].usage())
    path = p.args[1]
    _check_path(path)
    acl, stat = shell.call(GetACL(shell.server_path(path)), path)
    for line in fmt.acl_lines(acl):
        shell.printer.out(line)
    if p.has("s"):
        shell.print_stat(stat)


SETACL = OptionSpec([Opt("s", False, "stats"), Opt("v", True, "version"),
                     Opt("R", False, "recursive")])


def run_setacl(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 3:
        raise CliError(COMMANDS["setAcl"].usage())
    path = p.args[1]
    acl = parse_acl(shell, p.args[2])
    version = java_int(p.value("v")) if p.has("v") else -1
    _check_path(path)
    if p.has("R"):
        def set_one(node: str) -> None:
            try:
                shell.s.call(SetACL(shell.server_path(node), acl, version), node)
            except KeeperError as e:
                shell.printer.out(str(e), end="")  # zkCli uses out.print: no newline
        _visit_dfs(shell, path, None, set_one)
        return
    stat = shell.call(SetACL(shell.server_path(path), acl, version), path)
    if p.has("s"):
        shell.print_stat(stat)


NO_OPTIONS = OptionSpec([])


def run_addauth(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["addauth"].usage())
    # ZooKeeper.addAuthInfo is fire-and-forget; a refusal shows as an AuthFailed event.
    shell.s.client.add_auth_async(p.args[1], p.args[2] if len(p.args) >= 3 else "")


def run_sync(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["sync"].usage())
    path = p.args[1]
    _check_path(path)
    try:
        shell.s.call(Sync(shell.server_path(path)), path)
    except KeeperError as e:
        shell.printer.out(f"Sync has failed. rc={e.code}")
        return
    shell.printer.out("Sync is OK")


ADDWATCH = OptionSpec([Opt("m", True, "")])


def run_addwatch(shell: Shell, p: Parsed, args: list[str]) -> None:
    usage = COMMANDS["addWatch"].usage()
    if len(p.args) != 2:
        raise CliError(usage)
    mode = wire.ADD_WATCH_MODES["PERSISTENT_RECURSIVE"]
    if p.has("m"):
        name = (p.value("m") or "").upper()
        if name not in wire.ADD_WATCH_MODES:
            raise CliError(usage)
        mode = wire.ADD_WATCH_MODES[name]
    path = p.args[1]
    _check_path(path)
    shell.call(wire.AddWatch(shell.server_path(path), mode, shell.s._added), path)


REMOVEWATCHES = OptionSpec([Opt("c", False, "child watcher type"),
                            Opt("d", False, "data watcher type"),
                            Opt("p", False, "persistent watcher type"),
                            Opt("r", False, "persistent recursive watcher type"),
                            Opt("a", False, "any watcher type"),
                            Opt("l", False, "remove locally when there is no server connection")])


def run_removewatches(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["removewatches"].usage())
    path = p.args[1]
    kind = next((k for flag, k in (("c", "Children"), ("d", "Data"), ("p", "Persistent"),
                                   ("r", "PersistentRecursive"), ("a", "Any")) if p.has(flag)),
                "Any")
    _check_path(path)
    try:
        shell.s.remove_watches(path, kind, p.has("l"))
    except KeeperError as e:
        raise wrap(e) from None


def run_getephemerals(shell: Shell, p: Parsed, args: list[str]) -> None:
    path = p.args[1] if len(p.args) >= 2 else "/"
    _check_path(path)
    try:
        paths = shell.s.call(wire.GetEphemerals(path), None)
    except KeeperError as e:
        raise wrap(e) from None  # getEphemerals' KeeperException carries no path
    shell.printer.out("[" + ", ".join(paths) + "]")


def run_getallchildrennumber(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["getAllChildrenNumber"].usage())
    path = p.args[1]
    _check_path(path)
    shell.printer.out(str(shell.call(wire.GetAllChildrenNumber(shell.server_path(path)), path)))


def run_whoami(shell: Shell, p: Parsed, args: list[str]) -> None:
    infos = shell.call(wire.WhoAmI(), None)
    shell.printer.out("Auth scheme: User")
    for scheme, user in infos:
        shell.printer.out(f"{scheme}: {user}")


CONFIG = OptionSpec([Opt("s", False, "stats"), Opt("w", False, "watch"),
                     Opt("c", False, "client connection string")])


def client_config_str(config: str) -> str:
    """ConfigUtils.getClientConfigStr: "version host:port,host:port"."""
    version, clients = "", []
    for raw in config.splitlines():
        key, _, value = raw.partition("=")
        key, value = key.strip(), value.strip()
        if key == "version":
            version = value
        if key.startswith("server.") and ";" in value:
            client = value.rsplit(";", 1)[1]
            host, _, port = client.rpartition(":")
            clients.append(f"{host or '0.0.0.0'}:{port}")
    return f"{version} {','.join(clients)}"


def run_config(shell: Shell, p: Parsed, args: list[str]) -> None:
    watch = shell.s.watcher if p.has("w") else None
    data, stat = shell.call(GetData(shell.server_path(CONFIG_NODE), watch), None)
    text = "null" if data is None else data.decode("utf-8", errors="replace")
    shell.printer.out(client_config_str(text) if p.has("c") else text)
    if p.has("s"):
        shell.print_stat(stat)


def run_version(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) > 1:
        raise CliError(COMMANDS["version"].usage())
    shell.printer.out(f"ZooKeeper CLI version: zkcompat-{__version__} (zkCli of ZooKeeper 3.9)")


def run_close(shell: Shell, p: Parsed, args: list[str]) -> None:
    shell.s.close()


def run_reconfig(shell: Shell, p: Parsed, args: list[str]) -> None:
    raise CliError("reconfig is not supported by zkcompat shell")


# ------------------------------------------------------------------- quotas
def _exists(shell: Shell, path: str):
    return shell.call(Exists(shell.server_path(path), None), path)


def _create_ignoring_exists(shell: Shell, path: str, data: bytes | None) -> None:
    try:
        shell.s.call(wire.CreateAny(1, shell.server_path(path), data, OPEN_ACL_UNSAFE, 0), path)
    except KeeperError as e:
        if e.code != fmt.NODEEXISTS:
            raise wrap(e) from None


def _children(shell: Shell, path: str) -> list[str]:
    return shell.s.call(GetChildren(shell.server_path(path), None), path)


SETQUOTA = OptionSpec([Opt("n", True, "num soft quota"), Opt("b", True, "bytes soft quota"),
                       Opt("N", True, "num hard quota"), Opt("B", True, "bytes hard quota")],
                      group=("n", "b", "N", "B"), group_required=True)


def run_setquota(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["setquota"].usage())
    path = p.args[1]
    if path.startswith(QUOTA_ZOOKEEPER):
        shell.printer.err(f"cannot set a quota under the path: {QUOTA_ZOOKEEPER}")
        return
    quota = {}
    keys = {"n": ("count", 32, True), "b": ("bytes", 64, False),
            "N": ("countHardLimit", 32, True), "B": ("byteHardLimit", 64, False)}
    for flag, (key, bits, positive) in keys.items():
        if not p.has(flag):
            continue
        try:
            value = java_int(p.value(flag), bits)
        except CliError:
            shell.printer.err("NumberFormatException happens when parsing the option value")
            return
        if positive and value <= 0:
            shell.printer.err("the num quota must be greater than zero")
            return
        if not positive and value < 0:
            shell.printer.err("the bytes quota must be greater than or equal to zero")
            return
        quota[key] = value
    _check_path(path)
    if _exists(shell, path) is None:
        raise CliError(f"{path} does not exist.")
    _check_child_quota(shell, path)
    _check_parent_quota(shell, path)
    if _exists(shell, QUOTA_ZOOKEEPER) is None:
        _create_ignoring_exists(shell, PROC_ZOOKEEPER, None)
        _create_ignoring_exists(shell, QUOTA_ZOOKEEPER, None)
    quota_path = QUOTA_ZOOKEEPER
    for part in path.split("/")[1:]:
        quota_path += "/" + part
        if _exists(shell, quota_path) is None:
            _create_ignoring_exists(shell, quota_path, None)
    stat_path, limit_path = f"{quota_path}/{STAT_NODE}", f"{quota_path}/{LIMIT_NODE}"
    if _exists(shell, limit_path) is None:
        track = fmt.StatsTrack()
        track.stats = {"count": -1, "bytes": -1, "countHardLimit": -1, "byteHardLimit": -1}
        track.stats.update(quota)
        shell.call(wire.CreateAny(1, shell.server_path(limit_path), str(track).encode(),
                                  OPEN_ACL_UNSAFE, 0), limit_path)
        stats = fmt.StatsTrack("count=0,bytes=0")
        shell.call(wire.CreateAny(1, shell.server_path(stat_path), str(stats).encode(),
                                  OPEN_ACL_UNSAFE, 0), stat_path)
        _check_quota(shell, limit_path, stat_path)
    else:
        data, _ = shell.call(GetData(shell.server_path(limit_path), None), limit_path)
        track = fmt.StatsTrack(data)
        track.stats.update(quota)
        _check_quota(shell, None, stat_path, track)
        shell.call(SetData(shell.server_path(limit_path), str(track).encode(), -1), limit_path)


def _check_quota(shell: Shell, limit_path: str | None, stat_path: str,
                 quota: fmt.StatsTrack | None = None) -> None:
    if quota is None:
        quota = fmt.StatsTrack(shell.call(GetData(shell.server_path(limit_path), None),
                                          limit_path)[0])
    stats = fmt.StatsTrack(shell.call(GetData(shell.server_path(stat_path), None),
                                      stat_path)[0])
    count, nbytes = stats.get("count"), stats.get("bytes")
    if (-1 < quota.get("count") < count) or (-1 < quota.get("countHardLimit") < count):
        shell.printer.out("[Warning]: the count quota you create is less than the existing "
                          f"count:{count}")
    if (-1 < quota.get("bytes") < nbytes) or (-1 < quota.get("byteHardLimit") < nbytes):
        shell.printer.out("[Warning]: the bytes quota you create is less than the existing "
                          f"bytes:{nbytes}")


def _check_child_quota(shell: Shell, path: str) -> None:
    real = QUOTA_ZOOKEEPER + path
    try:
        shell.s.call(GetData(shell.server_path(real), None), real)
    except KeeperError as e:
        if e.code == fmt.NONODE:
            return
        raise wrap(e) from None

    def visit(node: str) -> None:
        try:
            children = _children(shell, node)
        except KeeperError:
            return
        for child in children:
            if node != QUOTA_ZOOKEEPER + path and child == LIMIT_NODE:
                raise CliError(f"{path} has a child {node[len(QUOTA_ZOOKEEPER):]} which has "
                               "a quota")

    _visit_dfs(shell, real, None, visit)


def _check_parent_quota(shell: Shell, path: str) -> None:
    quota_path = QUOTA_ZOOKEEPER
    for part in path.split("/")[1:-1]:
        quota_path += "/" + part
        try:
            children = _children(shell, quota_path)
        except KeeperError as e:
            if e.code == fmt.NONODE:
                return
            raise wrap(e) from None
        if not children:
            return
        for child in children:
            if quota_path != QUOTA_ZOOKEEPER + path and child == LIMIT_NODE:
                raise CliError(f"{path} has a parent {quota_path[len(QUOTA_ZOOKEEPER):]} "
                               "which has a quota")


def run_listquota(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["listquota"].usage())
    path = p.args[1]
    limit_path = f"{QUOTA_ZOOKEEPER}{path}/{LIMIT_NODE}"
    shell.printer.err(f"absolute path is {limit_path}")
    lines = []
    try:
        for node, label in ((limit_path, "quota"),
                            (f"{QUOTA_ZOOKEEPER}{path}/{STAT_NODE}", "stat")):
            data, _ = shell.s.call(GetData(shell.server_path(node), None), node)
            lines.append(f"Output {label} for {path} {fmt.StatsTrack(data)}")
    except KeeperError as e:
        if e.code != fmt.NONODE:
            raise wrap(e) from None
        for line in lines:
            shell.printer.out(line)
        shell.printer.err(f"quota for {path} does not exist.")
        return
    for line in lines:
        shell.printer.out(line)


DELQUOTA = OptionSpec([Opt("n", False, "num soft quota"), Opt("b", False, "bytes soft quota"),
                       Opt("N", False, "num hard quota"), Opt("B", False, "bytes hard quota")],
                      group=("n", "b", "N", "B"))


def run_delquota(shell: Shell, p: Parsed, args: list[str]) -> None:
    if len(p.args) < 2:
        raise CliError(COMMANDS["delquota"].usage())
    path = p.args[1]
    parent, limit_path = QUOTA_ZOOKEEPER + path, f"{QUOTA_ZOOKEEPER}{path}/{LIMIT_NODE}"
    try:
        if shell.s.call(Exists(shell.server_path(limit_path), None), limit_path) is None:
            shell.printer.out(f"Quota does not exist for {path}")
            return
        data, _ = shell.s.call(GetData(shell.server_path(limit_path), None), limit_path)
        flags = [f for f in "nbNB" if p.has(f)]
        if not flags:
            for child in _children(shell, parent):
                shell.s.call(Delete(shell.server_path(f"{parent}/{child}"), -1), parent)
            node = parent
            while node != QUOTA_ZOOKEEPER and not _children(shell, node):
                shell.s.call(Delete(shell.server_path(node), -1), node)
                node = node[:node.rfind("/")]
            return
        track = fmt.StatsTrack(data)
        for f in flags:
            track.stats[{"n": "count", "b": "bytes", "N": "countHardLimit",
                         "B": "byteHardLimit"}[f]] = -1
        shell.s.call(SetData(shell.server_path(limit_path), str(track).encode(), -1), limit_path)
    except KeeperError as e:
        if e.code == fmt.NONODE:
            shell.printer.err(f"quota for {path} does not exist.")
            return
        raise wrap(e) from None


COMMANDS: dict[str, Command] = {c.name: c for c in [
    Command("ls", "[-s] [-w] [-R] path", LS, run_ls),
    Command("get", "[-s] [-w] [-b] [-x] path", GET, run_get, usage_table=True),
    Command("set", "path data [-s] [-v version] [-b]", SET, run_set, usage_table=True),
    Command("create", "[-s] [-e] [-c] [-t ttl] path [data] [acl]", CREATE, run_create),
    Command("delete", "[-v version] path", DELETE, run_delete),
    Command("deleteall", "path [-b batch size]", DELETEALL, run_deleteall),
    Command("stat", "[-w] path", STAT, run_stat),
    Command("getAcl", "[-s] path", GETACL, run_getacl),
    Command("setAcl", "[-s] [-v version] [-R] path acl", SETACL, run_setacl),
    Command("addauth", "scheme auth", NO_OPTIONS, run_addauth),
    Command("sync", "path", NO_OPTIONS, run_sync),
    Command("addWatch", "[-m mode] path # optional mode is one of [PERSISTENT, "
            "PERSISTENT_RECURSIVE] - default is PERSISTENT_RECURSIVE", ADDWATCH, run_addwatch),
    Command("removewatches", "path [-c|-d|-a] [-l]", REMOVEWATCHES, run_removewatches),
    Command("getEphemerals", "path", NO_OPTIONS, run_getephemerals),
    Command("getAllChildrenNumber", "path", NO_OPTIONS, run_getallchildrennumber),
    Command("whoami", "", NO_OPTIONS, run_whoami),
    Command("config", "[-c] [-w] [-s]", CONFIG, run_config),
    Command("setquota", "-n|-b|-N|-B val path", SETQUOTA, run_setquota),
    Command("listquota", "path", NO_OPTIONS, run_listquota),
    Command("delquota", "[-n|-b|-N|-B] path", DELQUOTA, run_delquota),
    Command("version", "", NO_OPTIONS, run_version),
    Command("close", "", NO_OPTIONS, run_close),
    Command("reconfig", "[-s] [-v version] [[-file path] | [-members serverID=host:port1:"
            "port2;port3[,...]*]] | [-add serverId=host:port1:port2;port3[,...]]* "
            "[-remove serverId[,...]*]", OptionSpec([]), run_reconfig),
]}
# ZooKeeperMain.commandMap: the CliCommands plus the shell's own
USAGE_LIST: dict[str, str] = {
    **{name: c.option_str for name, c in COMMANDS.items()},
    "connect": "host:port", "history": "", "redo": "cmdno", "printwatches": "on|off",
    "quit": "",
}
