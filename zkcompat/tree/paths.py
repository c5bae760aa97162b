"""Znode path rules, as ZooKeeper's PathUtils.validatePath states them."""

import re

from zkcompat.jute.constants import Code
from zkcompat.tree.errors import KeeperError

ROOT = "/"
ZOOKEEPER = "/zookeeper"
QUOTA = "/zookeeper/quota"
CONFIG = "/zookeeper/config"
# DataTree.isSpecialPath: these can never be deleted, nor be a delete's target.
SPECIAL_PATHS = frozenset((ROOT, ZOOKEEPER, QUOTA, CONFIG))


def _invalid_char(c: str) -> bool:
    o = ord(c)
    # Java checks UTF-16 code units: every code point above U+FFFF is a surrogate pair
    # (U+D800..U+DFFF) and so invalid, like the control and private-use ranges.
    return (
        0 < o <= 0x1F
        or 0x7F <= o <= 0x9F
        or 0xD800 <= o <= 0xF8FF
        or o >= 0xFFF0
    )


# Characters PathUtils refuses (see _invalid_char), for a one-pass check of ordinary paths.
_BAD_CHAR = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\U0010ffff]")


def path_problem(path: str | None) -> str | None:
    """The reason `path` is not a valid znode path, or None if it is."""
    if (path and path[0] == "/" and path[-1] != "/" and "//" not in path and "/." not in path
            and _BAD_CHAR.search(path) is None):
        return None  # the common case, decided without a Python-level loop
    return _path_problem_by_char(path)


def _path_problem_by_char(path: str | None) -> str | None:
    """PathUtils.validatePath, character by character."""
    if path is None:
        return "path is null"
    n = len(path)
    if n == 0:
        return "path is empty"
    if path[0] != "/":
        return "path must start with /"
    if n == 1:
        return None
    if path[-1] == "/":
        return "path must not end with /"
    last = "/"
    for i in range(1, n):
        c = path[i]
        if c == "\0":
            return f"null character @{i}"
        if c == "/" and last == "/":
            return f"empty node name @{i}"
        if c == "." and last == ".":
            if path[i - 2] == "/" and (i + 1 == n or path[i + 1] == "/"):
                return f"relative path @{i}"
        elif c == ".":
            if path[i - 1] == "/" and (i + 1 == n or path[i + 1] == "/"):
                return f"relative path @{i}"
        elif _invalid_char(c):
            return f"invalid character @{i}"
        last = c
    return None


def validate_path(path: str | None) -> str:
    """Return `path` if valid, else raise KeeperError(BADARGUMENTS)."""
    if path_problem(path) is not None:
        raise KeeperError(Code.BADARGUMENTS, path)
    return path  # type: ignore[return-value]


def parent_of(path: str) -> str:
    """Parent path of a valid non-root path ("/a" -> "/", "/a/b" -> "/a")."""
    i = path.rfind("/")
    return "/" if i == 0 else path[:i]


def split_parent(path: str) -> tuple[str, str]:
    i = path.rfind("/")
    return ("/" if i == 0 else path[:i]), path[i + 1 :]
