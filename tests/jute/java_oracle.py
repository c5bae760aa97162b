"""Runs tests/jute/JuteOracle.java against Debian's ZooKeeper jars, one line per call."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SOURCE = Path(__file__).with_name("JuteOracle.java")
JARS = ("zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar", "slf4j-nop.jar")
JAVA_DIR = Path("/usr/share/java")


class JavaOracle:
    def __init__(self, build_dir: Path) -> None:
        # Missing Java fails the run: a silently skipped oracle would pass vacuously.
        for tool in ("java", "javac"):
            if shutil.which(tool) is None:
                pytest.fail(f"{tool} not found: the jute golden tests need Java 17 (apt-get install default-jdk)")
        missing = [jar for jar in JARS if not (JAVA_DIR / jar).exists()]
        if missing:
            pytest.fail(f"missing {missing} in {JAVA_DIR}: apt-get install zookeeper libslf4j-java")
        classpath = ":".join(str(JAVA_DIR / jar) for jar in JARS)
        subprocess.run(
            ["javac", "-d", str(build_dir), "-cp", classpath, str(SOURCE)],
            check=True, capture_output=True, text=True,
        )
        self.proc = subprocess.Popen(
            ["java", "-Xshare:auto", "-cp", f"{build_dir}:{classpath}", "JuteOracle"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8",
        )

    def call(self, *words: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(" ".join(words) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"JuteOracle exited with {self.proc.wait()}")
        return line.rstrip("\n")

    def ok(self, *words: str) -> list[str]:
        """The reply's words after "ok"; fails the test on an error reply."""
        reply = self.call(*words)
        assert reply.startswith("ok"), f"Java refused {words[:2]}: {reply}"
        return reply.split(" ")[1:]

    def golden(self, name: str) -> bytes:
        return bytes.fromhex(self.ok("golden", name)[0])

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)
