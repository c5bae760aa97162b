"""ZooKeeperMain: the Shell that numbers, remembers and runs lines (history, redo,
printwatches, connect, quit), and COMMANDS, zkCli's commands gathered from their families."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import TextIO

from zkcompat.shell import (
    acl_commands,
    quota_commands,
    read_commands,
    session_commands,
    watch_commands,
    write_commands,
)
from zkcompat.shell import format as fmt
from zkcompat.shell.cli_command import CliError, Command, wrap
from zkcompat.shell.options import ParseError, parse, split_command
from zkcompat.shell.session import KeeperError, Session

HISTORY_SHOWN = 10  # ZooKeeperMain's `history` shows the last 10 and itself
EXIT_OK = 0
EXIT_NOT_FOUND = 127  # CommandNotFoundException


class QuitShell(Exception):
    """`quit`: the caller exits with code."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


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


# zkCli's CliCommands by name; each family's module declares its own.
COMMANDS: dict[str, Command] = {
    **read_commands.COMMANDS, **write_commands.COMMANDS, **acl_commands.COMMANDS,
    **watch_commands.COMMANDS, **session_commands.COMMANDS, **quota_commands.COMMANDS,
}
# ZooKeeperMain.commandMap: the CliCommands plus the shell's own
USAGE_LIST: dict[str, str] = {
    **{name: c.option_str for name, c in COMMANDS.items()},
    "connect": "host:port", "history": "", "redo": "cmdno", "printwatches": "on|off",
    "quit": "",
}
