"""The dynamic config file (reconfigEnabled): `dynamicConfigFile=zoo.cfg.dynamic.<version>`
holds the server.N lines, its name the version; once a config is committed it is written
there and zoo.cfg is rewritten to point at it (QuorumPeerConfig.writeDynamicConfig and
editStaticConfig), so a restart reads the last committed membership.

Unlike ZooKeeper, zoo.cfg keeps its lines in their order (ZooKeeper writes them in its
Properties' hash order); a first rewrite keeps the original as zoo.cfg.bak, as it does.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from zkcompat.config.properties import ConfigError, parse_properties

log = logging.getLogger("zkcompat.config")

_VERSION_SUFFIX = re.compile(r"\.dynamic\.([0-9a-fA-F]+)$")
# What editStaticConfig drops from zoo.cfg: the membership now lives in the dynamic file.
_MEMBERSHIP_KEY = re.compile(r"^\s*(server\.|group\.|weight\.|dynamicConfigFile\b|version\b)")
_CLIENT_KEY = re.compile(r"^\s*(clientPort|clientPortAddress)\s*[=:\s]")


def read_dynamic_file(path: Path) -> tuple[dict[str, str], int]:
    """The server.N lines of a dynamic file and its version, which its name carries
    ("dynamic file shouldn't have version inside", as ZooKeeper refuses it)."""
    try:
        props = parse_properties(Path(path).read_text())
    except OSError as e:
        raise ConfigError(f"dynamicConfigFile: cannot read {path}: {e}") from None
    if "version" in props:
        raise ConfigError(f"dynamicConfigFile: {path}: dynamic file shouldn't have version "
                          "inside")
    for key in props:
        if not key.startswith("server."):
            raise ConfigError(f"dynamicConfigFile: {path}: {key} is not a server.N line")
    m = _VERSION_SUFFIX.search(str(path))
    return props, int(m.group(1), 16) if m else 0


def dynamic_file_path(static_path: Path, version: int) -> Path:
    return Path(f"{static_path}.dynamic.{version:x}")


def write_committed(static_path: Path, servers_text: str, version: int,
                    erase_client: bool) -> Path:
    """Write zoo.cfg.dynamic.<version> (fsynced, then renamed into place), then point
    zoo.cfg at it. `erase_client`: this server's client address is in its server line,
    so clientPort and clientPortAddress leave zoo.cfg (needEraseClientInfoFromStaticConfig)."""
    static_path = Path(static_path)
    target = dynamic_file_path(static_path, version)
    _write_atomically(target, servers_text)
    text = static_path.read_text()
    backup = Path(f"{static_path}.bak")
    if not backup.exists() and "dynamicConfigFile" not in parse_properties(text):
        _write_atomically(backup, text)
    kept = [line for line in text.splitlines()
            if not _MEMBERSHIP_KEY.match(line) and not (erase_client and _CLIENT_KEY.match(line))]
    kept.append(f"dynamicConfigFile={target}")
    _write_atomically(static_path, "\n".join(kept) + "\n")
    log.info("event=dynamic_config_written file=%s version=0x%x", target, version)
    return target


class DynamicConfigFiles:
    """Where a server keeps its committed config: zoo.cfg.dynamic.<version> beside zoo.cfg
    (config.load reads it back at start). The simulator gives its peers a store on its
    simulated disk instead."""

    def __init__(self, static_path: Path | None, server_id: int):
        self.static_path = static_path
        self.server_id = server_id

    def read(self) -> tuple[str, int] | None:
        return None  # config.load has read the file zoo.cfg names already

    def write(self, servers_text: str, version: int, erase_client: bool) -> None:
        if self.static_path is None:
            return  # a configuration built in memory: nowhere to write
        write_committed(self.static_path, servers_text, version, erase_client)


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
