"""The framed reply of each successful write, built from its ApplyResult: the Stat comes
straight from the node (SetDataResponse, SetACLResponse: the Stat alone)."""

from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.jute.multi import encode_multi_response
from zkcompat.jute.reply import encode_create_reply, encode_reply, encode_reply_raw


class MultiBody:
    """Adapts a list of multi results to the record interface encode_reply expects."""

    __slots__ = ("results",)

    def __init__(self, results):
        self.results = results

    def encode(self, out: bytearray) -> None:
        encode_multi_response(out, self.results)


def _create_reply(xid, zxid, rc):
    return encode_create_reply(xid, zxid, rc.path)


def _create2_reply(xid, zxid, rc):
    return encode_create_reply(xid, zxid, rc.path, rc.node.stat_bytes())


def _stat_reply(xid, zxid, rc):
    return encode_reply_raw(xid, zxid, rc.node.stat_bytes())


def _reconfig_reply(xid, zxid, rc):
    """FinalRequestProcessor: the config now committed, and the config node's Stat."""
    return encode_reply(xid, zxid, 0, r.GetDataResponse(rc.node.data, rc.node.stat()))


def _multi_reply(xid, zxid, rc):
    return encode_reply(xid, zxid, 0, _multi_body(rc))


def _multi_create_result(rc):
    return r.CreateResponse(rc.path)


def _multi_create2_result(rc):
    return r.Create2Response(rc.path, rc.stat)


def _multi_set_data_result(rc):
    return r.SetDataResponse(rc.stat)


def _multi_body(rc):
    results = []
    for sub in rc.multi:
        t = sub.type
        if t == OpCode.ERROR:
            results.append((OpCode.ERROR, r.ErrorResponse(sub.err)))
        else:
            build = MULTI_RESULT.get(t)
            results.append((t, build(sub) if build is not None else None))
    return MultiBody(results)


WRITE_REPLY = {
    OpCode.CREATE: _create_reply,
    OpCode.CREATE2: _create2_reply,
    OpCode.CREATE_CONTAINER: _create2_reply,
    OpCode.CREATE_TTL: _create2_reply,
    OpCode.SET_DATA: _stat_reply,
    OpCode.SET_ACL: _stat_reply,
    OpCode.RECONFIG: _reconfig_reply,
    OpCode.MULTI: _multi_reply,
}

MULTI_RESULT = {
    OpCode.CREATE: _multi_create_result,
    OpCode.CREATE2: _multi_create2_result,
    OpCode.CREATE_CONTAINER: _multi_create2_result,
    OpCode.CREATE_TTL: _multi_create2_result,
    OpCode.SET_DATA: _multi_set_data_result,
}
