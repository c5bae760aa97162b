"""The reconfig op's checks on the leader (server/reconfig.py), in ZooKeeper's order, with
a leader whose state each case sets: what the errors are and which comes first."""

from __future__ import annotations

import pytest

from zkcompat.jute import records as r
from zkcompat.jute.constants import Code
from zkcompat.server.reconfig import Reconfigurer
from zkcompat.tree.errors import KeeperError
from zkcompat.zab.leader import Leader
from zkcompat.zab.membership import Membership, QuorumServer


def server(sid: int, role: str = "participant") -> QuorumServer:
    return QuorumServer(sid, "127.0.0.1", 2000 + sid, 3000 + sid, role, "127.0.0.1", 4000 + sid)


CONFIG = Membership([server(1), server(2), server(3)], 0x100000000)


class FakeLeader:
    """The Leader's part the checks read: its configs and who is synced."""

    def __init__(self, synced=(1, 2, 3), pending: bool = False):
        self.membership = self.last_seen = CONFIG
        if pending:
            self.last_seen = CONFIG.with_version(0x100000005)
        self.synced = set(synced)

    reconfig_pending = property(lambda self: self.last_seen.version != self.membership.version)

    def synced_quorum(self, m: Membership) -> bool:
        return m.contains_quorum(self.synced)


def ask(leader, joining=None, leaving=None, members=None, version=-1, zxid=0x100000009,
        enabled=True, standalone_enabled=True):
    rec = r.ReconfigRequest(joining, leaving, members, version)
    reconfigurer = Reconfigurer(leader, enabled, standalone_enabled)
    reconfigurer.check_enabled()
    return reconfigurer.next_config(rec, zxid)


def code(**kw) -> Code:
    with pytest.raises(KeeperError) as e:
        ask(**kw)
    return e.value.code


def test_the_checks_in_zookeepers_order():
    assert code(leader=FakeLeader(), leaving="2", enabled=False) == Code.RECONFIGDISABLED
    assert code(leader=None, leaving="2") == Code.UNIMPLEMENTED  # standalone
    # In progress comes before a bad version, a bad version before bad arguments.
    assert code(leader=FakeLeader(pending=True), leaving="2,3", version=7) == \
        Code.RECONFIGINPROGRESS
    assert code(leader=FakeLeader(), leaving="2,3", version=7) == Code.BADVERSION
    assert code(leader=FakeLeader(), leaving="2,3") == Code.BADARGUMENTS  # one voter left
    assert code(leader=FakeLeader(synced=(1,)), leaving="2") == Code.NEWCONFIGNOQUORUM


@pytest.mark.parametrize("kw", [
    {"joining": "server.4"},  # no "=": "Wrong format of server string"
    {"joining": "server.4=127.0.0.1:1:2"},  # no client port
    {"joining": "server.4=127.0.0.1:2001:9"},  # server.1's quorum address
    {"leaving": "two"},
    {"members": "server.1=127.0.0.1:2001:3001;4001,group.1=1"},
])
def test_bad_arguments(kw):
    assert code(leader=FakeLeader(), **kw) == Code.BADARGUMENTS


def test_incremental_and_whole_membership_versions_the_config_by_the_txn():
    new = ask(FakeLeader(), joining="server.4=127.0.0.1:2004:3004:observer;4004", leaving="3")
    assert sorted(new.voters) == [1, 2] and new.observers == {4} and new.version == 0x100000009
    members = "server.1=127.0.0.1:2001:3001;4001\nserver.2=127.0.0.1:2002:3002;4002"
    whole = ask(FakeLeader(), members=members.replace("\n", ","))
    assert sorted(whole.voters) == [1, 2]
    assert ask(FakeLeader(), members=members, version=0x100000000).version == 0x100000009


def test_standalone_disabled_allows_one_voter():
    assert code(leader=FakeLeader(), leaving="2,3") == Code.BADARGUMENTS
    one = ask(FakeLeader(synced=(1,)), leaving="2,3", standalone_enabled=False)
    assert one.voters == {1}


def test_the_real_leader_says_what_is_synced():
    leader = Leader(1, CONFIG, 1, 1, 0, reconfig_enabled=True)
    assert not leader.synced_quorum(CONFIG)  # nobody has synced with it yet
    assert leader.synced_quorum(Membership([server(1)], 5))
