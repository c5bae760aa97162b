"""Generates records.py from schema.py: `python -m zkcompat.jute.gen` rewrites it in place.

The generated code is the hot path, so it is straight-line: each run of fixed-size fields
(including the length or count in front of a ustring, buffer or vector, and the fields of
nested records) is one precompiled big-endian struct.Struct; nested records are built
inline without a function call per field; records are made with object.__new__ before
their fields are decoded, and unpack_from stores straight into their slots, which is
cheaper than calling __init__ with temporaries.
"""

from __future__ import annotations

import keyword
import struct
import sys
from pathlib import Path

from zkcompat.jute.schema import BY_NAME, RECORDS, Record, element_type

TARGET = Path(__file__).with_name("records.py")

# jute type -> struct format character, for fixed-size fields.
FIXED = {"byte": "b", "boolean": "?", "int": "i", "long": "q", "float": "f", "double": "d"}
DEFAULTS = {"byte": "0", "boolean": "False", "int": "0", "long": "0", "float": "0.0", "double": "0.0"}
PY_TYPES = {
    "byte": "int", "boolean": "bool", "int": "int", "long": "int", "float": "float",
    "double": "float", "ustring": "str | None", "buffer": "bytes | None",
}


# Vectors whose commonest value decode hands out as one shared, read-only list, and encode
# writes as precomputed bytes. A create's ACL is world:anyone with every permission almost
# always; decoding its two records and two strings was a tenth of a create's work.
# {vector type: (module-level name of the shared list, (perms, scheme, id) of its one ACL)}
SHARED_VECTORS = {
    "vector<ACL>": ("OPEN_ACL_UNSAFE_RECORDS", (31, "world", "anyone")),
}


def shared_vector_element(type_: str) -> tuple[str, bytes]:
    """The shared vector's one element: as a Python expression, and on the wire (an ACL:
    int perms, then the Id's two ustrings; the vector's count is not included)."""
    perms, scheme, ident = SHARED_VECTORS[type_][1]
    wire = struct.pack(">ii", perms, len(scheme)) + scheme.encode() \
        + struct.pack(">i", len(ident)) + ident.encode()
    return f"ACL({perms}, Id({scheme!r}, {ident!r}))", wire


def min_wire_bytes(type_: str) -> int:
    """The fewest bytes a value of type_ can take on the wire (bounds vector counts)."""
    if type_ in FIXED:
        return struct.calcsize(">" + FIXED[type_])
    if type_ in ("ustring", "buffer") or element_type(type_) is not None:
        return 4
    return sum(min_wire_bytes(f.type) for f in BY_NAME[type_].fields)


def is_fixed_record(rec: Record) -> bool:
    return all(f.type in FIXED and not f.optional_trailing for f in rec.fields)


def py_type(type_: str) -> str:
    if type_ in PY_TYPES:
        return PY_TYPES[type_]
    elem = element_type(type_)
    if elem is not None:
        return f"list[{py_type(elem).removesuffix(' | None')}] | None"
    return f"{type_} | None"


class Emitter:
    """Accumulates lines of one function, plus the struct formats the module must define."""

    def __init__(self, structs: dict[str, str], indent: int) -> None:
        self.structs = structs
        self.lines: list[str] = []
        self.indent = indent
        self.counter = 0
        self.pending: list[tuple[str, str]] = []  # (format char, expression or target)

    def tmp(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}{self.counter}"

    def line(self, text: str) -> None:
        self.lines.append("    " * self.indent + text)

    def struct_name(self, fmt: str) -> str:
        name = "_S_" + fmt.replace("?", "z")
        self.structs[fmt] = name
        return name


class EncodeEmitter(Emitter):
    def flush(self) -> None:
        if not self.pending:
            return
        fmt = "".join(f for f, _ in self.pending)
        args = ", ".join(e for _, e in self.pending)
        self.line(f"out += {self.struct_name(fmt)}_pack({args})")
        self.pending = []

    def value(self, type_: str, expr: str) -> None:
        if type_ in FIXED:
            self.pending.append((FIXED[type_], expr))
        elif type_ == "ustring" or type_ == "buffer":
            b = self.tmp("b")
            n = self.tmp("n")
            self.line(f"{b} = {expr}")
            self.line(f"if {b} is None:")
            self.line(f"    {n} = -1")
            self.line(f"    {b} = b''")
            self.line("else:")
            if type_ == "ustring":
                self.line(f"    {b} = {b}.encode() if {b}.isascii() else _java_utf8_encode({b})")
            self.line(f"    {n} = len({b})")
            self.pending.append(("i", n))
            self.flush()
            self.line(f"out += {b}")
        elif (elem := element_type(type_)) is not None:
            v = self.tmp("v")
            x = self.tmp("x")
            self.line(f"{v} = {expr}")
            saved = list(self.pending)
            shared = SHARED_VECTORS.get(type_)
            if shared is not None:
                self.line(f"if {v} is {shared[0]}:")
                self.indent += 1
                self.flush()
                self.line(f"out += _{shared[0]}_VECTOR")
                self.indent -= 1
                self.pending = list(saved)
                self.line(f"elif {v} is None:")
            else:
                self.line(f"if {v} is None:")
            self.indent += 1
            self.pending.append(("i", "-1"))
            self.flush()
            self.indent -= 1
            self.line("else:")
            self.indent += 1
            self.pending = saved + [("i", f"len({v})")]
            self.flush()
            self.line(f"for {x} in {v}:")
            self.indent += 1
            self.value(elem, x)
            self.flush()
            if self.lines[-1].strip() == f"for {x} in {v}:":
                self.line("pass")
            self.indent -= 2
        else:
            rec = BY_NAME[type_]
            if expr.isidentifier():
                r = expr
            else:
                r = self.tmp("r")
                self.line(f"{r} = {expr}")
            for f in rec.fields:
                self.value(f.type, f"{r}.{f.name}")


class DecodeEmitter(Emitter):
    """Decodes straight into assignment targets (slots of records made up front), so a
    run of fixed-size fields is one unpack_from with no temporaries."""

    def __init__(self, structs: dict[str, str], indent: int) -> None:
        super().__init__(structs, indent)
        self.uses_end = False

    def flush(self) -> None:
        if not self.pending:
            return
        fmt = "".join(f for f, _ in self.pending)
        targets = ", ".join(t for _, t in self.pending)
        if len(self.pending) == 1:
            targets += ","
        self.line(f"{targets} = {self.struct_name(fmt)}_unpack_from(buf, o)")
        self.line(f"o += {struct.calcsize('>' + fmt)}")
        self.pending = []

    def value(self, type_: str, target: str, where: str) -> None:
        """Emits code that decodes one value into target.

        A fixed-size value is only stored at the next flush().
        """
        if type_ in FIXED:
            self.pending.append((FIXED[type_], target))
        elif type_ == "ustring" or type_ == "buffer":
            n = self.tmp("n")
            self.uses_end = True
            self.pending.append(("i", n))
            self.flush()
            self.line(f"if 0 <= {n} <= end - o:")
            if type_ == "ustring":
                # bytes.decode is the fast path; codecs.utf_8_decode takes any buffer.
                self.line(f"    {target} = buf[o:o + {n}].decode('utf-8', _JAVA) if isb "
                          f"else _utf8_decode(buf[o:o + {n}], _JAVA, True)[0]")
            else:
                self.line(f"    {target} = buf[o:o + {n}] if isb else bytes(buf[o:o + {n}])")
            self.line(f"    o += {n}")
            self.line(f"elif {n} == -1:")
            self.line(f"    {target} = None")
            self.line("else:")
            self.line(f"    raise _bad_length({where!r}, {n}, o, end)")
        elif (elem := element_type(type_)) is not None:
            n = self.tmp("n")
            v = self.tmp("v")
            self.uses_end = True
            self.pending.append(("i", n))
            self.flush()
            shared = SHARED_VECTORS.get(type_)
            if shared is not None:
                size = len(shared_vector_element(type_)[1])
                self.line(f"if {n} == 1 and buf[o:o + {size}] == _{shared[0]}_ELEMENT:")
                self.line(f"    {target} = {shared[0]}")
                self.line(f"    o += {size}")
                self.line(f"elif {n} <= 0:")
            else:
                # BinaryInputArchive.startVector: -1 is null; BinaryIndex.done() is n <= 0,
                # so Java reads any other negative count as an empty vector.
                self.line(f"if {n} <= 0:")
            self.line(f"    {target} = None if {n} == -1 else []")
            self.line("else:")
            self.indent += 1
            # Checked before allocating anything: each element takes at least this much.
            self.line(f"if {n} > (end - o) // {min_wire_bytes(elem)}:")
            self.line(f"    raise _bad_count({where!r}, {n}, o, end)")
            self.line(f"{target} = {v} = []")
            self.line(f"for _ in range({n}):")
            self.indent += 1
            if elem in FIXED or elem in ("ustring", "buffer") or element_type(elem) is not None:
                x = self.tmp("x")
                self.value(elem, x, f"{where}[]")
                self.flush()
                self.line(f"{v}.append({x})")
            else:
                x = self.tmp("r")
                self.line(f"{x} = _new({elem})")
                self.line(f"{v}.append({x})")
                self.record_fields(BY_NAME[elem], x, f"{where}[]")
                self.flush()
            self.indent -= 2
        else:
            rec = BY_NAME[type_]
            r = self.tmp("r")
            self.line(f"{target} = {r} = _new({rec.name})")
            self.record_fields(rec, r, where)

    def record_fields(self, rec: Record, obj: str, where: str) -> None:
        for f in rec.fields:
            if not f.optional_trailing:
                self.value(f.type, f"{obj}.{f.name}", f"{where}.{f.name}")


def gen_record(rec: Record, structs: dict[str, str]) -> list[str]:
    names = [f.name for f in rec.fields]
    for name in names:
        assert name.isidentifier() and not keyword.iskeyword(name), name
    out = [f"class {rec.name}:"]
    out.append(f'    """{rec.module}.{rec.name}"""')
    out.append("")
    out.append(f"    __slots__ = ({', '.join(repr(n) for n in names)}{',' if len(names) == 1 else ''})")
    out.append("")
    # __init__: jute order, Java's defaults (0, false, null); readOnly defaults to False.
    params = ", ".join(
        f"{f.name}: {py_type(f.type)} = {DEFAULTS.get(f.type, 'None')}" for f in rec.fields
    )
    out.append(f"    def __init__(self, {params}) -> None:")
    for f in rec.fields:
        out.append(f"        self.{f.name} = {f.name}")
    out.append("")
    out.append("    def __eq__(self, other: object) -> bool:")
    out.append(f"        if type(other) is not {rec.name}:")
    out.append("            return NotImplemented")
    cmp = " and ".join(f"self.{n} == other.{n}" for n in names)
    out.append(f"        return {cmp}")
    out.append("")
    out.append("    __hash__ = None  # type: ignore[assignment]  # mutable, like the Java records")
    out.append("")
    out.append("    def __repr__(self) -> str:")
    fields = ", ".join(f"{n}={{self.{n}!r}}" for n in names)
    out.append(f"        return f'{rec.name}({fields})'")
    out.append("")
    out.extend(gen_encode(rec, structs))
    out.append("")
    out.extend(gen_decode(rec, structs))
    out.append("")
    out.append("    @classmethod")
    out.append(f"    def from_bytes(cls, data: bytes | bytearray | memoryview) -> {rec.name}:")
    out.append('        """Decodes a record at offset 0; trailing bytes are ignored, as in Java."""')
    out.append(f"        return {rec.name}.decode(data, 0)[0]")
    return out


def gen_encode(rec: Record, structs: dict[str, str]) -> list[str]:
    em = EncodeEmitter(structs, indent=2)
    lines = ["    def encode(self, out: bytearray) -> None:"]
    optional = [f for f in rec.fields if f.optional_trailing]
    for f in rec.fields:
        if f.optional_trailing:
            continue
        em.value(f.type, f"self.{f.name}")
    em.flush()
    for f in optional:
        assert f is rec.fields[-1] and f.type == "boolean"
        em.line(f"if self.{f.name} is not None:")
        em.line(f"    out += b'\\x01' if self.{f.name} else b'\\x00'")
    encode_body = em.lines
    lines += encode_body
    lines.append("")
    lines.append("    def to_bytes(self) -> bytes:")
    if is_fixed_record(rec):
        fmt = "".join(FIXED[f.type] for f in rec.fields)
        args = ", ".join(f"self.{f.name}" for f in rec.fields)
        lines.append(f"        return {em.struct_name(fmt)}_pack({args})")
    else:
        lines.append("        out = bytearray()")
        lines += encode_body
        lines.append("        return bytes(out)")
    return lines


def gen_decode(rec: Record, structs: dict[str, str]) -> list[str]:
    lines = ["    @staticmethod"]
    lines.append(f"    def decode(buf: bytes | bytearray | memoryview, offset: int = 0) -> tuple[{rec.name}, int]:")
    em = DecodeEmitter(structs, indent=3)
    em.line(f"self = _new({rec.name})")
    if is_fixed_record(rec):
        fmt = "".join(FIXED[f.type] for f in rec.fields)
        targets = ", ".join(f"self.{f.name}" for f in rec.fields)
        comma = "," if len(rec.fields) == 1 else ""
        em.line(f"{targets}{comma} = {em.struct_name(fmt)}_unpack_from(buf, offset)")
        em.line(f"return self, offset + {struct.calcsize('>' + fmt)}")
    else:
        em.line("o = offset")
        em.record_fields(rec, "self", rec.name)
        em.flush()
        for f in rec.fields:
            if f.optional_trailing:
                # ProtocolManager reads readOnly in a try/catch: absent means an old peer.
                em.uses_end = True
                em.line("if o < end:")
                em.line(f"    self.{f.name} = buf[o] != 0")
                em.line("    o += 1")
                em.line("else:")
                em.line(f"    self.{f.name} = None")
        em.line("return self, o")
        if em.uses_end:
            em.lines.insert(0, "            isb = type(buf) is bytes")
            em.lines.insert(0, "            end = len(buf)")
    lines.append("        try:")
    lines += em.lines
    lines.append("        except _struct_error as e:")
    lines.append(f"            raise JuteError(f'{rec.name}: truncated record ({{e}})') from None")
    return lines


HEADER = '''"""Every Jute record of zookeeper.jute as a slotted class with generated encode/decode.

GENERATED by `python -m zkcompat.jute.gen` from schema.py: do not edit by hand.
"""

# ruff: noqa: E501
from __future__ import annotations

from codecs import utf_8_decode as _utf8_decode
from struct import Struct
from struct import error as _struct_error

from zkcompat.jute.errors import JuteError
from zkcompat.jute.text import JAVA_UTF8_ERRORS as _JAVA
from zkcompat.jute.text import java_utf8_encode as _java_utf8_encode

_new = object.__new__


def _bad_length(where: str, n: int, o: int, end: int) -> JuteError:
    if n < 0:
        return JuteError(f"{where}: negative length {n} at offset {o}")
    return JuteError(f"{where}: length {n} at offset {o} runs past the end ({end - o} bytes left)")


def _bad_count(where: str, n: int, o: int, end: int) -> JuteError:
    return JuteError(f"{where}: vector count {n} at offset {o} cannot fit in the {end - o} bytes left")


class FrozenList(list):
    """A decoded vector that many records share (see SHARED_VECTORS in gen.py): it reads
    and compares as a list, and refuses every change; copy it with list() to change it."""

    __slots__ = ()

    def _refuse(self, *args, **kwargs):
        raise TypeError("a shared decoded vector is read-only: copy it with list() first")

    append = extend = insert = pop = remove = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse

    def __reduce__(self):
        return (list, (list(self),))  # copy, deepcopy and pickle give a plain list

'''


def generate() -> str:
    structs: dict[str, str] = {}
    bodies: list[str] = []
    for rec in RECORDS:
        bodies.append("\n".join(gen_record(rec, structs)))
    parts = [HEADER]
    for fmt, name in sorted(structs.items(), key=lambda kv: kv[1]):
        parts.append(f"{name} = Struct('>{fmt}')\n")
        parts.append(f"{name}_pack = {name}.pack\n")
        parts.append(f"{name}_unpack_from = {name}.unpack_from\n")
    parts.append("\n\n")
    parts.append("\n\n\n".join(bodies))
    parts.append("\n\n\nRECORDS: dict[str, type] = {\n")
    for rec in RECORDS:
        parts.append(f"    {rec.name!r}: {rec.name},\n")
    parts.append("}\n")
    shared_names = []
    for type_, (name, _) in SHARED_VECTORS.items():
        expr, wire = shared_vector_element(type_)
        parts.append(f"\n{name} = FrozenList([{expr}])\n")
        parts.append(f"_{name}_ELEMENT = {wire!r}\n")
        parts.append(f"_{name}_VECTOR = {struct.pack('>i', 1) + wire!r}\n")
        shared_names.append(name)
    names = [r.name for r in RECORDS] + ["RECORDS", "FrozenList"] + shared_names
    parts.append(f"\n__all__ = [{', '.join(repr(n) for n in names)}]\n")
    return "".join(parts)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = generate()
    if argv == ["--check"]:
        current = TARGET.read_text() if TARGET.exists() else ""
        if current != text:
            print(f"{TARGET} is out of date: run python -m zkcompat.jute.gen", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
