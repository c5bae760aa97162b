"""ustring bytes exactly as Java's jute makes and reads them.

Encoding follows BinaryOutputArchive.stringToByteBuffer: UTF-8 per UTF-16 unit, so a
character outside the BMP becomes two 3-byte surrogates (CESU-8), and a lone surrogate
is written as is. Decoding follows `new String(bytes, UTF_8)` (JDK 17
String.decodeUTF8_UTF16): malformed input becomes U+FFFD with Java's resync rules, which
differ from Python's "replace" handler (e.g. an encoded surrogate is one U+FFFD in Java,
three in Python). It never raises.
"""

from __future__ import annotations

import codecs
import re

JAVA_UTF8_ERRORS = "zkcompat.jute.java"
"""Error-handler name: str(raw, "utf-8", JAVA_UTF8_ERRORS) decodes exactly as Java."""

_REPLACEMENT = "\ufffd"
_NON_BMP = re.compile("[\U00010000-\U0010ffff]")


def _surrogate_pair(match: re.Match[str]) -> str:
    c = ord(match.group()) - 0x10000
    return chr(0xD800 | (c >> 10)) + chr(0xDC00 | (c & 0x3FF))


def java_utf8_encode(s: str) -> bytes:
    """The bytes BinaryOutputArchive.writeString writes for s (without the length)."""
    if s.isascii():
        return s.encode()
    if _NON_BMP.search(s) is not None:
        s = _NON_BMP.sub(_surrogate_pair, s)
    return s.encode("utf-8", "surrogatepass")


def _continuation(b: int) -> bool:
    return (b & 0xC0) == 0x80


def _java_resume(src: bytes, sp: int) -> int:
    """Where Java's decoder resumes after the one U+FFFD it writes for the malformed
    sequence starting at src[sp]; a port of one turn of JDK 17 decodeUTF8_UTF16."""
    sl = len(src)
    b1 = src[sp]
    sp += 1
    if 0xC2 <= b1 <= 0xDF:  # a 2-byte lead whose continuation is missing or wrong
        return sp if sp < sl else sl
    if 0xE0 <= b1 <= 0xEF:
        if sp + 1 < sl:
            b2, b3 = src[sp], src[sp + 1]
            if (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not _continuation(b2) or not _continuation(b3):
                # malformed3(): skip only the lead, or the lead and b2
                if (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not _continuation(b2):
                    return sp
                return sp + 1
            return sp + 2  # a well-formed encoding of a surrogate: one U+FFFD for all three
        if sp < sl and ((b1 == 0xE0 and (src[sp] & 0xE0) == 0x80) or not _continuation(src[sp])):
            return sp
        return sl  # truncated at the end: Java writes one U+FFFD and stops
    if 0xF0 <= b1 <= 0xF7:
        if sp + 2 < sl:
            b2 = src[sp]
            if (
                b1 > 0xF4
                or (b1 == 0xF0 and (b2 < 0x90 or b2 > 0xBF))
                or (b1 == 0xF4 and (b2 & 0xF0) != 0x80)
                or not _continuation(b2)
            ):
                return sp
            if not _continuation(src[sp + 1]):
                return sp + 1
            return sp + 2
        if b1 > 0xF4 or (
            sp < sl
            and (
                (b1 == 0xF0 and (src[sp] < 0x90 or src[sp] > 0xBF))
                or (b1 == 0xF4 and (src[sp] & 0xF0) != 0x80)
                or not _continuation(src[sp])
            )
        ):
            return sp
        sp += 1
        if sp < sl and not _continuation(src[sp]):
            return sp
        return sl
    return sp  # a continuation byte, C0, C1 or F8..FF on its own


def _java_utf8_errors(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    src = exc.object
    return _REPLACEMENT, _java_resume(bytes(src), exc.start)


codecs.register_error(JAVA_UTF8_ERRORS, _java_utf8_errors)


def java_utf8_decode(raw: bytes | memoryview) -> str:
    """The String that `new String(raw, UTF_8)` makes (surrogate pairs joined)."""
    return str(raw, "utf-8", JAVA_UTF8_ERRORS)
