"""ACL checks and fix-up as ZooKeeperServer.checkACL / PrepRequestProcessor.fixupACL."""

import pytest

from zkcompat.jute import records as r
from zkcompat.tree.acl import OPEN_ACL_UNSAFE, check_acl, digest_id, fixup_acl, ip_matches
from zkcompat.tree.errors import KeeperError


def test_digest_id_matches_zookeeper():
    # Value printed by ZooKeeper's DigestAuthenticationProvider.generateDigest("u:p").
    assert digest_id("u:p") == "u:Jq7wMyA/w2Vd5WIDAKdu4OIIFEQ="


def test_check_acl_world_digest_ip_super():
    alice = digest_id("alice:pw")
    acl = ((1, "digest", alice), (2, "ip", "10.0.0.0/8"))
    check_acl(acl, 1, [("digest", alice)])
    check_acl(acl, 2, [("ip", "10.1.2.3")])
    check_acl(acl, 16, [("super", "")])
    check_acl(OPEN_ACL_UNSAFE, 31, [])
    for perm, ids in [(2, [("digest", alice)]), (1, [("ip", "10.1.2.3")]), (1, [("ip", "11.0.0.1")])]:
        with pytest.raises(KeeperError) as e:
            check_acl(acl, perm, ids)
        assert e.value.code == -102


def test_ip_matches():
    assert ip_matches("127.0.0.1", "127.0.0.0/8")
    assert ip_matches("127.0.0.1", "127.0.0.1")
    assert not ip_matches("128.0.0.1", "127.0.0.0/8")
    assert not ip_matches("127.0.0.1", "garbage")


def test_fixup_expands_auth_and_rejects_bad_ids():
    ids = [("ip", "127.0.0.1"), ("digest", "bob:xyz")]
    got = fixup_acl("/p", [r.ACL(31, r.Id("auth", ""))], ids)
    assert got == ((31, "digest", "bob:xyz"),)
    for bad in ([], None, [r.ACL(31, r.Id("auth", ""))]):
        with pytest.raises(KeeperError) as e:
            fixup_acl("/p", bad, [("ip", "127.0.0.1")])
        assert e.value.code == -114
    for ident in (r.Id("digest", "nocolon"), r.Id("ip", "300.1.1.1"), r.Id("world", "someone"),
                  r.Id("nosuch", "x")):
        with pytest.raises(KeeperError):
            fixup_acl("/p", [r.ACL(31, ident)], [])


def test_the_codecs_shared_world_anyone_list_is_open_acl_unsafe_both_ways():
    from zkcompat.tree.acl import acl_from_records, shared_acl_records

    decoded = r.CreateRequest.from_bytes(
        r.CreateRequest("/p", b"", [r.ACL(31, r.Id("world", "anyone"))], 0).to_bytes()).acl
    assert decoded is r.OPEN_ACL_UNSAFE_RECORDS
    assert fixup_acl("/p", decoded, []) is OPEN_ACL_UNSAFE
    assert shared_acl_records(OPEN_ACL_UNSAFE) is r.OPEN_ACL_UNSAFE_RECORDS
    assert acl_from_records(r.OPEN_ACL_UNSAFE_RECORDS) is OPEN_ACL_UNSAFE


def test_fixup_removes_duplicates_and_interns():
    a = fixup_acl("/p", [r.ACL(31, r.Id("world", "anyone"))] * 2, [])
    assert a is OPEN_ACL_UNSAFE


def test_auth_ids_iterate_in_javas_concurrent_hash_map_order():
    from zkcompat.tree.acl import java_auth_order

    ids = [("ip", "127.0.0.1")] + [("digest", u) for u in
                                   ["alice:AAA=", "bob:BBB=", "carol:x", "dave:y", "eve:zz"]]
    # Printed by Java 17 iterating Collections.newSetFromMap(new ConcurrentHashMap<>()) of Ids.
    assert java_auth_order(ids) == [
        ("digest", "alice:AAA="), ("digest", "carol:x"), ("digest", "bob:BBB="),
        ("digest", "eve:zz"), ("ip", "127.0.0.1"), ("digest", "dave:y")]
