"""Fixtures shared by the test modules that start chapter 3's ranks (test_rank_group, test_data_parallel)."""

from __future__ import annotations

import os
import time

import pytest


def proc_stat(pid: int) -> tuple[str, int] | None:
    """``pid``'s state letter and parent pid, from /proc (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    except OSError:
        return None
    return fields[0], int(fields[1])


def child_pids() -> set[int]:
    """Live processes descended from this one (from /proc): what a leaked rank would be.

    multiprocessing's helpers are left out (one each per parent; they outlive every group by design): the
    resource tracker, and the fork server itself, though not what it forked: the ranks are its children.
    """
    parents = {}
    for entry in os.listdir("/proc"):
        stat = proc_stat(int(entry)) if entry.isdigit() else None
        if stat is not None and stat[0] not in ("Z", "X"):
            parents[int(entry)] = stat[1]
    me, out = os.getpid(), set()
    for pid in parents:
        ancestor = parents.get(pid)
        while ancestor is not None and ancestor != me:
            ancestor = parents.get(ancestor)
        if ancestor == me and not (parents[pid] == me and _is_helper(pid)):
            out.add(pid)
    return out


def _is_helper(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except OSError:
        return False
    return b"resource_tracker" in cmdline or b"multiprocessing.forkserver" in cmdline


@pytest.fixture
def no_leaked_ranks():
    before = child_pids()
    yield
    deadline = time.monotonic() + 5
    while child_pids() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not child_pids() - before, "a rank process outlived its check"
