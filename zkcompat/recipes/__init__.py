"""Client-side recipes on kazoo: fenced locks and leader election, and the classic set.

Everything here runs against any server that speaks the ZooKeeper protocol (zkcompat or
Apache ZooKeeper). Where kazoo's recipe is already correct it is reused as is.
"""

from zkcompat.recipes.election import LeaderElection
from zkcompat.recipes.errors import (
    BarrierTimeout,
    ClaimLost,
    IndeterminateOutcome,
    LockCancelled,
    LockInJeopardy,
    LockLost,
    LockTimeout,
    RecipeError,
    StaleTokenError,
    WrongLockError,
)
from zkcompat.recipes.fencing import (
    FencedResource,
    MemoryTokenStore,
    Sequencer,
    TokenStore,
    ZnodeTokenStore,
)
from zkcompat.recipes.lock import FencedLock, FencedReadLock, FencedWriteLock, LockState

__all__ = [
    "BarrierTimeout",
    "ClaimLost",
    "FencedLock",
    "FencedReadLock",
    "FencedResource",
    "FencedWriteLock",
    "IndeterminateOutcome",
    "LeaderElection",
    "LockCancelled",
    "LockInJeopardy",
    "LockLost",
    "LockState",
    "LockTimeout",
    "MemoryTokenStore",
    "RecipeError",
    "Sequencer",
    "StaleTokenError",
    "TokenStore",
    "WrongLockError",
    "ZnodeTokenStore",
]
