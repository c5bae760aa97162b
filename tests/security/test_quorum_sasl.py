"""Quorum SASL (quorum.auth.*, DIGEST-MD5): the QuorumAuthPacket wire, the DIGEST-MD5 client
(RFC 2831's vectors, against zkcompat's server), the quorum.auth settings as QuorumPeerConfig
checks them, the learner and server exchanges against each other for every pairing of
settings and any split of the stream, and both exchanges against ZooKeeper 3.8's own
SaslQuorumAuthLearner and SaslQuorumAuthServer over loopback sockets."""

from __future__ import annotations

import shutil
import socket
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from java_client import JAVA_TIMEOUT_S, SLF4J_NOP_JAR, ZOOKEEPER_JAR

from zkcompat.jute import records as r
from zkcompat.jute.errors import JuteError
from zkcompat.security import quorum_auth_packet as qap
from zkcompat.security import quorum_sasl as qs
from zkcompat.security.digest_md5 import (
    DigestMd5Client,
    DigestMd5Server,
    SaslError,
    parse_directives,
)
from zkcompat.security.quorum_auth_packet import QuorumAuthError, Status
from zkcompat.security.quorum_sasl import QuorumAuthLearnerExchange, QuorumAuthServerExchange
from zkcompat.security.quorum_sasl_settings import (
    QuorumSaslSettings,
    QuorumSaslSetupError,
    quorum_sasl_settings,
)

USERS = {"learner": "lpw", "other": "opw"}
QUORUM_URI = "zookeeper-quorum/zk-quorum-sasl-md5"
LEARNER_NEXT = b"FOLLOWERINFO-or-notification bytes from the learner"
SERVER_NEXT = b"notification bytes the server's next layer sends"
# (enableSasl, learnerRequireSasl, serverRequireSasl): the combinations QuorumPeerConfig takes.
VALID = [(False, False, False), (True, False, False), (True, True, False), (True, True, True)]


def _settings(enable: bool, learner_req: bool, server_req: bool, username: str = "learner",
              password: str = "lpw") -> QuorumSaslSettings:
    if not enable:
        return QuorumSaslSettings()
    return QuorumSaslSettings(enable, learner_req, server_req, users=USERS,
                              learner_username=username, learner_password=password)


def _whole(data: bytes) -> list[bytes]:
    return [data] if data else []


class _Run:
    """What each side ended with: its error, and every byte its next layer got (leftover
    plus whatever arrived after the exchange)."""

    learner_error: QuorumAuthError | None = None
    server_error: QuorumAuthError | None = None
    learner_next = b""
    server_next = b""


def _pump(learner: QuorumAuthLearnerExchange, server: QuorumAuthServerExchange,
          chunks: Callable[[bytes], list[bytes]] = _whole) -> _Run:
    """Both exchanges on one in-memory connection; each side's next layer sends its bytes
    as soon as its exchange is done, so they may arrive with the last auth packet."""
    run = _Run()
    l2s, s2l = bytearray(learner.start()), bytearray()
    if learner.done:
        l2s += LEARNER_NEXT
    if server.done:
        s2l += SERVER_NEXT
    l_pos = s_pos = 0
    while True:
        progressed = False
        if l_pos < len(l2s) and run.server_error is None:
            new, l_pos, progressed = bytes(l2s[l_pos:]), len(l2s), True
            for chunk in chunks(new):
                if server.done:
                    run.server_next += chunk
                    continue
                try:
                    s2l += server.feed(chunk)
                except QuorumAuthError as e:
                    run.server_error = e
                    s2l += e.to_send
                    break
                if server.done:
                    run.server_next += server.leftover
                    s2l += SERVER_NEXT
        if s_pos < len(s2l) and run.learner_error is None:
            new, s_pos, progressed = bytes(s2l[s_pos:]), len(s2l), True
            for chunk in chunks(new):
                if learner.done:
                    run.learner_next += chunk
                    continue
                try:
                    l2s += learner.feed(chunk)
                except QuorumAuthError as e:
                    run.learner_error = e
                    break
                if learner.done:
                    run.learner_next += learner.leftover
                    l2s += LEARNER_NEXT
        if not progressed:
            return run


def _splitter(cuts: list[int]) -> Callable[[bytes], list[bytes]]:
    def split(data: bytes) -> list[bytes]:
        out, i = [], 0
        for n in cuts:
            if i >= len(data):
                break
            out.append(data[i:i + n])
            i += n
        if i < len(data):
            out += [data[j:j + 1] for j in range(i, len(data))]  # the rest byte by byte
        return out
    return split


# -- the wire ---------------------------------------------------------------------------------

def test_magic_is_javas_long_and_packets_are_jute():
    # Java's -0xa0dbcafecafe1234L negates a negative literal: the value is positive.
    assert qap.QUORUM_AUTH_MAGIC_NUMBER == struct.unpack(
        ">q", ((-0xA0DBCAFECAFE1234) % 2**64).to_bytes(8, "big"))[0] > 0
    assert qap.MAGIC_BYTES == bytes.fromhex("5f2435013501edcc")
    assert qap.encode_packet(Status.SUCCESS, b"tok") == (
        bytes.fromhex("5f2435013501edcc") + struct.pack(">ii", 1, 3) + b"tok")
    assert qap.encode_packet(Status.IN_PROGRESS, None) == qap.MAGIC_BYTES + struct.pack(
        ">ii", 0, -1)
    assert qap.encode_packet(Status.ERROR, b"")[8:] == struct.pack(">ii", -1, 0)
    assert qap.next_packet_is_auth(qap.encode_packet(Status.ERROR, b"")[:8])
    # A FOLLOWERINFO QuorumPacket and an election ConnectionHeader (protocol version -65536)
    # are not auth packets.
    assert not qap.next_packet_is_auth(r.QuorumPacket(11, 0, b"x", []).to_bytes()[:8])
    assert not qap.next_packet_is_auth(struct.pack(">q", -65536))
    with pytest.raises(ValueError):
        qap.next_packet_is_auth(qap.MAGIC_BYTES[:7])


def test_packet_end_waits_for_whole_packets_and_bounds_the_token():
    packet = qap.encode_packet(Status.IN_PROGRESS, b"abc")
    assert [qap.packet_end(packet[:n]) for n in range(len(packet))] == [-1] * len(packet)
    assert qap.packet_end(packet + b"more") == len(packet)
    assert qap.decode_packet(packet).token == b"abc"
    too_long = qap.MAGIC_BYTES + struct.pack(">ii", 0, qap.TOKEN_MAX_BYTES + 1)
    for bad in (too_long, qap.MAGIC_BYTES + struct.pack(">ii", 0, -2)):
        with pytest.raises(JuteError):
            qap.packet_end(bad)


# -- the DIGEST-MD5 client --------------------------------------------------------------------

# RFC 2831 section 4's IMAP example: chris/secret at elwood.innosoft.com.
RFC_CHALLENGE = (b'realm="elwood.innosoft.com",nonce="OA6MG9tEQGm2hh",qop="auth",'
                 b"algorithm=md5-sess,charset=utf-8")


def test_client_answers_rfc2831_example():
    client = DigestMd5Client("chris", "secret", "imap", "elwood.innosoft.com",
                             new_cnonce=lambda: "OA6MHXh6VqTrRk")
    response = parse_directives(client.evaluate(RFC_CHALLENGE))
    assert response["response"] == "d388dad90d4bbd760a152321f2143af7"
    assert response["digest-uri"] == "imap/elwood.innosoft.com"
    assert (response["nc"], response["qop"], response["realm"]) == ("00000001", "auth",
                                                                   "elwood.innosoft.com")
    assert client.evaluate(b"rspauth=ea40f60335c427b5527b84dbabcdfffd") is None
    assert client.complete
    with pytest.raises(SaslError):
        client.evaluate(b"rspauth=ea40f60335c427b5527b84dbabcdfffd")


def test_client_refuses_a_wrong_rspauth():
    client = DigestMd5Client("chris", "secret", "imap", "elwood.innosoft.com",
                             new_cnonce=lambda: "OA6MHXh6VqTrRk")
    client.evaluate(RFC_CHALLENGE)
    with pytest.raises(SaslError, match="rspauth"):
        client.evaluate(b"rspauth=00000000000000000000000000000000")
    assert not client.complete


@pytest.mark.parametrize("challenge", [
    b'realm="r",nonce="n",charset=utf-8',  # no algorithm
    b'realm="r",charset=utf-8,algorithm=md5-sess',  # no nonce
    b'realm="r",nonce="n",qop="auth-int",algorithm=md5-sess',  # no qop we speak
    b'realm="r",nonce="n",charset=iso-8859-1,algorithm=md5-sess',
    b'realm="r",nonce="' + b"n" * 2048 + b'",algorithm=md5-sess',  # over 2048 bytes
])
def test_client_refuses_bad_challenges(challenge):
    with pytest.raises(SaslError):
        DigestMd5Client("u", "p", "zookeeper-quorum", "zk-quorum-sasl-md5").evaluate(challenge)


def test_client_and_server_with_quorum_names():
    server = DigestMd5Server(USERS.get, protocol=qs.PROTOCOL, server_name=qs.SERVER_NAME)
    client = DigestMd5Client("learner", "lpw", qs.PROTOCOL, qs.SERVER_NAME, authzid="learner")
    challenge = server.evaluate(b"")
    assert challenge.startswith(b'realm="zk-quorum-sasl-md5",nonce="')
    response = client.evaluate(challenge)
    assert f'digest-uri="{QUORUM_URI}"'.encode() in response
    assert b'authzid="learner"' in response
    assert client.evaluate(server.evaluate(response)) is None
    assert client.complete and server.complete and server.username == "learner"


def test_quorum_and_client_port_names_do_not_mix():
    """A client-port client (zookeeper/zk-sasl-md5) is refused by a quorum server and the
    other way round: the realm and digest-uri differ."""
    for server_args, client_args in (
            ({"protocol": qs.PROTOCOL, "server_name": qs.SERVER_NAME},
             ("zookeeper", "zk-sasl-md5")),
            ({}, (qs.PROTOCOL, qs.SERVER_NAME))):
        server = DigestMd5Server(USERS.get, **server_args)
        challenge = server.evaluate(b"")
        # The client believes the challenge's realm but sends its own digest-uri.
        response = DigestMd5Client("learner", "lpw", *client_args).evaluate(challenge)
        with pytest.raises(SaslError, match="URI"):
            server.evaluate(response)


# -- settings ---------------------------------------------------------------------------------

QUORUM_JAAS = """
QuorumServer {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    user_learner="lpw"
    user_other="opw";
};
QuorumLearner {
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="learner"
    password="lpw";
};
"""


def _jaas(tmp_path: Path, text: str = QUORUM_JAAS, name: str = "jaas.conf") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_settings_default_to_off_without_reading_jaas():
    assert quorum_sasl_settings({}, {}) == QuorumSaslSettings()
    s = quorum_sasl_settings({"quorum.auth.enableSasl": " FALSE "}, {})
    assert not s.enable_sasl and s.jaas_path is None
    assert s.learner_login_context == "QuorumLearner"
    assert s.server_login_context == "QuorumServer"
    assert s.service_principal == "zkquorum/localhost"


def test_settings_read_both_sections(tmp_path):
    path = _jaas(tmp_path)
    props = {"quorum.auth.enableSasl": "true", "quorum.auth.learnerRequireSasl": "TRUE",
             "quorum.auth.serverRequireSasl": "true",
             "quorum.auth.kerberos.servicePrincipal": "zkquorum/_HOST",
             "java.security.auth.login.config": str(path)}
    s = quorum_sasl_settings(props, {})
    assert (s.enable_sasl, s.learner_require_sasl, s.server_require_sasl) == (True,) * 3
    assert s.users == USERS and s.jaas_path == path
    assert (s.learner_username, s.learner_password) == ("learner", "lpw")
    assert s.service_principal == "zkquorum/_HOST"


def test_settings_find_jaas_in_server_jvmflags_and_other_contexts(tmp_path):
    text = QUORUM_JAAS.replace("QuorumServer", "QS").replace("QuorumLearner", "QL")
    path = _jaas(tmp_path, text)
    props = {"quorum.auth.enableSasl": "true", "quorum.auth.server.saslLoginContext": "QS",
             "quorum.auth.learner.saslLoginContext": "QL"}
    env = {"SERVER_JVMFLAGS": f"-Xmx1g -Djava.security.auth.login.config={path}"}
    s = quorum_sasl_settings(props, env)
    assert (s.server_login_context, s.learner_login_context) == ("QS", "QL")
    assert s.users == USERS and s.learner_username == "learner"
    with pytest.raises(QuorumSaslSetupError, match="'QuorumServer' could not be found"):
        quorum_sasl_settings({"quorum.auth.enableSasl": "true"}, env)


@pytest.mark.parametrize("props, key", [
    ({"quorum.auth.serverRequireSasl": "true"}, "quorum.auth.serverRequireSasl"),
    ({"quorum.auth.learnerRequireSasl": "true"}, "quorum.auth.learnerRequireSasl"),
    ({"quorum.auth.enableSasl": "true", "quorum.auth.serverRequireSasl": "true"},
     "quorum.auth.serverRequireSasl"),
    ({"quorum.auth.enableSasl": "yes"}, "quorum.auth.enableSasl"),
    ({"quorum.auth.learnerRequireSasl": "1"}, "quorum.auth.learnerRequireSasl"),
])
def test_settings_quorum_peer_config_refuses(props, key):
    with pytest.raises(QuorumSaslSetupError) as e:
        quorum_sasl_settings(props, {})
    assert str(e.value).startswith(key + ":")


@pytest.mark.parametrize("text, match", [
    (QUORUM_JAAS.replace("QuorumLearner", "Other"), "'QuorumLearner' could not be found"),
    (QUORUM_JAAS.replace("QuorumServer", "Other"), "'QuorumServer' could not be found"),
    (QUORUM_JAAS.replace("org.apache.zookeeper.server.auth.DigestLoginModule required\n"
                         '    username=',
                         "com.sun.security.auth.module.Krb5LoginModule required\n"
                         '    username='), "keyTab= and principal="),  # no ticket cache
    (QUORUM_JAAS.replace("org.apache.zookeeper.server.auth.DigestLoginModule required\n"
                         '    user_learner',
                         "org.example.Other required\n    user_learner"), "org.example.Other"),
    ('QuorumServer { broken', "jaas.conf"),
])
def test_settings_refuse_unusable_jaas(tmp_path, text, match):
    props = {"quorum.auth.enableSasl": "true",
             "java.security.auth.login.config": str(_jaas(tmp_path, text))}
    with pytest.raises(QuorumSaslSetupError, match=match):
        quorum_sasl_settings(props, {})


def test_settings_need_a_jaas_file_and_learner_credentials_when_used(tmp_path):
    with pytest.raises(QuorumSaslSetupError, match="JAAS file"):
        quorum_sasl_settings({"quorum.auth.enableSasl": "true"}, {})
    with pytest.raises(QuorumSaslSetupError, match="cannot read"):
        quorum_sasl_settings({"quorum.auth.enableSasl": "true",
                              "java.security.auth.login.config": str(tmp_path / "none")}, {})
    no_creds = _jaas(tmp_path, QUORUM_JAAS.replace('username="learner"\n    password="lpw"',
                                                   'debug="true"'))
    props = {"quorum.auth.enableSasl": "true",
             "java.security.auth.login.config": str(no_creds)}
    assert quorum_sasl_settings(props, {}).learner_username is None  # never used
    with pytest.raises(QuorumSaslSetupError, match="quorum.auth.learnerRequireSasl"):
        quorum_sasl_settings({**props, "quorum.auth.learnerRequireSasl": "true"}, {})


# -- the exchanges, in process ----------------------------------------------------------------

@pytest.mark.parametrize("server_cfg", VALID, ids=str)
@pytest.mark.parametrize("learner_cfg", VALID, ids=str)
def test_every_pairing_of_settings(learner_cfg, server_cfg):
    learner = QuorumAuthLearnerExchange(_settings(*learner_cfg))
    server = QuorumAuthServerExchange(_settings(*server_cfg))
    run = _pump(learner, server)
    learner_auths, server_enabled, server_requires = learner_cfg[1], server_cfg[0], \
        server_cfg[2]
    if learner_auths and not server_enabled:
        # NullQuorumAuthServer reads nothing: the auth packet goes to its next layer, and
        # what that layer sends back is no QuorumAuthPacket.
        assert run.learner_error is not None and run.server_error is None
        assert run.server_next.startswith(qap.MAGIC_BYTES)
        return
    if not learner_auths and server_requires:
        assert run.server_error is not None
        assert "Learner not trying to authenticate" in str(run.server_error)
        assert run.server_error.to_send == b""
        return
    assert run.learner_error is None and run.server_error is None
    assert learner.done and server.done
    assert run.server_next == LEARNER_NEXT and run.learner_next == SERVER_NEXT
    assert server.username == ("learner" if learner_auths else None)
    assert server.failure is None


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 40), max_size=30), st.sampled_from(VALID[1:]))
def test_any_split_of_the_stream(cuts, cfg):
    """Any chunking, down to single bytes, with the next layer's bytes in the same chunk as
    the last auth packet: the same outcome and every byte of the next layer kept."""
    learner = QuorumAuthLearnerExchange(_settings(*cfg))
    server = QuorumAuthServerExchange(_settings(*cfg))
    run = _pump(learner, server, _splitter(cuts))
    assert run.learner_error is None and run.server_error is None
    assert run.server_next == LEARNER_NEXT and run.learner_next == SERVER_NEXT
    assert server.username == ("learner" if cfg[1] else None)


@pytest.mark.parametrize("username, password", [("learner", "wrong"), ("nobody", "lpw")])
@pytest.mark.parametrize("server_requires", [False, True])
def test_wrong_password_or_unknown_user(username, password, server_requires):
    learner = QuorumAuthLearnerExchange(_settings(True, True, False, username, password))
    server = QuorumAuthServerExchange(_settings(True, True, server_requires))
    run = _pump(learner, server)
    assert run.learner_error is not None  # the learner got ERROR
    assert "Authentication failed" in str(run.learner_error)
    assert server.username is None
    if server_requires:
        assert run.server_error is not None
        assert run.server_error.to_send == qap.encode_packet(Status.ERROR, b"")
    else:
        # "Maintaining learner connection despite SASL authentication failure"
        assert run.server_error is None and server.done and server.failure
        assert server.leftover == b""


def test_server_waits_for_eight_bytes_then_keeps_them_all():
    server = QuorumAuthServerExchange(_settings(True, False, False))
    first = r.QuorumPacket(11, 0, b"learnerinfo", []).to_bytes()
    for i in range(7):
        assert server.feed(first[i:i + 1]) == b"" and not server.done
    assert server.feed(first[7:9]) == b"" and server.done
    assert server.leftover == first[:9] and server.username is None
    with pytest.raises(RuntimeError):
        server.feed(b"x")


def test_disabled_server_and_unrequired_learner_are_done_at_once():
    server = QuorumAuthServerExchange(QuorumSaslSettings())
    assert server.done and server.leftover == b""
    learner = QuorumAuthLearnerExchange(_settings(True, False, False))
    assert learner.done and learner.start() == b""


def _success_packet_of(learner: QuorumAuthLearnerExchange,
                       server: QuorumAuthServerExchange) -> bytes:
    challenge = server.feed(learner.start())
    return server.feed(learner.feed(challenge))


def test_learner_refuses_a_wrong_rspauth_and_bad_packets():
    cfg = _settings(True, True, True)
    learner, server = QuorumAuthLearnerExchange(cfg), QuorumAuthServerExchange(cfg)
    success = _success_packet_of(learner, server)
    assert server.done
    forged = success[:-32] + b"0" * 32
    with pytest.raises(QuorumAuthError, match="rspauth"):
        learner.feed(forged)
    assert not learner.done
    bad_replies = [
        qap.encode_packet(Status.ERROR, b""),
        qap.MAGIC_BYTES + struct.pack(">ii", 7, 0),  # unknown status: ERROR, as Java
        qap.encode_packet(Status.IN_PROGRESS, None),  # null token
        struct.pack(">qii", 1234, 0, 0),  # not the magic
        qap.MAGIC_BYTES + struct.pack(">ii", 0, qap.TOKEN_MAX_BYTES + 1),
        qap.encode_packet(Status.SUCCESS, b'realm="zk-quorum-sasl-md5",nonce="n",'
                                         b"charset=utf-8,algorithm=md5-sess"),
    ]
    for reply in bad_replies:
        learner = QuorumAuthLearnerExchange(cfg)
        learner.start()
        with pytest.raises(QuorumAuthError):
            learner.feed(reply)


def test_server_refuses_an_oversize_token_without_an_error_packet_first():
    """SaslQuorumAuthServer opens its output only after reading the first packet: a first
    packet it cannot read gets no ERROR, a later one does."""
    huge = qap.MAGIC_BYTES + struct.pack(">ii", 0, qap.TOKEN_MAX_BYTES + 1)
    server = QuorumAuthServerExchange(_settings(True, True, True))
    with pytest.raises(QuorumAuthError) as e:
        server.feed(huge)
    assert e.value.to_send == b""
    server = QuorumAuthServerExchange(_settings(True, True, True))
    challenge = server.feed(qap.encode_packet(Status.IN_PROGRESS, b""))
    with pytest.raises(QuorumAuthError) as e:
        server.feed(huge)
    assert challenge and e.value.to_send == qap.encode_packet(Status.ERROR, b"")
    lenient = QuorumAuthServerExchange(_settings(True, True, False))
    assert lenient.feed(huge) == b"" and lenient.done and lenient.failure


def test_server_authorizes_a_learner_only_as_itself():
    cfg = _settings(True, True, True)
    learner = QuorumAuthLearnerExchange(cfg)
    learner._client._authzid = "other"  # noqa: SLF001 - a client asking to act as another
    server = QuorumAuthServerExchange(cfg)
    challenge = server.feed(learner.start())
    with pytest.raises(QuorumAuthError, match="not authorized"):
        server.feed(learner.feed(challenge))


def test_server_gives_up_after_max_retries():
    """A mechanism that never completes (DIGEST-MD5 always does in two steps): after
    MAX_RETRIES challenges ZooKeeper sends ERROR and lets the learner through, even when it
    requires SASL, since it throws nothing there."""

    class Endless:
        complete = False

        def evaluate(self, token: bytes) -> bytes:
            return b"again"

    server = QuorumAuthServerExchange(_settings(True, True, True), new_server=Endless)
    packet = qap.encode_packet(Status.IN_PROGRESS, b"t")
    replies = [server.feed(packet) for _ in range(qs.MAX_RETRIES + 1)]
    assert replies[:-1] == [qap.encode_packet(Status.IN_PROGRESS, b"again")] * qs.MAX_RETRIES
    assert replies[-1] == qap.encode_packet(Status.ERROR, b"again")
    assert server.done and server.username is None


# -- against ZooKeeper's own classes ----------------------------------------------------------

JAVA_SOURCE = Path(__file__).parent / "java" / "QuorumSaslPeer.java"
JAVA_LEARNER_NEXT = b"FROM-JAVA-LEARNER"
JAVA_SERVER_NEXT = b"FROM-JAVA-SERVER"
OUR_NEXT = b"FROM-ZKCOMPAT"
SOCKET_TIMEOUT_S = 30
RECV_BYTES = 7  # small reads, so packets arrive split


@pytest.fixture(scope="module")
def quorum_peer_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("javac") is None or shutil.which("java") is None \
            or not ZOOKEEPER_JAR.exists():
        pytest.fail("java, javac or zookeeper.jar missing: run scripts/install-zookeeper")
    out = tmp_path_factory.mktemp("quorum-sasl-java")
    done = subprocess.run(["javac", "-d", str(out), "-cp", str(ZOOKEEPER_JAR),
                           str(JAVA_SOURCE)], capture_output=True, text=True,
                          timeout=JAVA_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    return out


def _java(classes: Path, jaas: Path, *args: str) -> subprocess.Popen:
    classpath = ":".join((str(classes), str(ZOOKEEPER_JAR), str(SLF4J_NOP_JAR)))
    return subprocess.Popen(
        ["java", "-Xshare:auto", "-XX:+UseSerialGC",
         f"-Djava.security.auth.login.config={jaas}", "-cp", classpath, "QuorumSaslPeer",
         *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _java_lines(proc: subprocess.Popen) -> dict[str, str]:
    out, err = proc.communicate(timeout=JAVA_TIMEOUT_S)
    assert proc.returncode == 0, err
    return dict(line.split(" ", 1) if " " in line else (line, "")
                for line in out.splitlines())


def _drive(sock: socket.socket, exchange, first: bytes = b"") -> tuple[bytes, Exception | None]:
    """Run an exchange over a real socket; then, if it succeeded, send our next layer's
    marker, and return every byte the next layer got (leftover, then to EOF)."""
    sock.settimeout(SOCKET_TIMEOUT_S)
    try:
        sock.sendall(first)
        while not exchange.done:
            data = sock.recv(RECV_BYTES)
            if not data:
                return b"", EOFError("connection closed during the exchange")
            sock.sendall(exchange.feed(data))
    except QuorumAuthError as e:
        if e.to_send:
            sock.sendall(e.to_send)
        sock.close()
        return b"", e
    rest = bytearray(exchange.leftover)
    sock.sendall(OUR_NEXT)
    sock.shutdown(socket.SHUT_WR)
    while data := sock.recv(4096):
        rest += data
    sock.close()
    return bytes(rest), None


def _serve_java_learner(classes: Path, jaas: Path, server_cfg: QuorumSaslSettings,
                        learner_requires: bool):
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        proc = _java(classes, jaas, "learner", str(port), str(learner_requires).lower())
        listener.settimeout(JAVA_TIMEOUT_S)
        conn, _ = listener.accept()
        exchange = QuorumAuthServerExchange(server_cfg)
        got, error = (b"", None) if exchange.done else _drive(conn, exchange)
        return exchange, got, error, _java_lines(proc)


def _learn_from_java_server(classes: Path, jaas: Path, learner_cfg: QuorumSaslSettings,
                            server_requires: bool):
    proc = _java(classes, jaas, "server", str(server_requires).lower())
    first = proc.stdout.readline().split()
    assert first[0] == "port", first
    sock = socket.create_connection(("127.0.0.1", int(first[1])), timeout=SOCKET_TIMEOUT_S)
    exchange = QuorumAuthLearnerExchange(learner_cfg)
    got, error = _drive(sock, exchange, exchange.start())
    return exchange, got, error, _java_lines(proc)


@pytest.fixture
def java_jaas(tmp_path: Path) -> Path:
    return _jaas(tmp_path)


def test_java_learner_authenticates_to_our_server(quorum_peer_classes, java_jaas):
    exchange, got, error, java = _serve_java_learner(
        quorum_peer_classes, java_jaas, _settings(True, True, True), learner_requires=True)
    assert error is None and java["result"] == "ok"
    assert exchange.username == "learner"
    assert got == JAVA_LEARNER_NEXT  # every byte Java's next layer sent, none eaten
    assert bytes.fromhex(java["after"]) == OUR_NEXT


@pytest.mark.parametrize("server_requires", [False, True])
def test_java_learner_with_a_wrong_password(quorum_peer_classes, tmp_path, server_requires):
    jaas = _jaas(tmp_path, QUORUM_JAAS.replace('password="lpw"', 'password="nope"'))
    exchange, got, error, java = _serve_java_learner(
        quorum_peer_classes, jaas, _settings(True, True, server_requires),
        learner_requires=True)
    assert java["result"].startswith("error Authentication failed against server addr")
    assert exchange.username is None
    if server_requires:
        assert isinstance(error, QuorumAuthError)
    else:
        assert error is None and exchange.failure  # kept; Java's learner closed it


@pytest.mark.parametrize("server_requires", [False, True])
def test_java_learner_that_does_not_authenticate(quorum_peer_classes, java_jaas,
                                                 server_requires):
    exchange, got, error, java = _serve_java_learner(
        quorum_peer_classes, java_jaas, _settings(True, True, server_requires),
        learner_requires=False)
    assert java["result"] == "ok"  # SaslQuorumAuthLearner skips: learnerRequireSasl=false
    if server_requires:
        assert "Learner not trying to authenticate" in str(error)
    else:
        assert error is None and exchange.username is None
        assert got == JAVA_LEARNER_NEXT and bytes.fromhex(java["after"]) == OUR_NEXT


@pytest.mark.parametrize("server_requires", [False, True])
def test_our_learner_authenticates_to_java_server(quorum_peer_classes, java_jaas,
                                                  server_requires):
    exchange, got, error, java = _learn_from_java_server(
        quorum_peer_classes, java_jaas, _settings(True, True, False), server_requires)
    assert error is None and exchange.done
    assert java["result"] == "ok"
    assert got == JAVA_SERVER_NEXT
    assert bytes.fromhex(java["after"]) == OUR_NEXT


@pytest.mark.parametrize("username, password", [("learner", "wrong"), ("nobody", "lpw")])
def test_our_learner_refused_by_java_server(quorum_peer_classes, java_jaas, username,
                                            password):
    exchange, got, error, java = _learn_from_java_server(
        quorum_peer_classes, java_jaas, _settings(True, True, False, username, password),
        server_requires=True)
    assert isinstance(error, QuorumAuthError) and not exchange.done
    assert java["result"].startswith("error Failed to authenticate using SASL")
