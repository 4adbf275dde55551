"""Chapter 3, Exercise 3.7: the process group starts and always stops; each check fails on a wrong version."""

from __future__ import annotations

import os
import signal
import time

import pytest
import torch
import torch.distributed as dist

from synclab import pinned_transfers as ch3
from synclab.device import is_host, is_pin_memory_available, pick_device
from synclab.distributed import RankError, RankGroup, RankTimeout
from synclab.engine.dp_utils import (_get_device_and_group, _run_ar_baseline, _synchronize_dp_ranks_baseline,
                                     post_process)
from tests.check_reports import assert_every_check_shown_to_fail, outcome
from tests.notebook_code import load_function

NOTEBOOK = "solutions/03_pinned_transfers.ipynb"
_namespace: dict = {}
_run_ar = load_function(NOTEBOOK, "_run_ar", _namespace)
_synchronize_dp_ranks = load_function(NOTEBOOK, "_synchronize_dp_ranks", _namespace)


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


@pytest.fixture(scope="module")
def shared_ranks():
    """One group for the tests that only need ranks: spawning two costs seconds on a busy machine."""
    with RankGroup() as ranks:
        yield ranks


def test_solution_passes_and_the_baseline_counts_one_sync_per_field(shared_ranks, no_leaked_ranks):
    assert ch3.check_dp_sync(_run_ar, _synchronize_dp_ranks).passed  # its own group, stopped on return
    counts = ch3.dp_sync_counts(_run_ar, _synchronize_dp_ranks, (_run_ar_baseline, _synchronize_dp_ranks_baseline),
                                ranks=shared_ranks)
    # four fields written on the device: four syncs; vLLM's readers on the device table: five more
    assert counts == {"_run_ar": {"before": 4, "after": 0}, "_synchronize_dp_ranks": {"before": 9, "after": 1}}


# ----------------------------------------------------------------------------- the group itself


def _sleep_forever(rank: int) -> None:
    time.sleep(600)


def _raise_on_rank_1(rank: int) -> int:
    if rank == 1:
        raise ValueError("the reader's bug")
    t = torch.zeros(1)
    dist.all_reduce(t)  # rank 0 waits here for a rank that will never come
    return rank


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


def test_a_rank_dies_with_its_parent():
    """PR_SET_PDEATHSIG: a killed notebook kernel takes its ranks along (checked on a grandchild)."""
    import subprocess
    import sys

    code = ("from synclab.distributed import RankGroup\n"
            "g = RankGroup(); g.start(); print(*g.pids, flush=True)\n"
            "import time; time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    pids = [int(p) for p in parent.stdout.readline().split()]
    assert len(pids) == 2
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [p for p in pids if os.path.exists(f"/proc/{p}") and "Z" not in open(f"/proc/{p}/stat").read().split()[2]]
        time.sleep(0.1)
    assert not alive, "ranks outlived the process that started them"


# ----------------------------------------------------------------------------- wrong versions


def run_ar_pageable(should_ubatch, orig, padded, mode, parallel_config):
    device, group = _get_device_and_group(parallel_config)
    tensor_cpu = torch.zeros(4, parallel_config.data_parallel_size, dtype=torch.int32)  # pageable
    col = parallel_config.data_parallel_rank
    tensor_cpu[:, col] = torch.tensor([orig, padded, int(should_ubatch), mode], dtype=torch.int32)
    tensor = tensor_cpu.to(device, non_blocking=True)
    dist.all_reduce(tensor, group=group)
    return tensor


def run_ar_hard_pinned(should_ubatch, orig, padded, mode, parallel_config):
    device, group = _get_device_and_group(parallel_config)
    tensor_cpu = torch.zeros(4, parallel_config.data_parallel_size, dtype=torch.int32, pin_memory=True)
    tensor_cpu[:, parallel_config.data_parallel_rank] = torch.tensor([orig, padded, int(should_ubatch), mode])
    tensor = tensor_cpu.to(device, non_blocking=True)
    dist.all_reduce(tensor, group=group)
    return tensor


def run_ar_column_zero(should_ubatch, orig, padded, mode, parallel_config):  # every rank writes column 0
    device, group = _get_device_and_group(parallel_config)
    tensor_cpu = torch.zeros(4, parallel_config.data_parallel_size, dtype=torch.int32,
                             pin_memory=is_pin_memory_available() and not is_host(device))
    tensor_cpu[:, 0] = torch.tensor([orig, padded, int(should_ubatch), mode])
    tensor = tensor_cpu.to(device, non_blocking=True)
    dist.all_reduce(tensor, group=group)
    return tensor


def run_ar_ignores_cpu_group(should_ubatch, orig, padded, mode, parallel_config):
    _, group = _get_device_and_group(parallel_config)
    device = pick_device()  # the device even when the collective runs on the host
    tensor_cpu = torch.zeros(4, parallel_config.data_parallel_size, dtype=torch.int32,
                             pin_memory=is_pin_memory_available())
    tensor_cpu[:, parallel_config.data_parallel_rank] = torch.tensor([orig, padded, int(should_ubatch), mode])
    tensor = tensor_cpu.to(device, non_blocking=True)
    dist.all_reduce(tensor, group=group)
    return tensor


def sync_reads_on_device(num_tokens_unpadded, num_tokens_padded, should_attempt_ubatching, cudagraph_mode,
                         parallel_config):  # vLLM's readers on the device table: a sync per read
    tensor = _run_ar(should_attempt_ubatching, num_tokens_unpadded, num_tokens_padded, cudagraph_mode, parallel_config)
    return post_process(tensor, parallel_config.num_ubatches)


def sync_mode_max(num_tokens_unpadded, num_tokens_padded, should_attempt_ubatching, cudagraph_mode, parallel_config):
    ubatch, padding, _ = _synchronize_dp_ranks(num_tokens_unpadded, num_tokens_padded, should_attempt_ubatching,
                                               cudagraph_mode, parallel_config)
    return ubatch, padding, cudagraph_mode  # this rank's own mode, not the agreed one


def run_ar_one_rank_only(should_ubatch, orig, padded, mode, parallel_config):
    if parallel_config.data_parallel_rank == 0:
        return _run_ar(should_ubatch, orig, padded, mode, parallel_config)  # rank 0 waits for rank 1 forever
    return torch.zeros(4, parallel_config.data_parallel_size, dtype=torch.int32)


# (run_ar, synchronize_dp_ranks, failing check)
WRONG_3_7 = [
    (_run_ar_baseline, _synchronize_dp_ranks, "0 syncs on every rank"),
    (run_ar_pageable, _synchronize_dp_ranks, "0 syncs on every rank"),
    (run_ar_hard_pinned, _synchronize_dp_ranks, "WSL"),
    (run_ar_column_zero, _synchronize_dp_ranks, "every rank gets the full table"),
    (_run_ar, sync_mode_max, "agrees with the reference"),
    (_run_ar, sync_reads_on_device, "exactly 1 sync"),
    (_run_ar, _synchronize_dp_ranks_baseline, "exactly 1 sync"),
    (run_ar_ignores_cpu_group, _synchronize_dp_ranks, "CPU group"),
]


def test_every_check_is_shown_to_fail():
    assert_every_check_shown_to_fail(ch3.CHECKS_3_7, [(w[:2], name) for *w, name in WRONG_3_7])


@pytest.mark.parametrize("run_ar,sync,failing_check", WRONG_3_7,
                         ids=[f"{a.__name__}-{b.__name__}" for a, b, _ in WRONG_3_7])
def test_each_check_catches_a_wrong_version(run_ar, sync, failing_check, shared_ranks):
    report = ch3.check_dp_sync(run_ar, sync, seed=0, ranks=shared_ranks)
    assert outcome(report, failing_check) in ("failed", "crashed"), str(report)
    assert shared_ranks.running  # a wrong answer is no reason to stop the ranks


def test_a_stub_reports_not_implemented(shared_ranks):
    def stub(*args):
        raise NotImplementedError("Exercise 3.7")

    report = ch3.check_dp_sync(stub, stub, ranks=shared_ranks)
    assert {o.status for o in report.outcomes} == {"not implemented"}, str(report)
    assert shared_ranks.running  # a stub is no crash: the ranks stay up


def test_a_collective_on_one_rank_only_fails_in_time_and_skips_the_rest(no_leaked_ranks):
    started = time.monotonic()
    report = ch3.check_dp_sync(run_ar_one_rank_only, _synchronize_dp_ranks, seed=0, timeout_s=3)
    assert outcome(report, "every rank gets the full table") == "timed out"
    assert "did not answer" in str(report) and "collective" in str(report)
    assert {o.status for o in report.outcomes[1:]} == {"skipped"}, str(report)
    assert time.monotonic() - started < 20
