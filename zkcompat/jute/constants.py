"""ZooKeeper's numeric protocol constants, each with the Java source that defines it."""

from enum import IntEnum, IntFlag

# ClientCnxn.NOTIFICATION_XID etc. (zookeeper-server/.../ClientCnxn.java): reserved xids.
NOTIFICATION_XID = -1
PING_XID = -2
AUTH_XID = -4  # ClientCnxn.AUTHPACKET_XID
SET_WATCHES_XID = -8

# BinaryInputArchive.maxBuffer: Integer.getInteger("jute.maxbuffer", 0xfffff).
JUTE_MAXBUFFER_DEFAULT_BYTES = 0xFFFFF


class OpCode(IntEnum):
    """ZooDefs.OpCode: the `type` of a RequestHeader, MultiHeader and TxnHeader."""

    NOTIFICATION = 0
    CREATE = 1
    DELETE = 2
    EXISTS = 3
    GET_DATA = 4
    SET_DATA = 5
    GET_ACL = 6
    SET_ACL = 7
    GET_CHILDREN = 8
    SYNC = 9
    PING = 11
    GET_CHILDREN2 = 12
    CHECK = 13
    MULTI = 14
    CREATE2 = 15
    RECONFIG = 16
    CHECK_WATCHES = 17
    REMOVE_WATCHES = 18
    CREATE_CONTAINER = 19
    DELETE_CONTAINER = 20
    CREATE_TTL = 21
    MULTI_READ = 22
    AUTH = 100
    SET_WATCHES = 101
    SASL = 102
    GET_EPHEMERALS = 103
    GET_ALL_CHILDREN_NUMBER = 104
    SET_WATCHES2 = 105
    ADD_WATCH = 106
    WHO_AM_I = 107
    CREATE_SESSION = -10
    CLOSE_SESSION = -11
    ERROR = -1


class Code(IntEnum):
    """KeeperException.Code: the `err` of a ReplyHeader, MultiHeader and ErrorTxn."""

    OK = 0
    SYSTEMERROR = -1
    RUNTIMEINCONSISTENCY = -2
    DATAINCONSISTENCY = -3
    CONNECTIONLOSS = -4
    MARSHALLINGERROR = -5
    UNIMPLEMENTED = -6
    OPERATIONTIMEOUT = -7
    BADARGUMENTS = -8
    UNKNOWNSESSION = -12
    NEWCONFIGNOQUORUM = -13
    RECONFIGINPROGRESS = -14
    APIERROR = -100
    NONODE = -101
    NOAUTH = -102
    BADVERSION = -103
    NOCHILDRENFOREPHEMERALS = -108
    NODEEXISTS = -110
    NOTEMPTY = -111
    SESSIONEXPIRED = -112
    INVALIDCALLBACK = -113
    INVALIDACL = -114
    AUTHFAILED = -115
    SESSIONMOVED = -118
    NOTREADONLY = -119
    EPHEMERALONLOCALSESSION = -120
    NOWATCHER = -121
    REQUESTTIMEOUT = -122
    RECONFIGDISABLED = -123
    SESSIONCLOSEDREQUIRESASLAUTH = -124
    QUOTAEXCEEDED = -125
    THROTTLEDOP = -127


class EventType(IntEnum):
    """Watcher.Event.EventType: the `type` of a WatcherEvent."""

    NONE = -1
    NODE_CREATED = 1
    NODE_DELETED = 2
    NODE_DATA_CHANGED = 3
    NODE_CHILDREN_CHANGED = 4
    DATA_WATCH_REMOVED = 5
    CHILD_WATCH_REMOVED = 6
    PERSISTENT_WATCH_REMOVED = 7


class KeeperState(IntEnum):
    """Watcher.Event.KeeperState: the `state` of a WatcherEvent."""

    UNKNOWN = -1  # deprecated in ZooKeeper, never sent by a 3.x server
    DISCONNECTED = 0
    NO_SYNC_CONNECTED = 1  # deprecated in ZooKeeper, never sent by a 3.x server
    SYNC_CONNECTED = 3
    AUTH_FAILED = 4
    CONNECTED_READ_ONLY = 5
    SASL_AUTHENTICATED = 6
    EXPIRED = -112
    CLOSED = 7


class CreateMode(IntEnum):
    """CreateMode: the `flags` of a CreateRequest (CreateMode.fromFlag)."""

    PERSISTENT = 0
    EPHEMERAL = 1
    PERSISTENT_SEQUENTIAL = 2
    EPHEMERAL_SEQUENTIAL = 3
    CONTAINER = 4
    PERSISTENT_WITH_TTL = 5
    PERSISTENT_SEQUENTIAL_WITH_TTL = 6


class Perms(IntFlag):
    """ZooDefs.Perms: the `perms` bits of an ACL."""

    READ = 1
    WRITE = 2
    CREATE = 4
    DELETE = 8
    ADMIN = 16
    ALL = 31


class AddWatchMode(IntEnum):
    """AddWatchMode: the `mode` of an AddWatchRequest."""

    PERSISTENT = 0
    PERSISTENT_RECURSIVE = 1


class WatcherType(IntEnum):
    """Watcher.WatcherType: the `type` of CheckWatchesRequest and RemoveWatchesRequest."""

    CHILDREN = 1
    DATA = 2
    ANY = 3
    PERSISTENT = 4
    PERSISTENT_RECURSIVE = 5
