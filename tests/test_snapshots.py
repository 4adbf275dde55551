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


def test_times_and_addresses_are_not_part_of_a_snapshot() -> None:
    assert snapshots.normalised("took 0.93 s at 0x7f3a, 12 ms") == "took TIME at ADDRESS, TIME\n"
    assert snapshots.normalised("line 32: tokens [23, 50]") == "line 32: tokens [23, 50]\n"
