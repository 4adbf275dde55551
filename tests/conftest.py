"""Fixtures shared by the test modules that start chapter 3's ranks (test_rank_group, test_data_parallel)."""

from __future__ import annotations

import os
import time

import pytest


def child_pids() -> set[int]:
    """Processes whose parent is this one (from /proc): what a leaked rank would be."""
    me, out = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == me and fields[0] != "Z" and not _is_resource_tracker(int(entry)):
                out.add(int(entry))
    return out


def _is_resource_tracker(pid: int) -> bool:
    """multiprocessing's one helper per parent (it outlives every group by design), not a rank."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"resource_tracker" in f.read()
    except OSError:
        return False


@pytest.fixture
def no_leaked_ranks():
    before = child_pids()
    yield
    deadline = time.monotonic() + 5
    while child_pids() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not child_pids() - before, "a rank process outlived its check"
