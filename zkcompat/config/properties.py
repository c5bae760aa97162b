"""java.util.Properties as ZooKeeper reads zoo.cfg with it, and Integer.parseInt as it
reads a number: a value Java would refuse is a ConfigError whose message starts with the key."""

import re


class ConfigError(Exception):
    pass


JAVA_INT = re.compile(r"[+-]?[0-9]+")  # Integer.parseInt: no spaces, no underscores


def parse_int(key: str, value: str, minimum: int = 0) -> int:
    if not JAVA_INT.fullmatch(value.strip()):
        raise ConfigError(f"{key}: {value!r} is not an integer")
    n = int(value.strip())
    if n < minimum:
        raise ConfigError(f"{key}: {n} is below the minimum {minimum}")
    return n


def parse_port(key: str, value: str) -> int:
    n = parse_int(key, value, 0)
    if n > 65535:
        raise ConfigError(f"{key}: port {n} out of range (0-65535)")
    return n


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str):
    """java.util.Properties: a line ending in an odd number of backslashes continues on the
    next one, whose leading whitespace is dropped; comment lines start with # or !."""
    pending = None
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f") if pending is not None else raw
        if pending is None:
            stripped = line.lstrip(" \t\f")
            if not stripped or stripped[0] in "#!":
                continue
            line = stripped
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = (pending or "") + line[:-1]
            continue
        yield (pending or "") + line
        pending = None
    if pending is not None:
        yield pending


def _unescape(s: str) -> str:
    out = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\" or i + 1 == len(s):
            out.append(c)
            i += 1
            continue
        nxt = s[i + 1]
        if nxt == "u":
            digits = s[i + 2 : i + 6]
            try:
                out.append(chr(int(digits, 16)))
            except ValueError:
                raise ConfigError(f"malformed \\uxxxx escape in {s!r}") from None
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """java.util.Properties.load: key and value split at the first unescaped '=', ':' or
    whitespace; escapes and continuation lines as Java reads them. ZooKeeper then trims
    both (QuorumPeerConfig.parseProperties)."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        i, n = 0, len(line)
        while i < n and line[i] not in "=: \t\f":
            i += 2 if line[i] == "\\" else 1
        key = line[:i]
        while i < n and line[i] in " \t\f":
            i += 1
        if i < n and line[i] in "=:":
            i += 1
        while i < n and line[i] in " \t\f":
            i += 1
        props[_unescape(key).strip()] = _unescape(line[i:]).strip()
    return props
