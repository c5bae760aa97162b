"""JAAS login configuration files as Java's default ConfigFile reads them (the syntax of
sun.security.provider.ConfigFile), and where ZooKeeper's server finds one: the
java.security.auth.login.config system property.

    Server {
        org.apache.zookeeper.server.auth.DigestLoginModule required
        user_super="adminsecret"
        user_bob="bobsecret";
    };
"""

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

JAAS_PROPERTY = "java.security.auth.login.config"  # Environment.JAAS_CONF_KEY
# The JVM flags zkServer.sh puts on java's command line, in the order it puts them
# (JVMFLAGS="$SERVER_JVMFLAGS $JVMFLAGS"): JVMFLAGS comes last, so it wins.
JVM_FLAGS_ENV = ("SERVER_JVMFLAGS", "JVMFLAGS")
FLAGS = ("required", "requisite", "sufficient", "optional")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "a": "\a", "v": "\v"}


class JaasError(ValueError):
    """A JAAS file Java's ConfigFile would refuse; the message says where."""


@dataclass(frozen=True)
class LoginModule:
    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def location(props: Mapping[str, str], environ: Mapping[str, str]) -> str | None:
    """The JAAS file: java.security.auth.login.config in zoo.cfg (zkcompat's way, with or
    without "zookeeper."), else -Djava.security.auth.login.config=... in SERVER_JVMFLAGS
    or JVMFLAGS (ZooKeeper's way, through zkServer.sh); None if neither names one."""
    for key in (JAAS_PROPERTY, "zookeeper." + JAAS_PROPERTY):
        if props.get(key, "").strip():
            return props[key].strip()
    found = None
    for name in JVM_FLAGS_ENV:
        try:
            words = shlex.split(environ.get(name, ""))
        except ValueError:
            continue
        for word in words:
            if word.startswith(f"-D{JAAS_PROPERTY}="):
                found = word.split("=", 1)[1]
    return found or None


def parse(text: str) -> dict[str, list[LoginModule]]:
    """Every section of a JAAS file, by name; JaasError where ConfigFile would throw."""
    tokens = _Tokens(text)
    sections: dict[str, list[LoginModule]] = {}
    while not tokens.at_end():
        name = tokens.word("a section name")
        tokens.expect("{")
        modules = []
        while not tokens.peek_is("}"):
            modules.append(_module(tokens))
        tokens.expect("}")
        tokens.expect(";")
        if name in sections:  # ConfigFile adds the modules of a repeated section to it
            sections[name].extend(modules)
        else:
            sections[name] = modules
    return sections


def _module(tokens: "_Tokens") -> LoginModule:
    class_name = tokens.word("a login module class")
    flag = tokens.word("a control flag")
    if flag.lower() not in FLAGS:
        raise JaasError(f"line {tokens.line}: invalid control flag {flag!r}")
    options = {}
    while not tokens.peek_is(";"):
        key = tokens.word("an option name")
        tokens.expect("=")
        options[key] = tokens.value()
    tokens.expect(";")
    return LoginModule(class_name, flag.lower(), options)


class _Tokens:
    """java.io.StreamTokenizer as ConfigFile sets it up: words, quoted strings ("..." or
    '...') with Java's escapes, the punctuation { } ; =, and comments: // and /* */, and a
    lone / (StreamTokenizer's comment character), each to the end of its line."""

    _PUNCTUATION = "{};="

    def __init__(self, text: str):
        self._text = text
        self._i = 0
        self.line = 1
        self._next: tuple[str, str] | None = None

    def at_end(self) -> bool:
        return self._peek() is None

    def peek_is(self, punct: str) -> bool:
        token = self._peek()
        if token is None:
            raise JaasError(f"line {self.line}: unexpected end of file")
        return token == ("punct", punct)

    def expect(self, punct: str) -> None:
        token = self._take()
        if token != ("punct", punct):
            raise JaasError(f"line {self.line}: expected {punct!r}, found {self._show(token)}")

    def word(self, what: str) -> str:
        token = self._take()
        if token is None or token[0] != "word":
            raise JaasError(f"line {self.line}: expected {what}, found {self._show(token)}")
        return token[1]

    def value(self) -> str:
        token = self._take()
        if token is None or token[0] not in ("word", "quoted"):
            raise JaasError(f"line {self.line}: expected an option value, "
                            f"found {self._show(token)}")
        return token[1]

    @staticmethod
    def _show(token) -> str:
        return "the end of the file" if token is None else repr(token[1])

    def _peek(self):
        if self._next is None:
            self._next = self._scan()
        return self._next

    def _take(self):
        token = self._peek()
        self._next = None
        return token

    def _scan(self):
        text, n = self._text, len(self._text)
        while self._i < n:
            c = text[self._i]
            if c == "\n":
                self.line += 1
                self._i += 1
            elif c.isspace():
                self._i += 1
            elif text.startswith("//", self._i):
                end = text.find("\n", self._i)
                self._i = n if end < 0 else end
            elif text.startswith("/*", self._i):
                end = text.find("*/", self._i + 2)
                if end < 0:
                    raise JaasError(f"line {self.line}: unterminated comment")
                self.line += text.count("\n", self._i, end)
                self._i = end + 2
            elif c == "/":  # StreamTokenizer's comment character: the rest of the line
                end = text.find("\n", self._i)
                self._i = n if end < 0 else end
            elif c in self._PUNCTUATION:
                self._i += 1
                return ("punct", c)
            elif c in "\"'":
                return ("quoted", self._quoted(c))
            else:
                start = self._i
                while (self._i < n and not text[self._i].isspace()
                       and text[self._i] not in self._PUNCTUATION + "\"'/"):
                    self._i += 1
                return ("word", text[start:self._i])
        return None

    def _quoted(self, quote: str) -> str:
        text, n = self._text, len(self._text)
        self._i += 1
        out = []
        while self._i < n:
            c = text[self._i]
            if c == quote:
                self._i += 1
                return "".join(out)
            if c == "\n":
                break  # StreamTokenizer ends a quoted string at the line's end
            if c == "\\" and self._i + 1 < n:
                nxt = text[self._i + 1]
                self._i += 2
                if nxt in "01234567":
                    digits = nxt
                    while (len(digits) < 3 and self._i < n and text[self._i] in "01234567"
                           and int(digits + text[self._i], 8) <= 0o377):
                        digits += text[self._i]
                        self._i += 1
                    out.append(chr(int(digits, 8)))
                else:
                    out.append(_ESCAPES.get(nxt, nxt))
                continue
            out.append(c)
            self._i += 1
        raise JaasError(f"line {self.line}: unterminated quoted string")
