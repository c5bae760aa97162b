"""The zoo.cfg settings ZooKeeper 3.9 obeys and zkcompat does not: config.load names every one
a file sets in a single start-up warning (event=config_not_implemented), never silently.

A setting is listed here under the name a zoo.cfg gives it: QuorumPeerConfig's own keys, or
a system property without its "zookeeper." prefix (ZooKeeper turns an unknown zoo.cfg key K
into the system property zookeeper.K). `obeyed` is None when zkcompat lacks the setting
whatever its value, or says which values zkcompat obeys anyway because it always behaves
that way (ZooKeeper's default, as a rule). The security settings zkcompat obeys
(secureClientPort, ssl.*, sslQuorum, portUnification, ssl.quorum.*, quorum.auth.*,
authProvider.N, serverCnxnFactory, X509AuthenticationProvider.superUser,
superUser, sasl.serverconfig, enforce.auth.*, sessionRequireClientSASLAuth,
allowSaslFailedClients, kerberos.removeHostFromPrincipal, kerberos.removeRealmFromPrincipal,
kerberos.canonicalizeHostNames)
are read by zkcompat.security and are not listed here; the
ssl.* ones it does not obey are.
"""

from collections.abc import Callable
from dataclasses import dataclass

ZOOKEEPER_PREFIX = "zookeeper."


@dataclass(frozen=True, slots=True)
class Unsupported:
    key: str
    zookeeper_default: str
    obeyed: Callable[[str], bool] | None  # None: no value is obeyed
    why: str


def _is(*words: str) -> Callable[[str], bool]:
    """The value, trimmed and in any case, is one of words."""
    allowed = {w.lower() for w in words}
    return lambda v: v.strip().lower() in allowed


def _is_not(*words: str) -> Callable[[str], bool]:
    """ZooKeeper's `!getProperty(k).equals("no")` style: anything but these words (exactly)."""
    return lambda v: v.strip() not in words


_NO_JVM = "zkcompat is one Python process on one event loop: there is no such JVM or thread pool"
_NO_FILES = "zkcompat's txn log and snapshots live in LevelDB, not in ZooKeeper's files"
_TLS_LACKS = "the client port's TLS has no such option yet (issue 17)"

UNSUPPORTED: tuple[Unsupported, ...] = (
    # -- storage
    Unsupported("preAllocSize", "65536", None, _NO_FILES),
    Unsupported("snapSizeLimitInKb", "4194304", None,
                "a snapshot is taken every snapCount txns, never by log size"),
    Unsupported("txnLogSizeLimitInKb", "-1", None, _NO_FILES),
    Unsupported("commitLogCount", "500", None,
                "a learner's DIFF is read from the txn log; there is no in-memory commit list"),
    Unsupported("fsync.warningthresholdms", "1000", _is("1000"),
                "a sync slower than 1000 ms is always what counts as slow"),
    Unsupported("snapshot.compression.method", "(none)", None, _NO_FILES),
    Unsupported("snapshot.trust.empty", "false", None, _NO_FILES),
    Unsupported("serializeLastProcessedZxid.enabled", "true", None, _NO_FILES),
    # FileTxnSnapLog: false makes a missing dataDir, or one without a snapshot, stop start-up
    # (zkServer.sh sets -Dzookeeper.datadir.autocreate=false for ZOO_DATADIR_AUTOCREATE_DISABLE).
    Unsupported("datadir.autocreate", "true", _is("true"), "dataDir is always created"),
    Unsupported("db.autocreate", "true", _is("true"),
                "an empty dataDir always starts an empty database"),
    # -- client connections and requests
    Unsupported("clientPortListenBacklog", "-1", None, "the listen backlog is asyncio's"),
    Unsupported("maxResponseCacheSize", "400", None, "there is no response cache"),
    Unsupported("maxGetChildrenResponseCacheSize", "400", None, "there is no response cache"),
    Unsupported("flushDelay", "0", None, "group commit flushes at every loop turn"),
    Unsupported("maxWriteQueuePollTime", "flushDelay/3", None,
                "group commit flushes at every loop turn"),
    Unsupported("maxBatchSize", "1000", None, "group commit flushes at every loop turn"),
    Unsupported("request_throttler.shutdownTimeout", "10000", None,
                "the request throttler is no thread to join: requests still waiting in it "
                "when the server stops, or an ensemble member leaves its role, are dropped "
                "with their connections, none let into the pipeline first"),
    Unsupported("jute.maxbuffer.extrasize", "jute.maxbuffer", None,
                "a frame over jute.maxbuffer is refused, with no extra allowance"),
    Unsupported("tcpKeepAlive", "false", None, "quorum sockets keep asyncio's defaults"),
    Unsupported("clientTcpKeepAlive", "false", None, "client sockets keep asyncio's defaults"),
    Unsupported("netty.advancedFlowControl.enabled", "false", None, _NO_JVM),
    # Boolean.getBoolean: false unless set. zkcompat always behaves as with true.
    Unsupported("netty.server.earlyDropSecureConnectionHandshakes", "false", _is("true"),
                "a server between roles closes a secure connection before its TLS handshake"),
    Unsupported("enableEagerACLCheck", "false", None,
                "ACLs are checked where ZooKeeper's default checks them"),
    Unsupported("skipACL", "no", _is_not("yes"), "ACLs are always checked"),
    Unsupported("emulate353TTLNodes", "false", _is("false"),
                "TTL nodes use the 3.5.4+ session id encoding only"),
    Unsupported("localSessionsEnabled", "false", _is("false"), "every session is global"),
    Unsupported("localSessionsUpgradingEnabled", "false", _is("false"),
                "every session is global"),
    # -- threads, JVM and watch manager internals
    *(Unsupported(name, default, None, _NO_JVM)
      for name, default in (("nio.numSelectorThreads", "sqrt(cores/2)"),
                            ("nio.numWorkerThreads", "2 x cores"),
                            ("commitProcessor.numWorkerThreads", "cores"),
                            ("commitProcessor.maxReadBatchSize", "-1"),
                            ("commitProcessor.maxCommitBatchSize", "1"),
                            ("quorum.cnxn.threads.size", "20"),
                            ("jvm.pause.info-threshold.ms", "1000"),
                            ("jvm.pause.warn-threshold.ms", "10000"),
                            ("jvm.pause.sleep.time.ms", "500"),
                            ("fips-mode", "true"),
                            ("watchManagerName", "WatchManager"),
                            ("watcherCleanThreadsNum", "2"),
                            ("watcherCleanThreshold", "1000"),
                            ("watcherCleanIntervalInSeconds", "600"),
                            ("maxInProcessingDeadWatchers", "-1"),
                            ("bitHashCacheSize", "10"),
                            ("messageTracker.BufferSize", "10"),
                            ("messageTracker.Enabled", "false"),
                            ("learner.closeSocketAsync", "false"),
                            ("leader.closeSocketAsync", "false"),
                            ("learner.asyncSending", "false"),
                            ("follower.skipLearnerRequestToNextProcessor", "false"),
                            ("forward_learner_requests_to_commit_processor_disabled", "false"))),
    Unsupported("jvm.pause.monitor", "false", _is("false"), _NO_JVM),
    # -- quorum
    Unsupported("syncEnabled", "true", _is("true"), "an observer always logs and snapshots"),
    Unsupported("observer.syncEnabled", "true", _is("true"),
                "an observer always logs and snapshots"),
    Unsupported("leaderServes", "yes", _is_not("no"), "the leader always serves clients"),
    Unsupported("cnxTimeout", "5000", _is("5000"),
                "a quorum connection attempt always times out after 5000 ms"),
    Unsupported("electionPortBindRetry", "3", None,
                "a failed bind of the election port stops the server at once"),
    Unsupported("connectToLearnerMasterLimit", "initLimit", None,
                "a learner connects within initLimit"),
    Unsupported("observerMasterPort", "(unset)", None,
                "observers follow the leader; followers serve no observers"),
    Unsupported("quorumCnxnTimeoutMs", "-1", None, "quorum connections use cnxTimeout"),
    Unsupported("leader.maxConcurrentSnapSyncs", "10", None, "syncs are not limited"),
    Unsupported("leader.maxConcurrentDiffSyncs", "100", None, "syncs are not limited"),
    Unsupported("leader.maxTimeToWaitForEpoch", "-1", None,
                "a leader waits for epochs within initLimit"),
    Unsupported("fastleader.minNotificationInterval", "200", None,
                "election notification intervals are fixed at ZooKeeper's defaults"),
    Unsupported("fastleader.maxNotificationInterval", "60000", None,
                "election notification intervals are fixed at ZooKeeper's defaults"),
    Unsupported("observer.reconnectDelayMs", "0", None, "an observer reconnects at once"),
    Unsupported("observer.election.DelayMs", "200", None, "fixed"),
    Unsupported("multiAddress.enabled", "false", _is("false"),
                "one address per server (a server.N with | is refused)"),
    Unsupported("multiAddress.reachabilityCheckTimeoutMs", "1000", None,
                "one address per server"),
    Unsupported("multiAddress.reachabilityCheckEnabled", "true", None, "one address per server"),
    Unsupported("oraclePath", "(unset)", None, "no failure oracle for 2-server ensembles"),
    Unsupported("ssl.quorum.crl", "false", _is("false"), "no CRL checks between servers"),
    Unsupported("ssl.quorum.ocsp", "false", _is("false"), "no OCSP checks between servers"),
    Unsupported("ssl.quorum.sslProvider", "(the JDK's)", None,
                "TLS is always Python's ssl module on OpenSSL"),
    Unsupported("ssl.quorum.context.supplier.class", "(unset)", None,
                "there is no JVM to load it"),
    # -- authentication and audit
    Unsupported("DigestAuthenticationProvider.enabled", "true", _is("true"),
                "the digest scheme is always on"),
    Unsupported("DigestAuthenticationProvider.digestAlg", "SHA1", _is("SHA1", "SHA-1"),
                "digests are SHA1 only"),
    Unsupported("IPAuthenticationProvider.usexforwardedfor", "false", None,
                "the ip scheme sees the socket's peer address"),
    Unsupported("ensembleAuthName", "(unset)", None, "no ensemble auth provider"),
    # -- the client port's TLS: X509Util's settings zkcompat.security does not read
    Unsupported("ssl.crl", "false", _is("false"), "no CRL checks: " + _TLS_LACKS),
    Unsupported("ssl.ocsp", "false", _is("false"), "no OCSP checks: " + _TLS_LACKS),
    Unsupported("ssl.clientHostnameVerification", "false", _is("false"),
                "client certificates are not checked against the client's host name"),
    Unsupported("ssl.sslProvider", "(Netty's default)", None,
                "TLS is always Python's ssl module on OpenSSL"),
    Unsupported("ssl.context.supplier.class", "(unset)", None, "there is no JVM to load it"),
    Unsupported("audit.enable", "false", _is("false"), "there is no audit log"),
    Unsupported("audit.impl.class", "Slf4jAuditLogger", None, "there is no audit log"),
    # -- AdminServer (Jetty) and Prometheus provider tuning
    Unsupported("admin.idleTimeout", "30000", None, "aiohttp keeps its own idle timeout"),
    Unsupported("admin.httpVersion", "11", None, "aiohttp answers HTTP/1.1"),
    Unsupported("admin.rateLimiterIntervalInMS", "300000", None,
                "the snapshot and restore commands it limits do not exist"),
    Unsupported("admin.snapshot.enabled", "true", None, "there is no snapshot command"),
    Unsupported("admin.restore.enabled", "true", None, "there is no restore command"),
    Unsupported("admin.needClientAuth", "false", _is("false"), "the AdminServer is HTTP only"),
    Unsupported("admin.forceHttps", "false", _is("false"), "the AdminServer is HTTP only"),
    Unsupported("admin.portUnification", "false", _is("false"), "the AdminServer is HTTP only"),
    Unsupported("metricsProvider.numWorkerThreads", "1", None,
                "metrics are collected on the event loop when scraped"),
    Unsupported("metricsProvider.maxQueueSize", "1000000", None,
                "metrics are collected on the event loop when scraped"),
    Unsupported("metricsProvider.workerShutdownTimeoutMs", "1000", None,
                "metrics are collected on the event loop when scraped"),
)

BY_KEY: dict[str, Unsupported] = {u.key: u for u in UNSUPPORTED}
assert len(BY_KEY) == len(UNSUPPORTED), "a key listed twice"


def lookup(key: str) -> Unsupported | None:
    """The entry for a zoo.cfg key, given with or without the "zookeeper." prefix."""
    found = BY_KEY.get(key)
    if found is None and key.startswith(ZOOKEEPER_PREFIX):
        found = BY_KEY.get(key[len(ZOOKEEPER_PREFIX):])
    return found


def not_implemented(key: str, value: str) -> bool:
    """Whether zoo.cfg's key=value asks for something zkcompat does not do."""
    entry = lookup(key)
    return entry is not None and (entry.obeyed is None or not entry.obeyed(value))
