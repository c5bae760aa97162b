"""The reconfig op on the leader (PrepRequestProcessor's case, in its order): the checks,
then the next config, whose text becomes a setData of /zookeeper/config at the txn's zxid.

Incremental (`joining` "server.N=spec,..." and `leaving` "N,..." applied to the last
config seen) or not (`newMembers`, the whole membership, commas or newlines between
lines). The errors are ZooKeeper's: ReconfigDisabled, Unimplemented on a standalone
server, ReconfigInProgress, BadVersion for a stale curConfigId, BadArguments for a bad
membership, NewConfigNoQuorum unless a quorum of the new config is connected and synced,
and NoAuth for anyone but super (the node's ACL is read-only).
"""

from __future__ import annotations

import logging

from zkcompat.config.properties import ConfigError, parse_properties
from zkcompat.config.servers import parse_server
from zkcompat.jute.constants import Code
from zkcompat.tree.errors import KeeperError
from zkcompat.zab.membership import Membership

log = logging.getLogger(__name__)

# QuorumServer's id is a long: a reconfig may name a server this one could not be (myid).
RECONFIG_SID_MAX = (1 << 63) - 1


class Reconfigurer:
    """`leader` is the term's zab Leader (None on a standalone server): the committed and
    last seen configs, and who is synced."""

    def __init__(self, leader, enabled: bool, standalone_enabled: bool) -> None:
        self.leader = leader
        self.enabled = enabled
        self.standalone_enabled = standalone_enabled

    def check_enabled(self) -> None:
        if not self.enabled:
            log.error("event=reconfig_refused reason=%r", "reconfig feature is disabled")
            raise KeeperError(Code.RECONFIGDISABLED)

    def next_config(self, rec, zxid: int) -> Membership:
        """After the session check: the config this request proposes, version `zxid`."""
        leader = self.leader
        if leader is None:
            raise KeeperError(Code.UNIMPLEMENTED)  # standalone: not supported, as in ZooKeeper
        if leader.reconfig_pending:
            raise KeeperError(Code.RECONFIGINPROGRESS)
        last = leader.last_seen
        if rec.curConfigId != -1 and rec.curConfigId != last.version:
            log.info("event=reconfig_refused reason=%r", f"Reconfiguration from version "
                     f"{rec.curConfigId} failed -- last seen version is {last.version}")
            raise KeeperError(Code.BADVERSION)
        if rec.newMembers is not None:
            servers = _whole(rec.newMembers)
        else:
            servers = _incremental(last, rec.joiningServers, rec.leavingServers)
        try:
            new = Membership(servers, zxid)
        except ValueError as e:
            raise _bad(str(e)) from None
        if self.standalone_enabled and len(new.voters) < 2:
            raise _bad("Reconfig failed - new configuration must include at least 2 followers")
        if not new.voters:
            raise _bad("Reconfig failed - new configuration must include at least 1 follower")
        if not leader.synced_quorum(new):
            log.warning("event=reconfig_refused reason=%r", "Reconfig failed - there must be "
                        "a connected and synced quorum in new configuration")
            raise KeeperError(Code.NEWCONFIGNOQUORUM)
        return new


def _bad(message: str) -> KeeperError:
    log.warning("event=reconfig_refused reason=%r", message)
    return KeeperError(Code.BADARGUMENTS)


def _whole(new_members: str) -> list:
    """QuorumPeerConfig.parseDynamicConfig of the text, commas read as newlines."""
    try:
        props = parse_properties(new_members.replace(",", "\n"))
        servers = [parse_server(k, v, RECONFIG_SID_MAX) for k, v in props.items()
                   if k.startswith("server.")]
    except ConfigError as e:
        raise _bad(str(e)) from None
    others = [k for k in props if not k.startswith("server.") and k != "version"]
    if others:
        raise _bad(f"{others[0]}: not a membership key")
    return servers


def _incremental(last: Membership, joining: str | None, leaving: str | None) -> list:
    servers = dict(last.servers)
    for text in (leaving or "").split(","):
        if text.strip():
            try:
                servers.pop(int(text.strip()), None)
            except ValueError:
                raise _bad(f"leaving server {text.strip()!r} is not a server id") from None
    for joiner in (joining or "").split(","):
        if not joiner.strip():
            continue
        parts = joiner.strip().split("=")
        if len(parts) != 2:
            raise _bad("Wrong format of server string")
        key, spec = parts[0].strip(), parts[1].strip()
        key = "server." + key[key.rfind(".") + 1:]
        try:
            server = parse_server(key, spec, RECONFIG_SID_MAX)
        except ConfigError as e:
            raise _bad(str(e)) from None
        if server.client_port is None:
            raise _bad("Wrong format of server string - each server should have at least "
                       "3 ports specified")
        for other in servers.values():
            if other.sid != server.sid and _same_address(server, other):
                raise _bad("Reconfiguration failed")
        servers.pop(server.sid, None)
        servers[server.sid] = server
    return list(servers.values())


def _same_address(a, b) -> bool:
    """QuorumServer.checkAddressDuplicate: a quorum or election address both use."""
    mine = {(a.host, a.quorum_port), (a.host, a.election_port)}
    return bool(mine & {(b.host, b.quorum_port), (b.host, b.election_port)})
