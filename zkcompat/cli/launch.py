"""Servers a local run starts, of either kind: the zoo.cfg zkcompat and Apache ZooKeeper are
both given, and how Apache ZooKeeper is started (Debian's jars, its main classes, its heap).
`zkcompat ensemble` starts servers with it; so does bench/, from outside the product.
"""

from __future__ import annotations

import re
from pathlib import Path

HOST = "127.0.0.1"
ZOOKEEPER_HOME = Path("/usr/share/zookeeper")
JAVA_SHARE = Path("/usr/share/java")
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
ZOOKEEPER_QUORUM_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
ENSEMBLE_CFG = {"initLimit": 10, "syncLimit": 5}  # ticks, as ZooKeeper's sample zoo.cfg
ZOOKEEPER_HEAP_MAX = "-Xmx1g"
ZOOKEEPER_LOGGING_JARS = ("slf4j-log4j12.jar", "log4j-1.2.jar")
# Debian's zookeeper.jar names netty's buffer, common, handler and transport jars in its
# Class-Path but not codec and resolver, which ZooKeeper's TLS needs too: without them a
# TLS election port's listener thread dies of NoClassDefFoundError at its first connection
# (UnifiedServerSocket calls Netty's SslHandler), silently.
ZOOKEEPER_NETTY_JARS = ("netty-codec.jar", "netty-resolver.jar")

BASE_CFG = {
    "tickTime": 2000,
    "clientPortAddress": HOST,
    "maxClientCnxns": 0,  # every client of a local run comes from 127.0.0.1
    "forceSync": "yes",
    "snapCount": 100_000,
    "admin.enableServer": "false",
    "4lw.commands.whitelist": "*",
}


def zookeeper_classpath() -> str:
    """The jars Debian's zkEnv.sh puts on CLASSPATH, plus a log4j binding."""
    jars: list[str] = []
    try:
        text = (ZOOKEEPER_HOME / "bin" / "zkEnv.sh").read_text()
        m = re.search(r'^CLASSPATH="?([^"\n]*)"?', text, re.MULTILINE)
        if m:
            jars = [p for p in m.group(1).split(":") if p.endswith(".jar")]
    except OSError:
        pass
    if not jars:
        jars = [str(JAVA_SHARE / "zookeeper.jar")]
    jars += [str(JAVA_SHARE / j) for j in (*ZOOKEEPER_LOGGING_JARS, *ZOOKEEPER_NETTY_JARS)]
    missing = [j for j in jars if not Path(j).exists()]
    if missing:
        raise RuntimeError(f"ZooKeeper jars missing: {missing}; run scripts/install-zookeeper")
    return ":".join(jars)
