"""Log line formats for `zkcompat serve --log-format`: text keeps each event one
`key=value` line; json writes one JSON object per line with those pairs as fields."""

from __future__ import annotations

import ast
import json
import logging
import re
import sys

FORMATS = ("text", "json")
LEVELS = ("debug", "info", "warning", "error", "critical")
TEXT_FORMAT = "%(asctime)s level=%(levelname)s logger=%(name)s %(message)s"
# key=value, the value bare or quoted as %r quotes it (zkcompat's messages use both).
_PAIR = re.compile(r"""(?:^|\s)([A-Za-z_][\w.]*)=('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|\S*)""")
_RESERVED = ("ts", "level", "logger")


def pairs(message: str) -> dict[str, str]:
    """The key=value pairs of a message, quoted values unquoted; text outside them is lost
    from the pairs but kept whole in the json line's msg."""
    out: dict[str, str] = {}
    for key, value in _PAIR.findall(message):
        if value[:1] in ("'", '"') and len(value) >= 2:
            try:
                value = str(ast.literal_eval(value))
            except (ValueError, SyntaxError):
                pass
        out[key] = value
    return out


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        line: dict[str, object] = {"ts": self.formatTime(record), "level": record.levelname,
                                   "logger": record.name}
        for key, value in pairs(message).items():
            line[f"field_{key}" if key in _RESERVED else key] = value
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
