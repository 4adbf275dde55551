"""Chapter 4: the checks pass on the solution, and each check fails on a plausible wrong version."""

from __future__ import annotations

import random

import pytest
import torch

from synclab import reverse_scan as ch4
from synclab.engine.input_batch import PLACEHOLDER, InputBatchBaseline, update_reference
from tests.check_reports import assert_every_check_shown_to_fail, outcome
from tests.notebook_code import load_function

NOTEBOOK = "solutions/04_reverse_placeholder_scans.ipynb"
_namespace: dict = {}
ReverseScanBatch = load_function(NOTEBOOK, "ReverseScanBatch", _namespace)
host_bottleneck_length = load_function(NOTEBOOK, "host_bottleneck_length", _namespace)


def test_solution_passes_every_check():
    assert ch4.check_update_async_output_token_ids(ReverseScanBatch).passed
    assert ch4.check_bottleneck_model(host_bottleneck_length).passed


def test_work_is_counted_the_same_on_any_machine():
    assert ch4.elements_touched(ReverseScanBatch, 100) == ch4.elements_touched(ReverseScanBatch, 60_000)
    assert ch4.elements_touched(InputBatchBaseline, 60_000) > 500 * ch4.elements_touched(InputBatchBaseline, 100) / 2


def test_reference_on_the_issue_examples():
    assert update_reference([[5, 6, -1, -1, -1]], [[7, 8, -1]], [0]) == [[5, 6, 7, 8]]
    assert update_reference([[5, 6]], [[7]], [0]) == [[5, 6]]


def test_decode_step_repeats_and_variants_agree():
    fwd, rev = ch4.decode_step(InputBatchBaseline, 50, 4), ch4.decode_step(ReverseScanBatch, 50, 4)
    assert fwd() == rev() == [7, 7, 7, 7]
    assert rev() == [7, 7, 7, 7]  # a second step works on the same lists
    for _ in range(100):
        fwd()
    # a timed run repeats the step thousands of times: the output length on the chart must stay the one measured
    assert {len(state.output_token_ids) for state in fwd.states} == {len(state.output_token_ids) for state in rev.states} == {50}


def test_loop_model_takes_the_slower_side():
    tps = ch4.loop_model({"x": [5_000.0, 20_000.0]}, (100, 1000), device_step_us=10_000.0, num_reqs=100)
    assert tps == {"x": [10_000.0, 5_000.0]}


# ----------------------------------------------------------------------------- wrong versions of 4.1


class Rebuilds(ReverseScanBatch):  # builds a new list: the request state never sees the tokens
    def update_async_output_token_ids(self):
        out = self.sampling_metadata.output_token_ids
        snapshot = [list(ids) for ids in out]
        self.sampling_metadata.output_token_ids = snapshot
        super().update_async_output_token_ids()


class WaitsPerRequest(ReverseScanBatch):
    def update_async_output_token_ids(self):
        if self.async_copy_ready_event is not None and self.sampling_metadata.output_token_ids:
            for _ in self.req_ids:
                self.async_copy_ready_event.synchronize()
        super().update_async_output_token_ids()


class ReplacesOnlyOne(ReverseScanBatch):  # the first version (#26467): one placeholder, one token
    def update_async_output_token_ids(self):
        out = self.sampling_metadata.output_token_ids
        if self.sampled_token_ids_cpu is None or not out:
            return
        sampled = None
        for i, req_id in enumerate(self.req_ids):
            prev = self.prev_req_id_to_index.get(req_id)
            if prev is None or not out[i] or out[i][-1] != PLACEHOLDER:
                continue
            if sampled is None:
                self.async_copy_ready_event.synchronize()
                sampled = self.sampled_token_ids_cpu.tolist()
            out[i][-1] = sampled[prev][0]


class NoPrevCheck(ReverseScanBatch):  # treats a new request as if it sat in row 0
    def update_async_output_token_ids(self):
        for req_id in self.req_ids:
            self.prev_req_id_to_index.setdefault(req_id, 0)
        super().update_async_output_token_ids()


class ReadsBeforeWaiting(ReverseScanBatch):  # copies the host ids out before waiting: the copy had not landed
    def update_async_output_token_ids(self):
        if self.sampled_token_ids_cpu is not None:
            self.sampled_token_ids_cpu = self.sampled_token_ids_cpu.clone()  # read now, used after the wait
        super().update_async_output_token_ids()


class StoresTensors(ReverseScanBatch):  # right values, but a 0-d tensor where the last id was repaired
    def update_async_output_token_ids(self):
        super().update_async_output_token_ids()
        for ids in self.sampling_metadata.output_token_ids:
            if ids:
                ids[-1:] = [torch.tensor(ids[-1])]


class _RepairsEachRequest(ReverseScanBatch):
    """The repair's outer loop, right; subclasses get each list with a trailing -1 and its sampled row."""

    def update_async_output_token_ids(self):
        out = self.sampling_metadata.output_token_ids
        if self.sampled_token_ids_cpu is None or not out:
            return
        self.async_copy_ready_event.synchronize()
        sampled = self.sampled_token_ids_cpu.tolist()
        for i, req_id in enumerate(self.req_ids):
            prev = self.prev_req_id_to_index.get(req_id)
            if prev is not None and out[i] and out[i][-1] == PLACEHOLDER:
                self._repair(out[i], sampled[prev])


class KeepsPadding(_RepairsEachRequest):  # replaces placeholders with the -1 padding of rejected drafts too
    def _repair(self, ids, row):
        start = len(ids)
        while start > 0 and ids[start - 1] == PLACEHOLDER:
            start -= 1
        ids[start:] = row[:len(ids) - start]  # -1 padding and all


class RebuildsTheTail(_RepairsEachRequest):  # right values, in place, but copies the whole history every step
    def _repair(self, ids, row):
        k = 0
        while k < len(ids) and ids[len(ids) - 1 - k] == PLACEHOLDER:
            k += 1
        new = [t for t in row if t != PLACEHOLDER][:k]
        ids[:] = ids[:len(ids) - k] + new  # a slice copy of the whole history


def host_model_two_points(costs_us, device_step_us):  # a line through the first and last points only
    (x0, y0), (x1, y1) = min(costs_us.items()), max(costs_us.items())
    slope = (y1 - y0) / (x1 - x0)
    if y0 >= device_step_us:
        return 0
    return None if slope <= 0 else int((device_step_us - y0) / slope + x0)


WRONG_4_1 = [
    (InputBatchBaseline, "fixed cases"),
    (InputBatchBaseline, "random steps"),
    (InputBatchBaseline, "work per step"),
    (ReplacesOnlyOne, "fixed cases"),
    (Rebuilds, "in place"),
    (WaitsPerRequest, "at most one wait"),
    (NoPrevCheck, "new request"),
    (KeepsPadding, "fixed cases"),
    (RebuildsTheTail, "work per step"),
    (ReadsBeforeWaiting, "fixed cases"),
    (StoresTensors, "fixed cases"),
]


@pytest.mark.parametrize("wrong,failing_check", WRONG_4_1, ids=[f"{w.__name__}-{c}" for w, c in WRONG_4_1])
def test_4_1_checks_catch_wrong_versions(wrong, failing_check):
    report = ch4.check_update_async_output_token_ids(wrong, seed=0)
    assert outcome(report, failing_check) in ("failed", "crashed"), str(report)


WRONG_4_2 = [(host_model_two_points, "fixed cost tables"), (host_model_two_points, "random cost tables")]


@pytest.mark.parametrize("wrong,failing_check", WRONG_4_2, ids=[c for _, c in WRONG_4_2])
def test_4_2_checks_catch_wrong_versions(wrong, failing_check):
    report = ch4.check_bottleneck_model(wrong, seed=0)
    assert outcome(report, failing_check) in ("failed", "crashed"), str(report)


def test_every_check_is_shown_to_fail():
    assert_every_check_shown_to_fail(ch4.CHECKS_4_1, WRONG_4_1)
    assert_every_check_shown_to_fail(ch4.CHECKS_4_2, WRONG_4_2)


def test_random_steps_depend_on_the_seed():
    assert ch4.random_step(random.Random(1), 8) != ch4.random_step(random.Random(2), 8)


def test_a_value_mistake_is_not_blamed_on_in_place_updates():
    """Keeping the -1 padding gives wrong values; the lists are still the request states' own."""
    report = ch4.check_update_async_output_token_ids(KeepsPadding, seed=0)
    assert outcome(report, "fixed cases") == "failed" and outcome(report, "in place") == "passed", str(report)


def test_the_work_check_names_what_grew():
    report = ch4.check_update_async_output_token_ids(RebuildsTheTail, seed=0)
    (work,) = [o for o in report.outcomes if "work per step" in o.name]
    assert work.status == "failed" and "slicing (x[a:b] copies the slice)" in work.got, str(report)
    assert "list.index" not in work.hint  # the old hint blamed a call this code never makes
    baseline = ch4.check_update_async_output_token_ids(InputBatchBaseline, seed=0)
    (work,) = [o for o in baseline.outcomes if "work per step" in o.name]
    assert "list.index(-1) (scans from the start)" in work.got, str(baseline)


def test_a_random_case_shows_its_input_and_the_first_difference():
    report = ch4.check_update_async_output_token_ids(ReplacesOnlyOne, seed=3)
    (random_case,) = [o for o in report.outcomes if "random steps" in o.name]
    assert random_case.status == "failed", str(report)
    assert "first difference at index" in random_case.expected and "first difference at index" in random_case.got
    assert "output before the step ends" in random_case.case and "its sampled ids" in random_case.case


def test_reading_the_sampled_ids_before_the_wait_shows_garbage():
    report = ch4.check_update_async_output_token_ids(ReadsBeforeWaiting, seed=0)
    (fixed,) = [o for o in report.outcomes if "fixed cases" in o.name]
    assert fixed.status == "failed" and "-12345" in fixed.got, str(report)  # sim_cuda.GARBAGE, not the ids
    assert "only after async_copy_ready_event.synchronize()" in fixed.hint


def test_tensors_in_the_token_lists_are_caught_though_they_compare_equal():
    report = ch4.check_update_async_output_token_ids(StoresTensors, seed=0)
    (fixed,) = [o for o in report.outcomes if "fixed cases" in o.name]
    assert fixed.status == "failed" and fixed.message == "the token lists must hold Python ints", str(report)
