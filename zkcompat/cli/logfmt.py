"""Log line formats for `zkcompat serve --log-format`: text keeps each event one
`key=value` line; json writes one JSON object per line with those pairs as fields (a bare
number a JSON number, a bare true/false a boolean), stamped with the UTC time."""

from __future__ import annotations

import ast
import json
import logging
import os
import re
import signal
import sys
from datetime import UTC, datetime

FORMATS = ("text", "json")
LEVELS = ("debug", "info", "warning", "error", "critical")
TEXT_FORMAT = "%(asctime)s level=%(levelname)s logger=%(name)s %(message)s"
# key=value, the value bare or quoted as %r quotes it (zkcompat's messages use both).
_PAIR = re.compile(r"""(?:^|\s)([A-Za-z_][\w.]*)=('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|\S*)""")
_RESERVED = ("ts", "level", "logger")
# A bare value that is a JSON number as written: no leading zeros, sign, hex (zxids and
# session ids stay strings, 0x as ZooKeeper prints them), inf or nan.
_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"-?(?:0|[1-9][0-9]*)\.[0-9]+(?:[eE][+-]?[0-9]+)?")
_BOOLEANS = {"true": True, "false": False, "True": True, "False": False}  # %s of a bool


def _scan(message: str):
    """(key, value, quoted) for each key=value pair, a quoted value unquoted."""
    for key, value in _PAIR.findall(message):
        quoted = value[:1] in ("'", '"') and len(value) >= 2
        if quoted:
            try:
                value = str(ast.literal_eval(value))
            except (ValueError, SyntaxError):
                pass
        yield key, value, quoted


def pairs(message: str) -> dict[str, str]:
    """The key=value pairs of a message, quoted values unquoted; text outside them is lost
    from the pairs but kept whole in the json line's msg."""
    return {key: value for key, value, _ in _scan(message)}


def typed(value: str) -> object:
    """A bare value as JSON should carry it: an int, a float, a boolean, else the string."""
    if _INT.fullmatch(value):
        return int(value)
    if _FLOAT.fullmatch(value):
        return float(value)
    return _BOOLEANS.get(value, value)


def utc_timestamp(created: float) -> str:
    """ISO 8601 in UTC, to the millisecond: 2025-01-31T12:00:00.123Z."""
    stamp = datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")
    return stamp.removesuffix("+00:00") + "Z"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        line: dict[str, object] = {"ts": utc_timestamp(record.created),
                                   "level": record.levelname, "logger": record.name}
        for key, value, quoted in _scan(message):
            line[f"field_{key}" if key in _RESERVED else key] = value if quoted else typed(value)
        line["msg"] = message
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def setup(level: str = "info", fmt: str = "text", stream=None) -> None:
    """The root logger's one handler, replacing any earlier one (serve calls this once)."""
    if fmt not in FORMATS:
        raise ValueError(f"log format {fmt!r} is not one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper()))


def log_sigterm(log: logging.Logger) -> None:
    """On SIGTERM, log `event=shutdown signal=SIGTERM`, then die of the signal as before: the
    exit status and the lack of clean-up stay what they were (every acknowledged write is
    already fsynced, as after a crash)."""
    def on_signal(signum: int, _frame) -> None:
        log.info("event=shutdown signal=%s", signal.Signals(signum).name)
        for handler in logging.getLogger().handlers:
            handler.flush()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, on_signal)
