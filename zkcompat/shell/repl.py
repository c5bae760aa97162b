"""The interactive loop: prompt_toolkit line editing, a persistent history file, and tab
completion of command names and of znode paths (the children of the typed parent)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.history import FileHistory
from prompt_toolkit.patch_stdout import patch_stdout

from zkcompat.shell.commands import USAGE_LIST, QuitShell, Shell
from zkcompat.shell.session import KeeperError

HISTORY_ENV = "ZKCOMPAT_SHELL_HISTORY"
HISTORY_DEFAULT = "~/.zkcompat_history"
COMPLETION_TIMEOUT_MS = 2000  # a completion never waits longer for the server


def history_path() -> Path:
    return Path(os.path.expanduser(os.environ.get(HISTORY_ENV) or HISTORY_DEFAULT))


def complete_words(shell: Shell, line: str) -> Iterable[tuple[str, int]]:
    """(completion, start offset from the cursor) for the word at the end of line, as
    JLineZNodeCompleter: a command for the first word, a znode for a word starting "/"."""
    words = line.split()
    word = "" if line.endswith((" ", "\t")) or not words else words[-1]
    first = len(words) == 0 or (len(words) == 1 and word)
    if first:
        for name in sorted(USAGE_LIST):
            if name.startswith(word):
                yield name, -len(word)
        return
    if not word.startswith("/"):
        return
    parent, _, prefix = word.rpartition("/")
    from kazoo.protocol.serialization import GetChildren  # noqa: PLC0415

    session = shell.session
    if session is None or not session.alive:
        return
    try:
        children = session.call(GetChildren(session._server_path(parent or "/"), None),
                                parent or "/")
    except KeeperError:
        return
    for child in sorted(children):
        if child.startswith(prefix):
            yield f"{parent}/{child}", -len(word)


class ZnodeCompleter(Completer):
    def __init__(self, shell: Shell) -> None:
        self.shell = shell

    def get_completions(self, document, complete_event):
        for text, start in complete_words(self.shell, document.text_before_cursor):
            yield Completion(text, start_position=start)


def run(shell: Shell, history_file: Path | None = None) -> int:
    """Read lines until EOF or quit; the exit code zkCli would give."""
    history_file = history_file or history_path()
    history_file.parent.mkdir(parents=True, exist_ok=True)
    session: PromptSession = PromptSession(history=FileHistory(str(history_file)),
                                           completer=ZnodeCompleter(shell),
                                           complete_while_typing=False)
    with patch_stdout(raw=True):
        while True:
            try:
                line = session.prompt(shell.prompt)
            except KeyboardInterrupt:
                continue
            except EOFError:
                break
            try:
                shell.execute_line(line)
            except QuitShell as q:
                return q.code
    shell.close()
    return shell.exit_code
