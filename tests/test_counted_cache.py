"""Counts kept on disk per version of the package's code (synclab.capstone.counted_cache): read back only while the code is
the same, only from this user's own folder, and counted again from a file that does not read back."""

from __future__ import annotations

import os

import pytest

from synclab.capstone import counted_cache

pytestmark = pytest.mark.sim  # no device at all: files on disk (conftest.py asks every test to say)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setattr(counted_cache.tempfile, "tempdir", str(tmp_path))
    return tmp_path / f"synclab-counts-{os.getuid()}"


def test_a_count_is_made_once_and_read_back(folder):
    calls = []
    first = counted_cache.counted_once("toy", lambda: calls.append(1) or {"baseline": [3, 4]})
    again = counted_cache.counted_once("toy", lambda: calls.append(1) or {"baseline": [0, 0]})
    assert first == again == {"baseline": [3, 4]} and calls == [1]
    assert oct(folder.stat().st_mode & 0o777) == "0o700"


def test_changed_code_is_counted_again(folder, monkeypatch):
    counted_cache.counted_once("toy", lambda: 1)
    monkeypatch.setattr(counted_cache, "package_digest", lambda: "another-version")
    assert counted_cache.counted_once("toy", lambda: 2) == 2


def test_a_file_that_does_not_read_back_is_counted_again(folder):
    counted_cache.counted_once("toy", lambda: 1)
    (path,) = folder.glob("toy-*.json")
    path.write_text("{half a fi")
    assert counted_cache.counted_once("toy", lambda: 2) == 2
    assert counted_cache.counted_once("toy", lambda: 3) == 2  # and the new count is kept


def test_a_folder_others_may_write_to_is_not_used(folder):
    folder.mkdir(mode=0o700)
    folder.chmod(0o777)
    calls = []
    for _ in range(2):
        assert counted_cache.counted_once("toy", lambda: calls.append(1) or 5) == 5
    assert calls == [1, 1] and not list(folder.glob("toy-*.json"))


def test_the_digest_follows_the_package_code():
    digest = counted_cache.package_digest()
    assert len(digest) == 20 and digest == counted_cache.package_digest()
