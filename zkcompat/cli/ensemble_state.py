"""What `zkcompat ensemble` records of an ensemble: each member's ports, files, kind and PID,
in D/ensemble.json, written whole (by a rename) and changed one member at a time under a lock.
"""

from __future__ import annotations

import fcntl
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

HOST = "127.0.0.1"
STATE_FILE = "ensemble.json"


@dataclass
class Member:
    """One server of the ensemble: its ports, its files and the PID it last ran as."""

    sid: int
    client_port: int
    quorum_port: int
    election_port: int
    cfg: str  # absolute path of its zoo.cfg: the mark of our process in /proc/PID/cmdline
    data_dir: str
    pid: int | None = None
    kind: str = "zkcompat"  # a mixed ensemble (tests) has ZooKeeper servers too
    settings: dict = field(default_factory=dict)  # zoo.cfg keys beyond the defaults
    observer: bool = False  # listens and serves, does not vote (server.N=...:observer)
    admin_port: int | None = None  # its AdminServer's; None in an ensemble.json from before
    host: str = HOST  # every port of this server is bound here (--addresses spread: 127.0.0.K)

    @property
    def log_path(self) -> Path:
        return Path(self.data_dir) / "server.log"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.client_port}"


@dataclass
class Ensemble:
    kind: str
    members: dict[int, Member] = field(default_factory=dict)

    @property
    def connect_string(self) -> str:
        return ",".join(m.address for m in self.members.values())


def _state_path(directory: Path) -> Path:
    return directory / STATE_FILE


def load_state(directory: Path) -> Ensemble | None:
    path = _state_path(directory)
    if not path.is_file():
        return None
    raw = json.loads(path.read_text())
    members = {int(k): Member(**v) for k, v in raw["members"].items()}
    return Ensemble(raw["kind"], dict(sorted(members.items())))


def save_state(directory: Path, ensemble: Ensemble) -> None:
    raw = {"kind": ensemble.kind,
           "members": {str(k): asdict(m) for k, m in ensemble.members.items()}}
    tmp = _state_path(directory).with_suffix(".json.tmp")
    tmp.write_text(json.dumps(raw, indent=2) + "\n")
    tmp.replace(_state_path(directory))


def record_pid(directory: Path, sid: int, pid: int) -> None:
    """Write one member's PID into ensemble.json under a lock, re-reading the file first,
    so two commands starting servers at once do not overwrite each other's PIDs."""
    update_member(directory, sid, pid=pid)


def update_member(directory: Path, sid: int, **fields) -> None:
    """Change fields of one member in ensemble.json, under the lock record_pid takes; a new
    `kind` also renames the ensemble's (one kind, or one per server)."""
    with open(directory / f"{STATE_FILE}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ensemble = load_state(directory)
        for name, value in fields.items():
            setattr(ensemble.members[sid], name, value)
        kinds = [m.kind for m in ensemble.members.values()]
        ensemble.kind = kinds[0] if len(set(kinds)) == 1 else ",".join(kinds)
        save_state(directory, ensemble)
