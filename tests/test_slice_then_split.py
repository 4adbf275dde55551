"""Chapter 1: the engine pieces, the checks pass on the solution, and each check fails on a plausible wrong version."""

from __future__ import annotations

import functools

import inspect
import itertools
import random
import re

import pytest
import torch

from synclab.answer_keys import unguarded
from synclab import slice_then_split as ch1
from synclab.slice_then_split import checks as ch1_checks
from synclab.device import is_device_tensor, pick_device, to_device
from synclab.sim.pinning import simulated_pinning
from synclab.engine.pool_metadata import PoolingMetadata, PoolingParams, PoolingStates
from synclab.engine.pooler import DispatchPooler, LastPool
from synclab.engine.pooler_baseline import AllPoolBaseline, with_split_before_41163
from synclab.syncs import count_syncs
from synclab.timing import Sweep, Timing
from synclab.provenance import Provenance
from tests.check_reports import assert_every_check_shown_to_fail, assert_passes_witness_as, copied, outcome, witnesses
from tests.notebook_code import ROOT, load_function
from tests.snapshots import matches_report_snapshot

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

NOTEBOOK = "solutions/01_slice_then_split.ipynb"
_namespace: dict = {}
AllPool = load_function(NOTEBOOK, "AllPool", _namespace)
AllPoolNoSync = load_function(NOTEBOOK, "AllPoolNoSync", _namespace)


# ----------------------------------------------------------------------------- engine pieces


def test_cursor_describes_each_request_rows():
    requests = ch1.make_requests([2, 3, 4])
    step = next(ch1.PoolingRun(requests, chunked=False).steps())
    cursor = step.metadata.get_pooling_cursor()
    assert cursor.first_token_indices_gpu.tolist() == [0, 2, 5]
    assert cursor.last_token_indices_gpu.tolist() == [1, 4, 8]
    assert cursor.num_scheduled_tokens_cpu.tolist() == [2, 3, 4]
    assert cursor.finished_mask == [True, True, True] and not cursor.is_partial_prefill()


def test_sub_group_cursor_recomputes_host_fields_without_syncs():
    requests = ch1.make_requests([5, 5])
    step = next(ch1.PoolingRun(requests, chunked=True, token_budget=7).steps())  # 5 + 2 of 5
    with count_syncs() as report:
        sub = step.metadata[1:]
    assert report.count == 0
    cursor = sub.get_pooling_cursor()
    assert cursor.finished_mask == [False] and cursor.is_partial_prefill()
    assert cursor.first_token_indices_gpu.tolist() == [5]  # still a position in the whole batch


def test_metadata_errors_are_clear():
    with pytest.raises(ValueError, match="no task"):
        PoolingMetadata(torch.tensor([1]), [PoolingParams(None)], [PoolingStates()])
    meta = PoolingMetadata(torch.tensor([1]), [PoolingParams("token_embed")], [PoolingStates()])
    with pytest.raises(RuntimeError, match="build_pooling_cursor"):
        meta.get_pooling_cursor()
    with pytest.raises(ValueError, match="1 requests, but 2"):
        meta.build_pooling_cursor(torch.tensor([1, 2]), torch.tensor([1, 2]))


def _cursor_meta(n: int) -> PoolingMetadata:
    return PoolingMetadata(torch.full((n,), 4), [PoolingParams("token_embed")] * n, [PoolingStates() for _ in range(n)])


def test_the_cursor_is_built_without_a_sync_or_a_staging_copy():
    scheduled = torch.tensor([4, 2, 3])
    meta = _cursor_meta(3)
    with simulated_pinning(True), count_syncs() as report:
        meta.build_pooling_cursor(scheduled, torch.tensor([4, 2, 3]), pick_device())
    assert report.count == 0 and report.staged_count == 0, str(report)
    cursor = meta.get_pooling_cursor()
    assert is_device_tensor(cursor.first_token_indices_gpu)
    assert cursor.first_token_indices_gpu.tolist() == [0, 4, 6] and cursor.last_token_indices_gpu.tolist() == [3, 5, 8]


def test_the_cursor_is_a_view_of_query_start_loc_when_the_runner_passes_it():
    query_start_loc_gpu = to_device(torch.tensor([0, 4, 6, 9, 9, 9]))  # a persistent buffer, longer than needed
    meta = _cursor_meta(3)
    with count_syncs() as report:
        meta.build_pooling_cursor(torch.tensor([4, 2, 3]), torch.tensor([4, 2, 3]), pick_device(),
                                  query_start_loc_gpu=query_start_loc_gpu)
    assert report.count == 0 and report.staged_count == 0
    first = meta.get_pooling_cursor().first_token_indices_gpu
    assert first.data_ptr() == query_start_loc_gpu.data_ptr() and first.tolist() == [0, 4, 6]  # no copy
    with pytest.raises(ValueError, match="at least 4 entries"):
        meta.build_pooling_cursor(torch.tensor([4, 2, 3]), torch.tensor([4, 2, 3]),
                                  query_start_loc_gpu=query_start_loc_gpu[:3])
    with pytest.raises(ValueError, match="in host memory"):
        meta.build_pooling_cursor(torch.tensor([4, 2, 3]), torch.tensor([4, 2, 3]),
                                  query_start_loc_gpu=torch.tensor([0, 4, 6, 9]))


def test_dispatcher_rejects_unknown_tasks():
    requests = ch1.make_requests([2], tasks=["embed"])
    step = next(ch1.PoolingRun(requests, chunked=False).steps())
    with pytest.raises(ValueError, match="no pooler for task"):
        DispatchPooler({"classify": LastPool()})(step.hidden_states, step.metadata)


@pytest.mark.parametrize("slice_groups,pool,expected", [(False, AllPool, 2), (True, AllPoolNoSync, 0)])
def test_dispatcher_adds_no_sync(slice_groups, pool, expected):
    requests = ch1.make_requests([2, 3, 4, 1], tasks=["classify", "token_embed", "token_embed", "classify"])
    step = next(ch1.PoolingRun(requests, chunked=False).steps())
    dispatcher = DispatchPooler({"classify": LastPool(), "token_embed": pool()}, slice_groups=slice_groups)
    with count_syncs() as report:
        out = dispatcher(step.hidden_states, step.metadata)
    assert report.count == expected  # the pooler's own, nothing from the dispatcher
    assert [tuple(o.shape) for o in out] == [(8,), (3, 8), (4, 8), (8,)]
    assert torch.equal(out[1], requests[1].prompt_hidden) and torch.equal(out[3], requests[3].prompt_hidden[-1])


def test_run_schedules_every_token_once_and_poisons_the_buffer():
    requests = ch1.make_requests([9, 4, 7])
    run = ch1.PoolingRun(requests, chunked=True, rng=random.Random(3), token_budget=5)
    seen = 0
    for step in run.steps():
        assert step.hidden_states.shape[0] <= 5
        seen += step.hidden_states.shape[0]
        run.overwrite_buffer()
        assert bool((step.hidden_states == ch1.POISON).all())  # a view of the buffer
    assert seen == 20 and all(r.finished for r in requests)


# ----------------------------------------------------------------------------- the solution


def test_solution_passes_every_check():
    assert ch1.check_all_pool(AllPool).passed
    assert ch1.check_all_pool_no_sync(AllPoolNoSync).passed


def test_baseline_is_vllm_before_41163_in_full_views_two_whole_reads_and_a_slice_per_request():
    """The code before the PR differs from 1.1 where the PR did (the split) and where later vLLM did (the clones)."""
    report = ch1.check_all_pool(copied(AllPoolBaseline), seed=0)
    failed = {o.name for o in report.outcomes if o.status == "failed"}
    assert failed == {o.name for o in report.outcomes
                      if any(word in o.name for word in ("fixed cases", "random", "survive", "syncs", "host work"))}
    assert "chunked prefill" in next(o.case for o in report.outcomes if "fixed cases" in o.name)  # kept views
    matches_report_snapshot(report)  # names what grew (the per-request slices) and the index tensors read whole


def test_the_capstones_before_keeps_the_forward_and_puts_back_the_split():
    before = with_split_before_41163(AllPoolNoSync)
    assert before.forward is AllPoolNoSync.forward and not before.receives_group_rows
    report = ch1.check_all_pool(copied(before), seed=0)
    assert {o.name for o in report.outcomes if o.status == "failed"} == {
        o.name for o in report.outcomes if "syncs" in o.name or "host work" in o.name}, str(report)


def test_sync_counts_of_the_three_versions_and_the_pitfall():
    impls = {"baseline": AllPoolBaseline, "1.1": AllPool, "1.2": AllPoolNoSync, "pitfall": ch1.IteratesDeviceIndices}
    counts = ch1.sync_counts(impls, (1, 8, 48))
    assert counts == {"baseline": [2, 2, 2], "1.1": [2, 2, 2], "1.2": [0, 0, 0], "pitfall": [2, 16, 96]}


def test_torch_calls_grow_with_the_requests_before_41163_and_stay_flat_after():
    calls = ch1.torch_call_counts({"baseline": AllPoolBaseline, "1.1": AllPool, "1.2": AllPoolNoSync}, (1, 8, 48))
    base, after, stretch = calls["baseline"], calls["1.1"], calls["1.2"]
    assert base[2] - base[1] == 40  # one slice per request
    assert len(set(after)) == 1 and len(set(stretch)) == 1, calls


def test_the_pr_benchmark_batch_is_the_prs_shape():
    hidden_states, group = ch1.pr_benchmark_batch(32, hidden_size=4)
    assert tuple(hidden_states.shape) == (64 * 128, 4)
    assert group.tasks == ["token_classify"] * 32
    assert group.get_pooling_cursor().first_token_indices_gpu.tolist()[0] == 16 * 128
    with pytest.raises(ValueError, match="1 to 48"):
        ch1.pr_benchmark_batch(49)


def test_solution_outputs_are_views_and_kept_chunks_are_copies():
    requests = ch1.make_requests([4, 2])
    run = ch1.PoolingRun(requests, chunked=True, rng=random.Random(0), token_budget=5)  # 4 + 1 of 2
    step = next(run.steps())
    pool = AllPool()
    out = pool(step.hidden_states, step.metadata)
    assert out[0].untyped_storage().data_ptr() == step.hidden_states.untyped_storage().data_ptr()
    assert out[1] is None
    (kept,) = requests[1].state.hidden_states_cache
    assert kept.untyped_storage().data_ptr() != step.hidden_states.untyped_storage().data_ptr()


def test_compare_with_pr_states_the_source_and_the_device():
    prov = Provenance.here()
    def timing(us):
        return Timing("x", us, 0.0, [us], prov)
    sweep = Sweep("batch size", [1, 64], {"base": [timing(20.0), timing(400.0)], "fast": [timing(10.0), timing(40.0)]},
                  prov)
    text = ch1.compare_with_pr(sweep)
    assert "59.89 us -> 39.65 us, 1.51x" in text
    assert prov.label in text
    assert "2.00x" in text and "10.00x" in text
    fig = ch1.speedup_figure(sweep)
    bar = fig.data[0]  # from 1x to its ratio: its base at 1, its length the ratio less 1, its label the ratio
    assert list(bar.base) == [1.0, 1.0] and [1 + y for y in bar.y] == [2.0, 10.0]
    assert list(bar.customdata) == [2.0, 10.0] and list(bar.text) == ["2.00x", "10.00x"]
    (pr,) = [trace for trace in fig.data if trace.name.startswith("PR #41163")]
    assert list(pr.x) == ["32"] and round(pr.y[0], 2) == 1.51  # at the size the PR measured, nowhere else
    assert list(fig.layout.yaxis.ticktext) == ["1x", "2x", "4x", "8x", "16x"]  # ratios, not a log axis's digits


# ----------------------------------------------------------------------------- wrong versions of 1.1


class SlicesPerRequestFromHostSizes(AllPool):  # 2 syncs, right values, but a slice per request
    def split_hidden_states(self, hidden_states, cursor):
        sizes = cursor.num_scheduled_tokens_cpu.tolist()
        if not sizes:
            return []
        start = int(cursor.first_token_indices_gpu[0].item())
        int(cursor.last_token_indices_gpu[-1].item())
        chunks = []
        for n in sizes:
            chunks.append(hidden_states[start:start + n])
            start += n
        return chunks


class StartsAtRowZero(AllPool):  # forgets that the sub-group's rows start past row 0
    def split_hidden_states(self, hidden_states, cursor):
        sizes = cursor.num_scheduled_tokens_cpu.tolist()
        return list(hidden_states[:sum(sizes)].split(sizes))


class SplitsTheWholeBatch(AllPool):  # the pre-#36614 bug: split the full batch by the sub-group's sizes
    def split_hidden_states(self, hidden_states, cursor):
        return list(hidden_states.split(cursor.num_scheduled_tokens_cpu.tolist()))


class OffByOneEnd(AllPool):
    def split_hidden_states(self, hidden_states, cursor):
        sizes = cursor.num_scheduled_tokens_cpu.tolist()
        if not sizes:
            return []
        start = int(cursor.first_token_indices_gpu[0].item())
        end = int(cursor.last_token_indices_gpu[-1].item())  # the last row, not one past it
        return list(hidden_states[start:end].split(sizes))


class NoEmptyGuard(AllPool):
    def split_hidden_states(self, hidden_states, cursor):
        start = int(cursor.first_token_indices_gpu[0].item())
        end = int(cursor.last_token_indices_gpu[-1].item()) + 1
        return list(hidden_states[start:end].split(cursor.num_scheduled_tokens_cpu.tolist()))


class ReadsWholeIndexTensors(AllPool):  # 2 syncs and one split, but both index tensors come back whole
    def split_hidden_states(self, hidden_states, cursor):
        sizes = cursor.num_scheduled_tokens_cpu.tolist()
        if not sizes:
            return []
        first, last = cursor.first_token_indices_gpu.tolist(), cursor.last_token_indices_gpu.tolist()
        return list(hidden_states[first[0]:last[-1] + 1].split(sizes))


class NeverCleans(AllPool):
    def forward(self, hidden_states, pooling_metadata):
        states = pooling_metadata.pooling_states
        saved = [s.clean for s in states]
        for s in states:
            s.clean = lambda: None  # type: ignore[method-assign]
        try:
            return super().forward(hidden_states, pooling_metadata)
        finally:
            for s, clean in zip(states, saved):
                s.clean = clean  # type: ignore[method-assign]


class KeepsViews(AllPool):  # #41163's chunked branch as it was: no clone of unfinished chunks
    def forward(self, hidden_states, pooling_metadata):
        cursor = pooling_metadata.get_pooling_cursor()
        chunks = self.split_hidden_states(hidden_states, cursor)
        if not self.enable_chunked_prefill:
            return [c.clone() for c in chunks] if self.clone_finished else chunks
        for state, chunk in zip(pooling_metadata.pooling_states, chunks):
            state.hidden_states_cache.append(chunk)
        out = []
        for state, done in zip(pooling_metadata.pooling_states, cursor.get_finished_mask()):
            if done:
                cache = state.hidden_states_cache
                out.append(cache[0] if len(cache) == 1 else torch.cat(cache))
                state.clean()
            else:
                out.append(None)
        return out


class IgnoresAsyncScheduling(AllPool):  # clones unfinished chunks, but returns views under async scheduling
    def __init__(self, enable_chunked_prefill=True, async_scheduling=False):
        super().__init__(enable_chunked_prefill, async_scheduling=False)


class ClonesEverything(AllPool):
    def __init__(self, enable_chunked_prefill=True, async_scheduling=False):
        super().__init__(enable_chunked_prefill, async_scheduling=True)


class AlwaysConcatenates(AllPool):
    def forward(self, hidden_states, pooling_metadata):
        out = super().forward(hidden_states, pooling_metadata)
        return [None if o is None else torch.cat([o]) for o in out]


class ChunkForUnfinished(AllPool):  # returns this step's chunk instead of None
    def forward(self, hidden_states, pooling_metadata):
        chunks = self.split_hidden_states(hidden_states, pooling_metadata.get_pooling_cursor())
        out = super().forward(hidden_states, pooling_metadata)
        return [c if o is None else o for c, o in zip(chunks, out)]


class CachesByPosition(AllPool):  # keeps chunks per batch position on the pooler, not per request
    def forward(self, hidden_states, pooling_metadata):
        if not self.enable_chunked_prefill:
            return super().forward(hidden_states, pooling_metadata)
        cursor = pooling_metadata.get_pooling_cursor()
        chunks = self.split_hidden_states(hidden_states, cursor)
        cache: dict[int, list] = self.__dict__.setdefault("cache", {})
        out = []
        for i, (chunk, done) in enumerate(zip(chunks, cursor.get_finished_mask())):
            cache.setdefault(i, []).append(chunk.clone())
            out.append(torch.cat(cache.pop(i)) if done else None)
        return out


class EmptyListForUnfinished(AllPool):  # [] instead of None for a prompt that is not complete
    def forward(self, hidden_states, pooling_metadata):
        return [[] if o is None else o for o in super().forward(hidden_states, pooling_metadata)]


class NoneForFinished(AllPool):  # None for every request, finished or not
    def forward(self, hidden_states, pooling_metadata):
        return [None for _ in super().forward(hidden_states, pooling_metadata)]


class _ChunkedForward(AllPool):
    """1.1's forward, right but for which chunks it clones (``_owned``); subclasses are wrong versions."""

    def _owned(self, done, cache):
        return (not done) or (self.clone_finished and not cache)

    def _finished_output(self, cache):
        return cache[0] if len(cache) == 1 else torch.cat(cache, dim=0)

    def forward(self, hidden_states, pooling_metadata):
        cursor = pooling_metadata.get_pooling_cursor()
        chunks = self.split_hidden_states(hidden_states, cursor)
        if not self.enable_chunked_prefill:
            return [c.clone() for c in chunks] if self.clone_finished else chunks
        finished = cursor.get_finished_mask()
        for state, chunk, done in zip(pooling_metadata.pooling_states, chunks, finished):
            owned = self._owned(done, state.hidden_states_cache)
            state.hidden_states_cache.append(chunk.clone() if owned else chunk)
        out = []
        for state, done in zip(pooling_metadata.pooling_states, finished):
            out.append(self._finished_output(state.hidden_states_cache) if done else None)
            if done:
                state.clean()
        return out


class ClonesBeforeCat(_ChunkedForward):  # under async scheduling clones every finished chunk, even one cat copies
    def _owned(self, done, cache):
        return (not done) or self.clone_finished


class ClonesTheConcatenation(_ChunkedForward):  # under async scheduling clones the output torch.cat just made
    def _finished_output(self, cache):
        out = super()._finished_output(cache)
        return out.clone() if self.clone_finished and len(cache) > 1 else out


class ClonesAllItCaches(_ChunkedForward):  # "what goes into the cache is cloned": the last chunk too, before cat
    def _owned(self, done, cache):
        return (not done) or bool(cache) or self.clone_finished


WRONG_1_1 = [
    (copied(AllPoolBaseline), "host work"),
    (SlicesPerRequestFromHostSizes, "host work"),
    (ch1.IteratesDeviceIndices, "syncs"),
    (StartsAtRowZero, "fixed cases"),
    (SplitsTheWholeBatch, "fixed cases"),
    (OffByOneEnd, "fixed cases"),
    (NoEmptyGuard, "empty batch"),
    (ReadsWholeIndexTensors, "syncs"),
    (NeverCleans, "cleaned"),
    (KeepsViews, "survive"),
    (IgnoresAsyncScheduling, "survive"),
    (ClonesEverything, "needless copies"),
    (AlwaysConcatenates, "needless copies"),
    (ClonesBeforeCat, "needless copies"),
    (ClonesTheConcatenation, "needless copies"),
    (ClonesAllItCaches, "needless copies"),
    (ChunkForUnfinished, "fixed cases"),
    (CachesByPosition, "random batches"),
    (EmptyListForUnfinished, "fixed cases"),
    (NoneForFinished, "fixed cases"),
]


@pytest.mark.parametrize("wrong,got", [(EmptyListForUnfinished, "list [] (not a tensor)"), (NoneForFinished, "None")])
def test_a_wrong_item_is_the_readers_mistake_not_a_checker_crash(wrong, got):
    report = ch1.check_all_pool(wrong, seed=0)
    assert "crashed" not in {o.status for o in report.outcomes}, str(report)
    failed = [o for o in report.outcomes if o.status == "failed"]
    assert failed and failed[0].got.startswith(got), str(report)
    if wrong is EmptyListForUnfinished:
        assert "must be None itself (not [] or an empty tensor)" in failed[0].hint


@pytest.mark.parametrize("wrong,async_sched,needless", [
    (ClonesBeforeCat, True, "request 0's chunk (finished this step: its last chunk, after earlier ones)"),
    (ClonesTheConcatenation, True, "a tensor outside the hidden-states buffer"),
    (ClonesAllItCaches, False, "request 0's chunk (finished this step: its last chunk, after earlier ones)"),
])
def test_a_clone_before_or_after_torch_cat_is_named(wrong, async_sched, needless):
    report = ch1.check_all_pool(wrong, seed=0)
    (copies,) = [o for o in report.outcomes if "needless copies" in o.name]
    assert copies.status == "failed" and f"async scheduling {async_sched}" in copies.case, str(report)
    assert needless in copies.got, str(report)
    rule = "ONLY chunk" if async_sched else "goes into torch.cat as a view"
    assert rule in copies.hint and "torch.cat" in copies.hint, str(report)
    others = [o.status for o in report.outcomes if "needless copies" not in o.name]
    assert others == ["passed"] * len(others), str(report)  # the values are right: only the copies give it away


def test_the_copy_count_allows_what_must_outlive_the_step():
    """The solution's clones, counted over chunked runs: exactly the chunks that must own their storage."""
    for async_sched in (False, True):
        ch1_checks._copies_per_step(AllPool, {"lens": [6, 2, 5, 1, 9]}, async_scheduling=async_sched,
                                    slice_groups=False, token_budget=4, case="", schedule_seed=1)


def test_failure_messages_point_at_the_buffer_hazard():
    report = ch1.check_all_pool(KeepsViews, seed=0)
    assert outcome(report, "cleaned") == "passed", str(report)  # a missing clone is the buffer's fault, not the cache's
    kept_views = str(report)
    assert "every step's forward overwrites: .clone() it" in kept_views
    async_views = str(ch1.check_all_pool(IgnoresAsyncScheduling, seed=0))
    assert "NEXT step wrote into the hidden-states buffer" in async_views


# ----------------------------------------------------------------------------- wrong versions of 1.2


class NoSyncWithoutGuard(AllPool):
    def split_hidden_states(self, hidden_states, cursor):
        sizes = cursor.num_scheduled_tokens_cpu.tolist()
        return list(hidden_states[:sum(sizes)].split(sizes))


class NoSyncKeepsViews(KeepsViews):
    split_hidden_states = AllPoolNoSync.split_hidden_states
    receives_group_rows = True  # profiled as 1.2 is: with its sub-group's rows only


class NoSyncNeverCleans(NeverCleans):
    split_hidden_states = AllPoolNoSync.split_hidden_states
    receives_group_rows = True  # profiled as 1.2 is: with its sub-group's rows only


class NoSyncClonesEverything(ClonesEverything):
    split_hidden_states = AllPoolNoSync.split_hidden_states
    receives_group_rows = True  # profiled as 1.2 is: with its sub-group's rows only


class NoSyncClonesBeforeCat(ClonesBeforeCat):
    split_hidden_states = AllPoolNoSync.split_hidden_states
    receives_group_rows = True  # profiled as 1.2 is: with its sub-group's rows only


class NoSyncNoEmptyGuard(AllPoolNoSync):  # validates against the last offset, which an empty batch lacks
    def split_hidden_states(self, hidden_states, cursor):
        sizes = cursor.num_scheduled_tokens_cpu.tolist()
        offsets = list(itertools.accumulate(sizes))
        if offsets[-1] != hidden_states.shape[0]:
            raise ValueError("rows do not match the sizes")
        return list(hidden_states.split(sizes))


class NoSyncSplitsByPromptLength(AllPoolNoSync):  # right without chunked prefill only
    def split_hidden_states(self, hidden_states, cursor):
        sizes = cursor.prompt_lens_cpu.tolist()
        if hidden_states.shape[0] != sum(sizes):
            raise ValueError("rows do not match the sizes")
        return list(hidden_states.split(sizes))


class NoSyncCachesByPosition(CachesByPosition):
    split_hidden_states = AllPoolNoSync.split_hidden_states
    receives_group_rows = True  # profiled as 1.2 is: with its sub-group's rows only


class NoSyncSlicesPerRequest(AllPoolNoSync):  # 0 syncs, right values, a slice per request
    def split_hidden_states(self, hidden_states, cursor):
        sizes = cursor.num_scheduled_tokens_cpu.tolist()
        if hidden_states.shape[0] != sum(sizes):
            raise ValueError("rows do not match the sizes")
        offsets = [0, *itertools.accumulate(sizes)]
        return [hidden_states[a:b] for a, b in zip(offsets, offsets[1:])]


class NoSyncCopies(AllPoolNoSync):
    def split_hidden_states(self, hidden_states, cursor):
        return [c.clone() for c in super().split_hidden_states(hidden_states, cursor)]


WRONG_1_2 = [
    (NoSyncSlicesPerRequest, "host work"),
    (NoSyncCopies, "split_hidden_states alone"),
    (AllPool, "0 syncs"),
    (NoSyncWithoutGuard, "do not match"),
    (NoSyncSplitsByPromptLength, "fixed cases"),
    (NoSyncNoEmptyGuard, "empty batch"),
    (NoSyncCachesByPosition, "random batches"),
    (NoSyncKeepsViews, "survive"),
    (NoSyncNeverCleans, "cleaned"),
    (NoSyncClonesEverything, "needless copies"),
    (NoSyncClonesBeforeCat, "needless copies"),
]


EXERCISES = {"1.1": (ch1.check_all_pool, ch1.CHECKS_1_1, WRONG_1_1),
             "1.2": (ch1.check_all_pool_no_sync, ch1.CHECKS_1_2, WRONG_1_2)}
CASES = [(task, wrong, check) for task, (_, _, wrongs) in EXERCISES.items() for wrong, check in wrongs]


@pytest.mark.parametrize("task,wrong,failing_check", CASES, ids=[f"{t}-{w.__name__}" for t, w, _ in CASES])
def test_each_check_catches_a_wrong_version(task, wrong, failing_check):
    """Each wrong version fails its check; every check it passes witnesses what the solution's does (the grader
    verifies a passed check by its witness: a bug that one check names must not cost another)."""
    report = EXERCISES[task][0](wrong, seed=0)
    assert outcome(report, failing_check) in ("failed", "crashed"), str(report)
    right = _right_witnesses(task)
    assert sum(map(bool, right.values())) >= 7  # every check that compares results is verified
    assert_passes_witness_as(report, right)


@pytest.mark.parametrize("task", EXERCISES)
def test_every_check_is_shown_to_fail(task):
    _, checks, wrongs = EXERCISES[task]
    assert_every_check_shown_to_fail(checks, wrongs)


class NoSyncAsserts(AllPoolNoSync):  # the invariant held by an assert, not the contract's ValueError
    def split_hidden_states(self, hidden_states, cursor):
        sizes = cursor.num_scheduled_tokens_cpu.tolist()
        assert hidden_states.shape[0] == sum(sizes), "rows do not match sizes"
        return list(hidden_states.split(sizes))


def test_an_assert_for_the_valueerror_is_told_so():
    """A learner's honest mistake: the invariant checked with an assert. The crash names the AssertionError and the
    hint says why it is not the contract's ValueError."""
    report = ch1.check_all_pool_no_sync(NoSyncAsserts, seed=0)
    (rejects,) = [o for o in report.outcomes if "do not match the sizes" in o.name]
    assert rejects.status == "crashed" and "AssertionError" in rejects.message, str(report)
    assert "an assert is not the contract's ValueError" in rejects.hint, str(report)
    assert all(o.ok for o in report.outcomes if o is not rejects), str(report)  # the rest is right


def test_a_stub_reports_not_implemented():
    class Stub(AllPool):
        def split_hidden_states(self, hidden_states, cursor):
            raise NotImplementedError("Exercise 1.1")

    report = ch1.check_all_pool(Stub)
    assert {o.status for o in report.outcomes} == {"not implemented"}


def test_the_pitfall_is_still_at_the_line_the_solution_stored():
    """solutions/01 stores a sync report that names the pitfall's slice as synclab/slice_then_split/profiling.py:<line>.

    Code added above the pitfall shifts that line and breaks the stored output: put new helpers below it.
    """
    stored = set(re.findall(r"slice_then_split/profiling\.py:(\d+)", (ROOT / NOTEBOOK).read_text()))
    lines, first = inspect.getsourcelines(unguarded(ch1.IteratesDeviceIndices.split_hidden_states))
    line = first + next(i for i, text in enumerate(lines) if "hidden_states[first:last + 1]" in text)
    assert stored == {str(line)}, f"the stored report names line(s) {stored}; the slice is now at line {line}"


def _pr_41163_all_pool() -> type:
    """AllPool as #41163 merged it: the solution's split, with the finished flags read as the PR read them
    (``cursor.is_finished()``, a host bool tensor, iterated); only the clone rule is later vLLM's (the page says so)."""
    import nbformat

    source = next(c.source for c in nbformat.read(ROOT / NOTEBOOK, as_version=4).cells
                  if "### BEGIN SOLUTION 1.1" in c.source)
    pr_source = source.replace("cursor.get_finished_mask()", "cursor.is_finished()")
    assert pr_source != source
    namespace: dict = {}
    load_function(NOTEBOOK, "AllPool", namespace)  # the notebook's imports
    exec(pr_source, namespace)
    return namespace["AllPool"]


def test_the_prs_own_code_passes_exercise_1_1():
    """1.1 is #41163: its host-work check measures what the PR changed (the slices), not the flags it kept."""
    report = ch1.check_all_pool(_pr_41163_all_pool(), seed=0)
    assert report.passed, str(report)
    with_flags = ch1.host_calls_per_call(_pr_41163_all_pool(), 48, chunked=True)
    assert with_flags.by_name["__bool__"] >= 48  # the flags' reads are there: the check leaves them out on purpose


def test_growth_of_another_call_is_named_not_blamed_on_slices():
    """A loop that grows another call is named by that call, with no hint about slices."""
    class ClonesPerRequest(AllPool):
        def split_hidden_states(self, hidden_states, cursor):
            return [chunk.contiguous().view_as(chunk) for chunk in super().split_hidden_states(hidden_states, cursor)]

    report = ch1.check_all_pool(ClonesPerRequest, seed=0)
    work = next(o for o in report.outcomes if "host work" in o.name)
    assert work.status == "failed" and "slice" not in work.hint and "runs once per request" in work.hint, str(report)


def test_a_forgotten_sub_group_offset_is_named_before_cloning():
    class FromRowZero(AllPool):  # slices the sub-group's length from row 0: the sub-group's offset forgotten
        def split_hidden_states(self, hidden_states, cursor):
            sizes = cursor.num_scheduled_tokens_cpu.tolist()
            return list(hidden_states[:sum(sizes)].split(sizes))

    report = ch1.check_all_pool(FromRowZero, seed=0)
    fixed = next(o for o in report.outcomes if "fixed cases" in o.name)
    assert fixed.status == "failed" and "first_token_indices_gpu[0]" in fixed.hint, str(report)
    assert "clone" not in fixed.hint


def test_clone_everything_is_told_what_to_clone_not_to_batch_its_clones():
    report = ch1.check_all_pool(ClonesEverything, seed=0)
    (flat,) = [o for o in report.outcomes if o.name.startswith("host work per call")]
    if flat.status == "failed":
        assert "clone only what must outlive the step" in flat.hint and "in one call" not in flat.hint, str(report)


class EndExclusive(AllPool):  # a learner's off-by-one: the last index taken as exclusive
    def split_hidden_states(self, hidden_states, cursor):
        start = int(cursor.first_token_indices_gpu[0].item())
        end = int(cursor.last_token_indices_gpu[-1].item())  # inclusive index: the slice loses the last row
        sizes = cursor.num_scheduled_tokens_cpu.tolist()
        return list(hidden_states[start:end].split(sizes))


def test_an_off_by_one_at_the_sub_groups_end_is_explained_in_place_of_torchs_words():
    report = ch1.check_all_pool(EndExclusive, seed=0)
    (fixed,) = [o for o in report.outcomes if "fixed cases" in o.name]
    assert fixed.status == "crashed" and "split_sizes" in fixed.message, str(report)
    assert "last_token_indices_gpu is inclusive" in fixed.hint and not fixed.generic_hint, str(report)
    # the off-by-one is told as itself: its slice is short of the sizes, not a split of more than the sub-group
    assert "1 fewer than the sizes" in fixed.hint and "Split only the sub-group" not in fixed.hint, str(report)


class SplitsTheWholeBatch(AllPool):  # the sub-group's sizes applied to every row of the batch, never sliced
    def split_hidden_states(self, hidden_states, cursor):
        return list(hidden_states.split(cursor.num_scheduled_tokens_cpu.tolist()))


def test_splitting_the_whole_batch_is_told_to_slice_the_sub_group_first():
    """The sizes miss the other way (more rows than they cover): told to slice the sub-group first."""
    report = ch1.check_all_pool(SplitsTheWholeBatch, seed=0)
    (fixed,) = [o for o in report.outcomes if "fixed cases" in o.name]
    assert fixed.status == "crashed", str(report)
    assert "Split only the sub-group's rows: slice them first" in fixed.hint, str(report)


class DecidesFinishedItself(AllPool):  # a rule of its own for "finished": this step's chunk is the whole prompt
    def forward(self, hidden_states, pooling_metadata):
        cursor = pooling_metadata.get_pooling_cursor()
        outputs = super().forward(hidden_states, pooling_metadata)
        lens = cursor.prompt_lens_cpu.tolist()
        scheduled = cursor.num_scheduled_tokens_cpu.tolist()
        return [out if n == p else None for out, n, p in zip(outputs, scheduled, lens)]


def test_a_finished_rule_of_its_own_is_told_to_read_the_cursor():
    report = ch1.check_all_pool(DecidesFinishedItself, seed=0)
    failed = [o for o in report.outcomes if o.status == "failed" and "wrong output" in o.message]
    assert failed and all("get_finished_mask()" in o.hint for o in failed), str(report)


class ShortcutWhenCounted(AllPool):  # the slices per request, but a cheap wrong answer whenever a torch mode is on
    def split_hidden_states(self, hidden_states, cursor):
        if torch.overrides._get_current_function_mode_stack():
            sizes = cursor.num_scheduled_tokens_cpu.tolist()
            return [hidden_states[:n] for n in sizes] if len(sizes) < 2 else list(hidden_states[:sum(sizes)].split(sizes))
        return AllPoolBaseline.split_hidden_states.__wrapped__(self, hidden_states, cursor)


def test_a_call_that_is_counted_is_also_checked():
    """Code that can tell it is counted gains nothing: the syncs and host work count only on calls whose rows count."""
    report = ch1.check_all_pool(ShortcutWhenCounted, seed=0)
    assert outcome(report, "syncs") == "failed" and outcome(report, "host work") == "failed", str(report)
    matches_report_snapshot(report)  # each names the counted call's wrong rows


@functools.cache
def _right_witnesses(task: str) -> dict[str, str]:
    """Each check's witness for the solution of ``task`` on seed 0 (computed once for every wrong version)."""
    check = EXERCISES[task][0]
    return witnesses(check(AllPool if task == "1.1" else AllPoolNoSync, seed=0))


def test_a_1_2_inheriting_a_broken_1_1_is_told_the_fault_is_1_1s():
    """A learner's 1.2 (right split) inherited their 1.1's forward, which never cleaned the cache: the check's hint
    pointed at state.clean(), which their 1.2 cell does not hold, while the grader kept 1.2's points (it judges 1.2 on
    the package's 1.1). The hint now says the failure is forward's, inherited from 1.1."""
    class NoSyncOnANeverCleaner(NeverCleans):
        receives_group_rows = True
        split_hidden_states = AllPoolNoSync.split_hidden_states

    report = ch1.check_all_pool_no_sync(NoSyncOnANeverCleaner, seed=0)
    failed = [o for o in report.outcomes if o.status == "failed"]
    assert failed and all("inherits forward from your AllPool (Exercise 1.1)" in o.hint for o in failed), str(report)
    right = ch1.check_all_pool_no_sync(AllPoolNoSync, seed=0)
    assert right.passed, str(right)
