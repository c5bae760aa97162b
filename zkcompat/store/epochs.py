"""acceptedEpoch and currentEpoch: two small files in the dataDir, named and written as
ZooKeeper's QuorumPeer writes them (decimal text, replaced atomically, fsync'd)."""

import os
from pathlib import Path

ACCEPTED_EPOCH_FILE = "acceptedEpoch"  # QuorumPeer.ACCEPTED_EPOCH_FILENAME
CURRENT_EPOCH_FILE = "currentEpoch"  # QuorumPeer.CURRENT_EPOCH_FILENAME


class EpochFiles:
    def __init__(self, data_dir: Path, last_zxid_epoch: int):
        self.dir = Path(data_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        # A server upgraded from standalone has neither file: ZooKeeper starts both at the
        # epoch of its last zxid (QuorumPeer.loadDataBase) and writes them.
        current = self._read(CURRENT_EPOCH_FILE)
        if current is None:
            current = last_zxid_epoch
            self._write(CURRENT_EPOCH_FILE, current)
        accepted = self._read(ACCEPTED_EPOCH_FILE)
        if accepted is None:
            accepted = current
            self._write(ACCEPTED_EPOCH_FILE, accepted)
        if current > accepted:
            raise ValueError(f"{self.dir}: currentEpoch {current} is after acceptedEpoch "
                             f"{accepted}; the epoch files are damaged")
        self.current = current
        self.accepted = accepted

    def _read(self, name: str) -> int | None:
        try:
            text = (self.dir / name).read_text().strip()
        except FileNotFoundError:
            return None
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{self.dir / name}: {text!r} is not an epoch") from None

    def _write(self, name: str, value: int) -> None:
        tmp = self.dir / f".{name}.tmp"
        with open(tmp, "w") as f:
            f.write(f"{value}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.dir / name)
        fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def write(self, accepted: int | None, current: int | None) -> None:
        """acceptedEpoch before currentEpoch: a current epoch is never ahead of the accepted."""
        if accepted is not None:
            self._write(ACCEPTED_EPOCH_FILE, accepted)
            self.accepted = accepted
        if current is not None:
            self._write(CURRENT_EPOCH_FILE, current)
            self.current = current
