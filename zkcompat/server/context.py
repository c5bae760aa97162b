"""ServerContext: what every stage and connection of one server shares, from its
configuration and clock to the role's pipeline of the moment."""

import asyncio
import collections
from dataclasses import dataclass, field

from zkcompat.config import Config
from zkcompat.server.clock import SYSTEM_CLOCK, Clock
from zkcompat.server.limits import ClientLimits
from zkcompat.server.loopmon import LoopMonitor
from zkcompat.server.stats import ServerStats

# DataTree.DIGEST_LOG_LIMIT: the hash command lists the last 1024 logged digests.
DIGEST_LOG_LIMIT = 1024


@dataclass(eq=False)
class ServerContext:
    """What every connection of this server shares."""

    config: Config
    pipeline: object  # the role's server.pipeline.Pipeline; None between roles
    datadir: object  # store.datadir.DataDir, or the simulator's
    snapshotter: object
    tree: object = None
    mode: str = "standalone"  # what srvr says: standalone, leader, follower, observer
    serving: bool = True  # an ensemble member serves clients only while its role does
    expirer: asyncio.Task | None = None
    quorum_config: bytes | None = None  # an ensemble's membership, as ZooKeeper prints it
    connections: set = field(default_factory=set)
    admin: object = None  # server.admin.Admin
    loopmon: LoopMonitor = field(default_factory=LoopMonitor)
    stats: ServerStats = field(default_factory=ServerStats)
    member: object = None  # an ensemble member's peer.quorum_peer.QuorumPeer
    sasl: object = None  # security.sasl.SaslAuthenticator on the client port (JAAS Server)
    # (zxid, digest version, digest) at every DIGEST_LOG_INTERVAL-th zxid applied
    digest_log: collections.deque = field(
        default_factory=lambda: collections.deque(maxlen=DIGEST_LOG_LIMIT))
    limits: ClientLimits | None = None  # connections and requests in flight, and their bounds
    clock: Clock = SYSTEM_CLOCK  # wall and monotonic time; the simulator's is virtual

    def __post_init__(self) -> None:
        if self.limits is None:
            self.limits = ClientLimits(self.config)
