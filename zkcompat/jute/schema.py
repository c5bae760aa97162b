"""Every record of zookeeper.jute (ZooKeeper 3.9), declared once; records.py is generated from it.

Types are spelled as in zookeeper.jute: int, long, boolean, ustring, buffer, a record name,
or vector<T>. Field names and order are exactly zookeeper.jute's, since order is the wire
format.
"""

from __future__ import annotations

from dataclasses import dataclass

PRIMITIVES = ("byte", "boolean", "int", "long", "float", "double", "ustring", "buffer")


@dataclass(frozen=True)
class Field:
    type: str
    name: str
    # Only ConnectRequest/ConnectResponse.readOnly: clients and servers before 3.4 omit it,
    # and ZooKeeper's ProtocolManager reads it in a try/catch and echoes its presence.
    optional_trailing: bool = False


@dataclass(frozen=True)
class Record:
    module: str
    name: str
    fields: tuple[Field, ...]


def _record(module: str, name: str, *fields: tuple[str, str] | Field) -> Record:
    return Record(module, name, tuple(f if isinstance(f, Field) else Field(*f) for f in fields))


DATA = "org.apache.zookeeper.data"
PROTO = "org.apache.zookeeper.proto"
QUORUM = "org.apache.zookeeper.server.quorum"
PERSISTENCE = "org.apache.zookeeper.server.persistence"
TXN = "org.apache.zookeeper.txn"

_ACLS = ("vector<ACL>", "acl")

RECORDS: tuple[Record, ...] = (
    # module org.apache.zookeeper.data
    _record(DATA, "Id", ("ustring", "scheme"), ("ustring", "id")),
    _record(DATA, "ACL", ("int", "perms"), ("Id", "id")),
    _record(
        DATA, "Stat",
        ("long", "czxid"), ("long", "mzxid"), ("long", "ctime"), ("long", "mtime"),
        ("int", "version"), ("int", "cversion"), ("int", "aversion"),
        ("long", "ephemeralOwner"), ("int", "dataLength"), ("int", "numChildren"),
        ("long", "pzxid"),
    ),
    _record(
        DATA, "StatPersisted",
        ("long", "czxid"), ("long", "mzxid"), ("long", "ctime"), ("long", "mtime"),
        ("int", "version"), ("int", "cversion"), ("int", "aversion"),
        ("long", "ephemeralOwner"), ("long", "pzxid"),
    ),
    _record(DATA, "ClientInfo", ("ustring", "authScheme"), ("ustring", "user")),
    # module org.apache.zookeeper.proto
    _record(
        PROTO, "ConnectRequest",
        ("int", "protocolVersion"), ("long", "lastZxidSeen"), ("int", "timeOut"),
        ("long", "sessionId"), ("buffer", "passwd"),
        Field("boolean", "readOnly", optional_trailing=True),
    ),
    _record(
        PROTO, "ConnectResponse",
        ("int", "protocolVersion"), ("int", "timeOut"), ("long", "sessionId"),
        ("buffer", "passwd"),
        Field("boolean", "readOnly", optional_trailing=True),
    ),
    _record(
        PROTO, "SetWatches",
        ("long", "relativeZxid"), ("vector<ustring>", "dataWatches"),
        ("vector<ustring>", "existWatches"), ("vector<ustring>", "childWatches"),
    ),
    _record(
        PROTO, "SetWatches2",
        ("long", "relativeZxid"), ("vector<ustring>", "dataWatches"),
        ("vector<ustring>", "existWatches"), ("vector<ustring>", "childWatches"),
        ("vector<ustring>", "persistentWatches"),
        ("vector<ustring>", "persistentRecursiveWatches"),
    ),
    _record(PROTO, "RequestHeader", ("int", "xid"), ("int", "type")),
    _record(PROTO, "MultiHeader", ("int", "type"), ("boolean", "done"), ("int", "err")),
    _record(PROTO, "AuthPacket", ("int", "type"), ("ustring", "scheme"), ("buffer", "auth")),
    _record(PROTO, "ReplyHeader", ("int", "xid"), ("long", "zxid"), ("int", "err")),
    _record(PROTO, "GetDataRequest", ("ustring", "path"), ("boolean", "watch")),
    _record(PROTO, "SetDataRequest", ("ustring", "path"), ("buffer", "data"), ("int", "version")),
    _record(
        PROTO, "ReconfigRequest",
        ("ustring", "joiningServers"), ("ustring", "leavingServers"),
        ("ustring", "newMembers"), ("long", "curConfigId"),
    ),
    _record(PROTO, "SetDataResponse", ("Stat", "stat")),
    _record(PROTO, "GetSASLRequest", ("buffer", "token")),
    _record(PROTO, "SetSASLRequest", ("buffer", "token")),
    _record(PROTO, "SetSASLResponse", ("buffer", "token")),
    _record(PROTO, "CreateRequest", ("ustring", "path"), ("buffer", "data"), _ACLS, ("int", "flags")),
    _record(
        PROTO, "CreateTTLRequest",
        ("ustring", "path"), ("buffer", "data"), _ACLS, ("int", "flags"), ("long", "ttl"),
    ),
    _record(PROTO, "DeleteRequest", ("ustring", "path"), ("int", "version")),
    _record(PROTO, "GetChildrenRequest", ("ustring", "path"), ("boolean", "watch")),
    _record(PROTO, "GetAllChildrenNumberRequest", ("ustring", "path")),
    _record(PROTO, "GetChildren2Request", ("ustring", "path"), ("boolean", "watch")),
    _record(PROTO, "CheckVersionRequest", ("ustring", "path"), ("int", "version")),
    _record(PROTO, "GetMaxChildrenRequest", ("ustring", "path")),
    _record(PROTO, "GetMaxChildrenResponse", ("int", "max")),
    _record(PROTO, "SetMaxChildrenRequest", ("ustring", "path"), ("int", "max")),
    _record(PROTO, "SyncRequest", ("ustring", "path")),
    _record(PROTO, "SyncResponse", ("ustring", "path")),
    _record(PROTO, "GetACLRequest", ("ustring", "path")),
    _record(PROTO, "SetACLRequest", ("ustring", "path"), _ACLS, ("int", "version")),
    _record(PROTO, "SetACLResponse", ("Stat", "stat")),
    _record(PROTO, "AddWatchRequest", ("ustring", "path"), ("int", "mode")),
    _record(PROTO, "WatcherEvent", ("int", "type"), ("int", "state"), ("ustring", "path")),
    _record(PROTO, "ErrorResponse", ("int", "err")),
    _record(PROTO, "CreateResponse", ("ustring", "path")),
    _record(PROTO, "Create2Response", ("ustring", "path"), ("Stat", "stat")),
    _record(PROTO, "ExistsRequest", ("ustring", "path"), ("boolean", "watch")),
    _record(PROTO, "ExistsResponse", ("Stat", "stat")),
    _record(PROTO, "GetDataResponse", ("buffer", "data"), ("Stat", "stat")),
    _record(PROTO, "GetChildrenResponse", ("vector<ustring>", "children")),
    _record(PROTO, "GetAllChildrenNumberResponse", ("int", "totalNumber")),
    _record(PROTO, "GetChildren2Response", ("vector<ustring>", "children"), ("Stat", "stat")),
    _record(PROTO, "GetACLResponse", _ACLS, ("Stat", "stat")),
    _record(PROTO, "CheckWatchesRequest", ("ustring", "path"), ("int", "type")),
    _record(PROTO, "RemoveWatchesRequest", ("ustring", "path"), ("int", "type")),
    _record(PROTO, "GetEphemeralsRequest", ("ustring", "prefixPath")),
    _record(PROTO, "GetEphemeralsResponse", ("vector<ustring>", "ephemerals")),
    _record(PROTO, "WhoAmIResponse", ("vector<ClientInfo>", "clientInfo")),
    # module org.apache.zookeeper.server.quorum
    _record(QUORUM, "LearnerInfo", ("long", "serverid"), ("int", "protocolVersion"), ("long", "configVersion")),
    _record(
        QUORUM, "QuorumPacket",
        ("int", "type"), ("long", "zxid"), ("buffer", "data"), ("vector<Id>", "authinfo"),
    ),
    _record(QUORUM, "QuorumAuthPacket", ("long", "magic"), ("int", "status"), ("buffer", "token")),
    # module org.apache.zookeeper.server.persistence
    _record(PERSISTENCE, "FileHeader", ("int", "magic"), ("int", "version"), ("long", "dbid")),
    # module org.apache.zookeeper.txn
    _record(TXN, "TxnDigest", ("int", "version"), ("long", "treeDigest")),
    _record(
        TXN, "TxnHeader",
        ("long", "clientId"), ("int", "cxid"), ("long", "zxid"), ("long", "time"), ("int", "type"),
    ),
    _record(TXN, "CreateTxnV0", ("ustring", "path"), ("buffer", "data"), _ACLS, ("boolean", "ephemeral")),
    _record(
        TXN, "CreateTxn",
        ("ustring", "path"), ("buffer", "data"), _ACLS, ("boolean", "ephemeral"),
        ("int", "parentCVersion"),
    ),
    _record(
        TXN, "CreateTTLTxn",
        ("ustring", "path"), ("buffer", "data"), _ACLS, ("int", "parentCVersion"), ("long", "ttl"),
    ),
    _record(
        TXN, "CreateContainerTxn",
        ("ustring", "path"), ("buffer", "data"), _ACLS, ("int", "parentCVersion"),
    ),
    _record(TXN, "DeleteTxn", ("ustring", "path")),
    _record(TXN, "SetDataTxn", ("ustring", "path"), ("buffer", "data"), ("int", "version")),
    _record(TXN, "CheckVersionTxn", ("ustring", "path"), ("int", "version")),
    _record(TXN, "SetACLTxn", ("ustring", "path"), _ACLS, ("int", "version")),
    _record(TXN, "SetMaxChildrenTxn", ("ustring", "path"), ("int", "max")),
    _record(TXN, "CreateSessionTxn", ("int", "timeOut")),
    _record(TXN, "CloseSessionTxn", ("vector<ustring>", "paths2Delete")),
    _record(TXN, "ErrorTxn", ("int", "err")),
    _record(TXN, "Txn", ("int", "type"), ("buffer", "data")),
    _record(TXN, "MultiTxn", ("vector<Txn>", "txns")),
)

BY_NAME: dict[str, Record] = {rec.name: rec for rec in RECORDS}


def element_type(type_: str) -> str | None:
    """The T of vector<T>, or None when type_ is not a vector."""
    if type_.startswith("vector<") and type_.endswith(">"):
        return type_[len("vector<"):-1]
    return None
