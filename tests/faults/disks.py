"""Small disks that fill up for real: a tmpfs of a few MB mounted where a server keeps its
data, a file that takes the free space, and the space given back. Shared by the full-disk
test (test_full_disk.py) and the nemesis's disk-full case; needs root (a mount).
"""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

MOUNT_TIMEOUT_S = 10.0
FILL_CHUNK_BYTES = 1 << 20


class Tmpfs:
    """A tmpfs of `size` (mount's size=, e.g. "8m") at `mountpoint`; close() unmounts it."""

    def __init__(self, mountpoint: Path, size: str) -> None:
        assert os.geteuid() == 0, "a full disk is a tmpfs mounted here: run the tests as root"
        self.mountpoint = mountpoint
        mountpoint.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mountpoint)],
                       check=True, capture_output=True, timeout=MOUNT_TIMEOUT_S)
        self.filler = mountpoint / "filler"

    def fill(self, keep_bytes: int = 0) -> Path:
        """A file that takes all the free space but keep_bytes (or all there is, if a
        server writing at the same time takes some first: the disk is full either way)."""
        stat = os.statvfs(self.mountpoint)
        size = max(0, stat.f_bavail * stat.f_frsize - keep_bytes)
        with open(self.filler, "ab", buffering=0) as f:
            while size > 0:
                try:
                    size -= f.write(b"\0" * min(size, FILL_CHUNK_BYTES))
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    break
        return self.filler

    def free(self) -> None:
        """Space returns."""
        self.filler.unlink(missing_ok=True)

    def close(self) -> None:
        if os.path.ismount(self.mountpoint):
            subprocess.run(["umount", "--lazy", str(self.mountpoint)], capture_output=True,
                           timeout=MOUNT_TIMEOUT_S)
