"""Chapter 0: the checks pass on the solution and each one fails on a plausible wrong version."""

from __future__ import annotations

import random

import pytest
import torch

from synclab import primer
from synclab.syncs import count_syncs
from tests.check_reports import outcome
from tests.notebook_code import load_function

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


@pytest.mark.parametrize(
    "wrong,failing_check",
    [
        (syncs_per_request, "at most 1 sync"),
        (copies_logits_to_host, "at most 1 sync"),
        (new_lists_instead_of_in_place, "fixed cases"),
        (off_by_one_length_limit, "fixed cases"),
        (forgets_device_lengths, "fixed cases"),
        (drops_the_nan_check, "NaN"),
        (updates_before_nan_check, "NaN"),
        (breaks_on_empty_batch, "empty batch"),
    ],
)
def test_each_check_catches_a_wrong_version(wrong, failing_check):
    report = primer.check_decode_step(wrong)
    assert not report.passed
    assert outcome(report, failing_check) in ("failed", "crashed"), str(report)


def test_a_stub_reports_not_implemented():
    def stub(batch):
        raise NotImplementedError("Exercise 0.1")

    report = primer.check_decode_step(stub)
    assert {o.status for o in report.outcomes} == {"not implemented"}
    assert "Exercise 0.1" in str(report)


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
    assert "b: x[idx[0]:idx[1]]: you said 0, measured 2" in str(report)


def test_missing_predictions_fail():
    report = primer.check_predictions(lambda: {"a: x[2:9].sum()": 0})
    assert not report.passed
