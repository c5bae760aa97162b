"""The leader's container and TTL reaper (ZooKeeper's ContainerManager).

Every check interval it deletes, at most max_per_minute a minute: containers that have
had a child and are empty again (or were never used for max_never_used_ms), and childless
TTL nodes whose mtime + ttl has passed. Each delete is an ordinary deleteContainer request
through prep, so a node that gained a child meanwhile is left alone (NotEmpty).
"""

import asyncio
import logging

from zkcompat.jute.constants import OpCode
from zkcompat.server.clock import SYSTEM_CLOCK, Clock
from zkcompat.server.request import DeleteContainerRequest, Request
from zkcompat.tree.datatree import is_ttl_owner, ttl_of

log = logging.getLogger(__name__)


def candidates(tree, now_ms: int, max_never_used_ms: int) -> list[str]:
    out = []
    for path in sorted(tree.containers):
        node = tree.nodes.get(path)
        if node is None or node.children:
            continue
        if node.cversion > 0 or (max_never_used_ms and now_ms - node.mtime > max_never_used_ms):
            out.append(path)
    for path in sorted(tree.ttls):
        node = tree.nodes.get(path)
        if node is None or node.children or not is_ttl_owner(node.ephemeralOwner):
            continue
        ttl = ttl_of(node.ephemeralOwner)
        if ttl and now_ms - node.mtime > ttl:
            out.append(path)
    return out


async def run_reaper(leading_pipeline, interval_ms: int, max_per_minute: int,
                     max_never_used_ms: int, clock: Clock = SYSTEM_CLOCK):
    """Only a leader reaps (ContainerManager runs on the leader): `leading_pipeline()` is
    the pipeline while this server leads, else None. Ages are on the wall clock, against
    the mtime the leader stamped (ContainerManager.getElapsed)."""
    gap_s = 60.0 / max_per_minute
    while True:
        await asyncio.sleep(interval_ms / 1000)
        pipeline = leading_pipeline()
        if pipeline is None:
            continue
        now_ms = clock.wall_ms()
        for path in candidates(pipeline.tree, now_ms, max_never_used_ms):
            if leading_pipeline() is not pipeline:
                break
            log.info("event=reap_candidate path=%s", path)
            pipeline.submit(None, Request(0, 0, OpCode.DELETE_CONTAINER,
                                          DeleteContainerRequest(path), None, [], 0))
            await asyncio.sleep(gap_s)
