"""Chapter 3, Exercise 3.7: the checks pass the solution and fail each wrong version (the group itself: test_rank_group)."""

from __future__ import annotations

import time
from pathlib import Path

import nbformat
import pytest
import torch
import torch.distributed as dist

from synclab import pinned_transfers as ch3
from synclab.device import is_host, is_pin_memory_available, pick_device
from synclab.pinned_transfers.ranks import RankGroup
from synclab.pinned_transfers.checks.data_parallel import RANK_CALL_TIMEOUT_S, STRAGGLER_S
from synclab.engine.dp_utils import (_get_device_and_group, _run_ar_baseline, _synchronize_dp_ranks_baseline,
                                     post_process)
from tests.check_reports import assert_every_check_shown_to_fail, assert_passes_witness_as, outcome, witnesses
from tests.notebook_code import load_function
from tests.snapshots import matches_report_snapshot

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

NOTEBOOK = "solutions/03_pinned_transfers.ipynb"
_namespace: dict = {}
_run_ar = load_function(NOTEBOOK, "_run_ar", _namespace)
_synchronize_dp_ranks = load_function(NOTEBOOK, "_synchronize_dp_ranks", _namespace)


@pytest.fixture(scope="module")
def shared_ranks():
    """One group for the tests that only need ranks: starting two costs a second on a busy machine."""
    with RankGroup() as ranks:
        yield ranks


def test_solution_passes_and_the_baseline_counts_one_sync_per_field(shared_ranks, no_leaked_ranks):
    assert ch3.check_dp_sync(_run_ar, _synchronize_dp_ranks).passed  # its own group, stopped on return
    counts = ch3.dp_sync_counts(_run_ar, _synchronize_dp_ranks, (_run_ar_baseline, _synchronize_dp_ranks_baseline),
                                ranks=shared_ranks)
    # four fields written on the device: four syncs; vLLM's readers on the device table: five more
    assert counts == {"_run_ar": {"before": 4, "after": 0}, "_synchronize_dp_ranks": {"before": 9, "after": 1}}


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


def run_ar_mode_off_by_one(should_ubatch, orig, padded, mode, parallel_config):  # one field written wrong
    return _run_ar(should_ubatch, orig, padded, mode + 1, parallel_config)


def sync_through_a_wrong_run_ar(num_tokens_unpadded, num_tokens_padded, should_attempt_ubatching, cudagraph_mode,
                                parallel_config):
    tensor = run_ar_mode_off_by_one(should_attempt_ubatching, num_tokens_unpadded, num_tokens_padded, cudagraph_mode,
                                    parallel_config)
    return post_process(tensor.cpu(), parallel_config.num_ubatches)


def sync_raises(num_tokens_unpadded, num_tokens_padded, should_attempt_ubatching, cudagraph_mode, parallel_config):
    raise IndexError("the reader's slip")


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


def _host_table(should_ubatch, orig, padded, mode, parallel_config):
    """This rank's column of the [4, dp_size] table, filled on the host (pinned where the device is not the host)."""
    device, group = _get_device_and_group(parallel_config)
    tensor_cpu = torch.zeros(4, parallel_config.data_parallel_size, dtype=torch.int32,
                             pin_memory=is_pin_memory_available() and not is_host(device))
    tensor_cpu[:, parallel_config.data_parallel_rank] = torch.tensor([orig, padded, int(should_ubatch), mode])
    return tensor_cpu, device, group


def run_ar_reduces_the_host_table(should_ubatch, orig, padded, mode, parallel_config):
    """The all-reduce on the pinned host table, then the upload: the CPU group (gloo) takes it, NCCL would raise."""
    tensor_cpu, device, group = _host_table(should_ubatch, orig, padded, mode, parallel_config)
    dist.all_reduce(tensor_cpu, group=group)
    return tensor_cpu.to(device, non_blocking=True)


def run_ar_returns_what_it_did_not_reduce(should_ubatch, orig, padded, mode, parallel_config):
    """The all-reduce on a copy: the table returned holds this rank's column only."""
    tensor_cpu, device, group = _host_table(should_ubatch, orig, padded, mode, parallel_config)
    tensor = tensor_cpu.to(device, non_blocking=True)
    dist.all_reduce(tensor.clone(), group=group)
    return tensor


def run_ar_without_the_group(should_ubatch, orig, padded, mode, parallel_config):
    """No group=: the world group. Here the world is the DP group, and gloo; in vLLM it is neither."""
    device, _ = _get_device_and_group(parallel_config)
    tensor_cpu = torch.zeros(4, parallel_config.data_parallel_size, dtype=torch.int32,
                             pin_memory=is_pin_memory_available() and not is_host(device))
    tensor_cpu[:, parallel_config.data_parallel_rank] = torch.tensor([orig, padded, int(should_ubatch), mode])
    tensor = tensor_cpu.to(device, non_blocking=True)
    dist.all_reduce(tensor)
    return tensor


def run_ar_skips_an_idle_rank(should_ubatch, orig, padded, mode, parallel_config):
    if orig == 0:  # "nothing to run, nothing to tell": the other rank waits in all_reduce for this one
        return torch.zeros(4, parallel_config.data_parallel_size, dtype=torch.int32)
    return _run_ar(should_ubatch, orig, padded, mode, parallel_config)


def sync_swaps_orig_and_padded(num_tokens_unpadded, num_tokens_padded, should_attempt_ubatching, cudagraph_mode,
                               parallel_config):
    tensor = _run_ar(should_attempt_ubatching, num_tokens_padded, num_tokens_unpadded, cudagraph_mode, parallel_config)
    return post_process(tensor.cpu(), parallel_config.num_ubatches)


def sync_passes_its_own_order(num_tokens_unpadded, num_tokens_padded, should_attempt_ubatching, cudagraph_mode,
                              parallel_config):  # _synchronize_dp_ranks' order, positionally, into _run_ar
    tensor = _run_ar(num_tokens_unpadded, num_tokens_padded, should_attempt_ubatching, cudagraph_mode, parallel_config)
    return post_process(tensor.cpu(), parallel_config.num_ubatches)


def _all_reduced(num_tokens_unpadded, num_tokens_padded, should_attempt_ubatching, cudagraph_mode, parallel_config):
    return _run_ar(should_ubatch=should_attempt_ubatching, orig_num_tokens_per_ubatch=num_tokens_unpadded,
                   padded_num_tokens_per_ubatch=num_tokens_padded, cudagraph_mode=cudagraph_mode,
                   parallel_config=parallel_config)


def sync_reads_without_a_wait(*args):
    parallel_config = args[-1]
    table = _all_reduced(*args).to("cpu", non_blocking=True)  # returns before the data is there
    return post_process(table, parallel_config.num_ubatches)


def sync_copies_into_pinned_without_a_wait(*args):
    parallel_config = args[-1]
    tensor = _all_reduced(*args)
    table = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=is_pin_memory_available())
    table.copy_(tensor, non_blocking=True)
    return post_process(table, parallel_config.num_ubatches)


def sync_reads_then_waits_on_the_stream(*args):
    """Right: a non_blocking read, then a wait on the stream before the host reads (1 sync, as .cpu())."""
    parallel_config = args[-1]
    tensor = _all_reduced(*args)
    table = tensor.to("cpu", non_blocking=True)
    if not is_host(tensor.device):
        torch.cuda.current_stream().synchronize()
    return post_process(table, parallel_config.num_ubatches)


def sync_reads_then_waits_on_an_event(*args):
    parallel_config = args[-1]
    tensor = _all_reduced(*args)
    table = tensor.to("cpu", non_blocking=True)
    if not is_host(tensor.device):
        done = torch.cuda.Event()
        done.record()
        done.synchronize()
    return post_process(table, parallel_config.num_ubatches)


# (run_ar, synchronize_dp_ranks, the check that must catch it, what its message or hint must say)
NAMED_3_7 = [
    (run_ar_reduces_the_host_table, _synchronize_dp_ranks, "every rank gets the full table",
     "NCCL, vLLM's device group, reduces device tensors only"),
    (run_ar_without_the_group, _synchronize_dp_ranks, "every rank gets the full table", "default (world) group"),
    (run_ar_returns_what_it_did_not_reduce, _synchronize_dp_ranks, "every rank gets the full table",
     "you reduced a [4, 2] int32 device tensor, but returned a [4, 2] int32 device tensor"),
    (run_ar_returns_what_it_did_not_reduce, _synchronize_dp_ranks, "CPU group", "you reduced a [4, 2] int32 host"),
    (run_ar_returns_what_it_did_not_reduce, _synchronize_dp_ranks, "WSL", "you reduced"),
    (run_ar_without_the_group, _synchronize_dp_ranks, "CPU group", "pass group=group"),
    (_run_ar, sync_swaps_orig_and_padded, "agrees with the reference",
     "row 0 (orig_num_tokens) holds the values of row 1 (padded_num_tokens)"),
    (_run_ar, sync_swaps_orig_and_padded, "CPU group", "Pass the arguments by keyword"),
    (_run_ar, sync_passes_its_own_order, "agrees with the reference", "the fields landed in the wrong rows"),
    (_run_ar, sync_passes_its_own_order, "CPU group", "the fields landed in the wrong rows"),
    (_run_ar, sync_reads_without_a_wait, "exactly 1 sync", "wait (synchronize the stream"),
    # the table these two read has not landed (as on a GPU, where the read races the copy): the values are wrong too
    (_run_ar, sync_reads_without_a_wait, "agrees with the reference", "before you read the host buffer"),
    (_run_ar, sync_copies_into_pinned_without_a_wait, "exactly 1 sync", "before you read the host buffer"),
    (_run_ar, sync_copies_into_pinned_without_a_wait, "agrees with the reference", "before you read the host buffer"),
    *[(run_ar_mode_off_by_one, _synchronize_dp_ranks, check, "the reduced table differs in row 3 (cudagraph_mode)")
      for check in ("every rank gets the full table", "CPU group", "WSL")],
    *[(_run_ar, sync_through_a_wrong_run_ar, check, "the table _run_ar all-reduced differs in row 3 (cudagraph_mode)")
      for check in ("agrees with the reference", "CPU group")],
    *[(_run_ar, sync_raises, check, "_synchronize_dp_ranks raised on rank")
      for check in ("agrees with the reference", "exactly 1 sync", "CPU group")],
]

# (run_ar, synchronize_dp_ranks, failing check)
WRONG_3_7 = [w[:3] for w in NAMED_3_7] + [
    (_run_ar_baseline, _synchronize_dp_ranks, "0 syncs and no staging copy on every rank"),
    (run_ar_pageable, _synchronize_dp_ranks, "0 syncs and no staging copy on every rank"),
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
    """Each wrong version fails its check; every check it passes witnesses what the solution's does (the grader
    verifies a passed check by its witness: a bug one check names must not cost another)."""
    report = ch3.check_dp_sync(run_ar, sync, seed=0, ranks=shared_ranks)
    assert outcome(report, failing_check) in ("failed", "crashed"), str(report)
    assert shared_ranks.running  # a wrong answer is no reason to stop the ranks
    right = _right_witnesses(shared_ranks)
    assert_passes_witness_as(report, right)


_RIGHT: dict[str, str] = {}


def _right_witnesses(ranks) -> dict[str, str]:
    """Each check's witness for the solution on seed 0, computed once for every wrong version."""
    if not _RIGHT:
        _RIGHT.update(witnesses(ch3.check_dp_sync(_run_ar, _synchronize_dp_ranks, seed=0, ranks=ranks)))
        assert sum(map(bool, _RIGHT.values())) >= 4  # the checks that compare the ranks' answers are verified
    return _RIGHT


def test_each_new_wrong_version_fails_its_check_alone_and_names_its_fault(shared_ranks):
    """One group for all of them: each report's failing checks, and the fault its message or hint names."""
    failing = {}
    for run_ar, sync, check, fault in NAMED_3_7:
        key = (run_ar.__name__, sync.__name__)
        if key not in failing:
            report = ch3.check_dp_sync(run_ar, sync, seed=0, ranks=shared_ranks)
            failing[key] = {o.name: f"{o.message}\n{o.hint}" for o in report.outcomes if not o.ok}
        said = [text for name, text in failing[key].items() if check in name]
        assert said and fault in said[0], (key, failing[key])
    listed = {(r.__name__, s.__name__): {c for r2, s2, c, _ in NAMED_3_7 if (r2, s2) == (r, s)}
              for r, s, _, _ in NAMED_3_7}
    for key, names in failing.items():  # nothing else fails: only the checks each one is listed with
        assert {n for n in names if not any(c in n for c in listed[key])} == set(), (key, names)
    swapped = failing[("_run_ar", "sync_swaps_orig_and_padded")]
    assert "pad every rank" not in next(text for name, text in swapped.items() if "agrees" in name)


def test_a_non_blocking_read_with_a_wait_passes(shared_ranks):
    """The wait the hint asks for works on any machine: simulated streams on the ranks of a CPU-only one."""
    for sync in (sync_reads_then_waits_on_the_stream, sync_reads_then_waits_on_an_event):
        report = ch3.check_dp_sync(_run_ar, sync, seed=0, ranks=shared_ranks)
        assert report.passed, str(report)


def test_a_rank_that_skips_the_collective_is_named_within_seconds(shared_ranks):
    started = time.monotonic()
    report = ch3.check_dp_sync(run_ar_skips_an_idle_rank, _synchronize_dp_ranks, seed=0, ranks=shared_ranks)
    first = report.outcomes[0]
    assert first.status == "timed out", str(report)
    assert "rank 1 never reached dist.all_reduce" in first.message and "rank 0 waited in all_reduce" in first.message
    assert "loop" not in first.hint and "every rank joins the all-reduce" in first.hint
    assert {o.status for o in report.outcomes[1:]} == {"skipped"}, str(report)
    assert time.monotonic() - started < RANK_CALL_TIMEOUT_S  # no waiting out the limits


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
    matches_report_snapshot(report)
    assert {o.status for o in report.outcomes[1:]} == {"skipped"}, str(report)
    assert time.monotonic() - started < 20


def test_a_location_in_a_readers_cell_reads_cell_and_shows_its_line_on_the_ranks(shared_ranks):
    """A cell's function goes to the ranks without its source; its lines go along, so the hint shows them."""
    import linecache

    cell_file = "/tmp/ipykernel_4242/1960580593.py"  # what ipykernel names a cell
    source = ("def sync_reads_in_a_cell(*args):\n"
              "    table = _all_reduced(*args).to('cpu', non_blocking=True)  # read before any wait\n"
              "    return post_process(table, args[-1].num_ubatches)\n")
    linecache.cache[cell_file] = (len(source), None, source.splitlines(True), cell_file)  # as ipykernel does
    namespace = {"_all_reduced": _all_reduced, "post_process": post_process}
    exec(compile(source, cell_file, "exec"), namespace)
    try:
        report = ch3.check_dp_sync(_run_ar, namespace["sync_reads_in_a_cell"], seed=0, ranks=shared_ranks)
    finally:
        del linecache.cache[cell_file]
    text = str(report)
    assert "<cell>:2 `table = _all_reduced(*args).to('cpu', non_blocking=True)" in text, text
    assert "1960580593.py" not in text


def test_the_lab_states_the_limits_the_check_uses():
    """The lab's sentence about a hang gives the check's own limits (it once said 60 s where a run took 6 s)."""
    text = "\n".join(c.source for c in nbformat.read(Path(__file__).parents[1] / "labs" / "03_pinned_transfers.ipynb",
                                                     as_version=4).cells if c.cell_type == "markdown")
    sentence = text[text.index("a hang (an `all_reduce`"):][:300]
    assert f"{STRAGGLER_S:g} s more" in sentence and f"{RANK_CALL_TIMEOUT_S:g} s at most" in sentence, sentence
