"""Chapter 3's process group (:mod:`synclab.pinned_transfers.ranks`): it starts, answers, and always stops.

Apart from the checks of Exercise 3.7 (``tests/test_data_parallel.py``): each test here starts its own pair of
ranks, to see them stopped.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
import torch
import torch.distributed as dist

from synclab.pinned_transfers.ranks import RankError, RankGroup, RankTimeout, _alive
from tests.conftest import proc_stat

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)


# ----------------------------------------------------------------------------- the group itself


def _sleep_forever(rank: int) -> None:
    time.sleep(600)


def _raise_on_rank_1(rank: int) -> int:
    if rank == 1:
        raise ValueError("the reader's bug")
    t = torch.zeros(1)
    dist.all_reduce(t)  # rank 0 waits here for a rank that will never come
    return rank


class _RunsWhenRebuilt:
    """An object whose unpickling calls a function: what a rank must not hand the checks' process."""

    def __reduce__(self):
        return (os.getpid, ())


def _returns_an_object_that_runs_code(rank: int) -> object:
    return _RunsWhenRebuilt()


def test_a_rank_hands_back_plain_data_only(no_leaked_ranks):
    """The reader's code runs on the ranks: what they send back is read as plain data, so nothing it sends runs code in
    the checks' process as it is rebuilt (a pickle's globals are refused, and the rank is reported)."""
    with RankGroup() as ranks:
        with pytest.raises(RankError, match="more than plain data.*posix.getpid"):
            ranks.run(_returns_an_object_that_runs_code, timeout_s=30)
        assert ranks.run(lambda rank: {"rank": rank, "values": [1.5, None, "x"]}) == [
            {"rank": 0, "values": [1.5, None, "x"]}, {"rank": 1, "values": [1.5, None, "x"]}]


def test_a_raising_rank_stops_every_rank(no_leaked_ranks):
    with RankGroup() as ranks:
        pids = ranks.pids
        with pytest.raises(RankError, match="the reader's bug") as caught:
            ranks.run(_raise_on_rank_1, timeout_s=30)
        assert caught.value.rank == 1
        assert not ranks.running
        assert ranks.run(lambda rank: rank * 10) == [0, 10]  # restarted on demand
        assert ranks.starts == 2
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_hanging_rank_is_killed_after_the_timeout(no_leaked_ranks):
    with RankGroup() as ranks:
        started = time.monotonic()
        with pytest.raises(RankTimeout, match="did not answer"):
            ranks.run(_sleep_forever, timeout_s=2)
        assert time.monotonic() - started < 10
        assert not ranks.running


def test_an_interrupt_while_waiting_stops_every_rank(no_leaked_ranks):
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        with RankGroup() as ranks:
            signal.setitimer(signal.ITIMER_REAL, 1.0)
            with pytest.raises(KeyboardInterrupt):
                ranks.run(_sleep_forever, timeout_s=60)
            assert not ranks.running
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_ranks_are_forked_from_one_server_that_imported_torch_once(no_leaked_ranks):
    """A restart forks two processes from the same server: no rank imports torch anew (seconds each on 2 cores)."""
    with RankGroup() as ranks:
        first = {_parent(pid) for pid in ranks.pids}
        ranks.close()
        ranks.start()
        again = {_parent(pid) for pid in ranks.pids}
        assert ranks.starts == 2 and len(first) == 1 and first == again
        server = first.pop()
        with open(f"/proc/{server}/cmdline", "rb") as f:
            assert b"multiprocessing.forkserver" in f.read()
        with open(f"/proc/{server}/maps") as f:
            assert "libtorch" in f.read()  # imported by the server, before it forked the ranks


def _parent(pid: int) -> int:
    return proc_stat(pid)[1]


def test_a_busy_rank_dies_with_the_process_that_started_it(tmp_path):
    """A killed notebook kernel takes its ranks along, even while they run the reader's code (one spins, one
    sleeps), and the fork server goes too."""
    import subprocess
    import sys

    code = ("import os, sys, time\n"
            "from synclab.pinned_transfers.ranks import RankGroup\n"
            "def busy(rank, marks):\n"
            "    open(os.path.join(marks, str(rank)), 'w').close()\n"
            "    if rank == 0:\n"
            "        while True: pass\n"
            "    time.sleep(600)\n"
            "g = RankGroup(); g.start(); print(*g.pids, flush=True)\n"
            "g.run(busy, sys.argv[1], timeout_s=600)\n")
    parent = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    pids = [int(p) for p in parent.stdout.readline().split()]
    assert len(pids) == 2
    server = _parent(pids[0])
    deadline = time.monotonic() + 30
    while len(list(tmp_path.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(list(tmp_path.iterdir())) == 2, "the ranks never started the reader's code"
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    alive = pids + [server]
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if _alive(p)]
        time.sleep(0.1)
    assert not alive, f"outlived the process that started them: {alive} (ranks {pids}, fork server {server})"
