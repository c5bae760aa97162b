"""Command-line splitting as ZooKeeperMain.parseCommand does it, and option parsing as
commons-cli's DefaultParser does it for zkCli's commands (errors with its messages)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# ZooKeeperMain.MyCommandOptions.ARGS_PATTERN / QUOTED_PATTERN
ARGS_PATTERN = re.compile(r"""\s*([^"']\S*|"[^"]*"|'[^']*')\s*""")
QUOTED_PATTERN = re.compile(r"""^(['"])(.*)(\1)$""", re.DOTALL)


def split_command(line: str) -> list[str]:
    args = []
    for m in ARGS_PATTERN.finditer(line):
        value = m.group(1)
        if QUOTED_PATTERN.match(value):
            value = value[1:-1]
        args.append(value)
    return args


class ParseError(Exception):
    """A commons-cli ParseException; str() is what zkCli prints (the exception's toString)."""

    def __init__(self, java_class: str, message: str) -> None:
        super().__init__(f"org.apache.commons.cli.{java_class}: {message}")


@dataclass(frozen=True)
class Opt:
    key: str
    has_arg: bool
    description: str


@dataclass
class OptionSpec:
    options: list[Opt]
    group: tuple[str, ...] = ()  # one OptionGroup, as setquota/delquota have
    group_required: bool = False

    def find(self, key: str) -> Opt | None:
        return next((o for o in self.options if o.key == key), None)


@dataclass
class Parsed:
    args: list[str]
    values: dict[str, str | None] = field(default_factory=dict)

    def has(self, key: str) -> bool:
        return key in self.values

    def value(self, key: str) -> str | None:
        return self.values.get(key)


def _is_negative_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def _is_option(spec: OptionSpec, token: str) -> bool:
    if not token.startswith("-") or len(token) == 1:
        return False
    name = token[1:].split("=", 1)[0]
    return spec.find(name) is not None or (len(name) > 0 and spec.find(name[0]) is not None)


def parse(spec: OptionSpec, tokens: list[str]) -> Parsed:
    """DefaultParser.parse(options, tokens) with stopAtNonOption=false."""
    parsed = Parsed(args=[])
    current: Opt | None = None
    current_has_value = False
    selected_in_group: str | None = None
    skip = False

    def check_required_arg() -> None:
        if current is not None and not current_has_value:
            raise ParseError("MissingArgumentException",
                             f"Missing argument for option: {current.key}")

    def handle_option(opt: Opt) -> None:
        nonlocal current, current_has_value, selected_in_group
        check_required_arg()
        if opt.key in spec.group:
            if selected_in_group is not None and selected_in_group != opt.key:
                raise ParseError(
                    "AlreadySelectedException",
                    f"The option '{opt.key}' was specified but an option from this group "
                    f"has already been selected: '{selected_in_group}'")
            selected_in_group = opt.key
        parsed.values.setdefault(opt.key, None)
        current = opt if opt.has_arg else None
        current_has_value = False

    def add_value(value: str) -> None:
        nonlocal current, current_has_value
        assert current is not None
        if not current_has_value:
            parsed.values[current.key] = value
        current_has_value = True
        current = None  # one value per option: the next token is an argument again

    def unknown(token: str) -> None:
        if token.startswith("-") and len(token) > 1:
            raise ParseError("UnrecognizedOptionException", f"Unrecognized option: {token}")
        parsed.args.append(token)

    for token in tokens:
        if skip:
            parsed.args.append(token)
        elif current is not None and (not _is_option(spec, token)
                                      or _is_negative_number(token)):
            add_value(token)
        elif token == "--":
            skip = True
        elif token == "-":
            parsed.args.append(token)
        elif token.startswith("--"):
            raise ParseError("UnrecognizedOptionException", f"Unrecognized option: {token}")
        elif token.startswith("-"):
            t = token[1:]
            opt = spec.find(t)
            if opt is not None:
                handle_option(opt)
            elif "=" in t and spec.find(t.split("=", 1)[0]) is not None:
                handle_option(spec.find(t.split("=", 1)[0]))
                if current is not None:
                    add_value(t.split("=", 1)[1])
            else:
                # -S1S2S3 or -S1S2V (handleConcatenatedOptions)
                for i in range(1, len(token)):
                    ch = spec.find(token[i])
                    if ch is None:
                        unknown(token)
                        break
                    handle_option(ch)
                    if current is not None and len(token) != i + 1:
                        add_value(token[i + 1:])
                        break
        else:
            parsed.args.append(token)
    check_required_arg()
    if spec.group_required and selected_in_group is None:
        listed = ", ".join(f"-{k} {spec.find(k).description}" for k in spec.group)
        raise ParseError("MissingOptionException", f"Missing required option: [{listed}]")
    return parsed
