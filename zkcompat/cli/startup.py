"""Why a server could not start, in one line: the setting or file, the cause, what to do.

explain() reads the errors start-up meets (a dataDir it cannot create or write, one another
server holds, a full disk, a port in use or an address not of this machine) from the OS
and LevelDB; anything else is no start-up condition it knows, and is left to propagate.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

from zkcompat.config import Config

# LevelDB's Status::IOError text, as plyvel raises it: "IO error: [lock ]PATH: strerror".
_LEVELDB_IO = re.compile(r"IO error: (?:lock )?(?P<path>/.*?): (?P<cause>[^:]+)$")
_LEVELDB_CAUSES = {  # strerror(3) -> errno, for LevelDB's texts
    "Resource temporarily unavailable": errno.EAGAIN,
    "No space left on device": errno.ENOSPC,
    "Permission denied": errno.EACCES,
    "Operation not permitted": errno.EPERM,
    "Read-only file system": errno.EROFS,
    "Not a directory": errno.ENOTDIR,
}
# asyncio's and uvloop's bind failure: "error while attempting to bind on address
# ('HOST', PORT): strerror".
_BIND_ADDRESS = re.compile(r"bind on address \('(?P<host>[^']*)', (?P<port>\d+)")
_BIND_ERRNOS = (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES)
PRIVILEGED_PORT_MAX = 1023
_HOW_TO_SET = {"dataDir": "(--data-dir, or dataDir in zoo.cfg)",
               "dataLogDir": "(dataLogDir in zoo.cfg)"}


def explain(exc: BaseException, cfg: Config) -> str | None:
    """The one line for a start-up failure, or None for an error that is none of these."""
    if not isinstance(exc, OSError):
        return None
    bind = _BIND_ADDRESS.search(str(exc))
    if bind is not None and exc.errno in _BIND_ERRNOS:
        return _bind(exc.errno, bind["host"], int(bind["port"]), cfg)
    path, code = _failed_path(exc)
    if path is None or code is None:
        return None
    return _storage(path, code, cfg)


def _failed_path(exc: OSError) -> tuple[Path | None, int | None]:
    """The file an OSError or a LevelDB IOError is about, and its errno."""
    if exc.filename is not None:
        return Path(os.fsdecode(exc.filename)), exc.errno
    text = exc.args[0] if exc.args else ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    m = _LEVELDB_IO.search(str(text))
    if m is None:
        return None, None
    return Path(m["path"]), _LEVELDB_CAUSES.get(m["cause"].strip())


def _setting(path: Path, cfg: Config) -> tuple[str, Path]:
    """Which of dataLogDir and dataDir holds path: its name and its value."""
    if cfg.data_log_dir is not None and _under(path, cfg.data_log_dir):
        return "dataLogDir", cfg.data_log_dir
    return "dataDir", cfg.data_dir


def _under(path: Path, directory: Path) -> bool:
    path, directory = Path(os.path.abspath(path)), Path(os.path.abspath(directory))
    return path == directory or directory in path.parents


def _storage(path: Path, code: int, cfg: Config) -> str | None:
    name, value = _setting(path, cfg)
    choose = f"choose another {name} {_HOW_TO_SET[name]}"
    if code == errno.EAGAIN and path.name == "LOCK":
        holder = _lock_holder(path)
        by = f"process {holder} holds {path}" if holder is not None else f"{path} is locked"
        return (f"{name} {value} is in use by another server ({by}); stop that server, or "
                f"give this one a {name} of its own {_HOW_TO_SET[name]}")
    if code == errno.ENOSPC:
        return (f"{name} {value}: no space left on device (writing {path}); free space on "
                "that file system, then start again: every acknowledged write is kept")
    if code in (errno.EACCES, errno.EPERM):
        verb, target = ("write", path) if path.exists() else ("create", _existing(path))
        return (f"{name} {value}: cannot {verb} {path} ({os.strerror(code)}, as uid "
                f"{os.geteuid()}); make {target} writable for that user, or {choose}")
    if code == errno.EROFS:
        return f"{name} {value}: {path} is on a read-only file system; {choose}"
    if code == errno.ENOTDIR:
        return f"{name} {value}: {_first_non_directory(path)} is not a directory; {choose}"
    return None


def _existing(path: Path) -> Path:
    """The nearest ancestor of path that exists: the directory a create needs to write."""
    for parent in path.parents:
        if parent.exists():
            return parent
    return path


def _first_non_directory(path: Path) -> Path:
    for candidate in (*reversed(path.parents), path):
        if candidate.exists() and not candidate.is_dir():
            return candidate
    return path


def _lock_holder(lock: Path) -> int | None:
    """The PID holding a POSIX lock on the file (LevelDB's LOCK), from /proc/locks."""
    try:
        st = lock.stat()
        locks = Path("/proc/locks").read_text()
    except OSError:
        return None
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in locks.splitlines():
        fields = line.split()
        # "1: POSIX  ADVISORY  WRITE 12345 00:2f:4711 0 EOF" ("->" marks a waiter)
        if "->" not in fields and len(fields) >= 6 and fields[5] == inode:
            return int(fields[4]) if fields[4].isdigit() else None
    return None


def _bind(code: int, host: str, port: int, cfg: Config) -> str:
    setting, change = _port_setting(port, cfg)
    if code == errno.EADDRNOTAVAIL:
        return (f"clientPortAddress {host}: not an address of this machine (cannot bind "
                f"{host}:{port}); give one of its addresses, or 0.0.0.0 for all (--address, "
                "or clientPortAddress in zoo.cfg)")
    if code == errno.EACCES:
        why = (f"ports up to {PRIVILEGED_PORT_MAX} need root or CAP_NET_BIND_SERVICE"
               if port <= PRIVILEGED_PORT_MAX else "refused by the system")
        return f"{setting}: cannot bind {host}:{port} ({why}); choose another port ({change})"
    return (f"{setting}: {host}:{port} is already in use by another process; stop it, or "
            f"choose another port ({change})")


def _port_setting(port: int, cfg: Config) -> tuple[str, str]:
    """The setting a port comes from, named with its value, and where to change it."""
    if port == cfg.client_port:
        return f"clientPort {port}", "--port, or clientPort in zoo.cfg"
    if port == cfg.secure_client_port:
        return f"secureClientPort {port}", "secureClientPort in zoo.cfg"
    me = cfg.servers.get(cfg.server_id)
    if me is not None and port in (me.quorum_port, me.election_port):
        what = "quorum" if port == me.quorum_port else "election"
        return f"server.{me.sid}'s {what} port {port}", f"server.{me.sid} in zoo.cfg"
    return f"port {port}", "zoo.cfg"
