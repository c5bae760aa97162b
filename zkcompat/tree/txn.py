"""Txn: what the leader's prep hands to ZAB and every replica applies, in zxid order.

`hdr` is ZooKeeper's TxnHeader (clientId, cxid, zxid, time, type). `body` is the txn
record for hdr.type; for a multi it is the list of (type, record) sub-txns, kept
decoded so apply never re-parses them, and encoded as a MultiTxn only for the log.
"""

from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.jute.errors import JuteError

# The record each txn type carries (DataTree.processTxn / SerializeUtils.deserializeTxn).
TXN_RECORD = {
    OpCode.CREATE: r.CreateTxn,
    OpCode.CREATE2: r.CreateTxn,
    OpCode.CREATE_CONTAINER: r.CreateContainerTxn,
    OpCode.CREATE_TTL: r.CreateTTLTxn,
    OpCode.DELETE: r.DeleteTxn,
    OpCode.DELETE_CONTAINER: r.DeleteTxn,
    OpCode.SET_DATA: r.SetDataTxn,
    OpCode.SET_ACL: r.SetACLTxn,
    OpCode.CHECK: r.CheckVersionTxn,
    OpCode.CREATE_SESSION: r.CreateSessionTxn,
    OpCode.CLOSE_SESSION: r.CloseSessionTxn,
    OpCode.ERROR: r.ErrorTxn,
    OpCode.RECONFIG: r.SetDataTxn,
}


class Txn:
    __slots__ = ("hdr", "body")

    def __init__(self, hdr, body):
        self.hdr = hdr
        self.body = body

    @property
    def zxid(self) -> int:
        return self.hdr.zxid

    def __repr__(self) -> str:
        return f"Txn({self.hdr!r}, {self.body!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Txn) and self.hdr == other.hdr and self.body == other.body


def encode_txn(txn: Txn) -> bytes:
    """ZooKeeper's log encoding of one txn: TxnHeader, then its record."""
    out = bytearray()
    txn.hdr.encode(out)
    if txn.hdr.type == OpCode.MULTI:
        r.MultiTxn([r.Txn(t, rec.to_bytes()) for t, rec in txn.body]).encode(out)
    elif txn.body is not None:
        txn.body.encode(out)
    return bytes(out)


def decode_txn(buf: bytes) -> Txn:
    """Inverse of encode_txn; raises JuteError on malformed input."""
    hdr, off = r.TxnHeader.decode(buf, 0)
    if hdr.type == OpCode.MULTI:
        multi, _ = r.MultiTxn.decode(buf, off)
        body = []
        for sub in multi.txns or ():
            cls = TXN_RECORD.get(sub.type)
            if cls is None:
                raise JuteError(f"invalid type of op in multi txn: {sub.type}")
            body.append((sub.type, cls.from_bytes(sub.data)))
        return Txn(hdr, body)
    cls = TXN_RECORD.get(hdr.type)
    if cls is None:
        raise JuteError(f"unknown txn type {hdr.type}")
    if hdr.type == OpCode.CLOSE_SESSION and off == len(buf):
        return Txn(hdr, None)  # before closeSessionTxnEnabled, closeSession had no record
    body, _ = cls.decode(buf, off)
    return Txn(hdr, body)
