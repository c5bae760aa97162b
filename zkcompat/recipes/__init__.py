"""Client-side recipes on kazoo: fenced locks, leader election with epochs, and the classic set."""

# Everything here runs against any server that speaks the ZooKeeper protocol (zkcompat or
# Apache ZooKeeper). Where kazoo's recipe is already correct it is reused as is.

from zkcompat.recipes.barrier import Barrier, DoubleBarrier
from zkcompat.recipes.counter import Counter
from zkcompat.recipes.discovery import ServiceRegistry
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
from zkcompat.recipes.membership import GroupMembership, MemberIdTaken
from zkcompat.recipes.semaphore import Semaphore
from zkcompat.recipes.workqueue import WorkItem, WorkQueue

__all__ = [
    "Barrier",
    "BarrierTimeout",
    "ClaimLost",
    "Counter",
    "DoubleBarrier",
    "FencedLock",
    "FencedReadLock",
    "FencedResource",
    "FencedWriteLock",
    "GroupMembership",
    "IndeterminateOutcome",
    "LeaderElection",
    "LockCancelled",
    "LockInJeopardy",
    "LockLost",
    "LockState",
    "LockTimeout",
    "MemberIdTaken",
    "MemoryTokenStore",
    "RecipeError",
    "Semaphore",
    "Sequencer",
    "ServiceRegistry",
    "StaleTokenError",
    "TokenStore",
    "WorkItem",
    "WorkQueue",
    "WrongLockError",
    "ZnodeTokenStore",
]
