"""records.py is generated: the checked-in file must be exactly what gen.py makes now."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys
from pathlib import Path

from zkcompat.jute import gen, records
from zkcompat.jute.schema import BY_NAME, RECORDS

ROOT = Path(__file__).resolve().parents[2]


def test_checked_in_records_module_is_up_to_date() -> None:
    assert gen.TARGET.read_text() == gen.generate(), "run: python -m zkcompat.jute.gen"


def test_check_mode_reports_a_stale_module(tmp_path: Path, monkeypatch) -> None:
    assert gen.main(["--check"]) == 0
    stale = tmp_path / "records.py"
    stale.write_text(gen.TARGET.read_text().replace("class Stat:", "class Stat:  # edited"))
    monkeypatch.setattr(gen, "TARGET", stale)
    assert gen.main(["--check"]) == 1


def test_gen_runs_as_a_module() -> None:
    done = subprocess.run([sys.executable, "-m", "zkcompat.jute.gen", "--check"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_every_schema_record_has_a_class_with_jute_slots() -> None:
    assert len(BY_NAME) == len(RECORDS) == 72
    for rec in RECORDS:
        cls = getattr(records, rec.name)
        assert cls.__slots__ == tuple(f.name for f in rec.fields)
        assert records.RECORDS[rec.name] is cls
        instance = cls()
        assert not hasattr(instance, "__dict__")


# -- the shared world:anyone ACL vector (gen.SHARED_VECTORS) ---------------------------------

OPEN = [records.ACL(31, records.Id("world", "anyone"))]


def _create(acl) -> records.CreateRequest:
    return records.CreateRequest("/a", b"x", acl, 1)


def test_shared_acl_vector_encodes_as_the_general_code_does() -> None:
    # A plain list takes the loop; the shared list takes the precomputed bytes.
    assert type(OPEN) is list and OPEN == records.OPEN_ACL_UNSAFE_RECORDS
    plain = _create(list(OPEN)).to_bytes()
    assert _create(records.OPEN_ACL_UNSAFE_RECORDS).to_bytes() == plain
    out = bytearray(b"head")
    _create(records.OPEN_ACL_UNSAFE_RECORDS).encode(out)
    assert bytes(out) == b"head" + plain
    txn = records.CreateTxn("/a", b"x", records.OPEN_ACL_UNSAFE_RECORDS, True, 7)
    assert txn.to_bytes() == records.CreateTxn("/a", b"x", list(OPEN), True, 7).to_bytes()


def test_world_anyone_decodes_to_the_shared_list_from_any_buffer() -> None:
    wire = _create(list(OPEN)).to_bytes()
    for buf in (wire, bytearray(wire), memoryview(wire)):
        rec, end = records.CreateRequest.decode(buf, 0)
        assert rec.acl is records.OPEN_ACL_UNSAFE_RECORDS
        assert (rec.path, rec.data, rec.flags, end) == ("/a", b"x", 1, len(wire))
        assert rec == _create(list(OPEN))


def test_other_acl_vectors_decode_into_lists_of_their_own() -> None:
    near_misses = [
        [records.ACL(1, records.Id("world", "anyone"))],  # other permissions
        [records.ACL(31, records.Id("world", "anyonf"))],  # same length, other id
        OPEN * 2,  # starts with the shared element
        [records.ACL(31, records.Id("digest", "u:x"))],
        [],
    ]
    for acl in near_misses:
        rec = records.CreateRequest.from_bytes(_create(acl).to_bytes())
        assert rec.acl == acl and type(rec.acl) is list
    assert records.CreateRequest.from_bytes(_create(None).to_bytes()).acl is None


def test_a_truncated_shared_element_is_refused_not_shared() -> None:
    wire = _create(list(OPEN)).to_bytes()
    cut = wire[:-4 - 3]  # flags gone and the last 3 bytes of "anyone"
    try:
        records.CreateRequest.from_bytes(cut)
    except records.JuteError as e:
        assert "CreateRequest.acl[].id.id" in str(e)
    else:
        raise AssertionError("a truncated ACL decoded")


def test_the_shared_list_refuses_every_change() -> None:
    shared = records.OPEN_ACL_UNSAFE_RECORDS
    changes = [
        lambda v: v.append(OPEN[0]), lambda v: v.extend(OPEN), lambda v: v.insert(0, OPEN[0]),
        lambda v: v.pop(), lambda v: v.remove(shared[0]), lambda v: v.clear(),
        lambda v: v.sort(), lambda v: v.reverse(), lambda v: v.__setitem__(0, OPEN[0]),
        lambda v: v.__delitem__(0), lambda v: v.__iadd__(OPEN), lambda v: v.__imul__(2),
    ]
    for change in changes:
        try:
            change(shared)
        except TypeError:
            pass
        else:
            raise AssertionError("the shared ACL list changed")
    assert shared == OPEN and list(shared) == OPEN and shared + OPEN == OPEN * 2
    for copied in (copy.copy(shared), copy.deepcopy(shared), pickle.loads(pickle.dumps(shared))):
        assert copied == OPEN and type(copied) is list
        copied.append(OPEN[0])  # a copy is the caller's to change
