"""Build step of the Dockerfile, in Python so that a base image needs nothing but Python:
the zookeeper user (1000:1000), the directories the official ZooKeeper image has, and
zkcompat's dependencies (unless INSTALL_DEPENDENCIES=no: a base that already has them)."""

import compileall
import configparser
import os
import subprocess
import sys
from pathlib import Path

UID = GID = 1000
DIRECTORIES = ("/conf", "/data", "/datalog", "/logs")
SOURCE = Path("/opt/zkcompat")


def add_user() -> None:
    passwd, group = Path("/etc/passwd"), Path("/etc/group")
    if f":{UID}:" not in (passwd.read_text() if passwd.exists() else ""):
        with passwd.open("a") as f:
            f.write(f"zookeeper:x:{UID}:{GID}:zookeeper:/data:/usr/sbin/nologin\n")
    if f":{GID}:" not in (group.read_text() if group.exists() else ""):
        with group.open("a") as f:
            f.write(f"zookeeper:x:{GID}:\n")


def install_dependencies() -> None:
    setup = configparser.ConfigParser()
    setup.read(SOURCE / "setup.cfg")
    requirements = [r for r in setup["options"]["install_requires"].splitlines() if r.strip()]
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-cache-dir",
                    "--disable-pip-version-check", *requirements], check=True)


def main() -> None:
    add_user()
    for d in DIRECTORIES:
        os.makedirs(d, exist_ok=True)
        os.chown(d, UID, GID)
    if os.environ.get("INSTALL_DEPENDENCIES", "yes") != "no":
        install_dependencies()
    compileall.compile_dir(SOURCE / "zkcompat", quiet=1)
    # Python, its dependencies and zkcompat must import; a broken base fails the build here.
    subprocess.run([sys.executable, "-c",
                    "import zkcompat.cli.main, zkcompat.cli.container, zkcompat.peer.node"],
                   check=True, env={**os.environ, "PYTHONPATH": str(SOURCE)})


if __name__ == "__main__":
    main()
