"""The x509 auth scheme: a verified client certificate's subject, as ZooKeeper's
X509AuthenticationProvider names it (X500Principal.getName(), RFC 2253), and which ACL ids
it accepts (X500Principal's parser).

The id is the subject as Java prints it, not as OpenSSL does: the most specific RDN first,
joined by "," without spaces; only RFC 2253's keywords (CN, C, L, ST, O, OU, STREET, DC,
UID); any other attribute as its dotted OID with the value's DER in hex ("#16..."); and
Java's escapes (",=+<>#;\"\\" anywhere, a leading or trailing space or CR).
"""

import re

from cryptography import x509
from pyasn1.codec.der import decoder
from pyasn1.error import PyAsn1Error
from pyasn1_modules import rfc5280

SCHEME = "x509"
SUPER_SCHEME = "super"  # the id X509AuthenticationProvider adds for its superUser
# sun.security.x509.AVAKeyword's keywords that RFC 2253 output uses, by OID.
RFC2253_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
    "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# Every keyword X500Principal's parser accepts (AVAKeyword), RFC 1779's and RFC 2253's.
PARSER_KEYWORDS = frozenset((
    "CN", "C", "L", "S", "ST", "O", "OU", "T", "IP", "STREET", "DC", "DNQUALIFIER", "DNQ",
    "SURNAME", "GIVENNAME", "INITIALS", "GENERATION", "EMAIL", "EMAILADDRESS", "UID",
    "SERIALNUMBER",
))
# The DER string types Java prints as text in RFC 2253 (AVA.isDerString, not canonical),
# with the charset DerValue.getAsString decodes each in; any other type is printed in hex.
_TEXT_TAGS = {0x0C: "utf-8", 0x13: "ascii", 0x14: "latin-1", 0x16: "ascii", 0x1B: "latin-1",
              0x1E: "utf-16-be"}
_ESCAPED = frozenset(',=+<>#;"\\')  # AVA.toRFC2253String's escapees
_EDGE_WHITESPACE = " \r"


class CertificateError(ValueError):
    """A client certificate whose subject cannot be read."""


def subject_id(cert_der: bytes) -> str:
    """The x509 id of a client certificate (X509AuthenticationProvider.getClientId)."""
    try:
        subject = x509.load_der_x509_certificate(cert_der).subject.public_bytes()
        name, _ = decoder.decode(subject, asn1Spec=rfc5280.Name())
    except (ValueError, PyAsn1Error) as e:
        raise CertificateError(f"unreadable certificate subject: {e}") from None
    rdns = [_rdn(rdn) for rdn in name[0]]
    return ",".join(reversed(rdns))


def _rdn(rdn) -> str:
    return "+".join(_ava(str(atv["type"]), atv["value"].asOctets()) for atv in rdn)


def _ava(oid: str, der: bytes) -> str:
    keyword = RFC2253_KEYWORDS.get(oid)
    tag, content = _tlv(der)
    charset = _TEXT_TAGS.get(tag)
    if keyword is None or charset is None:
        return f"{keyword or oid}=#{der.hex()}"
    return f"{keyword}={_escape(content.decode(charset, 'replace'))}"


def _tlv(der: bytes) -> tuple[int, bytes]:
    """One DER value's tag and content (its length is checked by the decoder already)."""
    if len(der) < 2:
        raise CertificateError("truncated attribute value")
    first = der[1]
    if first < 0x80:
        return der[0], der[2:2 + first]
    n = first & 0x7F
    length = int.from_bytes(der[2:2 + n], "big")
    return der[0], der[2 + n:2 + n + length]


def _escape(value: str) -> str:
    out = []
    for c in value:
        if c in _ESCAPED:
            out.append("\\" + c)
        elif c == "\0":
            out.append("\\00")
        else:
            out.append(c)
    text = "".join(out)
    body = text.strip(_EDGE_WHITESPACE)
    if body == text:
        return text
    lead = len(text) - len(text.lstrip(_EDGE_WHITESPACE))
    trail = len(text) - len(text.rstrip(_EDGE_WHITESPACE))
    lead_part = "".join("\\" + c for c in text[:lead])
    trail_part = "".join("\\" + c for c in text[len(text) - trail:]) if trail else ""
    return lead_part + text[lead:len(text) - trail] + trail_part


# -- ACL ids: X509AuthenticationProvider.isValid is "new X500Principal(id) does not throw" ---

_OID = re.compile(r"(?:OID\.)?[0-9]+(?:\.[0-9]+)+", re.IGNORECASE)
_HEX_VALUE = re.compile(r"#(?:[0-9A-Fa-f]{2})+")


def is_valid_name(text: str) -> bool:
    """Whether X500Principal would parse `text` (RFC 1779 or RFC 2253 form): RDNs split
    at "," or ";", attributes at "+", each a known keyword or an OID, "=", and a value
    that is quoted, "#" and hex, or a string whose escapes are well formed."""
    if text == "":
        return True  # the empty name; " " is an RDN without "=" (X500Name.parseDN)
    try:
        rdns = _split(text, ",;")
    except ValueError:
        return False
    for rdn in rdns:
        try:
            avas = _split(rdn, "+")
        except ValueError:
            return False
        if not all(_valid_ava(ava) for ava in avas):
            return False
    return True


def _split(text: str, separators: str) -> list[str]:
    """Split at separators outside quotes and escapes; ValueError on a dangling escape or
    an unclosed quote."""
    parts, current, i, quoted = [], [], 0, False
    while i < len(text):
        c = text[i]
        if c == "\\":
            if i + 1 == len(text):
                raise ValueError("dangling escape")
            current.append(text[i:i + 2])
            i += 2
            continue
        if c == '"':
            quoted = not quoted
        elif c in separators and not quoted:
            parts.append("".join(current))
            current = []
            i += 1
            continue
        current.append(c)
        i += 1
    if quoted:
        raise ValueError("unclosed quote")
    parts.append("".join(current))
    return parts


def _valid_ava(ava: str) -> bool:
    keyword, eq, value = ava.partition("=")
    keyword = keyword.strip()
    if not eq or not keyword:
        return False
    if keyword.upper() not in PARSER_KEYWORDS and not _OID.fullmatch(keyword):
        return False
    value = _strip_unescaped(value)
    if value.startswith("#"):
        return bool(_HEX_VALUE.fullmatch(value)) and _one_der_value(bytes.fromhex(value[1:]))
    if value.startswith('"'):
        return value.endswith('"') and len(value) >= 2
    i = 0
    while i < len(value):
        if value[i] == "\\":
            nxt = value[i + 1:i + 3]
            if nxt[:1] in _ESCAPED or nxt[:1] == " ":
                i += 2
                continue
            if re.fullmatch(r"[0-9A-Fa-f]{2}", nxt):
                i += 3
                continue
            return False
        if value[i] in '"' or value[i] in "<>":
            return False
        i += 1
    return True


def _strip_unescaped(value: str) -> str:
    """The value without its leading spaces and its trailing ones, except an escaped one
    ("CN=a\\ " keeps its space)."""
    value = value.lstrip()
    end = len(value)
    while end > 0 and value[end - 1].isspace():
        backslashes = len(value[:end - 1]) - len(value[:end - 1].rstrip("\\"))
        if backslashes % 2:
            break
        end -= 1
    return value[:end]


# DerInputStream.getDefiniteLength's limit on a long-form length: four bytes, read as a
# signed int (a negative one is refused).
_DER_LENGTH_BYTES_MAX = 4
_DER_LENGTH_MAX = 0x7FFFFFFF
_DER_HIGH_TAG = 0x1F  # "Tag number over 30 not supported"


def _one_der_value(der: bytes) -> bool:
    """Whether `der` is exactly one DER value as Java 17's new DerValue(bytes) reads one for
    a "#" hex value: a low tag number, a definite length (its long form not necessarily the
    shortest), and exactly that many bytes."""
    if len(der) < 2 or der[0] & _DER_HIGH_TAG == _DER_HIGH_TAG:
        return False
    first = der[1]
    if first < 0x80:
        return len(der) == 2 + first
    n = first & 0x7F
    if n == 0 or n > _DER_LENGTH_BYTES_MAX or len(der) < 2 + n:
        return False
    length = int.from_bytes(der[2:2 + n], "big")
    return length <= _DER_LENGTH_MAX and len(der) == 2 + n + length
