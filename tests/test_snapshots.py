"""The stored report texts (tests/snapshots.py): a text that differs from its snapshot fails with the diff, a missing
one says how to write it, and ``--refresh-snapshots`` rewrites it; what varies from run to run is left out."""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.snapshots as snapshots

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)


def test_a_reworded_message_fails_its_snapshot_until_refreshed(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(snapshots, "SNAPSHOTS", tmp_path)
    monkeypatch.delenv(snapshots.REFRESH_ENV, raising=False)
    with pytest.raises(AssertionError, match="no snapshot .*--refresh-snapshots"):
        snapshots.matches_snapshot("clauses/9.9-x", "message: the old words")
    monkeypatch.setenv(snapshots.REFRESH_ENV, "1")
    snapshots.matches_snapshot("clauses/9.9-x", "message: the old words")
    monkeypatch.delenv(snapshots.REFRESH_ENV)
    snapshots.matches_snapshot("clauses/9.9-x", "message: the old words")  # as stored
    with pytest.raises(AssertionError, match=r"(?s)9.9-x.txt differs.*-message: the old words.*\+message: new words"):
        snapshots.matches_snapshot("clauses/9.9-x", "message: new words")


def test_times_addresses_and_line_numbers_are_not_part_of_a_snapshot() -> None:
    assert snapshots.normalised("took 0.93 s at 0x7f3a, 12 ms") == "took TIME at ADDRESS, TIME\n"
    assert snapshots.normalised("line 32: tokens [23, 50]") == "line N: tokens [23, 50]\n"  # the quoted code stays
    assert snapshots.normalised("at synclab/engine/x.py:145 in f") == "at synclab/engine/x.py:LINE in f\n"
    assert snapshots.normalised("sum of 32 values") == "sum of 32 values\n"


def test_a_report_snapshot_is_named_after_its_test(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(snapshots, "SNAPSHOTS", tmp_path)
    monkeypatch.setenv(snapshots.REFRESH_ENV, "1")
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "tests/test_x.py::test_y[seed 0] (call)")
    snapshots.matches_report_snapshot("a report", "here")
    assert (tmp_path / "reports" / "test_x" / "test_y[seed_0][here].txt").read_text() == "a report\n"


def test_every_snapshot_belongs_to_something_that_still_writes_it() -> None:
    """A renamed test, wrong version or clause leaves its old snapshot behind: it is named here, to be deleted."""
    from tests.honest.corpus import HERE
    from tests.test_clauses import CLAUSES

    tests = snapshots.SNAPSHOTS.parent
    orphans = []
    for path in snapshots.SNAPSHOTS.rglob("*.txt"):
        kind, *rest = path.relative_to(snapshots.SNAPSHOTS).parts
        if kind == "clauses":
            alive = path.stem in {clause.id for clause in CLAUSES}
        elif kind == "wrong":
            alive = (HERE / "wrong" / f"{path.stem}.py").exists()
        else:
            source = tests / f"{rest[0]}.py"
            alive = source.exists() and f"def {path.stem.split('[')[0]}(" in source.read_text()
        if not alive:
            orphans.append(str(path.relative_to(tests)))
    assert not orphans, f"snapshots nothing writes any more (delete them): {orphans}"
