"""A FUSE filesystem that passes every call through to a directory and fails or delays
writes and fsyncs on command, for a server's dataDir (fusepy over Debian's libfuse2).

    python -m tests.faults.faultyfs SOURCE MOUNTPOINT CONTROL

runs in the foreground until unmounted. CONTROL is a file outside the mount, reread when
it changes; each line is one fault, and an empty file means none:

    fail fsync        fsync and fdatasync answer EIO (and keep answering it)
    fail write        write answers EIO
    fail-once fsync   the next fsync answers EIO, the ones after it succeed (fsyncgate)
    delay fsync MS    fsync waits MS milliseconds before it runs
    delay write MS    write waits MS milliseconds before it runs

`FaultyMount` starts one as a child process, waits until it is mounted, changes its faults
and unmounts it, also on failure.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

MOUNT_TIMEOUT_S = 10.0


class Faults:
    """The CONTROL file's faults, reread when its mtime changes."""

    def __init__(self, control: Path) -> None:
        self.control = control
        self._mtime: int | None = None
        self._failing: set[str] = set()
        self._delay_s: dict[str, float] = {}
        self._once: set[str] = set()
        self._lock = threading.Lock()

    def _reload(self) -> None:
        try:
            mtime = self.control.stat().st_mtime_ns
        except OSError:
            mtime = None
        if mtime == self._mtime:
            return
        failing, delay, once = set(), {}, set()
        if mtime is not None:
            for line in self.control.read_text().splitlines():
                words = line.split()
                if words[:1] == ["fail"] and len(words) == 2:
                    failing.add(words[1])
                elif words[:1] == ["fail-once"] and len(words) == 2:
                    once.add(words[1])
                elif words[:1] == ["delay"] and len(words) == 3:
                    delay[words[1]] = int(words[2]) / 1000
        self._mtime, self._failing, self._delay_s, self._once = mtime, failing, delay, once

    def enter(self, op: str) -> None:
        """Delay or fail `op` as the control file says."""
        with self._lock:
            self._reload()
            delay = self._delay_s.get(op, 0.0)
            failing = op in self._failing or op in self._once
            self._once.discard(op)
        if delay:
            time.sleep(delay)
        if failing:
            from fuse import FuseOSError

            raise FuseOSError(errno.EIO)


def _operations(source: Path, faults: Faults):
    from fuse import FuseOSError, LoggingMixIn, Operations  # noqa: F401 - LoggingMixIn for debugging

    class Passthrough(Operations):
        """Every call on the mount made on `source`, with `faults` in writes and fsyncs."""

        def _path(self, path: str) -> str:
            return str(source) + path

        def __call__(self, op, path, *args):
            try:
                return super().__call__(op, path, *args)
            except OSError as e:
                if isinstance(e, FuseOSError):
                    raise
                raise FuseOSError(e.errno or errno.EIO) from None

        def access(self, path, mode):
            if not os.access(self._path(path), mode):
                raise FuseOSError(errno.EACCES)

        def getattr(self, path, fh=None):
            st = os.lstat(self._path(path))
            return {k: getattr(st, k) for k in ("st_atime", "st_ctime", "st_gid", "st_mode",
                                                "st_mtime", "st_nlink", "st_size", "st_uid")}

        def readdir(self, path, fh):
            return [".", "..", *os.listdir(self._path(path))]

        def statfs(self, path):
            st = os.statvfs(self._path(path))
            return {k: getattr(st, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize",
                                                "f_favail", "f_ffree", "f_files", "f_flag",
                                                "f_frsize", "f_namemax")}

        def chmod(self, path, mode):
            os.chmod(self._path(path), mode)

        def chown(self, path, uid, gid):
            os.chown(self._path(path), uid, gid)

        def mkdir(self, path, mode):
            os.mkdir(self._path(path), mode)

        def rmdir(self, path):
            os.rmdir(self._path(path))

        def unlink(self, path):
            os.unlink(self._path(path))

        def rename(self, old, new):
            os.rename(self._path(old), self._path(new))

        def link(self, target, name):
            os.link(self._path(name), self._path(target))

        def utimens(self, path, times=None):
            os.utime(self._path(path), times)

        def open(self, path, flags):
            return os.open(self._path(path), flags)

        def create(self, path, mode, fi=None):
            return os.open(self._path(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)

        def read(self, path, size, offset, fh):
            return os.pread(fh, size, offset)

        def write(self, path, data, offset, fh):
            faults.enter("write")
            return os.pwrite(fh, data, offset)

        def truncate(self, path, length, fh=None):
            if fh is None:
                with open(self._path(path), "r+b") as f:
                    f.truncate(length)
            else:
                os.ftruncate(fh, length)

        def flush(self, path, fh):
            return 0  # close(2) of a dup; the data is already in the source file

        def release(self, path, fh):
            os.close(fh)

        def fsync(self, path, datasync, fh):
            faults.enter("fsync")
            if datasync:
                os.fdatasync(fh)
            else:
                os.fsync(fh)

    return Passthrough()


def main(argv: list[str]) -> None:
    from fuse import FUSE

    source, mountpoint, control = (Path(a).resolve() for a in argv)
    FUSE(_operations(source, Faults(control)), str(mountpoint), foreground=True,
         nothreads=False, fsname="zkcompat-faultyfs")


class FaultyMount:
    """The filesystem over `source`, mounted at `mountpoint` by a child process."""

    def __init__(self, source: Path, mountpoint: Path, control: Path) -> None:
        self.source, self.mountpoint, self.control = source, mountpoint, control
        source.mkdir(parents=True, exist_ok=True)
        mountpoint.mkdir(parents=True, exist_ok=True)
        self.set()
        self.log = open(mountpoint.parent / f"{mountpoint.name}.fuse.log", "wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.faults.faultyfs", str(source), str(mountpoint),
             str(control)], stdout=self.log, stderr=subprocess.STDOUT,
            cwd=Path(__file__).resolve().parents[2])
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        while not os.path.ismount(mountpoint):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise AssertionError("the FUSE filesystem did not mount: "
                                     + (mountpoint.parent / f"{mountpoint.name}.fuse.log")
                                     .read_text(errors="replace")[-2000:])
            time.sleep(0.05)

    def set(self, *faults: str) -> None:
        """Replace the faults: e.g. set("fail fsync"), set("delay fsync 1500"), set()."""
        text = "".join(f"{f}\n" for f in faults)
        self.control.write_text(text)
        now = time.time_ns()
        os.utime(self.control, ns=(now, now))

    def close(self) -> None:
        if os.path.ismount(self.mountpoint):
            subprocess.run(["umount", "--lazy", str(self.mountpoint)], capture_output=True,
                           timeout=10)
        if self.process.poll() is None:
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.log.close()


if __name__ == "__main__":
    main(sys.argv[1:])
