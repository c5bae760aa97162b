"""Txn: what the leader's prep hands to ZAB and every replica applies, in zxid order.

`hdr` is ZooKeeper's TxnHeader (clientId, cxid, zxid, time, type). `body` is the txn
record for hdr.type; for a multi it is the list of (type, record) sub-txns, kept
decoded so apply never re-parses them, and encoded as a MultiTxn only for the log.
"""

import struct

from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.jute.errors import JuteError
from zkcompat.tree.digest import DIGEST_VERSION

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
    """`zxid` is the header's, copied once: it is read at every stage (log, ZAB, apply).
    `digest` is the tree digest a leader said the tree has after this txn (a proposal's
    TxnDigest), or None."""

    __slots__ = ("hdr", "body", "zxid", "digest")

    def __init__(self, hdr, body):
        self.hdr = hdr
        self.body = body
        self.zxid = hdr.zxid
        self.digest = None

    def __repr__(self) -> str:
        return f"Txn({self.hdr!r}, {self.body!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Txn) and self.hdr == other.hdr and self.body == other.body


_MULTI = int(OpCode.MULTI)  # a global: enum lookups are slow per txn (docs/measurements.md)


def encode_txn(txn: Txn) -> bytes:
    """ZooKeeper's log encoding of one txn: TxnHeader, then its record."""
    hdr = txn.hdr
    if hdr.type == _MULTI:
        return hdr.to_bytes() + r.MultiTxn([r.Txn(t, rec.to_bytes()) for t, rec in txn.body]).to_bytes()
    if txn.body is None:
        return hdr.to_bytes()
    return hdr.to_bytes() + txn.body.to_bytes()


def encode_proposal(txn: Txn) -> bytes:
    """A PROPOSAL's (or INFORM's) data: the txn, then the TxnDigest of the tree after it
    when the leader predicted one (Request.getSerializeData)."""
    data = encode_txn(txn)
    digest = txn.digest
    return data if digest is None else data + TXN_DIGEST.pack(DIGEST_VERSION, digest)


def decode_txn(buf: bytes) -> Txn:
    """Inverse of encode_txn; raises JuteError on malformed input."""
    return decode_txn_at(buf)[0]


def decode_txn_at(buf: bytes, digest_follows: bool = False) -> tuple[Txn, int]:
    """Decode a txn and say where it ends: a PROPOSAL may carry a TxnDigest after it
    (SerializeUtils.deserializeTxn reads one if bytes remain)."""
    hdr, off = r.TxnHeader.decode(buf, 0)
    if hdr.type == OpCode.MULTI:
        multi, off = r.MultiTxn.decode(buf, off)
        body = []
        for sub in multi.txns or ():
            cls = TXN_RECORD.get(sub.type)
            if cls is None:
                raise JuteError(f"invalid type of op in multi txn: {sub.type}")
            body.append((sub.type, cls.from_bytes(sub.data)))
        return Txn(hdr, body), off
    cls = TXN_RECORD.get(hdr.type)
    if cls is None:
        raise JuteError(f"unknown txn type {hdr.type}")
    if hdr.type == OpCode.CLOSE_SESSION and (off == len(buf) or digest_follows
                                             and len(buf) - off == _DIGEST_BYTES):
        return Txn(hdr, None), off  # before closeSessionTxnEnabled, closeSession had no record
    body, off = cls.decode(buf, off)
    return Txn(hdr, body), off


TXN_DIGEST = struct.Struct(">iq")  # TxnDigest: int version, long treeDigest
_DIGEST_BYTES = TXN_DIGEST.size
