"""`zkcompat shell`: zkCli.sh's command line (-server, -timeout, -r, -waitforconnection,
then an optional command), one command, commands on stdin, or the interactive loop."""

from __future__ import annotations

import sys

import click

SERVER_DEFAULT = "localhost:2181"  # ZooKeeperMain.MyCommandOptions
TIMEOUT_DEFAULT_MS = 30000
WITH_VALUE = {"-server": "server", "-timeout": "timeout", "-client-configuration": "config"}
HELP_OPTIONS = ("--help", "-h")  # not zkCli's (it ignores both and connects): ours
HELP = f"""\
Usage: zkcompat shell [-server host:port[,host:port...][/chroot]] [-timeout ms] [-r]
                      [-waitforconnection] [command [args...]]

A zkCli.sh-compatible ZooKeeper shell. With a command, runs it and exits: status 0, 1 on
an error (ConnectionLoss included: a server that cannot be reached fails the command at
once, as zkCli's), 127 for an unknown command. Without one, reads commands from the
terminal (history, tab completion) or from stdin. `help` in the shell lists the commands.

Options, as zkCli.sh's:
  -server host:port,...   the servers to connect to (default {SERVER_DEFAULT})
  -timeout ms             the session timeout (default {TIMEOUT_DEFAULT_MS})
  -r                      read-only: a server without a quorum may serve the session
  -waitforconnection      wait up to the timeout for the session before the command
  -h, --help              print this and exit
"""


class Options:
    def __init__(self) -> None:
        self.help = False
        self.server = SERVER_DEFAULT
        self.timeout = str(TIMEOUT_DEFAULT_MS)
        self.read_only = False
        self.wait_for_connection = False
        self.config: str | None = None
        self.command: list[str] = []


def parse_options(argv: list[str]) -> Options:
    """MyCommandOptions.parseOptions: flags until the first word without a dash."""
    opts = Options()
    it = iter(argv)
    for opt in it:
        if opt in WITH_VALUE:
            try:
                setattr(opts, WITH_VALUE[opt], next(it))
            except StopIteration:
                raise click.UsageError(f"Error: no argument found for option {opt}") from None
        elif opt == "-r":
            opts.read_only = True
        elif opt == "-waitforconnection":
            opts.wait_for_connection = True
        elif opt in HELP_OPTIONS:
            opts.help = True
        if not opt.startswith("-"):
            opts.command = [opt, *it]
            break
    return opts


def run(argv: list[str], stdin=None, stdout=None, stderr=None) -> int:
    # kazoo is imported here, not at `zkcompat` start-up: `serve` must not need it.
    from zkcompat.shell.commands import Printer, QuitShell, Shell  # noqa: PLC0415

    stdin = stdin or sys.stdin
    printer = Printer(stdout or sys.stdout, stderr or sys.stderr)
    opts = parse_options(argv)
    if opts.help:
        (stdout or sys.stdout).write(HELP)
        return 0
    if opts.config is not None:
        printer.err("-client-configuration is not supported by zkcompat shell")
        return 2
    try:
        timeout_ms = int(opts.timeout)
    except ValueError:
        printer.err(f'java.lang.NumberFormatException: For input string: "{opts.timeout}"')
        return 1
    printer.out(f"Connecting to {opts.server}")
    shell = Shell(opts.server, timeout_ms, opts.read_only, printer)
    if opts.wait_for_connection and not shell.s.client._live.wait(timeout_ms / 1000.0):
        shell.close()
        printer.err("org.apache.zookeeper.KeeperException$ConnectionLossException: "
                    "KeeperErrorCode = ConnectionLoss")
        return 1
    if opts.command:
        try:
            shell.process_cmd(opts.command)
        except QuitShell as q:
            return q.code
        # zkCli exits without closing: no Closed event is printed. The session is closed
        # all the same, so that its ephemerals do not outlive the command by a timeout.
        shell.print_watches = False
        shell.close()
        return shell.exit_code
    printer.out("Welcome to ZooKeeper!")
    if stdin.isatty() and (stdout or sys.stdout).isatty():
        from zkcompat.shell import repl  # noqa: PLC0415

        return repl.run(shell)
    for raw in stdin:
        try:
            shell.execute_line(raw.rstrip("\r\n"))
        except QuitShell as q:
            return q.code
    shell.close()
    return shell.exit_code


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                 "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def shell(args) -> None:
    """A zkCli-style shell: zkcompat shell [-server host:port] [-timeout ms] [-r] [cmd args]
    (--help for more)."""
    raise SystemExit(run(list(args)))
