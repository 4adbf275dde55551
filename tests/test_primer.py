"""Chapter 0: the checks pass on the solution and each one fails on a plausible wrong version."""

from __future__ import annotations

import random

import pytest
import torch

from synclab import primer
from synclab.device import is_simulated
from synclab.syncs import count_syncs
from tests.check_reports import assert_every_check_shown_to_fail, assert_passes_witness_as, outcome, witnesses
from tests.notebook_code import ROOT, load_function
from tests.snapshots import matches_report_snapshot

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

decode_step = load_function("solutions/00_primer.ipynb", "decode_step")
my_predictions = load_function("solutions/00_primer.ipynb", "my_predictions")


def test_solution_passes_every_check():
    report = primer.check_decode_step(decode_step)
    assert report.passed, str(report)


def test_solution_does_one_sync_per_step_whatever_the_batch():
    for n in (0, 1, 64, 256):
        batch = primer.make_batch(n, rng=random.Random(n))
        with count_syncs() as report:
            decode_step(batch)
        assert report.count == 1


def test_baseline_syncs_grow_with_the_batch():
    counts = primer.sync_counts({"baseline": primer.decode_step_baseline}, (1, 4, 16))["baseline"]
    assert counts == [3, 9, 33]  # 1 NaN check + 2 per request


# ----------------------------------------------------------------------------- wrong versions


def syncs_per_request(batch):  # the baseline: right answer, too many syncs
    return primer.decode_step_baseline(batch)


def copies_logits_to_host(batch):  # one sync, but reads [num_reqs, vocab] back
    return primer.decode_step_reference(batch)


def new_lists_instead_of_in_place(batch):
    out = decode_step(batch)
    batch.output_token_ids[:] = [list(o) for o in batch.output_token_ids]  # replaces the request's lists
    return out


def off_by_one_length_limit(batch):
    out = decode_step(batch)
    lens = (batch.seq_lens_cpu - 1).tolist()
    finished = [t == batch.eos_token_id or n + 1 > batch.max_model_len for t, n in zip(out.sampled_token_ids, lens)]
    return primer.StepOutput(out.sampled_token_ids, finished)


def forgets_device_lengths(batch):
    out = decode_step(batch)
    batch.seq_lens_gpu -= 1
    return out


def drops_the_nan_check(batch):
    return decode_step(primer.DecodeBatch(torch.nan_to_num(batch.logits, nan=0.0), batch.seq_lens_gpu,
                                          batch.seq_lens_cpu, batch.output_token_ids, batch.max_model_len,
                                          batch.eos_token_id))


def updates_before_nan_check(batch):
    for out in batch.output_token_ids:
        out.append(-1)
    for out in batch.output_token_ids:
        out.pop()
        out.append(0)
    return decode_step(batch)


def breaks_on_empty_batch(batch):
    if batch.num_reqs == 0:
        raise IndexError("list index out of range")
    return decode_step(batch)


def returns_0d_tensors(batch):  # one sync, right values, but 0-d tensors where the batch holds ints
    sampled_gpu = batch.logits.argmax(dim=-1)  # [num_reqs] device
    has_nan = torch.isnan(batch.logits).any().view(1)  # [1] device
    *sampled, nan_flag = torch.cat([sampled_gpu, has_nan.to(sampled_gpu.dtype)]).unbind(0)  # 0-d tensors: no sync
    if nan_flag:  # the one sync
        raise ValueError("NaN in logits")
    finished = list(((sampled_gpu == batch.eos_token_id) | (batch.seq_lens_gpu + 1 >= batch.max_model_len)).unbind(0))
    for output, token in zip(batch.output_token_ids, sampled):
        output.append(token)  # tensor(5) == 5: the lists look right
    batch.seq_lens_gpu += 1
    batch.seq_lens_cpu += 1
    return primer.StepOutput(sampled, finished)


def appends_0d_tensors(batch):  # returns ints, but appends device scalars to the request's lists
    sampled_gpu = batch.logits.argmax(dim=-1)  # [num_reqs] device
    has_nan = torch.isnan(batch.logits).any().view(1)
    *sampled, nan_flag = torch.cat([sampled_gpu, has_nan.to(sampled_gpu.dtype)]).tolist()  # the one sync
    if nan_flag:
        raise ValueError("NaN in logits")
    lens = batch.seq_lens_cpu.tolist()
    finished = [t == batch.eos_token_id or n + 1 >= batch.max_model_len for t, n in zip(sampled, lens)]
    for i, output in enumerate(batch.output_token_ids):
        output.append(sampled_gpu[i])  # a Python index: no sync, but a 0-d device tensor in the history
    batch.seq_lens_gpu += 1
    batch.seq_lens_cpu += 1
    return primer.StepOutput(sampled, finished)


def finished_as_device_flags(batch):  # right ids, but finished as 0-d device bools
    lens_gpu = batch.seq_lens_gpu.clone()
    out = decode_step(batch)
    sampled_gpu = batch.logits.argmax(dim=-1)
    flags = (sampled_gpu == batch.eos_token_id) | (lens_gpu + 1 >= batch.max_model_len)
    return primer.StepOutput(out.sampled_token_ids, list(flags.unbind(0)))


WRONG_0_1 = [
    (syncs_per_request, "at most 1 sync"),
    (copies_logits_to_host, "at most 1 sync"),
    (new_lists_instead_of_in_place, "fixed cases"),
    (off_by_one_length_limit, "fixed cases"),
    (forgets_device_lengths, "fixed cases"),
    (drops_the_nan_check, "NaN"),
    (updates_before_nan_check, "NaN"),
    (breaks_on_empty_batch, "empty batch"),
    (returns_0d_tensors, "fixed cases"),
    (returns_0d_tensors, "random batches"),
    (appends_0d_tensors, "fixed cases"),
    (finished_as_device_flags, "fixed cases"),
]


@pytest.mark.parametrize("wrong,failing_check", WRONG_0_1, ids=[f"{w.__name__}-{c}" for w, c in WRONG_0_1])
def test_each_check_catches_a_wrong_version(wrong, failing_check):
    report = primer.check_decode_step(wrong)
    assert not report.passed
    assert outcome(report, failing_check) in ("failed", "crashed"), str(report)


def test_every_check_is_shown_to_fail():
    assert_every_check_shown_to_fail(primer.CHECKS_0_1, WRONG_0_1)


@pytest.mark.parametrize("wrong,message", [
    (returns_0d_tensors, "sampled_token_ids must hold Python ints, not tensors"),
    (appends_0d_tensors, "the tokens appended to output_token_ids must hold Python ints, not tensors"),
    (finished_as_device_flags, "finished must hold Python bools, not tensors"),
])
def test_0d_tensors_are_caught_though_they_compare_equal(wrong, message):
    report = primer.check_decode_step(wrong, seed=0)
    (fixed,) = [o for o in report.outcomes if "fixed cases" in o.name]
    assert fixed.status == "failed" and fixed.message == message, str(report)
    assert "tensor(5) == 5 is true" in fixed.hint and "a sync of its own" in fixed.hint
    # one sync per step, but the counted step is checked in full: its types give it away there too (a 0-d device
    # tensor read later is a sync the count never sees)
    (syncs,) = [o for o in report.outcomes if "at most 1 sync" in o.name]
    assert syncs.status == "failed" and syncs.message == message and syncs.case.startswith("the counted call")


def test_finished_as_0_or_1_is_told_to_return_bools():
    def flags_as_ints(batch):
        out = decode_step(batch)
        return primer.StepOutput(out.sampled_token_ids, [int(f) for f in out.finished])

    report = primer.check_decode_step(flags_as_ints, seed=0)
    (fixed,) = [o for o in report.outcomes if "fixed cases" in o.name]
    assert fixed.status == "failed" and fixed.message == "finished must hold Python bools", str(report)
    assert "bool(flag)" in fixed.hint


def advances_lengths_before_the_nan_check(batch):  # the lists stay, but the lengths move on a refused step
    batch.seq_lens_cpu += 1
    batch.seq_lens_gpu += 1
    batch.seq_lens_cpu -= 1
    batch.seq_lens_gpu -= 1
    if torch.isnan(batch.logits).any():
        batch.seq_lens_cpu += 1
        batch.seq_lens_gpu += 1
    return decode_step(batch)


@pytest.mark.parametrize("seed", range(5))
def test_lengths_advanced_on_a_refused_step_fail_on_every_seed(seed):
    report = primer.check_decode_step(advances_lengths_before_the_nan_check, seed=seed)
    (nan,) = [o for o in report.outcomes if "NaN" in o.name]
    assert nan.status == "failed" and "after a rejected step" in nan.message, str(report)
    assert "a refused step changes nothing" in nan.hint


def packs_three_int64_per_request(batch):
    """A correct alternative: [token, done, nan] per request in int64, one .tolist() (24 bytes per request)."""
    num_reqs = len(batch.output_token_ids)
    if num_reqs == 0:
        if torch.isnan(batch.logits).any():
            raise ValueError("NaN in logits")
        return primer.StepOutput([], [])
    sampled = batch.logits.argmax(dim=-1)  # [num_reqs]
    lens = batch.seq_lens_gpu
    done = (sampled == batch.eos_token_id) | (lens + 1 >= batch.max_model_len)
    nan = torch.isnan(batch.logits).any(dim=-1)
    rows = torch.stack([sampled, done.long(), nan.long()], dim=1).tolist()  # the one sync
    if any(r[2] for r in rows):
        raise ValueError("NaN in logits")
    for out, (token, _, _) in zip(batch.output_token_ids, rows):
        out.append(token)
    batch.seq_lens_gpu += 1
    batch.seq_lens_cpu += 1
    return primer.StepOutput([r[0] for r in rows], [bool(r[1]) for r in rows])


def test_an_int64_pack_of_three_values_per_request_is_within_the_budget():
    for seed in range(3):
        report = primer.check_decode_step(packs_three_int64_per_request, seed=seed)
        assert report.passed, str(report)


def skips_the_nan_test_when_counted(batch):  # a separate NaN test, a 2nd sync: dropped whenever syncs are counted
    if not is_simulated(batch.logits.device) and torch.isnan(batch.logits).any():
        raise ValueError("NaN in logits")
    return decode_step(primer.DecodeBatch(torch.nan_to_num(batch.logits, nan=0.0), batch.seq_lens_gpu,
                                          batch.seq_lens_cpu, batch.output_token_ids, batch.max_model_len,
                                          batch.eos_token_id))


def reads_nothing_when_counted(batch):  # no sync at all while a torch mode is on: every request "samples" EOS
    if not torch.overrides._get_current_function_mode_stack():
        return decode_step(batch)
    for output in batch.output_token_ids:
        output.append(batch.eos_token_id)
    batch.seq_lens_gpu += 1
    batch.seq_lens_cpu += 1
    return primer.StepOutput([batch.eos_token_id] * batch.num_reqs, [True] * batch.num_reqs)


@pytest.mark.parametrize("wrong,message", [
    (skips_the_nan_test_when_counted, "a step over NaN logits must raise ValueError"),
    (reads_nothing_when_counted, "sampled_token_ids differs"),
])
def test_a_call_that_is_counted_is_also_checked(wrong, message):
    """Code that can tell it is counted gains nothing: the syncs count only on steps whose results count."""
    report = primer.check_decode_step(wrong, seed=0)
    assert all(o.status == "passed" for o in report.outcomes if "sync" not in o.name), str(report)  # right uncounted
    (syncs,) = [o for o in report.outcomes if "at most 1 sync" in o.name]
    assert syncs.status == "failed" and syncs.message == message, str(report)
    assert syncs.case.startswith("the counted call"), str(report)


def test_a_stub_reports_not_implemented():
    def stub(batch):
        raise NotImplementedError("Exercise 0.1")

    report = primer.check_decode_step(stub, seed=0)
    assert {o.status for o in report.outcomes} == {"not implemented"}
    matches_report_snapshot(report)


def test_random_cases_depend_on_the_seed():
    seen = []

    def spy(batch):
        seen.append(batch.num_reqs)
        return decode_step(batch)

    primer.check_decode_step(spy, seed=1)
    first = list(seen)
    seen.clear()
    primer.check_decode_step(spy, seed=1)
    assert seen == first  # replayable
    seen.clear()
    primer.check_decode_step(spy, seed=2)
    assert seen != first  # a hard-coded answer for one seed fails another


# ----------------------------------------------------------------------------- Exercise 0.2


def test_predictions_solution_passes():
    assert primer.check_predictions(my_predictions).passed


def test_wrong_predictions_fail_with_the_snippet_named():
    def wrong():
        answers = dict(my_predictions())
        answers["b: x[idx[0]:idx[1]]"] = 0
        return answers

    report = primer.check_predictions(wrong)
    assert not report.passed
    matches_report_snapshot(report)  # what the line does, not the answer


def test_a_prediction_written_as_text_or_a_key_left_out_is_named_exactly():
    as_text = {name: str(count) for name, count in my_predictions().items()}
    report = primer.check_predictions(lambda: as_text)
    assert not report.passed
    matches_report_snapshot(report, "as text")
    one_short = {k: v for k, v in my_predictions().items() if not k.startswith("e:")}
    matches_report_snapshot(primer.check_predictions(lambda: one_short), "one short")  # that one, not all eight


def test_predictions_as_an_int_enum_or_numpy_ints_are_counts_and_one_that_equals_anything_earns_its_values():
    """A learner's IntEnum was refused as "not an int"; an int subclass is read as its value, in the notebook as in
    the grader (where a subclass crosses as its value alone): one whose __eq__ says yes to everything earns what its
    values earn, no more."""
    import enum

    import numpy as np

    counts = dict(my_predictions())
    Count = enum.IntEnum("Count", {f"N{n}": n for n in sorted(set(counts.values()))})
    assert primer.check_predictions(lambda: {k: Count(v) for k, v in counts.items()}).passed
    assert primer.check_predictions(lambda: {k: np.int64(v) for k, v in counts.items()}).passed

    class Yes(int):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = int.__hash__

    zeros = primer.check_predictions(lambda: {k: 0 for k in counts})
    cheat = primer.check_predictions(lambda: {k: Yes(0) for k in counts})
    assert not cheat.passed and cheat.outcomes[0].share == zeros.outcomes[0].share < 1


def test_missing_predictions_fail():
    report = primer.check_predictions(lambda: {"a: x[2:9].sum()": 0})
    assert not report.passed


def test_predictions_keyed_by_the_tables_letters_are_accepted_and_wrong_keys_told_the_exact_ones():
    by_letter = {name.split(":")[0]: count for name, count in my_predictions().items()}
    assert primer.check_predictions(lambda: by_letter).passed
    report = primer.check_predictions(lambda: {"x": 0}, seed=0)
    text = str(report)
    assert not report.passed and "a: x[2:9].sum()" in text and "letters, lowercase ('a' to 'h'" in text
    assert "random cases used seed" not in text  # 0.2 draws no random case: no seed to replay
    assert "random cases used seed" in str(primer.check_decode_step(lambda batch: None, seed=0))


def test_the_model_plays_the_formula_the_primer_prints():
    """T_step = s((host + device)/(s + 1) + launch) + max(host, device)/(s + 1): the model, exactly."""
    import re

    from synclab.figures import model_slider_figure
    from synclab.timeline_model import simulate, step_time_formula

    for host in (0, 10, 40, 60, 120):
        for device in (1, 30, 60, 200):
            for syncs in range(9):
                run = simulate(host, device, syncs, steps=8)
                assert abs(run.step_time_us - step_time_formula(host, device, syncs)) < 1e-9, (host, device, syncs)
    assert step_time_formula(40, 60, 0) == 60 and step_time_formula(40, 60, 1) == 85  # the page's numbers
    assert step_time_formula(40, 60, 4) == 112
    page = " ".join((ROOT / "book" / "00_primer.md").read_text().split())
    assert "60 us with no sync, 85 us with one, 112 us with four" in page
    assert r"T_\text{step} = s \left( \frac{T_\text{host} + T_\text{device}}{s + 1} + T_\text{launch} \right)" in page
    fig = model_slider_figure(host_us=40, device_us=60)
    printed = [re.search(r"GPU busy \d+%, (\d+) us per step", frame.layout.title.text).group(1) for frame in fig.frames]
    assert printed == [f"{step_time_formula(40, 60, s):.0f}" for s in (0, 1, 2, 4, 8)]
    broken = simulate(40, 60, 1, steps=8)
    assert broken.step_time_us != (40 + 60)  # a "host + device" formula would not be what the model plays


def test_predictions_earn_partial_credit_per_prediction():
    """Issue: 6 of 8 right earned 0. Now each right prediction earns its share; the message still names the others."""
    def two_wrong():
        answers = dict(my_predictions())
        for key in list(answers)[:2]:
            answers[key] += 1
        return answers

    report = primer.check_predictions(two_wrong)
    assert not report.passed and report.earned == pytest.approx(1 - 2 / len(primer.SNIPPETS)), report
    matches_report_snapshot(report)
    assert primer.check_predictions(lambda: {k: 99 for k in my_predictions()}).earned == 0


@pytest.mark.parametrize("answer", [drops_the_nan_check, syncs_per_request, off_by_one_length_limit,
                                    advances_lengths_before_the_nan_check, packs_three_int64_per_request],
                         ids=lambda f: f.__name__)
def test_a_passed_check_witnesses_what_a_right_answer_does_whatever_else_is_wrong(answer):
    """A grader verifies each passed check by its witness (the results it compared), against a right answer's on
    the same seed: a bug that one check names must not change another check's witness, or it would cost twice."""
    right = witnesses(primer.check_decode_step(decode_step, seed=3))
    assert all(right.values())  # every check of 0.1 is verified
    report = primer.check_decode_step(answer, seed=3)
    assert any(o.ok for o in report.outcomes)
    assert_passes_witness_as(report, right)


def test_the_sync_count_figure_shows_the_solutions_1s_as_bars():
    """Learners could not see the solution's bars of 1 beside the baseline's 513 on a linear axis: the figure's count
    axis is logarithmic from 0.5, in the solution notebook's cell and in the figure it stored for the page."""
    import math

    import nbformat

    from synclab.figures import sync_counts_figure

    fig = sync_counts_figure("batch size", (1, 256), {"baseline": [3, 513], "0.1": [1, 1]}, "t", log_y=True)
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis.range[0] == math.log10(0.5) < 0
    assert sync_counts_figure("batch size", (1,), {"a": [1]}, "t").layout.yaxis.type is None  # the other chapters'
    nb = nbformat.read(ROOT / "solutions" / "00_primer.ipynb", as_version=4)
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and '"primer_sync_counts"' in c.source]
    assert "log_y=True" in cell.source
    stored = cell.outputs[0]["data"]["application/papermill.record/application/vnd.plotly.v1+json"]
    assert stored["layout"]["yaxis"]["type"] == "log"
