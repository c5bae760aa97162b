"""PathUtils.validatePath, rule by rule."""

import pytest

from zkcompat.tree.errors import KeeperError
from zkcompat.tree.paths import parent_of, path_problem, validate_path


@pytest.mark.parametrize("path", ["/", "/a", "/a/b", "/a.b", "/a/..b", "/a/b..", "/..a", "/é", "/a b"])
def test_valid(path):
    assert path_problem(path) is None
    assert validate_path(path) == path


@pytest.mark.parametrize(
    "path",
    [None, "", "a", "/a/", "//", "/a//b", "/.", "/..", "/a/.", "/a/..", "/a/./b", "/a/../b",
     "/a\0b", "/\x01", "/\x7f", "/\x9f", "/\ud800", "/\uf8ff", "/\ufff0", "/\U0001f600"],
)
def test_invalid(path):
    assert path_problem(path) is not None
    with pytest.raises(KeeperError) as e:
        validate_path(path)
    assert e.value.code == -8  # BADARGUMENTS


def test_parent_of():
    assert parent_of("/a") == "/"
    assert parent_of("/a/b/c") == "/a/b"


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from zkcompat.tree.paths import _path_problem_by_char  # noqa: E402

_ALPHABET = st.sampled_from(["/", ".", "a", "b", "\0", "\x1f", "\x7f", "\x9f", "\ud800", "\uf8ff",
                             "\ufff0", "\U0001f600", "é", " ", "z"])


@settings(max_examples=3000, deadline=None)
@given(st.lists(_ALPHABET, max_size=8).map("".join))
def test_fast_check_agrees_with_the_character_loop(path):
    assert (path_problem(path) is None) == (_path_problem_by_char(path) is None)
