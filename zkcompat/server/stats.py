"""Request counters and latencies, server-wide and per connection (ZooKeeper's ServerStats
and ServerCnxn stats), as srvr, stat, cons and mntr report them. Latencies in ms."""

import time

from zkcompat.jute.constants import OpCode

# FinalRequestProcessor's lastOp names.
OP_NAMES = {
    OpCode.PING: "PING", OpCode.CREATE_SESSION: "SESS", OpCode.MULTI: "MULT",
    OpCode.MULTI_READ: "MLTR", OpCode.CREATE: "CREA", OpCode.CREATE2: "CREA",
    OpCode.CREATE_TTL: "CREA", OpCode.CREATE_CONTAINER: "CREA", OpCode.DELETE: "DELE",
    OpCode.DELETE_CONTAINER: "DELE", OpCode.SET_DATA: "SETD", OpCode.RECONFIG: "RECO",
    OpCode.SET_ACL: "SETA", OpCode.CLOSE_SESSION: "CLOS", OpCode.SYNC: "SYNC",
    OpCode.CHECK: "CHEC", OpCode.EXISTS: "EXIS", OpCode.GET_DATA: "GETD",
    OpCode.SET_WATCHES: "SETW", OpCode.SET_WATCHES2: "STW2", OpCode.ADD_WATCH: "ADDW",
    OpCode.GET_ACL: "GETA", OpCode.GET_CHILDREN: "GETC", OpCode.GET_CHILDREN2: "GETC",
    OpCode.GET_ALL_CHILDREN_NUMBER: "GETACN", OpCode.CHECK_WATCHES: "CHKW",
    OpCode.REMOVE_WATCHES: "REMW", OpCode.WHO_AM_I: "HOMI", OpCode.GET_EPHEMERALS: "GETE",
}


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class Latency:
    """Min, max and total of request latencies. Connection.reply updates it inline, once
    per request, for the connection and for the server."""

    __slots__ = ("count", "total", "min", "max")

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.count = 0
        self.total = 0
        self.min = 0
        self.max = 0

    @property
    def avg(self) -> float:
        return self.total / self.count if self.count else 0.0


class ServerStats:
    def __init__(self):
        self.packets_received = 0
        self.packets_sent = 0
        self.latency = Latency()

    def reset(self) -> None:
        self.packets_received = 0
        self.packets_sent = 0
        self.latency.reset()


class ConnectionStats:
    __slots__ = ("received", "sent", "last_op", "established_ms", "last_cxid", "last_zxid",
                 "last_response_ms", "last_latency", "latency")

    def __init__(self):
        self.received = 0
        self.sent = 0
        self.last_op = "NA"
        self.established_ms = int(time.time() * 1000)
        self.last_cxid = -1
        self.last_zxid = -1
        self.last_response_ms = 0
        self.last_latency = 0
        self.latency = Latency()

    def reset(self) -> None:
        self.received = self.sent = 0
        self.last_op = "NA"
        self.last_cxid = self.last_zxid = -1
        self.last_response_ms = self.last_latency = 0
        self.latency.reset()
