"""Hypothesis strategies for every jute record, derived from zkcompat.jute.schema."""

from __future__ import annotations

from functools import cache

from hypothesis import strategies as st

from zkcompat.jute import records as r
from zkcompat.jute.schema import BY_NAME, element_type

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


def _bounded(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from([lo, hi, 0, -1, 1]), st.integers(lo, hi))


# Text Java's String round-trips through UTF-8 unchanged: the BMP without surrogates.
# (Outside the BMP Java writes CESU-8 and reads it back as U+FFFD; tested separately.)
BMP_TEXT = st.text(st.characters(max_codepoint=0xFFFF, exclude_categories=("Cs",)), max_size=12)

FIXED = {
    "byte": _bounded(-128, 127),
    "boolean": st.booleans(),
    "int": _bounded(INT_MIN, INT_MAX),
    "long": _bounded(LONG_MIN, LONG_MAX),
}


@cache
def value(type_: str) -> st.SearchStrategy:
    if type_ in FIXED:
        return FIXED[type_]
    if type_ == "ustring":
        return st.one_of(st.none(), st.just(""), BMP_TEXT)
    if type_ == "buffer":
        return st.one_of(st.none(), st.just(b""), st.binary(max_size=40))
    elem = element_type(type_)
    if elem is not None:
        return st.one_of(st.none(), st.just([]), st.lists(value(elem), max_size=4))
    return record(type_)


@cache
def record(name: str) -> st.SearchStrategy:
    cls = getattr(r, name)
    fields = []
    for f in BY_NAME[name].fields:
        fields.append(st.one_of(st.none(), st.booleans()) if f.optional_trailing else value(f.type))
    return st.builds(cls, *fields)
