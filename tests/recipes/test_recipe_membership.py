"""GroupMembership and ServiceRegistry: ephemeral members, change callbacks, re-joining."""

from __future__ import annotations

import pytest
from recipes_proxy import TcpProxy
from recipes_util import wait_for

from zkcompat.recipes import GroupMembership, MemberIdTaken, ServiceRegistry


def test_members_and_change_callback(zk, make_client, base):
    path = f"{base}/group"
    seen: list[list[str]] = []
    GroupMembership(zk, path).watch(seen.append)
    a_client, b_client = make_client(), make_client()
    a = GroupMembership(a_client, path, "a", b"10.0.0.1")
    a.join()
    GroupMembership(b_client, path, "b").join()
    wait_for(lambda: seen and seen[-1] == ["a", "b"], what="both members seen")
    assert a.members() == ["a", "b"]
    with pytest.raises(MemberIdTaken):
        GroupMembership(zk, path, "a").join()
    b_client.stop()  # b's session ends: it leaves the group by itself
    wait_for(lambda: seen[-1] == ["a"], what="b gone")
    a.leave()
    wait_for(lambda: seen[-1] == [], what="a gone")
    assert seen[0] == []


def test_member_rejoins_after_session_expiry(target, zk, make_client, base):
    path = f"{base}/group"
    proxy = TcpProxy(target.hosts)
    try:
        client = make_client(timeout=1.0, hosts=proxy.hosts)
        member = GroupMembership(client, path, "m")
        member.join()
        proxy.pause()
        wait_for(lambda: zk.get_children(path) == [], what="session expired")
        proxy.drop()
        proxy.resume()
        wait_for(lambda: member.rejoins == 1 and zk.get_children(path) == ["m"],
                 what="member back")
        stat = zk.exists(f"{path}/m")
        assert stat.ephemeralOwner == client.client_id[0]
    finally:
        proxy.close()


def test_service_discovery_register_and_watch(zk, make_client, base):
    registry = ServiceRegistry(zk, f"{base}/services")
    seen: list[dict] = []
    registry.watch("billing", seen.append)
    instance_client = make_client()
    ServiceRegistry(instance_client, f"{base}/services").register(
        "billing", "host-a:8080", {"host": "host-a", "port": 8080}
    )
    wait_for(lambda: seen[-1] == {"host-a:8080": {"host": "host-a", "port": 8080}},
             what="instance seen")
    other = ServiceRegistry(make_client(), f"{base}/services")
    other.register("billing", "host-b:8080", {"host": "host-b", "port": 8080})
    wait_for(lambda: set(seen[-1]) == {"host-a:8080", "host-b:8080"}, what="two instances")
    assert registry.instances("billing")["host-b:8080"]["host"] == "host-b"
    instance_client.stop()  # host-a dies
    wait_for(lambda: set(seen[-1]) == {"host-b:8080"}, what="dead instance gone")
    other.unregister("billing", "host-b:8080")
    wait_for(lambda: seen[-1] == {}, what="all gone")
    assert registry.instances("nothing-here") == {}
