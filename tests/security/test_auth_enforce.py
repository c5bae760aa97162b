"""Sessions that must authenticate (enforce.auth.enabled / enforce.auth.schemes, and the older
sessionRequireClientSASLAuth) and zookeeper.allowSaslFailedClients: zkcompat against
ZooKeeper 3.8 under the same zoo.cfg and JAAS file. The wire (what an unauthenticated
request, a ping and a failed SASL exchange get, and that the connection then closes), kazoo
and the stock Java client each see the same on both."""

from __future__ import annotations

import re
import socket
import struct

import pytest
from java_client import run_client
from kazoo.client import KazooClient
from test_sasl_digest import SASL_PROVIDER, SERVER_JAAS
from tls_servers import log_events, outcome, read_frame, start, whoami

from conformance_tests.servers import HOST
from zkcompat.config import ConfigError, load
from zkcompat.security.enforce import auth_enforcement

KINDS = ("zookeeper", "zkcompat")
OP_GET_DATA, OP_PING, OP_SASL = 4, 11, 102
PING_XID = -2
STILL_OPEN_S = 1.0  # the servers close at once; a connection open this long stays open
SESSIONCLOSEDREQUIRESASLAUTH, AUTHFAILED = -124, -115
WRONG_DIGEST_RESPONSE = (b'username="bob",realm="zk-sasl-md5",nonce="x",cnonce="y",nc=00000001,'
                         b'qop=auth,digest-uri="zookeeper/zk-sasl-md5",response=00')
CONFIGS = {
    "enforce sasl,digest": {"authProvider.1": SASL_PROVIDER, "enforce.auth.enabled": "true",
                            "enforce.auth.schemes": "sasl, digest"},
    "sessionRequireClientSASLAuth": {"authProvider.1": SASL_PROVIDER,
                                     "sessionRequireClientSASLAuth": "true"},
    "allowSaslFailedClients": {"authProvider.1": SASL_PROVIDER,
                               "allowSaslFailedClients": "true"},
}

# -- reading the settings -------------------------------------------------------------------


def test_settings_as_authentication_helper_reads_them():
    sasl = frozenset({"sasl"})
    assert auth_enforcement({}, sasl) is None
    assert auth_enforcement({"enforce.auth.schemes": "sasl"}, sasl) is None  # not enabled
    e = auth_enforcement({"zookeeper.enforce.auth.enabled": "TRUE",
                          "enforce.auth.schemes": " sasl , digest,"}, sasl)
    assert e.schemes == {"sasl", "digest"} and e.sasl_required
    # the older switch wins over enforce.auth.* and means sasl alone
    e = auth_enforcement({"sessionRequireClientSASLAuth": "true",
                          "enforce.auth.enabled": "false", "enforce.auth.schemes": "ip"}, sasl)
    assert e.schemes == {"sasl"}
    e = auth_enforcement({"allowSaslFailedClients": "true"}, frozenset())
    assert e.allow_sasl_failed_clients and not e.schemes
    assert auth_enforcement({"enforce.auth.enabled": "yes", "enforce.auth.schemes": "ip"},
                            frozenset()) is None  # Boolean.parseBoolean: only "true"


@pytest.mark.parametrize("props, message", [
    ({"enforce.auth.enabled": "true"}, "enforce.auth.schemes must be"),
    ({"enforce.auth.enabled": "true", "enforce.auth.schemes": ""}, "scheme  is not"),
    ({"enforce.auth.enabled": "true", "enforce.auth.schemes": "sasl"}, "scheme sasl is not"),
    ({"sessionRequireClientSASLAuth": "true"}, "scheme sasl is not"),
    ({"enforce.auth.enabled": "true", "enforce.auth.schemes": "x509"}, "scheme x509 is not"),
])
def test_enforced_scheme_without_a_provider_stops_start_up(props, message, tmp_path):
    """validateConfiguredProperties: every enforced scheme needs a registered provider
    (sasl needs authProvider.N=SASLAuthenticationProvider, x509 a secure port)."""
    with pytest.raises(ConfigError, match=message):
        load(None, {"dataDir": str(tmp_path), **props}, environ={})


# -- against ZooKeeper ------------------------------------------------------------------------


@pytest.fixture(scope="module", params=list(CONFIGS))
def servers(request, tmp_path_factory):
    jaas_path = tmp_path_factory.mktemp("jaas") / "server.jaas"
    jaas_path.write_text(SERVER_JAAS)
    flags = (f"-Djava.security.auth.login.config={jaas_path}",)
    started = {}
    try:
        for kind in KINDS:
            started[kind] = start(kind, tmp_path_factory.mktemp(kind), CONFIGS[request.param],
                                  flags)
        yield request.param, started
    finally:
        for server in started.values():
            server.stop()


def _raw_session(server, requests: list) -> list[bytes]:
    """A session over a raw socket, then each (xid, op, body) after the last one's reply
    (a SASL body with a nonce gets the wrong digest), or a list of them in one write; the
    frames after the ConnectResponse until the server closes (or "<open>" if it has not,
    STILL_OPEN_S after the last reply), nonces masked."""
    with socket.create_connection((HOST, server.port), timeout=5) as sock:
        connect = struct.pack(">iqiqi", 0, 0, 30000, 0, 16) + bytes(16) + b"\x00"
        sock.sendall(struct.pack(">i", len(connect)) + connect)
        read_frame(sock)
        seen = []
        for step in requests:
            batch = step if isinstance(step, list) else [step]
            sock.sendall(b"".join(struct.pack(">iii", len(body) + 8, xid, op) + body
                                  for xid, op, body in batch))
            for _ in batch:
                frame = read_frame(sock)
                if frame is None:
                    seen.append(b"<closed>")
                    return seen
                seen.append(re.sub(rb'nonce="[^"]{40}"', b'nonce="N"', frame))
        sock.settimeout(STILL_OPEN_S)
        try:
            frame = read_frame(sock)
        except TimeoutError:
            seen.append(b"<open>")
            return seen
        seen.append(b"<closed>" if frame is None else frame)
        return seen


def _zxids_masked(seen: dict[str, list[bytes]]) -> dict[str, list[bytes]]:
    """A reply's zxid is the server's last: the two servers' histories differ (zkcompat's
    start-up probe's session has its txns), so only a refusal's zxid (0) is compared."""
    return {story: [f[:4] + b"zxid" + f[12:] if len(f) >= 16 and f[4:12] != bytes(8) else f
                    for f in frames] for story, frames in seen.items()}


def _sasl_body(token: bytes) -> bytes:
    return struct.pack(">i", len(token)) + token


def _get_data_body(path: str) -> bytes:
    return struct.pack(">i", len(path)) + path.encode() + b"\x00"


WIRE_STORIES = {
    "getData": [(1, OP_GET_DATA, _get_data_body("/"))],
    "ping": [(PING_XID, OP_PING, b"")],
    "wrong SASL": [(1, OP_SASL, _sasl_body(b"")), (2, OP_SASL, _sasl_body(WRONG_DIGEST_RESPONSE)),
                   (3, OP_GET_DATA, _get_data_body("/"))],
    "unknown op": [(1, 9999, b"")],
    # ZooKeeper disables receiving as it refuses: what was pipelined behind goes unanswered.
    "pipelined": [[(1, OP_GET_DATA, _get_data_body("/")), (2, OP_GET_DATA, _get_data_body("/")),
                   (3, OP_PING, b"")]],
}


def _kazoo(server, **kwargs) -> KazooClient:
    return KazooClient(hosts=server.connect_string, timeout=5.0,
                       connection_retry={"max_tries": 0}, **kwargs)


def _kazoo_story(server, name: str, **kwargs) -> tuple:
    zk = _kazoo(server, **kwargs)
    try:
        zk.start(timeout=10)
        first = outcome(lambda: zk.get("/"))
        ids = sorted(s for s in whoami(zk) if s[0] != "ip") if first == "ok" else None
        return name, first, ids
    finally:
        zk.stop()
        zk.close()


def _kazoo_stories(server, config: str) -> list[tuple]:
    """Without, with digest, with the right and (unless the server keeps failed SASL
    clients: kazoo then sends its response again and again, busy, until something closes
    the connection) with a wrong SASL password."""
    digest = {"auth_data": [("digest", "bob:bobsecret")]}
    wrong = [] if config == "allowSaslFailedClients" else [
        _kazoo_story(server, "sasl wrong", sasl_options={"mechanism": "DIGEST-MD5",
                                                         "username": "bob",
                                                         "password": "wrong"})]
    return [
        _kazoo_story(server, "no auth"),
        _kazoo_story(server, "digest", **digest),
        _kazoo_story(server, "sasl bob", sasl_options={"mechanism": "DIGEST-MD5",
                                                       "username": "bob",
                                                       "password": "bobsecret"}),
        *wrong,
    ]


def test_the_wire_is_zookeepers(servers):
    name, started = servers
    seen = {kind: {story: _raw_session(s, reqs) for story, reqs in WIRE_STORIES.items()}
            for kind, s in started.items()}
    assert _zxids_masked(seen["zkcompat"]) == _zxids_masked(seen["zookeeper"])
    wire = seen["zkcompat"]
    refused = struct.pack(">iqi", 1, 0, SESSIONCLOSEDREQUIRESASLAUTH)
    if name == "allowSaslFailedClients":
        assert wire["getData"][-1] == b"<open>"
        # the failed exchange answers OK with a null token, and the session goes on
        assert wire["wrong SASL"][1] == struct.pack(">iqii", 2, 0, 0, -1)
        assert wire["wrong SASL"][3] == b"<open>"
    else:
        assert wire["getData"] == [refused, b"<closed>"]
        assert wire["ping"] == [struct.pack(">iqi", PING_XID, 0, SESSIONCLOSEDREQUIRESASLAUTH),
                                b"<closed>"]
        assert wire["unknown op"] == [refused, b"<closed>"]
        assert wire["pipelined"] == [refused, b"<closed>"]
        assert wire["wrong SASL"][1:] == [
            struct.pack(">iqii", 2, 0, SESSIONCLOSEDREQUIRESASLAUTH, -1), b"<closed>"]
        assert log_events(started["zkcompat"], "auth_required")


def test_kazoo_sees_the_same(servers):
    name, started = servers
    stories = {kind: _kazoo_stories(s, name) for kind, s in started.items()}
    assert stories["zkcompat"] == stories["zookeeper"]
    story = stories["zkcompat"]
    assert ("sasl bob", "ok", [("sasl", "bob")]) in story
    if name == "enforce sasl,digest":
        assert ("no auth", "SessionClosedRequireSaslError", None) in story
        assert ("digest", "ok", [("digest", "bob")]) in story
        # kazoo's connection thread dies of the SessionClosedRequireSaslError its SASL step
        # raises (kazoo 2.x handles AuthFailedError there, not this), so a request fails
        # with ConnectionLoss, against either server.
        assert ("sasl wrong", "ConnectionLoss", None) in story
    elif name == "sessionRequireClientSASLAuth":
        assert ("digest", "SessionClosedRequireSaslError", None) in story
    else:
        assert ("no auth", "ok", []) in story


def test_java_client_sees_the_same(servers, java_classes, tmp_path):
    name, started = servers
    client_jaas = tmp_path / "client.jaas"
    client_jaas.write_text(SERVER_JAAS)  # its Client section: bob
    with_sasl = {"java.security.auth.login.config": str(client_jaas)}
    outputs = {}
    for kind, s in started.items():
        outputs[kind] = (
            run_client(java_classes, s.connect_string, "/enforce-java", "bob", "sasl",
                       with_sasl),
            run_client(java_classes, s.connect_string, "/enforce-java-plain", "anyone", "world",
                       {}),
        )
    sasl_out, plain_out = outputs["zkcompat"]
    assert sasl_out[:2] == ["connect: ok", "whoami: sasl bob"]
    if name == "allowSaslFailedClients":
        assert outputs["zkcompat"] == outputs["zookeeper"]
        return
    assert sasl_out == outputs["zookeeper"][0]
    # 3.8's whoAmI reads the refusal's absent body: a NullPointerException. The client then
    # reconnects to its session and each later request is refused again, or meets the
    # connection closing (which of the two depends on the reconnect's timing); none succeeds.
    for out in (plain_out, outputs["zookeeper"][1]):
        assert out[:2] == ["connect: ok", "whoami: NullPointerException"], out
        assert [line.split(": ")[0] for line in out[2:]] == ["create", "getACL", "getData"]
        assert {line.split(": ")[1] for line in out[2:]} <= {"CONNECTIONLOSS",
                                                             "SESSIONCLOSEDREQUIRESASLAUTH"}


def test_server_serves_on(servers):
    """After every refusal above, an authenticated session still works on both."""
    _, started = servers
    for server in started.values():
        assert _kazoo_story(server, "sasl bob", sasl_options={
            "mechanism": "DIGEST-MD5", "username": "bob", "password": "bobsecret"})[1] == "ok"
