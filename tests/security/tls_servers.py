"""zkcompat and a real ZooKeeper 3.8 with a secure client port beside the plaintext one (the
plaintext port is how the launchers see that a server is up), and clients for both ports."""

from __future__ import annotations

import socket
import ssl
import struct
import time
from pathlib import Path

import pytest
from java_client import NETTY_EXTRA_JARS
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.security import make_acl

from bench.wire import connect_request
from conformance_tests import servers as conformance_servers
from conformance_tests.servers import (
    HOST,
    ServerProcess,
    four_letter_word,
    free_port,
    start_zkcompat,
    start_zookeeper,
)
from zkcompat.security.tls import DEFAULT_SUITES
from zkcompat.shell.wire import WhoAmI

NETTY_FACTORY = "org.apache.zookeeper.server.NettyServerCnxnFactory"
# The stock 3.8 Java client offers TLSv1.2 only, and a 3.9 server (zkcompat) enables only
# ssl.protocol, TLSv1.3, by default (ZOOKEEPER-5053): an operator with 3.8 clients enables
# both, and so do these zoo.cfg lines. 3.8's server needs 3.9's default suites named as
# well, since its own default list has no TLSv1.3 suite (ZOOKEEPER-4415 added them).
BOTH_PROTOCOLS = {"ssl.enabledProtocols": "TLSv1.3,TLSv1.2",
                  "ssl.ciphersuites": ",".join(DEFAULT_SUITES)}
CONNECT_TIMEOUT_S = 10.0
TICK_TIME_MS = 200


def secure_cfg(material, key_kind: str = "PKCS12", trust_kind: str = "PKCS12",
               **extra: str) -> dict[str, str]:
    """A zoo.cfg's TLS lines as an operator writes them for ZooKeeper."""
    cfg = {
        "secureClientPort": str(free_port()),
        "secureClientPortAddress": HOST,
        "serverCnxnFactory": NETTY_FACTORY,
        **material.key_store(material.server, key_kind),
        **material.trust_store(trust_kind),
    }
    cfg.update(extra)
    return cfg


def start(kind: str, workdir: Path, cfg: dict[str, str],
          jvm_flags: tuple[str, ...] = ()) -> ServerProcess:
    """zkcompat or ZooKeeper with zoo.cfg lines `cfg`; jvm_flags reach ZooKeeper on java's
    command line and zkcompat through SERVER_JVMFLAGS, as zkServer.sh passes them."""
    if kind == "zkcompat":
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("SERVER_JVMFLAGS", " ".join(jvm_flags))
            server = start_zkcompat(workdir, TICK_TIME_MS, dict(cfg))
    else:
        classpath = conformance_servers.zookeeper_classpath
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(conformance_servers, "zookeeper_classpath",
                          lambda: ":".join((classpath(), *NETTY_EXTRA_JARS)))
            server = start_zookeeper(workdir, TICK_TIME_MS, dict(cfg), jvm_flags)
    server.secure_port = int(cfg["secureClientPort"]) if "secureClientPort" in cfg else None
    if server.secure_port is not None:
        _wait_listening(server, server.secure_port)
    return server


def _wait_listening(server: ServerProcess, port: int, timeout_s: float = 30.0) -> None:
    """ZooKeeper starts its secure factory just after the plaintext one the launchers wait
    for: a test that connects at once can find the secure port not yet bound."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection((HOST, port), timeout=1.0).close()
            return
        except OSError:
            if time.monotonic() > deadline or not server.is_alive():
                raise AssertionError(f"{server.kind}: secure port {port} never listened:\n"
                                     f"{server.log_tail()}") from None
            time.sleep(0.05)


def tls_client(server: ServerProcess, material, party=None, verify: bool = True,
               **kwargs) -> KazooClient:
    """A kazoo client of the secure port; with `party`'s certificate when given."""
    options = {}
    if party is not None:
        options = {"certfile": str(party.cert), "keyfile": str(party.key)}
    return KazooClient(hosts=f"{HOST}:{server.secure_port}", use_ssl=True,
                       ca=str(material.ca_cert), verify_certs=verify, timeout=5.0,
                       connection_retry={"max_tries": 2, "delay": 0.1},
                       **options, **kwargs)


def plain_client(server: ServerProcess) -> KazooClient:
    """A kazoo client of the plaintext port."""
    return KazooClient(hosts=server.connect_string, timeout=5.0,
                       connection_retry={"max_tries": 2, "delay": 0.1})


def whoami(zk: KazooClient) -> list[tuple[str, str]]:
    """The session's (scheme, user) pairs by the real whoAmI request (op 107), which kazoo
    has no call for: zkcompat's shell sends it through kazoo's own request path."""
    result = zk.handler.async_result()
    zk._call(WhoAmI(), result)
    return result.get(timeout=CONNECT_TIMEOUT_S)


def log_events(server: ServerProcess, event: str) -> list[str]:
    """The server's log lines of one event (zkcompat's key=value lines)."""
    text = server.log_path.read_text(errors="replace") if server.log_path.exists() else ""
    return [line for line in text.splitlines() if f"event={event} " in line + " "]


def tls_handshake(server: ServerProcess, material, party=None,
                  max_version: ssl.TLSVersion | None = None) -> ssl.SSLSocket:
    """A bare TLS connection to the secure port (the caller closes it); raises what the
    handshake raised."""
    ctx = ssl.create_default_context(cafile=str(material.ca_cert))
    ctx.check_hostname = False
    if max_version is not None:
        ctx.maximum_version = max_version
    if party is not None:
        ctx.load_cert_chain(str(party.cert), str(party.key))
    raw = socket.create_connection((HOST, server.secure_port), timeout=CONNECT_TIMEOUT_S)
    try:
        return ctx.wrap_socket(raw)
    except BaseException:
        raw.close()
        raise


def handshake_outcome(server: ServerProcess, material, party="client") -> str:
    """"session" if a TLS connection (with `party`'s certificate, the client's unless told;
    None for none) is answered a ConnectRequest, "refused" if the handshake or the session
    fails. Under TLS 1.3 the server may judge the certificate after the client's side of the
    handshake is done, so only the session tells."""
    party = material.client if party == "client" else party
    try:
        sock = tls_handshake(server, material, party)
    except (ssl.SSLError, ConnectionError, OSError):
        return "refused"
    try:
        sock.sendall(connect_request())
        sock.settimeout(CONNECT_TIMEOUT_S)
        try:
            return "session" if sock.recv(4096) else "refused"
        except (ssl.SSLError, ConnectionResetError):
            return "refused"
    finally:
        sock.close()


def mntr(server: ServerProcess, name: str) -> int:
    """One number of the server's mntr (zk_<name>)."""
    for line in four_letter_word(HOST, server.port, "mntr").splitlines():
        key, _, value = line.partition("\t")
        if key == f"zk_{name}":
            return int(float(value))
    raise AssertionError(f"zk_{name} not in mntr")


def read_until_closed(sock: socket.socket, timeout_s: float = 5.0) -> bytes:
    """Everything the server sends until it closes (or the timeout passes: then the last
    byte is not the end, and the caller's assertion on closing fails)."""
    sock.settimeout(timeout_s)
    chunks = []
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    except (ssl.SSLError, ConnectionResetError):
        return b"".join(chunks)
    except TimeoutError:
        chunks.append(b"<still open>")
        return b"".join(chunks)


def outcome(call) -> str:
    """"ok", or the name of the KazooException the call raised."""
    try:
        call()
    except KazooException as e:
        return type(e).__name__
    return "ok"


def tried(zk: KazooClient, path: str, set_acl: bool = True) -> list[tuple[str, str]]:
    """What a session not named by path's ACL gets for each operation on it (path has a
    child "owned")."""
    seen = [
        ("get", outcome(lambda: zk.get(path))),
        ("exists", outcome(lambda: zk.exists(path))),
        ("getChildren", outcome(lambda: zk.get_children(path))),
        ("getACL", outcome(lambda: zk.get_acls(path))),
        ("set", outcome(lambda: zk.set(path, b"taken"))),
        ("create child", outcome(lambda: zk.create(path + "/intruder", b""))),
        ("delete child", outcome(lambda: zk.delete(path + "/owned"))),
    ]
    if set_acl:
        seen.append(("setACL", outcome(
            lambda: zk.set_acls(path, [make_acl("world", "anyone", all=True)]))))
    return seen


def read_frame(sock: socket.socket) -> bytes | None:
    """One length-prefixed frame, or None once the server has closed (or reset)."""
    head = _read_exactly(sock, 4)
    return None if head is None else _read_exactly(sock, struct.unpack(">i", head)[0])


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        try:
            chunk = sock.recv(n - len(data))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        data += chunk
    return data
