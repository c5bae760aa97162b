"""The container image's entrypoint and health check.

`entrypoint CMD...` writes zoo.cfg and myid from the official ZooKeeper image's ZOO_*
variables exactly as that image's docker-entrypoint.sh does (each only when it does not
exist yet, so a mounted zoo.cfg or an existing myid wins), then execs CMD. `ruok` is the
health check: 0 when the server answers imok (or, with ruok not whitelisted, answers srvr).
Like ZooKeeper's ruok it says the server runs, not that it serves: a member waiting for a
quorum answers too, so the first pod of an OrderedReady StatefulSet can become ready and
its peers be started.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

# The official image's Dockerfile ENV: what its entrypoint sees unless the user sets them.
IMAGE_DEFAULTS = {
    "ZOO_CONF_DIR": "/conf",
    "ZOO_DATA_DIR": "/data",
    "ZOO_DATA_LOG_DIR": "/datalog",
    "ZOO_LOG_DIR": "/logs",
    "ZOO_TICK_TIME": "2000",
    "ZOO_INIT_LIMIT": "5",
    "ZOO_SYNC_LIMIT": "2",
    "ZOO_AUTOPURGE_PURGEINTERVAL": "0",
    "ZOO_AUTOPURGE_SNAPRETAINCOUNT": "3",
    "ZOO_MAX_CLIENT_CNXNS": "60",
    "ZOO_STANDALONE_ENABLED": "true",
    "ZOO_ADMINSERVER_ENABLED": "true",
}
# The entrypoint's fallback when ZOO_SERVERS is unset or empty: one standalone server.
DEFAULT_SERVERS = "server.1=localhost:2888:3888;2181"
# zkcompat's own addition, for a Kubernetes StatefulSet: myid = the pod's ordinal + 1.
MY_ID_FROM_HOSTNAME = "ZOO_MY_ID_FROM_HOSTNAME"
# The uid/gid the image runs as (the official image's zookeeper user is 1000:1000 too).
IMAGE_UID = IMAGE_GID = 1000
HEALTH_TIMEOUT_S = 5.0
# srvr's answer from a member without a quorum (AbstractFourLetterCommand.ZK_NOT_SERVING).
NOT_SERVING = "This ZooKeeper instance is not currently serving requests"

# zoo.cfg key -> the variable the official entrypoint writes it from, in its order.
_CFG_VARIABLES = (
    ("dataDir", "ZOO_DATA_DIR"),
    ("dataLogDir", "ZOO_DATA_LOG_DIR"),
    ("tickTime", "ZOO_TICK_TIME"),
    ("initLimit", "ZOO_INIT_LIMIT"),
    ("syncLimit", "ZOO_SYNC_LIMIT"),
    ("autopurge.snapRetainCount", "ZOO_AUTOPURGE_SNAPRETAINCOUNT"),
    ("autopurge.purgeInterval", "ZOO_AUTOPURGE_PURGEINTERVAL"),
    ("maxClientCnxns", "ZOO_MAX_CLIENT_CNXNS"),
    ("standaloneEnabled", "ZOO_STANDALONE_ENABLED"),
    ("admin.enableServer", "ZOO_ADMINSERVER_ENABLED"),
)


def _var(environ: Mapping[str, str], name: str) -> str:
    """A variable as the entrypoint sees it: the image default when unset; set and empty
    stays empty (the shell writes `key=`)."""
    return environ.get(name, IMAGE_DEFAULTS.get(name, ""))


def zoo_cfg(environ: Mapping[str, str]) -> str:
    """The zoo.cfg the official entrypoint writes for these variables. Its lists
    (ZOO_SERVERS, ZOO_CFG_EXTRA) are split on whitespace, as the shell's unquoted $VAR."""
    lines = [f"{key}={_var(environ, name)}" for key, name in _CFG_VARIABLES]
    lines += _var(environ, "ZOO_SERVERS").split() or [DEFAULT_SERVERS]
    whitelist = _var(environ, "ZOO_4LW_COMMANDS_WHITELIST")
    if whitelist:
        lines.append(f"4lw.commands.whitelist={whitelist}")
    lines += _var(environ, "ZOO_CFG_EXTRA").split()
    return "".join(f"{line}\n" for line in lines)


def my_id(environ: Mapping[str, str], hostname: str | None = None) -> str:
    """${ZOO_MY_ID:-1}; with ZOO_MY_ID_FROM_HOSTNAME=true (and no ZOO_MY_ID), the trailing
    ordinal of the host name plus one, as a StatefulSet's pod zk-0 is server 1."""
    given = environ.get("ZOO_MY_ID", "")
    if given:
        return given
    if environ.get(MY_ID_FROM_HOSTNAME, "").lower() == "true":
        name = hostname if hostname is not None else socket.gethostname()
        match = re.search(r"-(\d+)$", name.split(".", 1)[0])
        if match is None:
            raise SystemExit(f"{MY_ID_FROM_HOSTNAME}: host name {name!r} has no -N ordinal")
        return str(int(match.group(1)) + 1)
    return "1"


def prepare(environ: Mapping[str, str], hostname: str | None = None) -> tuple[Path, Path]:
    """Write zoo.cfg and myid where they do not exist yet; their paths."""
    cfg_path = Path(_var(environ, "ZOO_CONF_DIR")) / "zoo.cfg"
    if not cfg_path.is_file():
        cfg_path.parent.mkdir(parents=True, exist_ok=True)
        cfg_path.write_text(zoo_cfg(environ))
    myid_path = Path(_var(environ, "ZOO_DATA_DIR")) / "myid"
    if not myid_path.is_file():
        myid_path.parent.mkdir(parents=True, exist_ok=True)
        myid_path.write_text(f"{my_id(environ, hostname)}\n")
    return cfg_path, myid_path


def _is_server_command(argv: list[str]) -> bool:
    return "zkcompat" in argv[:3] and "serve" in argv


def _drop_root(environ: Mapping[str, str], argv: list[str]) -> None:
    """Started as root (`docker run --user 0`) to run the server: hand the directories to
    the image's user and run as it, as the official image does with chown and gosu for
    zkServer.sh (any other command keeps root)."""
    if os.getuid() != 0 or not _is_server_command(argv):
        return
    for name in ("ZOO_DATA_DIR", "ZOO_DATA_LOG_DIR", "ZOO_LOG_DIR", "ZOO_CONF_DIR"):
        top = Path(_var(environ, name))
        if not top.exists():
            continue
        for root, dirs, files in os.walk(top):
            for entry in (root, *(os.path.join(root, n) for n in dirs + files)):
                os.chown(entry, IMAGE_UID, IMAGE_GID, follow_symlinks=False)
    os.setgroups([])
    os.setgid(IMAGE_GID)
    os.setuid(IMAGE_UID)


def entrypoint(argv: list[str]) -> None:
    _drop_root(os.environ, argv)
    prepare(os.environ)
    if not argv:
        raise SystemExit("entrypoint: no command to run")
    os.execvp(argv[0], argv)


def _four_letter_word(host: str, port: int, word: str) -> str:
    with socket.create_connection((host, port), timeout=HEALTH_TIMEOUT_S) as s:
        s.settimeout(HEALTH_TIMEOUT_S)
        s.sendall(word.encode())
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def client_address(environ: Mapping[str, str]) -> tuple[str, int]:
    """Where this container's server takes clients, from its zoo.cfg (loopback for a
    wildcard address)."""
    from zkcompat import config  # noqa: PLC0415 (the entrypoint itself needs no config)

    logging.getLogger("zkcompat.config").setLevel(logging.ERROR)
    cfg = config.load(Path(_var(environ, "ZOO_CONF_DIR")) / "zoo.cfg", environ={})
    host = cfg.client_port_address
    return ("127.0.0.1" if host in ("0.0.0.0", "") else host), cfg.client_port


def ruok(environ: Mapping[str, str]) -> int:
    try:
        host, port = client_address(environ)
        answer = _four_letter_word(host, port, "ruok")
        if answer == "imok":
            return 0
        if "not in the whitelist" in answer:
            # The official image whitelists only srvr unless told otherwise; any answer of
            # srvr's says the server runs, as imok would.
            srvr = _four_letter_word(host, port, "srvr")
            if srvr.startswith(("Zookeeper version:", NOT_SERVING)):
                return 0
            answer = srvr
        print(f"ruok: {answer!r}", file=sys.stderr)
    except Exception as e:  # noqa: BLE001 (a health check reports, never raises)
        print(f"ruok: {e}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["entrypoint"]:
        entrypoint(args[1:])
    elif args == ["ruok"]:
        raise SystemExit(ruok(os.environ))
    else:
        raise SystemExit("usage: python -m zkcompat.cli.container entrypoint CMD... | ruok")


if __name__ == "__main__":
    main()
