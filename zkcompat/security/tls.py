"""TLS on the client port: the server's SSLContext from ZooKeeper's ssl.* settings, and the
handshake in front of each secure connection, after which the connection is the same
protocol object, on the same pipeline, as a plaintext one.

A handshake that fails (plain bytes, an untrusted or missing client certificate, no common
protocol or cipher, a timeout, the client going away) closes that connection with one
logged reason (event=tls_handshake_failed) and touches nothing else. A connection accepted
while netty.server.outstandingHandshake.limit handshakes are underway is closed before its
own starts (event=tls_handshake_refused).
"""

import asyncio
import logging
import os
import ssl
import tempfile
from collections.abc import Callable
from typing import Protocol

from cryptography.hazmat.primitives import serialization

from zkcompat.security import x509 as x509_scheme
from zkcompat.security.keystores import StoreError, load_key_store, load_trust_store
from zkcompat.security.settings import ClientAuth, TlsSettings

log = logging.getLogger(__name__)

# Netty's SslHandler gives a handshake 10 s (handshakeTimeoutMillis) before it closes.
HANDSHAKE_TIMEOUT_S = 10.0
_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
             "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_VERIFY_MODE = {ClientAuth.NONE: ssl.CERT_NONE, ClientAuth.WANT: ssl.CERT_OPTIONAL,
                ClientAuth.NEED: ssl.CERT_REQUIRED}
# Java's (IANA's) names of the TLS 1.2 suites OpenSSL has, by OpenSSL's names for them.
TLS12_SUITES = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "DHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256": "DHE-RSA-AES128-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256": "DHE-RSA-AES256-SHA256",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA": "DHE-RSA-AES128-SHA",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA": "DHE-RSA-AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA256": "AES256-SHA256",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
}
# TLS 1.3's suites: OpenSSL always offers all three (Python cannot choose among them), so
# naming any of them only keeps TLS 1.3 on.
TLS13_SUITES = frozenset(("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                          "TLS_CHACHA20_POLY1305_SHA256"))
# X509Util.DEFAULT_CIPHERS_JAVA9: GCM first, then CBC, then TLS 1.3's.
DEFAULT_SUITES = (
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384", "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_AES_256_GCM_SHA384", "TLS_AES_128_GCM_SHA256", "TLS_CHACHA20_POLY1305_SHA256",
)


class TlsSetupError(ValueError):
    """Settings that give no usable SSLContext; the message names the setting."""


def server_context(tls: TlsSettings) -> ssl.SSLContext:
    """The secure client port's SSLContext (or a quorum listener's), as
    X509Util.createSSLContextAndOptions and SSLContextAndOptions.configureSslParameters make
    ZooKeeper's."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _configure(ctx, tls)
    ctx.verify_mode = _VERIFY_MODE[tls.client_auth]
    if tls.client_auth != ClientAuth.NONE:
        _trust(ctx, tls, ssl.Purpose.CLIENT_AUTH)
    return ctx


def client_context(tls: TlsSettings) -> ssl.SSLContext:
    """The SSLContext of a server's own connections to its peers (X509Util.createSSLSocket):
    the key store's certificate goes out as the client's, and the peer's must chain to the
    trust store. Whether it names the peer is for the caller to check, as ZKTrustManager
    does it (zkcompat.security.quorum_tls.names_peer), not OpenSSL's hostname check."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    _configure(ctx, tls)
    ctx.verify_mode = ssl.CERT_REQUIRED
    _trust(ctx, tls, ssl.Purpose.SERVER_AUTH)
    return ctx


def _configure(ctx: ssl.SSLContext, tls: TlsSettings) -> None:
    versions = sorted(_VERSIONS[p] for p in tls.enabled_protocols)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    _set_suites(ctx, tls.ciphersuites or DEFAULT_SUITES, tls.ciphersuites is not None,
                tls.prefix)
    if tls.key_store is None:
        raise TlsSetupError(f"{tls.prefix}keyStore.location: a secure port needs a key store")
    try:
        _load_key(ctx, tls)
    except StoreError as e:
        raise TlsSetupError(str(e)) from None


def _trust(ctx: ssl.SSLContext, tls: TlsSettings, purpose: ssl.Purpose) -> None:
    if tls.trust_store is None:
        ctx.load_default_certs(purpose)  # Java's default trust store
        return
    try:
        pem = "".join(c.public_bytes(serialization.Encoding.PEM).decode("ascii")
                      for c in load_trust_store(tls.trust_store))
    except StoreError as e:
        raise TlsSetupError(str(e)) from None
    ctx.load_verify_locations(cadata=pem)
    # Every certificate of a Java trust store is an anchor, a CA's or not.
    ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN


def _set_suites(ctx: ssl.SSLContext, suites, given: bool, prefix: str) -> None:
    openssl = [TLS12_SUITES[s] for s in suites if s in TLS12_SUITES]
    unknown = [s for s in suites if s not in TLS12_SUITES and s not in TLS13_SUITES]
    if unknown and given:
        log.warning("event=tls_ciphersuites_unknown suites=%s", ",".join(unknown))
    if not any(s in TLS13_SUITES for s in suites):
        if ctx.maximum_version >= ssl.TLSVersion.TLSv1_3:
            ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    if not openssl:
        if ctx.maximum_version < ssl.TLSVersion.TLSv1_3:
            raise TlsSetupError(f"{prefix}ciphersuites: none of these suites can be used: "
                                + ",".join(suites))
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3  # TLS 1.3's suites alone
        return
    try:
        ctx.set_ciphers(":".join(openssl))
    except ssl.SSLError as e:
        raise TlsSetupError(f"{prefix}ciphersuites: {e}") from None


def _load_key(ctx: ssl.SSLContext, tls: TlsSettings) -> None:
    """Python's ssl loads a key only from a file: the key store's key and chain go through
    a private temporary PEM file, removed at once."""
    material = load_key_store(tls.key_store)
    pem = material.key.private_bytes(serialization.Encoding.PEM,
                                     serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption())
    pem += b"".join(c.public_bytes(serialization.Encoding.PEM) for c in material.chain)
    with tempfile.TemporaryDirectory(prefix="zkcompat-tls-") as tmp:  # mode 0700
        path = os.path.join(tmp, "key.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        try:
            ctx.load_cert_chain(path)
        except ssl.SSLError as e:
            raise TlsSetupError(f"{tls.prefix}keyStore.location: {tls.key_store.location}: "
                                f"{e}") from None


class HandshakeCount(Protocol):
    """The server's count of handshakes underway (zkcompat.server.limits.ClientLimits)."""

    def handshake_started(self) -> bool: ...

    def handshake_finished(self) -> None: ...


class TlsHandshake(asyncio.Protocol):
    """One secure client connection until its handshake is done: then the connection
    protocol made by `make_connection` takes the TLS transport, with the client's x509 id
    among its auth ids when `x509` is on and the client sent a certificate (and the super
    id too when that x509 id is `super_user`).

    asyncio's create_server(ssl=...) reports no failed handshake to anyone, so the handshake
    is this object's: loop.start_tls, with this object as the protocol of the TLS side
    until the connection takes over (it holds what arrives meanwhile).

    `handshakes` counts each handshake from the accept to its end, and may refuse to start
    one (NettyServerCnxnFactory's outstandingHandshake limit): the connection is then closed
    at once, before any TLS byte."""

    def __init__(self, make_connection: Callable[[], asyncio.Protocol],
                 context: ssl.SSLContext, x509: bool, super_user: str | None = None,
                 handshakes: HandshakeCount | None = None):
        self._make_connection = make_connection
        self._handshakes = handshakes
        self._counted = False  # handshakes counts this one in
        self._context = context
        self._x509 = x509
        self._super_user = super_user
        self._early: list[bytes] = []
        self._conn: asyncio.Protocol | None = None
        self._lost = False
        self._transport = None
        self._remote = "?"

    def connection_made(self, transport) -> None:
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self._remote = f"{peer[0]}:{peer[1]}" if peer else "?"
        if self._handshakes is not None:
            if not self._handshakes.handshake_started():
                log.info("event=tls_handshake_refused remote=%s reason=%r", self._remote,
                         "outstanding handshake limit")
                transport.close()
                return
            self._counted = True
        # start_tls must own the transport before this returns: uvloop starts reading
        # right after connection_made (a pause_reading here does not hold), and bytes read
        # before the TLS protocol is in place would be lost to it.
        handshake = asyncio.get_running_loop().start_tls(
            transport, self, self._context, server_side=True,
            ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S)
        _run_now(handshake, self._handshake_done)

    def _handshake_done(self, tls, exc: BaseException | None) -> None:
        if self._counted:  # updateHandshakeCountIfStarted: before the certificate is judged
            self._counted = False
            self._handshakes.handshake_finished()
        remote = self._remote
        if exc is not None:
            if not isinstance(exc, Exception):
                raise exc  # CancelledError at shutdown, KeyboardInterrupt: not this peer's doing
            # SSLError, EOF, reset and timeout are the peer's; anything else is logged the
            # same way, since it too must close this connection and nothing more.
            log.info("event=tls_handshake_failed remote=%s reason=%r", remote, failure_reason(exc))
            self._transport.close()
            return
        if self._lost:
            log.info("event=tls_handshake_failed remote=%s reason=%r", remote,
                     "client went away")
            return
        ids = self._client_ids(tls, remote)
        if ids is None:
            tls.abort()
            return
        conn = self._make_connection()
        tls.set_protocol(conn)
        conn.connection_made(tls)
        if getattr(conn, "transport", None) is None:
            return  # refused (maxClientCnxns): it closed the transport itself
        conn.auth_ids.extend(ids)
        conn.certificate_ids = ids
        self._conn = conn
        early, self._early = self._early, []
        for data in early:
            conn.data_received(data)
        if self._lost:
            conn.connection_lost(None)

    def _client_ids(self, tls, remote: str) -> list[tuple[str, str]] | None:
        """The client certificate's x509 id, as X509AuthenticationProvider gives it once the
        trust store has verified the chain, after ("super", id) if it is the superUser's;
        None (close) for a subject it cannot read."""
        if not self._x509:
            return []
        sslobj = tls.get_extra_info("ssl_object")
        cert = sslobj.getpeercert(binary_form=True) if sslobj is not None else None
        if not cert:
            return []  # clientAuth=want and no certificate: no x509 id
        try:
            ident = x509_scheme.subject_id(cert)
        except x509_scheme.CertificateError as e:
            log.info("event=x509_auth_failed remote=%s reason=%r", remote, str(e))
            return None
        ids = [(x509_scheme.SCHEME, ident)]
        if ident == self._super_user:
            ids.insert(0, (x509_scheme.SUPER_SCHEME, ident))
        log.info("event=x509_authenticated remote=%s id=%r super=%s", remote, ident,
                 ident == self._super_user)
        return ids

    # The TLS side's protocol until the connection takes over.

    def data_received(self, data: bytes) -> None:
        if self._conn is not None:
            self._conn.data_received(data)
        else:
            self._early.append(data)

    def eof_received(self) -> bool | None:
        return None  # close: a client half-closes only to go away

    def connection_lost(self, exc) -> None:
        if self._conn is not None:
            self._conn.connection_lost(exc)
        else:
            self._lost = True


def _run_now(coro, done: Callable[[object, BaseException | None], None]) -> None:
    """Run `coro` as a Task would, except that its first step runs now, not at the next
    turn of the loop; done(result, None) or done(None, exception) at its end."""

    def step(_future=None) -> None:
        try:
            future = coro.send(None)
        except StopIteration as stop:
            done(stop.value, None)
            return
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # noqa: BLE001 - handed to done, which decides
            done(None, e)
            return
        future._asyncio_future_blocking = False
        future.add_done_callback(step)

    step()


def failure_reason(exc: BaseException) -> str:
    """A failed handshake's reason, for one log line."""
    if isinstance(exc, ssl.SSLError):
        return exc.reason or exc.strerror or str(exc)
    if isinstance(exc, TimeoutError):
        return "handshake timed out"
    return str(exc) or type(exc).__name__
