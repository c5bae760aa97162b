"""SASL DIGEST-MD5 on the client port with users from a JAAS Server section: the mechanism
on RFC 2831's vectors and against pure-sasl's client, the JAAS reader, and then zkcompat
against ZooKeeper 3.8 given the same JAAS file the way zkServer.sh gives it
(-Djava.security.auth.login.config in SERVER_JVMFLAGS) and the same zoo.cfg: kazoo
(sasl_options) and the stock Java client (a JAAS Client section) authenticate, see the
same whoAmI, sasl ACLs and error codes, and a wrong password is refused alike."""

from __future__ import annotations

import re
import socket
import struct

import pytest
from java_client import run_client
from kazoo.client import KazooClient
from kazoo.security import make_acl
from puresasl.client import SASLClient
from tls_servers import log_events, outcome, plain_client, read_frame, start, tried, whoami

from conformance_tests.servers import HOST
from zkcompat.config import ConfigError, load
from zkcompat.security import jaas
from zkcompat.security.digest_md5 import (
    DigestMd5Server,
    SaslError,
    parse_directives,
    response_value,
)
from zkcompat.security.sasl import is_valid_id

KINDS = ("zookeeper", "zkcompat")
OP_SASL = 102
USERS = {"bob": "bobsecret", "alice": "alicesecret", "admin": "adminsecret",
         "super": "supersecret", "\u00e9mile": "p\u00e4ss"}
_USER_LINES = "\n".join(f'    user_{name}="{password}"' for name, password in USERS.items())
SERVER_JAAS = ("""
// The server's users, as zookeeperAdmin's SASL section writes them.
Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
""" + _USER_LINES + """;
};
/* a client section in the same file, as one file often serves both */
Client {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="bob"
    password="bobsecret";
};
""")
SASL_PROVIDER = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"

# -- the mechanism ----------------------------------------------------------------------------

# RFC 2831 section 4: the IMAP and ACAP examples (username chris, password secret).
RFC2831 = [
    ("OA6MG9tEQGm2hh", "OA6MHXh6VqTrRk", "imap/elwood.innosoft.com",
     "d388dad90d4bbd760a152321f2143af7", "ea40f60335c427b5527b84dbabcdfffd"),
    ("OA9BSXrbuRhWay", "OA9BSuZWMSpW8m", "acap/elwood.innosoft.com",
     "6084c6db3fede7352c551284490fd0fc", "2f0b3d7c3c2e486600ef710726aa2eae"),
]


@pytest.mark.parametrize("nonce, cnonce, uri, response, rspauth", RFC2831)
def test_rfc2831_vectors(nonce, cnonce, uri, response, rspauth):
    args = ("chris", "elwood.innosoft.com", "secret", nonce, cnonce, "00000001", "auth", uri,
            None)
    assert response_value(*args, "AUTHENTICATE") == response
    assert response_value(*args, "") == rspauth


def _pure_sasl(username: str, password: str) -> SASLClient:
    # kazoo's settings: service zookeeper, host zk-sasl-md5 for DIGEST-MD5.
    return SASLClient("zk-sasl-md5", service="zookeeper", mechanism="DIGEST-MD5",
                      username=username, password=password)


def _exchange(server: DigestMd5Server, client: SASLClient) -> bytes:
    challenge = server.evaluate(b"")  # ZooKeeper's client opens with an empty token
    return server.evaluate(client.process(challenge))


def test_pure_sasl_client_authenticates():
    server = DigestMd5Server(USERS.get)
    client = _pure_sasl("bob", "bobsecret")
    rspauth = _exchange(server, client)
    assert server.complete and server.username == "bob"
    client.process(rspauth)  # pure-sasl checks the server's rspauth, raising if wrong
    assert client.complete


def test_challenge_is_what_javas_server_sends():
    """ZooKeeper 3.8's challenge, seen on the wire, with its nonce (40 characters of base64
    of 30 random bytes) replaced."""
    server = DigestMd5Server(USERS.get, new_nonce=lambda: "NONCE")
    assert server.evaluate(b"") == b'realm="zk-sasl-md5",nonce="NONCE",charset=utf-8,' \
                                   b"algorithm=md5-sess"
    assert len(DigestMd5Server(USERS.get).evaluate(b"").split(b'"')[3]) == 40


@pytest.mark.parametrize("username, password", [("bob", "wrong"), ("nobody", "x")])
def test_wrong_password_or_unknown_user_fails(username, password):
    server = DigestMd5Server(USERS.get)
    with pytest.raises(SaslError):
        _exchange(server, _pure_sasl(username, password))
    assert not server.complete


def _honest_response(server, nonce: str, **change: str) -> bytes:
    d = {"username": "bob", "realm": "zk-sasl-md5", "nonce": nonce, "cnonce": "CN",
         "nc": "00000001", "qop": "auth", "digest-uri": "zookeeper/zk-sasl-md5"}
    d.update(change)
    d["response"] = response_value(d["username"], d["realm"], "bobsecret", nonce, d["cnonce"],
                                   d["nc"], d["qop"], d["digest-uri"], d.get("authzid"),
                                   "AUTHENTICATE", "charset" in d)
    return ",".join(f'{k}="{v}"' for k, v in d.items()).encode()


@pytest.mark.parametrize("change", [
    {"nc": "00000002"}, {"digest-uri": "zookeeper/elsewhere"}, {"realm": "other"},
    {"nonce": "replayed"}, {"qop": "auth-conf"}, {"charset": "iso-8859-1"},
])
def test_each_response_check(change):
    """The response is made with the right password, so only the changed directive can be
    what the server refuses."""
    server = DigestMd5Server(USERS.get, new_nonce=lambda: "N1")
    server.evaluate(b"")
    if "nonce" in change:
        token = _honest_response(server, change["nonce"])
    else:
        token = _honest_response(server, "N1", **change)
    with pytest.raises(SaslError):
        server.evaluate(token)
    fresh = DigestMd5Server(USERS.get, new_nonce=lambda: "N1")
    fresh.evaluate(b"")
    assert fresh.evaluate(_honest_response(fresh, "N1")).startswith(b"rspauth=")


def test_utf8_user_and_authzid_and_no_second_round():
    server = DigestMd5Server(USERS.get, new_nonce=lambda: "N2")
    server.evaluate(b"")
    d = {"username": "\u00e9mile", "realm": "zk-sasl-md5", "nonce": "N2", "cnonce": "C",
         "nc": "00000001", "qop": "auth", "digest-uri": "zookeeper/zk-sasl-md5",
         "charset": "utf-8", "authzid": "\u00e9mile"}
    d["response"] = response_value("\u00e9mile", "zk-sasl-md5", "p\u00e4ss", "N2", "C",
                                   "00000001", "auth", d["digest-uri"], d["authzid"],
                                   "AUTHENTICATE", True)
    server.evaluate(",".join(f'{k}="{v}"' for k, v in d.items()).encode("utf-8"))
    assert (server.username, server.authzid) == ("\u00e9mile", "\u00e9mile")
    with pytest.raises(SaslError):
        server.evaluate(b"")


def test_directives_parse_quotes_escapes_and_refuse_repeats():
    assert parse_directives(b'a="x\\"y, z", b=tok ,c=""') == {"a": 'x"y, z', "b": "tok",
                                                              "c": ""}
    for bad in (b'a="open', b"a=1,a=2", b"novalue", b"\xff"):
        with pytest.raises(SaslError):
            parse_directives(bad)


@pytest.mark.parametrize("ident, valid", [("bob", True), ("bob@EXAMPLE.COM", True),
                                          ("zk/host@EXAMPLE.COM", True), ("a/b", True),
                                          ("a@b@c", False), ("a/b/c@R", False)])
def test_sasl_acl_ids_as_kerberosname_parses_them(ident, valid):
    assert is_valid_id(ident) == valid


# -- the JAAS file ----------------------------------------------------------------------------


def test_jaas_file_is_read_as_java_reads_it():
    sections = jaas.parse(SERVER_JAAS)
    assert set(sections) == {"Server", "Client"}
    (server,) = sections["Server"]
    assert server.class_name == "org.apache.zookeeper.server.auth.DigestLoginModule"
    assert server.flag == "required"
    assert server.options == {f"user_{u}": p for u, p in USERS.items()}
    assert sections["Client"][0].options == {"username": "bob", "password": "bobsecret"}
    text = 'A { m.M optional k=\'v\' q="a\\tb\\101" ; m.N Sufficient; }; A { m.O required; };'
    parsed = jaas.parse(text)["A"]
    assert [(m.class_name, m.flag) for m in parsed] == [("m.M", "optional"),
                                                        ("m.N", "sufficient"),
                                                        ("m.O", "required")]
    assert parsed[0].options == {"k": "v", "q": "a\tbA"}


@pytest.mark.parametrize("text", ["Server { m.M required x=1 };", "Server { m.M maybe; };",
                                  'Server { m.M required x="open; };', "Server { m.M required",
                                  "/* open"])
def test_bad_jaas_file_stops_start_up(text, tmp_path):
    path = tmp_path / "bad.jaas"
    path.write_text(text)
    with pytest.raises(ConfigError, match="java.security.auth.login.config"):
        load(None, {"dataDir": str(tmp_path), "java.security.auth.login.config": str(path)})


def test_jaas_location_from_zoo_cfg_or_jvm_flags(tmp_path):
    path = tmp_path / "server.jaas"
    path.write_text(SERVER_JAAS)
    flags = {"SERVER_JVMFLAGS": f"-Xmx1g -Djava.security.auth.login.config={path}"}
    for props, environ in (({"java.security.auth.login.config": str(path)}, {}),
                           ({}, flags), ({}, {"JVMFLAGS": flags["SERVER_JVMFLAGS"]})):
        cfg = load(None, {"dataDir": str(tmp_path), **props}, environ=environ)
        assert cfg.sasl is not None and dict(cfg.sasl.users) == USERS
    assert load(None, {"dataDir": str(tmp_path)}, environ={}).sasl is None
    other_section = load(None, {"dataDir": str(tmp_path), "sasl.serverconfig": "Elsewhere"},
                         environ=flags)
    assert other_section.sasl is None  # no such section: no SASL, as in ZooKeeper
    with pytest.raises(ConfigError, match="cannot read"):
        load(None, {"dataDir": str(tmp_path),
                    "java.security.auth.login.config": str(tmp_path / "missing")})


# -- against ZooKeeper ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """Both servers with the JAAS file on their JVM flags, the SASL provider registered and
    admin as superUser; plaintext client ports."""
    jaas_path = tmp_path_factory.mktemp("jaas") / "server.jaas"
    jaas_path.write_text(SERVER_JAAS)
    flags = (f"-Djava.security.auth.login.config={jaas_path}",)
    cfg = {"authProvider.1": SASL_PROVIDER, "superUser": "admin"}
    started = {}
    try:
        for kind in KINDS:
            started[kind] = start(kind, tmp_path_factory.mktemp(kind), cfg, flags)
        yield started
    finally:
        for server in started.values():
            server.stop()


def _sasl_client(server, user: str, password: str) -> KazooClient:
    return KazooClient(hosts=server.connect_string, timeout=5.0,
                       connection_retry={"max_tries": 0},
                       sasl_options={"mechanism": "DIGEST-MD5", "username": user,
                                     "password": password})


def _story(server, path: str) -> list:
    seen = []
    bob = _sasl_client(server, "bob", "bobsecret")
    bob.start(timeout=10)
    try:
        seen.append(("whoami", sorted(s for s in whoami(bob) if s[0] != "ip")))
        bob.create(path, b"bob's", acl=[make_acl("sasl", "bob", all=True)])
        bob.create(path + "/owned", b"")
        bob.create(path + "-auth", b"", acl=[make_acl("auth", "", all=True)])
        for p in (path, path + "-auth"):
            acls, _ = bob.get_acls(p)
            seen.append(("getACL", p, [(a.perms, a.id.scheme, a.id.id) for a in acls]))
        seen.append(("invalid sasl id", outcome(
            lambda: bob.create(path + "-bad", b"", acl=[make_acl("sasl", "a@b@c")]))))
        for who, zk in (("alice", _sasl_client(server, "alice", "alicesecret")),
                        ("plaintext", plain_client(server))):
            zk.start(timeout=10)
            try:
                seen.extend((who, op, result) for op, result in tried(zk, path, set_acl=False))
            finally:
                zk.stop()
                zk.close()
        admin = _sasl_client(server, "admin", "adminsecret")
        admin.start(timeout=10)
        try:
            seen.append(("admin whoami", sorted(s for s in whoami(admin) if s[0] != "ip")))
            seen.append(("admin get", admin.get(path)[0]))
        finally:
            admin.stop()
            admin.close()
        # pure-sasl hashes a name in UTF-8 without saying charset=utf-8, so a server must
        # read it as ISO 8859-1 (RFC 2831) and the digests differ: refused on both.
        # The sasl id "super" matches every sasl ACL (SASLAuthenticationProvider.matches),
        # though it is no super user: a digest ACL still keeps it out.
        bob.create(path + "-digest", b"", acl=[make_acl("digest", "x:y", all=True)])
        named_super = _sasl_client(server, "super", "supersecret")
        named_super.start(timeout=10)
        try:
            seen.append(("sasl super", outcome(lambda: named_super.get(path)),
                         outcome(lambda: named_super.get(path + "-digest"))))
        finally:
            named_super.stop()
            named_super.close()
        seen.append(("non-ASCII user", _sasl_outcome(server, "\u00e9mile", "p\u00e4ss")))
        bob.delete(path + "/owned")
        seen.append(("bob after", bob.get(path)[0]))
    finally:
        bob.stop()
        bob.close()
    return seen


def _as_39(story: list) -> list:
    """3.9's exists() needs READ (deliberate.EXISTS_NEEDS_READ); 3.8 answers anyone."""
    return [(e[0], "exists", "NoAuthError") if e[1:] == ("exists", "ok") else e
            for e in story]


def test_kazoo_digest_md5_sees_the_same(servers):
    stories = {kind: _story(s, "/sasl-kazoo") for kind, s in servers.items()}
    assert stories["zkcompat"] == _as_39(stories["zookeeper"])
    story = stories["zkcompat"]
    assert ("whoami", [("sasl", "bob")]) in story
    assert ("getACL", "/sasl-kazoo-auth", [(31, "sasl", "bob")]) in story
    assert ("alice", "get", "NoAuthError") in story
    assert ("plaintext", "set", "NoAuthError") in story
    assert ("admin get", b"bob's") in story
    assert ("sasl super", "ok", "NoAuthError") in story
    assert ("invalid sasl id", "InvalidACLError") in story


def _sasl_outcome(server, user: str, password: str) -> str:
    """kazoo reports the session connected before its SASL exchange ends, so a refusal
    shows on the first request after start() (kazoo's state then moves from AUTH_FAILED
    to CLOSED as its connection thread ends, at a moment no test should depend on)."""
    zk = _sasl_client(server, user, password)
    try:
        zk.start(timeout=10)
        result = outcome(lambda: zk.get("/"))
        if result == "ok":
            assert zk.client_state == "CONNECTED"
        else:
            assert zk.client_state in ("AUTH_FAILED", "CLOSED"), zk.client_state
        return result
    finally:
        zk.stop()
        zk.close()


@pytest.mark.parametrize("user, password", [("bob", "wrong"), ("nobody", "secret")])
def test_wrong_password_is_refused_alike(user, password, servers):
    outcomes = {kind: _sasl_outcome(server, user, password) for kind, server in servers.items()}
    assert outcomes["zkcompat"] == outcomes["zookeeper"] == "AuthFailedError"
    for server in servers.values():  # the server goes on serving the right password
        assert _sasl_outcome(server, "bob", "bobsecret") == "ok"
    failures = log_events(servers["zkcompat"], "sasl_auth_failed")
    assert failures and all("reason=" in line for line in failures)


def test_java_client_with_a_jaas_client_section(servers, java_classes, tmp_path):
    client_jaas = tmp_path / "client.jaas"
    client_jaas.write_text(SERVER_JAAS)  # its Client section: bob
    props = {"java.security.auth.login.config": str(client_jaas)}
    outputs = {kind: run_client(java_classes, s.connect_string, "/sasl-java", "bob", "sasl",
                                props)
               for kind, s in servers.items()}
    assert outputs["zkcompat"] == outputs["zookeeper"]
    assert outputs["zkcompat"] == [
        "connect: ok",
        "whoami: sasl bob",
        "create: /sasl-java",
        "getACL: [31,s{'sasl,'bob} ]",
        "getData: x",
    ]


def _raw_sasl_refusal(server) -> tuple[bytes, list[bytes]]:
    """Over a raw socket: a session, the empty first token, then a response with a wrong
    digest; (the challenge with its nonce masked, every frame after it until the close)."""
    with socket.create_connection((HOST, server.port), timeout=5) as sock:
        connect = struct.pack(">iqiqi", 0, 0, 30000, 0, 16) + bytes(16) + b"\x00"
        sock.sendall(struct.pack(">i", len(connect)) + connect)
        read_frame(sock)

        def send_sasl(xid: int, token: bytes) -> None:
            body = struct.pack(">iii", xid, OP_SASL, len(token)) + token
            sock.sendall(struct.pack(">i", len(body)) + body)

        send_sasl(1, b"")
        challenge = read_frame(sock)
        masked = re.sub(rb'nonce="[^"]{40}"', b'nonce="N"', challenge)
        send_sasl(2, b'username="bob",realm="zk-sasl-md5",nonce="x",cnonce="y",nc=00000001,'
                     b'qop=auth,digest-uri="zookeeper/zk-sasl-md5",response=00')
        after = []
        while (frame := read_frame(sock)) is not None:
            after.append(frame)
        return masked, after


def test_challenge_and_refusal_on_the_wire_are_zookeepers(servers):
    """The challenge frame (nonce aside) and what follows a wrong response: one reply,
    xid 2, zxid 0, AUTHFAILED (-115), a null token, then the connection closed."""
    seen = {kind: _raw_sasl_refusal(server) for kind, server in servers.items()}
    assert seen["zkcompat"] == seen["zookeeper"]
    assert seen["zkcompat"][1] == [struct.pack(">iqii", 2, 0, -115, -1)]
