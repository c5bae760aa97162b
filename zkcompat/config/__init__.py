"""zoo.cfg and dataDir/myid, read as ZooKeeper reads them, into one Config.

The names other packages use are re-exported here (`from zkcompat.config import Config,
load`); each lives in the module that owns it.
"""

from zkcompat.config.zoocfg import (
    FOUR_LETTER_WORDS,
    PROMETHEUS_PROVIDER,
    Config,
    ConfigError,
    LearnerType,
    QuorumServer,
    load,
    parse_properties,
    parse_server,
    read_myid,
)

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
