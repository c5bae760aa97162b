"""records.py is generated: the checked-in file must be exactly what gen.py makes now."""

from __future__ import annotations

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
