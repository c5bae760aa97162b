"""zkCli's output formats, reproduced from ZooKeeper 3.9.3's Java: StatPrinter, Date.toString,
jute's Id.toString, ZKUtil.getPermString, KeeperException and CliWrapperException messages,
WatchedEvent.toString, Netty's prettyHexDump, commons-cli's HelpFormatter, StatsTrack."""

from __future__ import annotations

import time

# KeeperException.Code values and getCodeMessage (KeeperException.java)
CODE_MESSAGES = {
    0: "ok", -1: "SystemError", -2: "RuntimeInconsistency", -3: "DataInconsistency",
    -4: "ConnectionLoss", -5: "MarshallingError", -6: "Unimplemented",
    -7: "OperationTimeout", -8: "BadArguments", -13: "NewConfigNoQuorum",
    -14: "ReconfigInProgress", -100: "APIError", -101: "NoNode", -102: "NoAuth",
    -103: "BadVersion", -108: "NoChildrenForEphemerals", -110: "NodeExists",
    -111: "Directory not empty", -112: "Session expired", -113: "Invalid callback",
    -114: "InvalidACL", -115: "AuthFailed", -118: "Session moved",
    -119: "Not a read-only call", -120: "Ephemeral node on local session",
    -121: "No such watcher", -123: "Reconfig is disabled",
    -124: "Session closed because client failed to authenticate",
    -125: "Quota has exceeded", -127: "Op throttled due to high load",
}
CODE_NAMES = {  # Code enum names, for "Unknown error " + code
    -12: "UNKNOWNSESSION", -122: "REQUESTTIMEOUT",
}
NONODE, NOAUTH, BADVERSION, NOCHILDRENFOREPHEMERALS = -101, -102, -103, -108
NODEEXISTS, NOTEMPTY, INVALIDACL, BADARGUMENTS, NOTREADONLY = -110, -111, -114, -8, -119
QUOTAEXCEEDED, CONNECTIONLOSS, SESSIONEXPIRED = -125, -4, -112

# CliWrapperException.getMessage: the codes zkCli words itself
WRAPPED = {
    NONODE: "Node does not exist: {}",
    NOCHILDRENFOREPHEMERALS: "Ephemerals cannot have children: {}",
    NODEEXISTS: "Node already exists: {}",
    NOTEMPTY: "Node not empty: {}",
    NOTREADONLY: "Not a read-only call: {}",
    INVALIDACL: "Acl is not valid : {}",
    NOAUTH: "Insufficient permission : {}",
    BADARGUMENTS: "Arguments are not valid : {}",
    BADVERSION: "version No is not valid : {}",
    QUOTAEXCEEDED: "Quota has exceeded : {}",
    -14: "Another reconfiguration is in progress -- concurrent reconfigs not supported (yet)",
    -13: ("No quorum of new config is connected and up-to-date with the leader of last "
          "commmitted config - try invoking reconfiguration after new servers are "
          "connected and synced"),
}


def keeper_message(code: int, path: str | None) -> str:
    """KeeperException.getMessage()."""
    text = CODE_MESSAGES.get(code) or f"Unknown error {CODE_NAMES.get(code, code)}"
    if not path:
        return f"KeeperErrorCode = {text}"
    return f"KeeperErrorCode = {text} for {path}"


def wrapped_message(code: int, path: str | None) -> str:
    """CliWrapperException's message for a KeeperException (path None prints "null")."""
    template = WRAPPED.get(code)
    if template is None:
        return keeper_message(code, path)
    return template.format("null" if path is None else path)


def java_date(ms: int) -> str:
    """java.util.Date(ms).toString() in the local time zone: "Wed Dec 02 12:28:48 UTC 2026"."""
    t = time.localtime(ms / 1000.0)
    return time.strftime("%a %b %d %H:%M:%S %Z %Y", t)


def hex_long(v: int) -> str:
    """Long.toHexString: two's complement for negatives."""
    return format(v & 0xFFFFFFFFFFFFFFFF, "x")


def stat_lines(stat) -> list[str]:
    """StatPrinter.print, for a kazoo ZnodeStat."""
    return [
        f"cZxid = 0x{hex_long(stat.czxid)}",
        f"ctime = {java_date(stat.ctime)}",
        f"mZxid = 0x{hex_long(stat.mzxid)}",
        f"mtime = {java_date(stat.mtime)}",
        f"pZxid = 0x{hex_long(stat.pzxid)}",
        f"cversion = {stat.cversion}",
        f"dataVersion = {stat.version}",
        f"aclVersion = {stat.aversion}",
        f"ephemeralOwner = 0x{hex_long(stat.ephemeralOwner)}",
        f"dataLength = {stat.dataLength}",
        f"numChildren = {stat.numChildren}",
    ]


# ZooDefs.Perms
READ, WRITE, CREATE, DELETE, ADMIN = 1, 2, 4, 8, 16


def perm_string(perms: int) -> str:
    """ZKUtil.getPermString: c d r w a, in that order."""
    return "".join(ch for bit, ch in ((CREATE, "c"), (DELETE, "d"), (READ, "r"),
                                      (WRITE, "w"), (ADMIN, "a")) if perms & bit)


def _jute_string(s: str | None) -> str:
    """ToStringOutputArchive.escapeString."""
    if s is None:
        return ""
    table = {"\0": "%00", "\n": "%0A", "\r": "%0D", ",": "%2C", "}": "%7D", "%": "%25"}
    return "'" + "".join(table.get(c, c) for c in s)


def acl_lines(acl) -> list[str]:
    """GetAclCommand: Id.toString() (jute: "'scheme,'id" and a newline) + ": " + perms."""
    out: list[str] = []
    for a in acl:
        out.append(f"{_jute_string(a.id.scheme)},{_jute_string(a.id.id)}")
        out.append(f": {perm_string(a.perms)}")
    return out


def watched_event(state: str, event_type: str, path: str | None, zxid: int) -> str:
    """WatchedEvent.toString() of ZooKeeper 3.9 (3.8 had no " zxid: ")."""
    return (f"WatchedEvent state:{state} type:{event_type} "
            f"path:{'null' if path is None else path} zxid: {zxid}")


def hex_dump(data: bytes) -> str:
    """io.netty.buffer.ByteBufUtil.prettyHexDump."""
    if not data:
        return ""
    nl = "\n"
    out = [
        "         +-------------------------------------------------+" + nl
        + "         |  0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f |" + nl
        + "+--------+-------------------------------------------------+----------------+"
    ]
    for row_start in range(0, len(data), 16):
        row = data[row_start:row_start + 16]
        out.append(f"{nl}|{row_start:08x}|")
        out.append("".join(f" {b:02x}" for b in row) + "   " * (16 - len(row)) + " |")
        out.append("".join(chr(b) if 0x1f < b < 0x7f else "." for b in row)
                   + " " * (16 - len(row)) + "|")
    out.append(nl + "+--------+-------------------------------------------------+----------------+")
    return "".join(out)


def help_options(options: list[tuple[str, bool, str]]) -> str:
    """HelpFormatter.printOptions (left pad 1, desc pad 3), options sorted by key ignoring case;
    ends with the newline PrintWriter.println adds."""
    if not options:
        return ""
    rows = sorted(options, key=lambda o: o[0].lower())
    heads = [f" -{opt}" + (" <arg>" if has_arg else "") for opt, has_arg, _ in rows]
    width = max(len(h) for h in heads)
    lines = [h.ljust(width) + "   " + desc for h, (_, _, desc) in zip(heads, rows, strict=True)]
    return "\n".join(lines) + "\n"


class StatsTrack:
    """StatsTrack: "count=5,bytes=-1=;byteHardLimit=-1;countHardLimit=-1" and back."""

    def __init__(self, text: str | bytes | None = "") -> None:
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        self.stats: dict[str, int] = {}
        if not text:
            return
        for pair in filter(None, text.replace(";", ",").split(",")):
            kv = pair.split("=")
            value = kv[1] if len(kv) > 1 else ""
            self.stats[kv[0]] = int(value) if value else -1

    def get(self, key: str) -> int:
        return self.stats.get(key, -1)

    def __str__(self) -> str:
        rest = sorted(k for k in self.stats if k not in ("count", "bytes"))
        text = f"count={self.get('count')},bytes={self.get('bytes')}"
        if rest:
            text += "=" + "".join(f";{k}={self.stats[k]}" for k in rest)
        return text


def validate_path(path: str, sequential: bool = False) -> str | None:
    """PathUtils.validatePath: None if valid, else IllegalArgumentException's message."""
    if sequential:
        path = path + "1"
    if len(path) == 0:
        return "Path length must be > 0"
    if path[0] != "/":
        return "Path must start with / character"
    if len(path) == 1:
        return None
    if path[-1] == "/":
        return "Path must not end with / character"
    reason = None
    lastc = "/"
    for i in range(1, len(path)):
        c = path[i]
        o = ord(c)
        if o == 0:
            reason = f"null character not allowed @{i}"
        elif c == "/" and lastc == "/":
            reason = f"empty node name specified @{i}"
        elif c == "." and lastc == ".":
            if path[i - 2] == "/" and (i + 1 == len(path) or path[i + 1] == "/"):
                reason = f"relative paths not allowed @{i}"
        elif c == ".":
            if path[i - 1] == "/" and (i + 1 == len(path) or path[i + 1] == "/"):
                reason = f"relative paths not allowed @{i}"
        elif (0 < o <= 0x1F or 0x7F <= o <= 0x9F or 0xD800 <= o <= 0xF8FF
              or 0xFFF0 <= o):  # above 0xFFFF: a UTF-16 surrogate pair in Java
            reason = f"invalid character @{i}"
        if reason:
            break
        lastc = c
    if reason:
        return f'Invalid path string "{path}" caused by {reason}'
    return None
