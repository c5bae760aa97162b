"""java/TlsClient.java, the stock ZooKeeper Java client's steps, compiled once and run with
the -D properties a test gives it (TLS over Netty, or a JAAS Client section for SASL)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.certs import PASSWORD

JAVA_SOURCE = Path(__file__).parent / "java" / "TlsClient.java"
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
SLF4J_NOP_JAR = Path("/usr/share/java/slf4j-nop.jar")
# Debian's zookeeper.jar names netty's buffer, common, handler and transport jars in its
# Class-Path but not codec and resolver, which its Netty server and client need as well.
NETTY_EXTRA_JARS = ("/usr/share/java/netty-codec.jar", "/usr/share/java/netty-resolver.jar")
JAVA_TIMEOUT_S = 60


def compile_client(out: Path) -> Path:
    if shutil.which("javac") is None or not ZOOKEEPER_JAR.exists():
        pytest.fail("javac or zookeeper.jar missing: run scripts/install-zookeeper")
    done = subprocess.run(["javac", "-d", str(out), "-cp", str(ZOOKEEPER_JAR),
                           str(JAVA_SOURCE)], capture_output=True, text=True,
                          timeout=JAVA_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    return out


def netty_tls_props(material) -> dict[str, str]:
    """The Java client's TLS: ClientCnxnSocketNetty with zookeeper.client.secure=true, its
    key and trust stores as -Dzookeeper.ssl.* properties (JKS both)."""
    return {
        "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
        "zookeeper.client.secure": "true",
        "zookeeper.ssl.trustStore.location": str(material.trust_jks),
        "zookeeper.ssl.trustStore.password": PASSWORD,
        "zookeeper.ssl.keyStore.location": str(material.client.jks),
        "zookeeper.ssl.keyStore.password": PASSWORD,
    }


def run_client(classes: Path, connect: str, path: str, acl_id: str, scheme: str,
               props: dict[str, str]) -> list[str]:
    """TlsClient's lines, less whoAmI's ip line (the client's address)."""
    classpath = ":".join((str(classes), str(ZOOKEEPER_JAR), str(SLF4J_NOP_JAR),
                          *NETTY_EXTRA_JARS))
    done = subprocess.run(
        ["java", "-Xshare:auto", "-XX:+UseSerialGC", *(f"-D{k}={v}" for k, v in props.items()),
         "-cp", classpath, "TlsClient", connect, path, acl_id, scheme],
        capture_output=True, text=True, timeout=JAVA_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if not line.startswith("whoami: ip ")]


def run_zkcli(connect: str, commands: list[str], props: dict[str, str]) -> list[str]:
    """zkCli (ZooKeeperMain, the class zkCli.sh runs; Debian's script cannot be given the
    Netty jars its classpath lacks) reading `commands` from stdin: its stdout and stderr
    lines, less the one naming the port, the watcher's lines last."""
    classpath = ":".join((str(ZOOKEEPER_JAR), str(SLF4J_NOP_JAR), *NETTY_EXTRA_JARS))
    done = subprocess.run(
        ["java", "-Xshare:auto", "-XX:+UseSerialGC", *(f"-D{k}={v}" for k, v in props.items()),
         "-cp", classpath, "org.apache.zookeeper.ZooKeeperMain", "-server", connect],
        input="".join(f"{c}\n" for c in commands) + "quit\n", capture_output=True,
        text=True, timeout=JAVA_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines() + done.stderr.splitlines()
    kept = [line for line in lines if not line.startswith("Connecting to ") and line]
    # zkCli's watcher thread prints events wherever they fall among the commands' output:
    # they come last, in a fixed order, so two runs compare line for line.
    events = sorted(line for line in kept if line.startswith(_EVENT_LINES))
    return [line for line in kept if not line.startswith(_EVENT_LINES)] + events


_EVENT_LINES = ("WATCHER::", "WatchedEvent ")
