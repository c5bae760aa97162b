"""ZooKeeper's JVM system properties, as its start scripts hand them to java: the -D flags of
SERVER_JVMFLAGS and JVMFLAGS, after zkEnv.sh has sourced zookeeper-env.sh and java.env from
the configuration directory, each read as the zoo.cfg key it stands for. zoo.cfg wins.

How ZooKeeper 3.9 decides which value counts:
- zkServer.sh: `JVMFLAGS="$SERVER_JVMFLAGS $JVMFLAGS"`, then `java ... $JVMFLAGS ...`
  unquoted: the words split at blanks (a quote is a character, not quoting), and java keeps
  the last -D of a name, so JVMFLAGS wins over SERVER_JVMFLAGS, a later flag over an earlier.
- zkEnv.sh sources $ZOOCFGDIR/zookeeper-env.sh, then $ZOOCFGDIR/java.env, as shell: an
  assignment there replaces the variable the environment gave.
- QuorumPeerConfig.parseProperties: a zoo.cfg key K it does not handle itself becomes the
  system property "zookeeper." + K (System.setProperty, over any -D) before the server reads
  it; its own keys (tickTime, clientPort, ...) are never system properties.
- A few properties have no "zookeeper." prefix (jute.maxbuffer, readonlymode.enabled,
  znode.container.*, java.security.auth.login.config): in ZooKeeper only -D sets them.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from zkcompat.config import status as config_status
from zkcompat.config.properties import ConfigError

log = logging.getLogger("zkcompat.config")  # as every module of config/

PROPERTY_PREFIX = "zookeeper."
# In java's command-line order (zkServer.sh): a -D in JVMFLAGS overrides the same one here.
JVM_FLAGS_ENV = ("SERVER_JVMFLAGS", "JVMFLAGS")
CONF_DIR_ENV = "ZOOCFGDIR"  # zkEnv.sh's configuration directory, when set
ENV_SCRIPTS = ("zookeeper-env.sh", "java.env")  # zkEnv.sh sources them in this order
ENV_SCRIPT_TIMEOUT_S = 10.0

# System properties ZooKeeper reads without the prefix (BinaryInputArchive, QuorumPeer.run,
# ZooKeeperServerMain's ContainerManager, Environment.JAAS_CONF_KEY): zkcompat reads them
# under the same names, which are its zoo.cfg keys too.
UNPREFIXED = frozenset((
    "jute.maxbuffer", "readonlymode.enabled", "znode.container.checkIntervalMs",
    "znode.container.maxPerMinute", "znode.container.maxNeverUsedIntervalMs",
    "java.security.auth.login.config"))
# QuorumPeerConfig.parseProperties' own keys: read from zoo.cfg only, never as a property
# (-Dzookeeper.tickTime does nothing to ZooKeeper). multiAddress.* are the exception: its
# defaults are the zookeeper.multiAddress.* properties.
ZOO_CFG_ONLY = frozenset((
    "dataDir", "dataLogDir", "clientPort", "localSessionsEnabled",
    "localSessionsUpgradingEnabled", "clientPortAddress", "secureClientPort",
    "secureClientPortAddress", "observerMasterPort", "clientPortListenBacklog", "tickTime",
    "maxClientCnxns", "minSessionTimeout", "maxSessionTimeout", "initLimit", "syncLimit",
    "connectToLearnerMasterLimit", "electionAlg", "quorumListenOnAllIPs", "peerType",
    "syncEnabled", "dynamicConfigFile", "autopurge.snapRetainCount", "autopurge.purgeInterval",
    "standaloneEnabled", "reconfigEnabled", "sslQuorum", "portUnification",
    "sslQuorumReloadCertFiles", "quorum.auth.enableSasl", "quorum.auth.serverRequireSasl",
    "quorum.auth.learnerRequireSasl", "quorum.auth.learner.saslLoginContext",
    "quorum.auth.server.saslLoginContext", "quorum.auth.kerberos.servicePrincipal",
    "quorum.cnxn.threads.size", "jvm.pause.info-threshold.ms", "jvm.pause.warn-threshold.ms",
    "jvm.pause.sleep.time.ms", "jvm.pause.monitor", "oraclePath",
    # zkcompat's own zoo.cfg keys, which no ZooKeeper reads as a property: a stale
    # -Dzookeeper.superDigest that ZooKeeper ignored must not make a super user here.
    "superDigest", "quorumSync"))
ZOO_CFG_ONLY_PREFIXES = ("server.", "group.", "weight.", "metricsProvider.")
# Properties of ZooKeeper's own namespaces: an unknown one is more likely a misspelling than
# a JVM setting, and is warned about as an unknown zoo.cfg key is.
NAMESPACES = (PROPERTY_PREFIX, "jute.", "znode.", "readonlymode.")
# ZooKeeper's logging (log4j.properties, logback.xml, zkServer.sh) and JMX: obeyed by
# ZooKeeper's JVM, not by zkcompat, which logs to stderr (--log-level, --log-format).
LOGGING_PREFIXES = ("zookeeper.log.", "zookeeper.root.logger", "zookeeper.console.threshold",
                    "zookeeper.tracelog.", "zookeeper.jmx.log4j.disable")
# The Java client's settings: JVMFLAGS reaches zkCli.sh too, and ZooKeeper's server ignores
# them as zkcompat does, so they are not warned about.
CLIENT_PROPERTIES = frozenset((
    "zookeeper.clientCnxnSocket", "zookeeper.client.secure", "zookeeper.sasl.client",
    "zookeeper.sasl.clientconfig", "zookeeper.sasl.client.username",
    "zookeeper.sasl.client.canonicalize.hostname", "zookeeper.server.realm",
    "zookeeper.server.principal", "zookeeper.request.timeout",
    "zookeeper.disableAutoWatchReset", "zookeeper.kinit"))
# A java option that is no -D but loads code ZooKeeper's JVM would run (a metrics exporter).
AGENT_OPTIONS = ("-javaagent:", "-agentlib:", "-agentpath:")


@dataclass(frozen=True)
class SystemProperties:
    """The -D flags, sorted by what zkcompat does with them."""

    # zoo.cfg key -> value, for every flag zkcompat reads (zoo.cfg's own keys still win)
    settings: dict[str, str] = field(default_factory=dict)
    flags: dict[str, str] = field(default_factory=dict)  # zoo.cfg key -> the flag's name
    # "-Dname" (or an agent option) ZooKeeper or its JVM obeys and zkcompat does not
    not_implemented: tuple[str, ...] = ()
    # ("-Dname", why, if known): a ZooKeeper-looking name zkcompat does not read
    unknown: tuple[tuple[str, str], ...] = ()


def jvm_flags(environ: Mapping[str, str]) -> list[str]:
    """java's words from SERVER_JVMFLAGS then JVMFLAGS, split as the unquoted $JVMFLAGS is."""
    return [word for name in JVM_FLAGS_ENV for word in environ.get(name, "").split()]


def properties(words: list[str]) -> dict[str, str]:
    """The -D properties of java's words: -Dname=value, -Dname alone is "", the last wins."""
    props: dict[str, str] = {}
    for word in words:
        if word.startswith("-D") and len(word) > 2 and word[2] != "=":
            name, _, value = word[2:].partition("=")
            props.pop(name, None)  # keep the order of the winning flags
            props[name] = value
    return props


def script_environment(environ: Mapping[str, str], conf_dir: Path | None) -> Mapping[str, str]:
    """environ as zkEnv.sh leaves it for java: with zookeeper-env.sh and java.env of conf_dir
    sourced by bash (only the JVM flag variables are taken back)."""
    if conf_dir is None:
        return environ
    scripts = [conf_dir / name for name in ENV_SCRIPTS if (conf_dir / name).is_file()]
    if not scripts:
        return environ
    bash = shutil.which("bash") or "/bin/bash"
    # Their output goes to stderr, so stdout carries only the variables (NUL-separated).
    sources = " ".join(f'. "${i}";' for i in range(1, len(scripts) + 1))
    printed = " ".join(f'"${{{name}-}}"' for name in JVM_FLAGS_ENV)
    command = f'{{ {sources} }} >&2; printf "%s\\0" {printed}'
    try:
        done = subprocess.run([bash, "-c", command, "zkEnv.sh", *map(str, scripts)],
                              env=dict(environ), stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=ENV_SCRIPT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ConfigError(f"{scripts[-1]}: cannot source it as zkEnv.sh does: {e}") from None
    stderr = done.stderr.decode(errors="replace").strip()
    if done.returncode != 0:
        raise ConfigError(f"{scripts[-1]}: sourcing {', '.join(map(str, scripts))} exits with "
                          f"status {done.returncode} (zkServer.sh would stop there): "
                          f"{stderr or 'no message'}")
    if stderr:
        log.warning("event=config_env_script_output files=%s output=%r",
                    ",".join(map(str, scripts)), stderr)
    values = done.stdout.decode(errors="replace").split("\0")
    return {**environ, **dict(zip(JVM_FLAGS_ENV, values, strict=False))}


def read(environ: Mapping[str, str], conf_dir: Path | None, zoo_cfg: Mapping[str, str],
         reads: Callable[[str], bool]) -> SystemProperties:
    """The system properties the JVM flags set (java.env sourced), sorted: settings zkcompat
    reads (`reads(key)` says which zoo.cfg keys it does) and zoo.cfg does not set, the ones
    it does not implement, and the unknown ones, each warned about here as an unknown zoo.cfg
    key is. A flag zoo.cfg overrules (QuorumPeerConfig sets its key over the -D) is ignored."""
    words = jvm_flags(script_environment(environ, conf_dir))
    settings: dict[str, str] = {}
    flags: dict[str, str] = {}
    not_implemented: list[str] = []
    unknown: list[tuple[str, str]] = []
    for name, value in properties(words).items():
        key, why = _zoo_cfg_key(name)
        if key is not None and _given(zoo_cfg, key, reads):
            continue
        if key is not None and reads(key):
            settings[key], flags[key] = value, name
        if key is not None and (reads(key) or config_status.lookup(key) is not None):
            if config_status.not_implemented(key, value):
                not_implemented.append(f"-D{name}")
        elif name in CLIENT_PROPERTIES:
            continue
        elif not name.startswith(NAMESPACES) or name.startswith(LOGGING_PREFIXES):
            not_implemented.append(f"-D{name}")  # the JVM's, a library's or the logging's
        else:
            unknown.append((f"-D{name}", why))
    not_implemented += [w.split("=", 1)[0] for w in words if w.startswith(AGENT_OPTIONS)]
    for flag, why in unknown:
        log.warning("event=config_unknown_key key=%s%s", flag, f" detail={why!r}" if why else "")
    return SystemProperties(settings, flags, tuple(not_implemented), tuple(unknown))


def _zoo_cfg_key(name: str) -> tuple[str | None, str]:
    """The zoo.cfg key a property stands for in ZooKeeper, else None and why, if known."""
    if name in UNPREFIXED:
        return name, ""
    if not name.startswith(PROPERTY_PREFIX):
        return None, ""
    key = name[len(PROPERTY_PREFIX):]
    if key in ZOO_CFG_ONLY or key.startswith(ZOO_CFG_ONLY_PREFIXES):
        return None, f"{key} is read from zoo.cfg only"
    if key in UNPREFIXED:
        return None, f"ZooKeeper reads -D{key}, without {PROPERTY_PREFIX}"
    if key.startswith(PROPERTY_PREFIX):
        return None, ""
    return key, ""


def _given(zoo_cfg: Mapping[str, str], key: str, reads: Callable[[str], bool]) -> bool:
    """Whether zoo.cfg sets this setting: as the key, or as zookeeper.key where zkcompat
    reads that spelling too (jute.maxbuffer has no other)."""
    if key in zoo_cfg:
        return True
    other = PROPERTY_PREFIX + key
    return key not in UNPREFIXED and other in zoo_cfg and reads(other)
