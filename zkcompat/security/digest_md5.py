"""SASL DIGEST-MD5 (RFC 2831) with qop=auth, both sides, as Java's DigestMD5Server and
DigestMD5Client speak it to ZooKeeper: sans-I/O, tokens in and out. No Python library offers
the server side (nor a client that answers as Java's), so they are written here, small, and
tested with RFC 2831's vectors.

ZooKeeper's client port makes its server with Sasl.createSaslServer("DIGEST-MD5",
"zookeeper", "zk-sasl-md5", null, handler): the realm is "zk-sasl-md5" and a client's
digest-uri must be "zookeeper/zk-sasl-md5". Its quorum SASL uses protocol
"zookeeper-quorum" and server name "zk-quorum-sasl-md5" instead (QuorumAuth). Integrity and
confidentiality (auth-int, auth-conf) are not offered, as ZooKeeper offers neither.
"""

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable, Mapping

PROTOCOL = "zookeeper"
SERVER_NAME = "zk-sasl-md5"  # ZooKeeperSaslServer.DEFAULT_SERVER_NAME: the client port's
QOP_AUTH = "auth"
NONCE_BYTES = 30  # DigestMD5Server's RAW_NONCE_SIZE
NONCE_COUNT = "00000001"  # one authentication per nonce: no subsequent authentication
RESPONSE_BYTES_MAX = 4096  # RFC 2831 2.1.2: a digest-response is at most 4096 bytes
CHALLENGE_BYTES_MAX = 2048  # RFC 2831 2.1.1; DigestMD5Client's MAX_CHALLENGE_LENGTH
CNONCE_BYTES = 30  # DigestMD5Client's RAW_NONCE_SIZE, as the server's
ALGORITHM = "md5-sess"  # the only algorithm RFC 2831 defines, and required in a challenge


class SaslError(ValueError):
    """The client failed to authenticate; the message is Java's, for the log."""


def _h(data: bytes) -> bytes:
    return hashlib.md5(data).digest()  # noqa: S324 - RFC 2831 is MD5 by definition


def _hex(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()  # noqa: S324 - as above


def _latin1_or_utf8(text: str, utf8: bool) -> bytes:
    """RFC 2831 2.1.2.1: with charset=utf-8, a value all of whose characters are in ISO
    8859-1 is hashed in ISO 8859-1, any other in UTF-8; without it, ISO 8859-1 only."""
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        if not utf8:
            raise SaslError("DIGEST-MD5: a value is not ISO 8859-1 and charset is not "
                            "utf-8") from None
        return text.encode("utf-8")


def response_value(username: str, realm: str, password: str, nonce: str, cnonce: str,
                   nc: str, qop: str, digest_uri: str, authzid: str | None, a2_prefix: str,
                   utf8: bool = True) -> str:
    """RFC 2831 2.1.2.1's response-value; a2_prefix is "AUTHENTICATE" for the client's
    response and "" for the server's rspauth."""
    secret = _h(b":".join((_latin1_or_utf8(username, utf8), _latin1_or_utf8(realm, utf8),
                           _latin1_or_utf8(password, utf8))))
    a1 = secret + f":{nonce}:{cnonce}".encode()
    if authzid is not None:
        a1 += b":" + authzid.encode("utf-8")
    a2 = f"{a2_prefix}:{digest_uri}".encode()
    kd = f"{_hex(a1)}:{nonce}:{nc}:{cnonce}:{qop}:{_hex(a2)}".encode()
    return _hex(kd)


def parse_directives(token: bytes) -> dict[str, str]:
    """RFC 2831's comma-separated name=value list, values quoted (with \\ escapes) or not;
    a repeated directive or a malformed list is a SaslError."""
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslError("DIGEST-MD5: digest response is not UTF-8") from None
    out: dict[str, str] = {}
    i, n = 0, len(text)
    while i < n:
        while i < n and (text[i].isspace() or text[i] == ","):
            i += 1
        if i == n:
            break
        eq = text.find("=", i)
        if eq < 0:
            raise SaslError("DIGEST-MD5: digest response format violation")
        name = text[i:eq].strip().lower()
        i = eq + 1
        while i < n and text[i].isspace():
            i += 1
        if i < n and text[i] == '"':
            i += 1
            value = []
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                value.append(text[i])
                i += 1
            if i == n:
                raise SaslError("DIGEST-MD5: unterminated quoted value")
            i += 1
            val = "".join(value)
        else:
            end = text.find(",", i)
            end = n if end < 0 else end
            val = text[i:end].strip()
            i = end
        if name in out:
            raise SaslError(f"DIGEST-MD5: duplicate {name} directive")
        out[name] = val
    return out


class DigestMd5Server:
    """One client's authentication: evaluate(token) answers each token with the next one,
    the challenge first (for ZooKeeper's first, empty, token) and rspauth last, after
    which `complete` is true and `username`, `authzid` name the client. A SaslError ends
    the exchange (ZooKeeper then closes the connection)."""

    def __init__(self, password_of: Callable[[str], str | None],
                 new_nonce: Callable[[], str] | None = None, protocol: str = PROTOCOL,
                 server_name: str = SERVER_NAME):
        self._password_of = password_of
        self._new_nonce = new_nonce or _random_nonce
        # Java's DigestMD5Server offers the server name as its one realm and expects the
        # digest-uri protocol/server name.
        self._protocol = protocol
        self._server_name = server_name
        self._nonce: str | None = None
        self.complete = False
        self.username: str | None = None
        self.authzid: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslError("DIGEST-MD5: authentication already completed")
        if self._nonce is None:
            # DigestMD5Server.evaluateResponse's first step: any initial response is
            # ignored, and the challenge goes out, byte for byte as Java's (no qop
            # directive: auth alone is offered, which is what its absence means).
            self._nonce = self._new_nonce()
            return (f'realm="{self._server_name}",nonce="{self._nonce}",'
                    f"charset=utf-8,algorithm=md5-sess").encode()
        if len(token) > RESPONSE_BYTES_MAX:
            raise SaslError("DIGEST-MD5: digest response too long")
        rspauth = self._verify(parse_directives(token))
        self.complete = True
        return f"rspauth={rspauth}".encode()

    def _verify(self, d: Mapping[str, str]) -> str:
        """DigestMD5Server.validateClientResponse's checks, in its order; the rspauth."""
        charset = d.get("charset")
        if charset is not None and charset.lower() != "utf-8":
            raise SaslError("DIGEST-MD5: digest response format violation. Incompatible "
                            "charset value: " + charset)
        utf8 = charset is not None
        if d.get("cipher") is not None:
            raise SaslError("DIGEST-MD5: digest response format violation. Unexpected "
                            "cipher directive: no cipher was offered")
        username = d.get("username")
        if username is None:
            raise SaslError("DIGEST-MD5: digest response format violation. Missing "
                            "username.")
        realm = d.get("realm", "")
        if realm != self._server_name:
            raise SaslError("DIGEST-MD5: digest response format violation. Nonexistent "
                            "realm: " + realm)
        if d.get("nonce") != self._nonce:
            raise SaslError("DIGEST-MD5: digest response format violation. Mismatched "
                            "nonce.")
        cnonce = d.get("cnonce")
        if not cnonce:
            raise SaslError("DIGEST-MD5: digest response format violation. Missing cnonce.")
        if d.get("nc") is None or _nonce_count(d["nc"]) != 1:
            raise SaslError("DIGEST-MD5: Nonce count does not match: " + d.get("nc", ""))
        qop = d.get("qop", QOP_AUTH)
        if qop != QOP_AUTH:
            raise SaslError("DIGEST-MD5: digest response format violation. Invalid QOP: "
                            + qop)
        uri = d.get("digest-uri", "")
        expected_uri = f"{self._protocol}/{self._server_name}"
        if uri.lower() != expected_uri.lower():
            raise SaslError(f"DIGEST-MD5: digest response format violation. Mismatched URI: "
                            f"{uri}; expecting: {expected_uri}")
        password = self._password_of(username)
        if password is None:
            raise SaslError(f"DIGEST-MD5: cannot acquire password for {username} in realm : "
                            f"{realm}")
        authzid = d.get("authzid")
        expected = response_value(username, realm, password, self._nonce, cnonce, d["nc"], qop,
                                  uri, authzid, "AUTHENTICATE", utf8)
        if not hmac.compare_digest(expected, d.get("response", "").lower()):
            raise SaslError("DIGEST-MD5: digest response format violation. Mismatched "
                            "response.")
        self.username, self.authzid = username, authzid
        return response_value(username, realm, password, self._nonce, cnonce, d["nc"], qop,
                              uri, authzid, "", utf8)


class DigestMd5Client:
    """The client side, as Java's DigestMD5Client answers (it has no initial response):
    evaluate(challenge) gives the digest-response, evaluate(rspauth token) checks the
    server's proof and gives None, after which `complete` is true. authzid, when given, is
    sent and hashed into A1, as Java does when Sasl.createSaslClient is given one (ZooKeeper's
    learner passes its user name). A SaslError ends the exchange."""

    def __init__(self, username: str, password: str, protocol: str, server_name: str,
                 authzid: str | None = None, new_cnonce: Callable[[], str] | None = None):
        self._username, self._password = username, password
        self.digest_uri = f"{protocol}/{server_name}"
        self._authzid = authzid
        self._new_cnonce = new_cnonce or _random_nonce
        self._rspauth: str | None = None  # what the server must prove, once we responded
        self.complete = False

    def evaluate(self, token: bytes) -> bytes | None:
        if self.complete:
            raise SaslError("DIGEST-MD5: authentication already completed")
        if self._rspauth is None:
            return self._respond(token)
        self._check_rspauth(token)
        self.complete = True
        return None

    def _respond(self, challenge: bytes) -> bytes:
        if len(challenge) > CHALLENGE_BYTES_MAX:
            raise SaslError(f"DIGEST-MD5: Invalid digest-challenge length. Got: "
                            f"{len(challenge)} Expected < {CHALLENGE_BYTES_MAX}")
        d = parse_directives(challenge)
        charset = d.get("charset")
        if charset is not None and charset.lower() != "utf-8":
            raise SaslError("DIGEST-MD5: digest-challenge format violation: Unrecognised "
                            "charset value: " + charset)
        utf8 = charset is not None
        if d.get("algorithm", "").lower() != ALGORITHM:
            raise SaslError("DIGEST-MD5: Digest-challenge format violation: algorithm "
                            "directive missing or not md5-sess")
        nonce = d.get("nonce")
        if not nonce:
            raise SaslError("DIGEST-MD5: Digest-challenge format violation: nonce directive "
                            "missing")
        offered = [q.strip() for q in d.get("qop", QOP_AUTH).split(",")]
        if QOP_AUTH not in offered:
            raise SaslError("DIGEST-MD5: No common protection layer between client and server")
        realm = d.get("realm")  # absent: the client's own (none), hashed as ""
        cnonce = self._new_cnonce()
        response = response_value(self._username, realm or "", self._password, nonce, cnonce,
                                  NONCE_COUNT, QOP_AUTH, self.digest_uri, self._authzid,
                                  "AUTHENTICATE", utf8)
        self._rspauth = response_value(self._username, realm or "", self._password, nonce,
                                       cnonce, NONCE_COUNT, QOP_AUTH, self.digest_uri,
                                       self._authzid, "", utf8)
        # The directives in DigestMD5Client.generateClientResponse's order.
        parts = ["charset=utf-8"] if utf8 else []
        parts.append(f'username="{_quote(self._username)}"')
        if realm is not None:
            parts.append(f'realm="{_quote(realm)}"')
        parts += [f'nonce="{_quote(nonce)}"', f"nc={NONCE_COUNT}", f'cnonce="{_quote(cnonce)}"',
                  f'digest-uri="{_quote(self.digest_uri)}"', "maxbuf=65536",
                  f"response={response}", f"qop={QOP_AUTH}"]
        if self._authzid is not None:
            parts.append(f'authzid="{_quote(self._authzid)}"')
        try:
            return ",".join(parts).encode("utf-8" if utf8 else "latin-1")
        except UnicodeEncodeError:
            raise SaslError("DIGEST-MD5: a value is not ISO 8859-1 and charset is not "
                            "utf-8") from None

    def _check_rspauth(self, token: bytes) -> None:
        rspauth = parse_directives(token).get("rspauth")
        if rspauth is None:
            raise SaslError("DIGEST-MD5: Authentication failed. Expecting 'rspauth' "
                            "authentication success message")
        if not hmac.compare_digest(rspauth.lower().encode(), self._rspauth.encode()):
            raise SaslError("DIGEST-MD5: Server's rspauth value does not match what client "
                            "expects")


def _quote(value: str) -> str:
    """RFC 2831's quoted-string: a backslash before each \\ and \"."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _nonce_count(value: str) -> int:
    try:
        return int(value, 16)
    except ValueError:
        raise SaslError("DIGEST-MD5: digest response format violation. Bad nc: "
                        + value) from None


def _random_nonce() -> str:
    return base64.b64encode(secrets.token_bytes(NONCE_BYTES)).decode("ascii")
