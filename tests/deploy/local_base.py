"""A base image made from this machine, for building the Dockerfile where no registry is
reachable: the running Python 3.11 (moved to /usr/local), the installed distributions
zkcompat's install_requires need (their whole dependency closure), and the shared libraries
all of that links against (ldd). `docker import` turns the tar into an image."""

from __future__ import annotations

import configparser
import io
import re
import subprocess
import sys
import sysconfig
import tarfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

REPO_ROOT = Path(__file__).resolve().parents[2]
PREFIX = "usr/local"
LIB_DIR = "lib/x86_64-linux-gnu"  # a default search path of the loader: no ld.so.cache needed
# Parts of the standard library a server never imports.
STDLIB_SKIP = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3",
               "pydoc_data", "site-packages", "config-3.11-x86_64-linux-gnu"}
_LDD_PATH = re.compile(r"(?:=>\s*)?(/\S+)\s+\(0x")


def _requirements() -> list[Requirement]:
    setup = configparser.ConfigParser()
    setup.read(REPO_ROOT / "setup.cfg")
    lines = setup["options"]["install_requires"].splitlines()
    return [Requirement(line) for line in lines if line.strip()]


def distributions() -> list[metadata.Distribution]:
    """zkcompat's runtime dependencies and theirs, as installed here."""
    seen: dict[str, metadata.Distribution] = {}
    todo = [r for r in _requirements() if r.marker is None or r.marker.evaluate()]
    while todo:
        req = todo.pop()
        name = req.name.lower().replace("_", "-")
        if name in seen:
            continue
        dist = metadata.distribution(req.name)
        seen[name] = dist
        for sub in dist.requires or []:
            sub_req = Requirement(sub)
            if sub_req.marker is None or sub_req.marker.evaluate({"extra": ""}):
                todo.append(sub_req)
    return list(seen.values())


def _shared_libraries(paths: list[Path]) -> set[Path]:
    libs: set[Path] = set()
    for path in paths:
        out = subprocess.run(["ldd", str(path)], capture_output=True, text=True).stdout
        libs.update(Path(m.group(1)) for m in map(_LDD_PATH.search, out.splitlines()) if m)
    return libs


def build_tar(out: Path) -> Path:
    """Write the root filesystem tar to `out`."""
    executable = Path(sys.executable).resolve()
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    site = f"{PREFIX}/lib/python3.11/site-packages"
    files: dict[str, Path] = {f"{PREFIX}/bin/python3.11": executable}
    for path in stdlib.rglob("*"):
        rel = path.relative_to(stdlib)
        # Compiled modules without optimisation only: a server starts without recompiling.
        skip = set(rel.parts) & STDLIB_SKIP or (path.suffix == ".pyc" and ".opt-" in path.name)
        if path.is_file() and not skip:
            files[f"{PREFIX}/lib/python3.11/{rel.as_posix()}"] = path
    for dist in distributions():
        for f in dist.files or []:
            src = Path(dist.locate_file(f)).resolve()
            if src.is_file() and ".." not in f.parts and "__pycache__" not in f.parts:
                files[f"{site}/{f.as_posix()}"] = src
    binaries = [p for p in files.values() if p.suffix == ".so" or ".so." in p.name]
    for lib in _shared_libraries([executable, *binaries]):
        files[f"{LIB_DIR}/{lib.name}"] = lib.resolve()
    with tarfile.open(out, "w") as tar:
        for d in ("tmp", "etc", "lib64", f"{PREFIX}/bin"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
            tar.addfile(info)
        for name, src in sorted(files.items()):
            tar.add(src, arcname=name, recursive=False)
        # The loader, where every x86_64 ELF binary asks for it.
        tar.add(Path("/lib64/ld-linux-x86-64.so.2").resolve(), "lib64/ld-linux-x86-64.so.2")
        for link in ("python3", "python"):
            info = tarfile.TarInfo(f"{PREFIX}/bin/{link}")
            info.type, info.linkname = tarfile.SYMTYPE, "python3.11"
            tar.addfile(info)
        for name, text in (("etc/passwd", "root:x:0:0:root:/root:/usr/sbin/nologin\n"),
                           ("etc/group", "root:x:0:\n")):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return out
