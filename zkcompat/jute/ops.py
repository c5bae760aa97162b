"""Which record follows the RequestHeader / ReplyHeader for each client op code.

A value of None means the op has no body. MULTI and MULTI_READ map to multi.MultiRequest /
multi.MultiResponse, which decode the MultiHeader-separated op list. An op code missing
from REQUEST_RECORD is not a client request (createSession, deleteContainer, error and
notification only occur inside the server or in Txns).
"""

from __future__ import annotations

from zkcompat.jute import records as r
from zkcompat.jute.constants import OpCode
from zkcompat.jute.multi import MultiRequest, MultiResponse

# What PrepRequestProcessor / FinalRequestProcessor read for each op.
REQUEST_RECORD: dict[int, type | None] = {
    OpCode.CREATE: r.CreateRequest,
    OpCode.DELETE: r.DeleteRequest,
    OpCode.EXISTS: r.ExistsRequest,
    OpCode.GET_DATA: r.GetDataRequest,
    OpCode.SET_DATA: r.SetDataRequest,
    OpCode.GET_ACL: r.GetACLRequest,
    OpCode.SET_ACL: r.SetACLRequest,
    OpCode.GET_CHILDREN: r.GetChildrenRequest,
    OpCode.SYNC: r.SyncRequest,
    OpCode.PING: None,
    OpCode.GET_CHILDREN2: r.GetChildren2Request,
    OpCode.CHECK: r.CheckVersionRequest,
    OpCode.MULTI: MultiRequest,  # multi.py
    OpCode.CREATE2: r.CreateRequest,
    OpCode.RECONFIG: r.ReconfigRequest,
    OpCode.CHECK_WATCHES: r.CheckWatchesRequest,
    OpCode.REMOVE_WATCHES: r.RemoveWatchesRequest,
    OpCode.CREATE_CONTAINER: r.CreateRequest,
    OpCode.CREATE_TTL: r.CreateTTLRequest,
    OpCode.MULTI_READ: MultiRequest,  # multi.py
    OpCode.AUTH: r.AuthPacket,
    OpCode.SET_WATCHES: r.SetWatches,
    OpCode.SASL: r.GetSASLRequest,
    OpCode.GET_EPHEMERALS: r.GetEphemeralsRequest,
    OpCode.GET_ALL_CHILDREN_NUMBER: r.GetAllChildrenNumberRequest,
    OpCode.SET_WATCHES2: r.SetWatches2,
    OpCode.ADD_WATCH: r.AddWatchRequest,
    OpCode.WHO_AM_I: None,
    OpCode.CLOSE_SESSION: None,
}

# What FinalRequestProcessor sends after a ReplyHeader with err == 0. (With err != 0 most
# ops send the header alone.)
RESPONSE_RECORD: dict[int, type | None] = {
    OpCode.CREATE: r.CreateResponse,
    OpCode.DELETE: None,
    OpCode.EXISTS: r.ExistsResponse,
    OpCode.GET_DATA: r.GetDataResponse,
    OpCode.SET_DATA: r.SetDataResponse,
    OpCode.GET_ACL: r.GetACLResponse,
    OpCode.SET_ACL: r.SetACLResponse,
    OpCode.GET_CHILDREN: r.GetChildrenResponse,
    OpCode.SYNC: r.SyncResponse,
    OpCode.PING: None,
    OpCode.GET_CHILDREN2: r.GetChildren2Response,
    OpCode.CHECK: r.SetDataResponse,  # FinalRequestProcessor: rsp = new SetDataResponse(rc.stat)
    OpCode.MULTI: MultiResponse,  # multi.py
    OpCode.CREATE2: r.Create2Response,
    OpCode.RECONFIG: r.GetDataResponse,  # the new config and its Stat
    OpCode.CHECK_WATCHES: None,
    OpCode.REMOVE_WATCHES: None,
    OpCode.CREATE_CONTAINER: r.Create2Response,
    OpCode.CREATE_TTL: r.Create2Response,
    OpCode.MULTI_READ: MultiResponse,  # multi.py
    OpCode.AUTH: None,
    OpCode.SET_WATCHES: None,
    OpCode.SASL: r.SetSASLResponse,
    OpCode.GET_EPHEMERALS: r.GetEphemeralsResponse,
    OpCode.GET_ALL_CHILDREN_NUMBER: r.GetAllChildrenNumberResponse,
    OpCode.SET_WATCHES2: None,
    OpCode.ADD_WATCH: r.ErrorResponse,  # FinalRequestProcessor: rsp = new ErrorResponse(0)
    OpCode.WHO_AM_I: r.WhoAmIResponse,
    OpCode.CLOSE_SESSION: None,
}
