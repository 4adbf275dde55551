"""Chapter 4: the checks pass on the solution, and each check fails on a plausible wrong version."""

from __future__ import annotations


import json
import math
import random
import re
import statistics
from pathlib import Path

import numpy as np
import pytest
import torch

from synclab import reverse_scan as ch4
from synclab.reverse_scan import checks as ch4_checks
from synclab.dispatch import CountingList
from synclab.engine.input_batch import PLACEHOLDER
from synclab.engine.input_batch_baseline import InputBatchBaseline
from synclab.reverse_scan.checks import _bottleneck_reference, _update_reference as update_reference
from synclab.reverse_scan.workloads import step_outcome
from tests.check_reports import (assert_every_check_shown_to_fail, assert_passes_witness_as, copied, outcome,
                                 right_witnesses, witnesses)
from tests.notebook_code import load_function
from tests.snapshots import matches_report_snapshot

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

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


class NoNoneCheck(_RepairsEachRequest):  # right repair, but waits and reads without asking whether a step is in flight
    def update_async_output_token_ids(self):
        out = self.sampling_metadata.output_token_ids
        # a list with a row last step that ends with a placeholder; the `sampled_token_ids_cpu is None` test left out
        if not any(self.prev_req_id_to_index.get(req_id) is not None and ids and ids[-1] == PLACEHOLDER
                   for req_id, ids in zip(self.req_ids, out)):
            return
        self.async_copy_ready_event.synchronize()
        sampled = self.sampled_token_ids_cpu.tolist()
        for i, req_id in enumerate(self.req_ids):
            prev = self.prev_req_id_to_index.get(req_id)
            if prev is not None and out[i] and out[i][-1] == PLACEHOLDER:
                self._repair(out[i], sampled[prev])

    def _repair(self, ids, row):
        k = 0
        while k < len(ids) and ids[len(ids) - 1 - k] == PLACEHOLDER:
            k += 1
        valid = row[:row.index(PLACEHOLDER)] if PLACEHOLDER in row else row
        ids[len(ids) - k:] = valid[:min(len(valid), k)]


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


def _fit(costs_us, centred=True):
    """(intercept, slope) of the least-squares line; ``centred``: of the costs minus the first, as the reference."""
    xs, ys = list(costs_us), list(costs_us.values())
    base = ys[0] if centred else 0.0
    rises = [y - base for y in ys]
    mx, my = sum(xs) / len(xs), sum(rises) / len(rises)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (r - my) for x, r in zip(xs, rises)) / sxx
    return base + my - slope * mx, slope


def _answer(a, b, device_step_us, max_length, *, rounding=lambda x: x, at_max=lambda c, m: c <= m):
    if a >= device_step_us:
        return 0
    if b <= 0:
        return None
    crossing = rounding((device_step_us - a) / b)
    return crossing if at_max(crossing, max_length) else None


# Correct alternatives: every standard fit and every whole-token rounding of the crossing passes.
def with_statistics(costs_us, device_step_us, max_length):
    b, a = statistics.linear_regression(list(costs_us), list(costs_us.values()))
    return _answer(a, b, device_step_us, max_length)


def with_numpy_polyfit(costs_us, device_step_us, max_length):
    b, a = np.polyfit(list(costs_us), list(costs_us.values()), 1)
    return _answer(float(a), float(b), device_step_us, max_length)


def raw_mean_fit(costs_us, device_step_us, max_length):  # equal costs leave a ~1e-35 slope: its crossing is past max
    return _answer(*_fit(costs_us, centred=False), device_step_us, max_length)


def rounded_up(costs_us, device_step_us, max_length):
    return _answer(*_fit(costs_us), device_step_us, max_length, rounding=math.ceil)


def rounded_down(costs_us, device_step_us, max_length):
    return _answer(*_fit(costs_us), device_step_us, max_length, rounding=math.floor)


def rounded_to_nearest(costs_us, device_step_us, max_length):
    return _answer(*_fit(costs_us), device_step_us, max_length, rounding=round)


RIGHT_4_2 = [with_statistics, with_numpy_polyfit, raw_mean_fit, rounded_up, rounded_down, rounded_to_nearest]


# Wrong versions, each breaking one clause of the contract.
def host_model_two_points(costs_us, device_step_us, max_length):  # a line through the first and last points only
    (x0, y0), (x1, y1) = min(costs_us.items()), max(costs_us.items())
    b = (y1 - y0) / (x1 - x0)
    return _answer(y0 - b * x0, b, device_step_us, max_length)


def through_the_origin(costs_us, device_step_us, max_length):  # a line forced through 0: no fixed cost per step
    b = sum(x * y for x, y in costs_us.items()) / sum(x * x for x in costs_us)
    return _answer(0.0, b, device_step_us, max_length)


def slope_before_intercept(costs_us, device_step_us, max_length):  # a flat line above the device step gives None
    a, b = _fit(costs_us)
    if b <= 0:
        return None
    return _answer(a, b, device_step_us, max_length)


def polyfit_read_backwards(costs_us, device_step_us, max_length):  # a, b = np.polyfit(...) read as intercept, slope
    slope, intercept = np.polyfit(list(costs_us), list(costs_us.values()), 1)
    a, b = slope, intercept  # the learner's reading: a the intercept, b the slope
    if a >= device_step_us:
        return 0.0
    crossing = (device_step_us - a) / b if b > 0 else None
    return crossing if crossing is not None and crossing <= max_length else None


def test_slope_and_intercept_swapped_are_named():
    """A learner's a, b = np.polyfit(x, y, 1) read as intercept, slope got the generic hint "fit host_us = a + b *
    length"; the hint now names the order polyfit returns."""
    report = ch4.check_bottleneck_model(polyfit_read_backwards, seed=0)
    assert not report.passed, str(report)
    assert any(ch4_checks._SWAPPED_HINT in o.hint for o in report.outcomes if o.status == "failed"), str(report)
    right = ch4.check_bottleneck_model(RIGHT_4_2[0], seed=0)
    assert right.passed and all(ch4_checks._SWAPPED_HINT not in o.hint for o in right.outcomes)


def ignores_max_length(costs_us, device_step_us, max_length):  # extrapolates the noise: ~7e8 tokens
    return _answer(*_fit(costs_us), device_step_us, max_length, at_max=lambda c, m: True)


def negative_crossings(costs_us, device_step_us, max_length):  # no look at the slope: a falling line "crosses" < 0
    a, b = _fit(costs_us)
    if a >= device_step_us:
        return 0
    crossing = (device_step_us - a) / b if b else math.inf
    return crossing if crossing <= max_length else None


def strict_bound(costs_us, device_step_us, max_length):  # `<` for `<=`: a crossing at max_length itself is left out
    return _answer(*_fit(costs_us), device_step_us, max_length, at_max=lambda c, m: c < m)


def slope_threshold(costs_us, device_step_us, max_length):  # a threshold of its own: "nearly flat is flat"
    a, b = _fit(costs_us)
    return None if b <= 1e-4 and a < device_step_us else _answer(a, b, device_step_us, max_length)


class WrapsPastTheStart(_RepairsEachRequest):  # the walk back's guard lets the index reach -1, which wraps
    def _repair(self, ids, row):
        i, k = len(ids) - 1, 0
        while i >= -1 and ids[i] == PLACEHOLDER and k < len(ids) + 1:
            k, i = k + 1, i - 1
        valid = [t for t in row if t != PLACEHOLDER]
        n = min(len(valid), k)
        ids[len(ids) - k:] = valid[:n]


@pytest.mark.parametrize("seed", range(5))
def test_a_walk_back_that_wraps_past_index_0_fails_on_every_seed(seed):
    report = ch4.check_update_async_output_token_ids(WrapsPastTheStart, seed=seed)
    assert outcome(report, "fixed cases") == "failed", str(report)
    matches_report_snapshot(report)


WRONG_4_1 = [
    (copied(InputBatchBaseline), "fixed cases"),
    (copied(InputBatchBaseline), "random steps"),
    (copied(InputBatchBaseline), "work per step"),
    (ReplacesOnlyOne, "fixed cases"),
    (Rebuilds, "in place"),
    (WaitsPerRequest, "at most one wait"),
    (NoPrevCheck, "new request"),
    (NoNoneCheck, "new request"),
    (KeepsPadding, "fixed cases"),
    (RebuildsTheTail, "work per step"),
    (ReadsBeforeWaiting, "fixed cases"),
    (StoresTensors, "fixed cases"),
]


@pytest.mark.parametrize("wrong,failing_check", WRONG_4_1, ids=[f"{w.__name__}-{c}" for w, c in WRONG_4_1])
def test_4_1_checks_catch_wrong_versions(wrong, failing_check):
    report = ch4.check_update_async_output_token_ids(wrong, seed=0)
    assert outcome(report, failing_check) in ("failed", "crashed"), str(report)


WRONG_4_2 = [
    (host_model_two_points, "fixed cost tables"),
    (through_the_origin, "random cost tables"),
    (slope_before_intercept, "fixed cost tables"),
    (ignores_max_length, "fixed cost tables"),
    (negative_crossings, "fixed cost tables"),
    (slope_threshold, "fixed cost tables"),
    (strict_bound, "fixed cost tables"),
]


@pytest.mark.parametrize("wrong,failing_check", WRONG_4_2, ids=[f"{w.__name__}-{c}" for w, c in WRONG_4_2])
def test_4_2_checks_catch_wrong_versions(wrong, failing_check):
    report = ch4.check_bottleneck_model(wrong, seed=0)
    assert outcome(report, failing_check) in ("failed", "crashed"), str(report)


def test_every_check_is_shown_to_fail():
    assert_every_check_shown_to_fail(ch4.CHECKS_4_1, WRONG_4_1)
    assert_every_check_shown_to_fail(ch4.CHECKS_4_2, WRONG_4_2)


def test_random_steps_depend_on_the_seed():
    assert ch4.random_step(random.Random(1), 8) != ch4.random_step(random.Random(2), 8)


def test_a_value_mistake_is_not_blamed_on_in_place_updates():
    """Keeping the -1 padding gives wrong values; the in-place check does not fail for it: it waits for the values
    to be right (a method that does nothing keeps the lists in place too)."""
    report = ch4.check_update_async_output_token_ids(KeepsPadding, seed=0)
    assert outcome(report, "fixed cases") == "failed" and outcome(report, "in place") == "skipped", str(report)
    (in_place,) = [o for o in report.outcomes if "in place" in o.name]
    assert in_place.message.startswith('counts once "same as a plain reference'), in_place.message


def test_the_work_check_names_what_grew():
    report = ch4.check_update_async_output_token_ids(RebuildsTheTail, seed=0)
    (work,) = [o for o in report.outcomes if "work per step" in o.name]
    assert work.status == "failed" and "slicing (x[a:b] copies the slice)" in work.got, str(report)
    assert "list.index" not in work.hint  # the old hint blamed a call this code never makes
    baseline = ch4.check_update_async_output_token_ids(copied(InputBatchBaseline), seed=0)
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


@pytest.mark.parametrize("wrong,case,hint", [
    (host_model_two_points, "a noisy middle point", ch4_checks._TWO_POINT_HINT),
    (slope_before_intercept, "flat and above the device step", ch4_checks._AT_ZERO_HINT),
    (ignores_max_length, "noisy, nearly flat", ch4_checks._PAST_MAX_HINT),
    (negative_crossings, "falling and below the device step", "a length is never negative"),
    (slope_threshold, "a small slope", ch4_checks._NO_THRESHOLD_HINT),
    (strict_bound, "the crossing exactly at max_length", ch4_checks._AT_MAX_HINT),
])
def test_each_4_2_mistake_fails_on_its_clause_with_its_hint_on_every_seed(wrong, case, hint):
    for seed in range(20):
        report = ch4.check_bottleneck_model(wrong, seed=seed)
        (fixed,) = [o for o in report.outcomes if "fixed cost tables" in o.name]
        assert fixed.status == "failed" and fixed.case.startswith(case) and hint in fixed.hint, str(report)


@pytest.mark.parametrize("right", RIGHT_4_2, ids=lambda f: f.__name__)
def test_every_standard_fit_and_rounding_passes_on_every_seed(right):
    for seed in range(20):
        report = ch4.check_bottleneck_model(right, seed=seed)
        assert report.passed, str(report)


def test_the_4_2_contract_case_by_case():
    """0 when the line starts at or above; None when it never rises or rises only past max_length."""
    ref = _bottleneck_reference
    assert ref({100: 68.0, 10_000: 1850.0, 60_000: 10_850.0}, 10_000.0, 100_000) == pytest.approx(55_277.78)
    assert ref({100: 68.0, 10_000: 1850.0, 60_000: 10_850.0}, 10_000.0, 55_000) is None  # past the range
    assert ref({100: 12_000.0, 60_000: 12_000.0}, 10_000.0, 100_000) == 0  # flat above: 0, not None
    assert ref({100: 12_000.0, 60_000: 11_000.0}, 10_000.0, 100_000) == 0  # falling, but above from the start
    assert ref({100: 10_000.0, 60_000: 10_000.0}, 10_000.0, 100_000) == 0  # reaching it is enough
    assert ref({0: 0.0, 100: 100.0}, 50.0, 50) == 50.0 and ref({0: 0.0, 100: 100.0}, 50.0, 49) is None
    for length in ({100, 60_000, 100_000}, {100, 1000, 60_000}, {1000, 60_000, 100_000}):
        for cost in (0.05, 0.35, 30.4, 43.3, 44.8):
            flat = dict.fromkeys(sorted(length), cost)
            for fit in (ref, host_bottleneck_length, raw_mean_fit):
                assert fit(flat, 10_000.0, 100_000) is None, (fit, flat)
    noisy = ch4.NOISY_FLAT_US
    assert 7e8 < ref(noisy, 10_000.0, 10**12) < 8e8  # the noise's crossing, far past any measured length
    assert ref(noisy, 10_000.0, 100_000) is None


def test_the_solution_matches_the_reference_on_every_fixed_table():
    for case, costs, device_us, max_length, _ in ch4_checks._MODEL_CASES:
        want = _bottleneck_reference(costs, device_us, max_length)
        got = host_bottleneck_length(dict(costs), device_us, max_length)
        assert got == pytest.approx(want) if want is not None else got is None, case


def _page_table(path):
    """The worked table of Exercise 4.1's cases on a page (or a notebook's markdown): (before, sampled row, after)."""
    text = Path(path).read_text()
    if path.endswith(".ipynb"):
        text = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"] if c["cell_type"] == "markdown")
    cell = r"`\[([-\d, ]*)\]`"
    rows = re.findall(rf"^\|[^|\n]*\| {cell} \| {cell} \| {cell} \|", text, flags=re.M)
    return [tuple([int(t) for t in part.split(",") if t.strip()] for part in row) for row in rows]


@pytest.mark.parametrize("page", [NOTEBOOK, "labs/04_reverse_placeholder_scans.ipynb"])
def test_the_worked_table_of_4_1_is_what_the_code_does(page):
    rows = _page_table(page)
    assert len(rows) == 6, rows
    for before, sampled, after in rows:
        assert update_reference([before], [sampled], [0]) == [after], (before, sampled)
        step = step_outcome(ReverseScanBatch, [list(before)], [sampled], [0])
        assert step["outputs"][0] == after, (before, sampled)
        repairs = bool(before) and before[-1] == PLACEHOLDER
        assert step["waits"] == step["syncs"] == int(repairs), (before, sampled)  # no trailing -1: no wait at all


def test_the_prs_figures_are_drawn_at_the_one_length_it_measured():
    from synclab import figures

    lengths = list(ch4.OUTPUT_LENGTHS)
    fig = figures.loop_model_figure(lengths, {"forward": [1.0] * len(lengths)}, ch4.PR_TOKENS_PER_S, "cpu", 10_000.0)
    marks = [trace for trace in fig.data if trace.name.startswith("reported by PR #42938")]
    assert len(marks) == 2 and all(list(mark.x) == [60_000] for mark in marks)  # a point, never a line across lengths
    assert sorted(mark.y[0] for mark in marks) == [1_937.0, 12_178.0]


def test_a_rebuilt_list_is_the_failure_to_start_with_not_the_values_it_leaves_wrong():
    """Rebuilding the lists leaves the request states with placeholders: the in-place check names that exactly."""
    report = ch4.check_update_async_output_token_ids(Rebuilds, seed=0)
    assert outcome(report, "in place") == "failed", str(report)
    if sum(o.status == "failed" for o in report.outcomes) > 1:
        assert report.lead.name.startswith("the lists are updated in place"), str(report)


def test_the_new_request_hint_fires_only_when_the_new_request_changed():
    class TouchesNew(ReverseScanBatch):  # repairs a request with no row last step too (it takes row 0's ids)
        def update_async_output_token_ids(self):
            for req_id in self.req_ids:
                self.prev_req_id_to_index.setdefault(req_id, 0)
            super().update_async_output_token_ids()

    report = ch4.check_update_async_output_token_ids(TouchesNew, seed=0)
    (new,) = [o for o in report.outcomes if "new request" in o.name]
    assert new.status == "failed" and "is skipped" in new.hint, str(report)
    report = ch4.check_update_async_output_token_ids(ReplacesOnlyOne, seed=0)
    (new,) = [o for o in report.outcomes if "new request" in o.name]
    assert new.status == "passed" or "is skipped" not in new.hint, str(report)


def test_a_crash_names_the_step_it_crashed_on():
    class Crashes(ReverseScanBatch):
        def update_async_output_token_ids(self):
            raise IndexError("list index out of range")

    report = ch4.check_update_async_output_token_ids(Crashes, seed=0)
    (fixed,) = [o for o in report.outcomes if "fixed cases" in o.name]
    assert fixed.status == "crashed" and fixed.case.startswith("the fixed cases, all in one step"), str(report)
    (rand,) = [o for o in report.outcomes if "random steps" in o.name]
    assert rand.case.startswith("random step 0"), str(report)


def _numpy_fit(costs, device_step_us, max_length):
    """4.2 as a learner writes it with numpy.polyfit: the crossing comes back as np.float64."""
    import numpy as np

    slope, intercept = np.polyfit(list(costs), list(costs.values()), 1)
    if intercept >= device_step_us:
        return 0
    if slope <= 0:
        return None
    crossing = (device_step_us - intercept) / slope
    return crossing if crossing <= max_length else None


def _statistics_fit(costs, device_step_us, max_length):
    """The same with statistics.linear_regression over numpy values: numpy floats again."""
    import statistics

    import numpy as np

    fit = statistics.linear_regression(np.array(list(costs), dtype=float), np.array(list(costs.values())))
    if fit.intercept >= device_step_us:
        return 0
    if fit.slope <= 0:
        return None
    crossing = (device_step_us - fit.intercept) / fit.slope
    return crossing if crossing <= max_length else None


@pytest.mark.parametrize("right", [_numpy_fit, _statistics_fit])
def test_4_2_answers_in_numpy_floats_are_accepted(right):
    for seed in range(3):
        report = ch4.check_bottleneck_model(right, seed=seed)
        assert report.passed, str(report)


def test_4_2_an_answer_that_is_not_a_number_is_told_so_not_given_the_fit_hint():
    report = ch4.check_bottleneck_model(lambda costs, device_step_us, max_length: "12000", seed=0)
    assert not report.passed
    failed = [o for o in report.outcomes if o.status == "failed"]
    assert failed and "return a number" in failed[0].hint and "least squares" not in failed[0].hint, str(report)


def guesses_the_edges(costs_us, device_step_us, max_length):  # red team, second round: no fit at all
    return 0.0 if costs_us[min(costs_us)] >= device_step_us else None


def test_4_2_answers_of_0_and_none_alone_earn_nothing():
    """0 and None answer most clauses: a guess that fits no line (2.25 of 6 before) earns no share of them."""
    report = ch4.check_bottleneck_model(guesses_the_edges, seed=0)
    fixed = next(o for o in report.outcomes if "fixed cost tables" in o.name)
    assert fixed.status == "failed" and fixed.earned == 0 and "right only beside a crossing" in fixed.message, report
    assert report.earned == 0, report


def test_4_2_earns_partial_credit_per_clause_of_the_contract():
    """A model right on every clause but the range's end: it earns the other clauses' share of the fixed cases."""
    report = ch4.check_bottleneck_model(ignores_max_length, seed=0)
    fixed = next(o for o in report.outcomes if "fixed cost tables" in o.name)
    assert fixed.status == "failed" and 0 < fixed.earned < fixed.points, report
    assert "fixed cases wrong" in fixed.message


class SkipsLongLists(ReverseScanBatch):  # right on every list the result checks use, idle on the work check's
    def update_async_output_token_ids(self) -> None:
        if any(len(ids) > 20_000 for ids in self.sampling_metadata.output_token_ids):
            return
        super().update_async_output_token_ids()


def test_the_work_check_counts_only_a_step_whose_lists_come_out_right():
    report = ch4.check_update_async_output_token_ids(SkipsLongLists, seed=1)
    failed = {o.name: o for o in report.outcomes if not o.ok}
    assert list(failed) == ["work per step does not grow with output length (60,000 vs 100 tokens)"], report
    assert "came out wrong" in failed[next(iter(failed))].message


def test_chapter_4s_picture_is_the_repair_either_version_makes():
    """The page draws the code before the PR's repair: the same lists as the solution's, only slower."""
    assert ch4.speculative_example(ReverseScanBatch) == ch4.speculative_example()
    (_, scheduled, _), (_, row, _), (_, repaired, _) = ch4.speculative_example()
    assert scheduled.count(-1) == 3 and row == [7, 8, -1] and repaired == [5, 6, 7, 8]


class _ScansACopy(_RepairsEachRequest):  # the red teams' cheats: a full forward scan over a copy read some other way
    def _copy(self, ids) -> list[int]:
        raise NotImplementedError

    def _repair(self, ids, row):
        plain = self._copy(ids)
        start = 0
        for j, t in enumerate(plain):
            if t != PLACEHOLDER:
                start = j + 1
        valid = len(row) if row[-1] != PLACEHOLDER else row.index(PLACEHOLDER)
        ids[start:] = row[:min(valid, len(plain) - start)]


class CopiesAroundTheCount(_ScansACopy):  # red team: list.copy(ids), read in C
    def _copy(self, ids):
        return list.copy(ids)


class ShortcutWhenCounted(_RepairsEachRequest):  # red team: a one-placeholder shortcut when the history counts
    def _repair(self, ids, row):
        if type(ids).__name__.startswith("Counting"):
            ids[len(ids) - 1:] = row[:1]
            return
        start = len(ids)
        while start > 0 and ids[start - 1] == PLACEHOLDER:
            start -= 1
        valid = len(row) if row[-1] != PLACEHOLDER else row.index(PLACEHOLDER)
        ids[start:] = row[:min(valid, len(ids) - start)]


class ReadsTheText(_ScansACopy):  # red team, second round: the history's text
    def _copy(self, ids):
        return [int(t) for t in re.findall(r"-?\d+", repr(ids))]


class CopiesTheHistory(_ScansACopy):  # red team, third round: a deep copy
    def _copy(self, ids):
        import copy

        return list(copy.deepcopy(ids, {}))


def test_a_copy_of_the_history_is_a_counted_read():
    """copy.copy, copy.deepcopy and pickle all read every element (through __reduce_ex__), and are counted so."""
    report = ch4.check_update_async_output_token_ids(CopiesTheHistory, seed=0)
    (work,) = [o for o in report.outcomes if o.name.startswith("work per step does not grow")]
    assert work.status == "failed" and "copying it" in work.hint, str(report)


def test_the_historys_text_is_a_counted_read():
    """repr(ids) writes out every element: as good as a copy, and counted as one (the red team's second round read
    the history uncounted through its text, and through a public uncounted copy the checks no longer have)."""
    report = ch4.check_update_async_output_token_ids(ReadsTheText, seed=0)
    (work,) = [o for o in report.outcomes if o.name.startswith("work per step does not grow")]
    assert work.status == "failed" and "repr(x)" in work.hint, str(report)
    assert not hasattr(CountingList([1]), "as_list")


def test_a_counted_read_keeps_the_line_that_made_it_the_readers_over_the_packages():
    """Chapter 6's host-work message names the line that read a history: the first reader's line outside the lab's
    package, where the engine's own read came first; once per call of a method, never per element; reset with the
    count."""
    CountingList.reset()
    history = CountingList(range(5))
    # as if the engine's own slice had read first, inside the lab's package...
    CountingList.first_at["slicing (x[a:b] copies the slice)"] = "synclab/engine/engine_core.py:154 `x[a:b]`"
    for _ in history:
        pass
    tail = history[2:]  # ...then the reader's: its line wins
    assert CountingList.first_at["slicing (x[a:b] copies the slice)"].endswith("`tail = history[2:]  # ...then "
                                                                             "the reader's: its line wins`")
    assert "`for _ in history:`" in CountingList.first_at["iterating over the list from the start"]
    assert CountingList.by_op["iterating over the list from the start"] == 5 and tail == [2, 3, 4]
    CountingList.reset()
    assert CountingList.first_at == {} and CountingList.touched == 0 and not CountingList.by_op


@pytest.mark.parametrize("wrong", [CopiesAroundTheCount, ShortcutWhenCounted])
def test_no_call_escapes_the_count_nor_can_tell_it_is_counted(wrong):
    """Every 4.1 check hands the answer the same counted history type, which list's C methods refuse: a read around
    the count crashes every check, and a shortcut taken when counted is taken everywhere and fails on values."""
    report = ch4.check_update_async_output_token_ids(wrong, seed=0)
    if wrong is CopiesAroundTheCount:
        assert report.earned == 0 and {o.status for o in report.outcomes} == {"crashed"}, str(report)
        assert "doesn't apply to a 'CountingList' object" in report.outcomes[0].message, str(report)
    else:
        assert report.earned < report.points / 2, str(report)
        assert any(o.status == "failed" and "fixed cases" in o.name for o in report.outcomes), str(report)


@pytest.mark.parametrize("wrong", sorted({w for w, _ in WRONG_4_1} | {WrapsPastTheStart}, key=lambda w: w.__name__),
                         ids=lambda w: w.__name__)
def test_a_passed_check_witnesses_what_a_right_answer_does_whatever_else_is_wrong(wrong):
    """The grader verifies each passed check of 4.1 by its witness against a right answer's on the same seed: a bug
    that one check names must not change another check's witness (a 0-d tensor in a list compares equal to its int,
    so the new-request check passes it and must witness what a right answer does)."""
    right = right_witnesses(ch4.check_update_async_output_token_ids, ReverseScanBatch)
    assert all(right.values())  # every check of 4.1 is verified
    report = ch4.check_update_async_output_token_ids(wrong, seed=0)
    assert_passes_witness_as(report, right)


@pytest.mark.parametrize("answer", RIGHT_4_2 + [w for w, _ in WRONG_4_2], ids=lambda f: f.__name__)
def test_4_2_witnesses_the_crossings_it_found_each_answer_within_a_token_of(answer):
    """4.2 compares within a token, so its witness is the reference's crossings the answer was found within a token
    of: every right answer (rounded up, down, to the nearest, or not) and every wrong one, where a check passes it,
    witnesses what the solution does."""
    right = witnesses(ch4.check_bottleneck_model(host_bottleneck_length, seed=0))
    assert all(right.values())
    report = ch4.check_bottleneck_model(answer, seed=0)
    assert_passes_witness_as(report, right)
    assert answer not in RIGHT_4_2 or report.passed


def test_a_repair_that_reads_with_no_step_in_flight_is_told_to_return_first():
    """The contract's clause "every list untouched when sampled_token_ids_cpu is None" has its case: a version that
    waits and reads regardless crashes on it, and is told why."""
    report = ch4.check_update_async_output_token_ids(NoNoneCheck, seed=0)
    (new,) = [o for o in report.outcomes if "new request" in o.name]
    assert new.status == "crashed" and "sampled_token_ids_cpu is None" in new.case, str(report)
    assert "nothing is in flight" in new.hint, str(report)
    assert all(o.ok for o in report.outcomes if o is not new), str(report)  # the rest is right


def test_the_gpu_loop_is_measured_on_a_gpu_only_and_drawn_from_what_a_gpu_run_stores(tmp_path):
    """`bench ch4` stores the real loop (gpu_loop_sweep) on a GPU; on a CPU it measures nothing. The book draws a
    stored run as its time per step per scan, the forwards' time beside it and the PR's TPOT as the PR's marks; a CPU
    run is never drawn. (The run's numbers here are made up for the drawing: no GPU figure is claimed from them.)"""
    from synclab.provenance import Provenance
    from synclab.reference import headline_figures

    if not torch.cuda.is_available():
        assert ch4.gpu_loop_sweep({"reverse": ReverseScanBatch}) is None
    stored = {"lengths": [100, 10_000, 60_000], "num_reqs": 128, "steps": 30, "rounds": 3, "forward": "made up",
              "ms_per_step": {"forward": [1.0, 3.0, 12.0], "reverse": [1.0, 1.0, 1.1]},
              "ms_per_step_range": {"forward": [[0.9, 1.1]] * 3, "reverse": [[0.9, 1.2]] * 3},
              "device_ms_per_step": {"forward": [0.9] * 3, "reverse": [0.9] * 3},
              "pr_tpot_ms": {"output tokens": 60_000, **ch4.PR_TPOT_MS}}
    provenance = {"device": "NVIDIA Made Up", "is_gpu": True, "torch_version": "2.13.0", "date": "2026-11-29",
                  "host": "x86_64", "threads": 16}
    (tmp_path / "made-up").mkdir()
    (tmp_path / "made-up" / "ch4.json").write_text(json.dumps({"provenance": provenance,
                                                               "results": {"gpu_loop": stored}}))
    (figure,) = headline_figures("ch4", "gpu_loop", "A real loop's step", root=tmp_path)
    assert Provenance.from_dict(provenance).label in figure["layout"]["title"]["text"]
    lines = {t["name"]: list(t["y"]) for t in figure["data"]}
    assert lines["forward: the loop's step"] == [1.0, 3.0, 12.0] and lines["reverse: its forwards alone"] == [0.9] * 3
    assert lines["the PR's TPOT (its model and GPU, not this loop's)"] == list(ch4.PR_TPOT_MS.values())
    (tmp_path / "made-up" / "ch4.json").write_text(json.dumps({"provenance": {**provenance, "is_gpu": False},
                                                               "results": {"gpu_loop": stored}}))
    assert headline_figures("ch4", "gpu_loop", "t", root=tmp_path) == []


def test_the_terminals_text_says_the_points_its_json_says():
    """A learner read "(1.77/2 points)" in the terminal's text (the checks' weights) and 5.31/6 in its JSON (the
    exercise's points): the text now gives the exercise's points, the number the JSON gives, and no other scale."""
    from synclab.lab.cli import json_report
    from synclab.lab.verdicts import Verdict

    verdict = Verdict("4.2", ch4.check_bottleneck_model(strict_bound, seed=0))
    (exercise,) = json_report(Path("lab.ipynb"), {"4.2": verdict}, [], "4.2", 0.0)["exercises"]
    assert 0 < exercise["earned"] < exercise["points"], exercise
    assert f"(worth {exercise['earned']:g} of the exercise's {exercise['points']} points" in str(verdict), str(verdict)
    assert f"/{verdict.report.points} points)" not in str(verdict), str(verdict)  # the checks' weights: 2
