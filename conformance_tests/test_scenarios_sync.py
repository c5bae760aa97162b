"""Differential scenarios: sync, whose path ZooKeeper only echoes back in SyncResponse.

Through RawClient: kazoo never sends a null path.
"""

from .harness import scenario
from .rawclient import read_ustring


@scenario
def sync_null_and_odd_paths(env):
    """sync with a null path is OK and answers a null path (FinalRequestProcessor: new
    SyncResponse(syncRequest.getPath())); no path is validated, a missing one included."""
    rc = env.raw()
    for label, path in (
        ("null", None),
        ("empty", ""),
        ("root", "/"),
        ("base", env.base),
        ("missing", env.base + "/missing"),
        ("relative", "no/leading/slash"),
        ("double slash", env.base + "//x"),
    ):
        reply = env.raw_call(f"sync {label}", rc.sync, path)
        if reply is not None and reply.err == 0:
            env.record(f"sync {label}: path", read_ustring(reply.body)[0])
            env.record(f"sync {label}: body length", len(reply.body))
    reply = env.raw_call("sync null again", rc.sync, None)
    if reply is not None and reply.err == 0:
        env.record("sync null again: body", reply.body)
    env.raw_call("then exists", rc.exists, env.base)
