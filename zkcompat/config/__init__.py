"""zoo.cfg and dataDir/myid, read as ZooKeeper reads them, into one Config.

properties: java.util.Properties; servers: server.N, myid and the quorum's checks;
security: the TLS and SASL settings; limits: the limit and throttle settings;
status: what ZooKeeper obeys and zkcompat does not; sysprops: the -D flags of the JVM
flags and java.env, read under zoo.cfg; zoocfg: Config and load().
The names other packages use are re-exported here (`from zkcompat.config import Config`).
"""

from zkcompat.config.properties import ConfigError, parse_properties
from zkcompat.config.servers import LearnerType, QuorumServer, parse_server, read_myid
from zkcompat.config.zoocfg import FOUR_LETTER_WORDS, PROMETHEUS_PROVIDER, Config, load

__all__ = [
    "FOUR_LETTER_WORDS",
    "PROMETHEUS_PROVIDER",
    "Config",
    "ConfigError",
    "LearnerType",
    "QuorumServer",
    "load",
    "parse_properties",
    "parse_server",
    "read_myid",
]
