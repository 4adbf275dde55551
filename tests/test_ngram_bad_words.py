"""Chapter 3, Exercise 3.8: the n-gram update and the bad-words ban pass on the solution; each check fails on a
plausible wrong version (the race one found by the simulated streams)."""

from __future__ import annotations

import functools
import random

import pytest
import torch

from synclab import pinned_transfers as ch3
from synclab.device import is_pin_memory_available
from synclab.engine.bad_words import _SMALLEST_LOGIT, _apply_bad_words_single_batch_baseline
from synclab.engine.ngram_proposer_gpu import update_ngram_gpu_tensors_incremental_baseline
from synclab.pinned_transfers.checks.ngram import count_bad_words, count_reorder_step
from tests.check_reports import assert_every_check_shown_to_fail, assert_passes_witness_as, outcome, witnesses
from tests.notebook_code import load_function
from tests.snapshots import matches_report_snapshot

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

NOTEBOOK = "solutions/03_pinned_transfers.ipynb"
_namespace: dict = {}
async_tensor_h2d = load_function(NOTEBOOK, "async_tensor_h2d", _namespace)
update = load_function(NOTEBOOK, "update_ngram_gpu_tensors_incremental", _namespace)
ban = load_function(NOTEBOOK, "_apply_bad_words_single_batch", _namespace)


def test_solutions_pass():
    assert ch3.check_ngram_update(update).passed
    assert ch3.check_bad_words(ban).passed


def test_counts_grow_before_and_vanish_after():
    assert [count_reorder_step(update_ngram_gpu_tensors_incremental_baseline, n, random.Random(n)) for n in (1, 16)] \
        == [2, 2]  # the two reorder lists, whatever the batch
    assert [count_reorder_step(update, n, random.Random(n)) for n in (1, 16)] == [0, 0]
    assert [count_bad_words(_apply_bad_words_single_batch_baseline, n) for n in (1, 16)] == [1, 16]
    assert count_bad_words(ban, 16) == 0


# ----------------------------------------------------------------------------- wrong versions of the update

_STAGING: dict[str, torch.Tensor] = {}


def _moves(batch, new_reqs):
    new = {r.req_id for r in new_reqs}
    prev = batch.prev_req_id_to_index or {}
    pairs = [(prev[r], i) for r, i in batch.req_id_to_index.items() if r not in new and r in prev and prev[r] != i]
    return [s for s, _ in pairs], [d for _, d in pairs]


def update_one_staging_buffer(batch, token_ids_gpu, num_tokens_gpu, new_reqs, device):
    """Both reorder lists through one resident pinned buffer, refilled before the first upload has run."""
    src, dst = _moves(batch, new_reqs)
    if batch.prev_req_id_to_index is not None and src:
        buf = _STAGING.setdefault("buf", torch.zeros(64, dtype=torch.long, pin_memory=is_pin_memory_available()))
        buf[:len(src)].copy_(torch.tensor(src))
        src_gpu = buf[:len(src)].to(device, non_blocking=True)
        buf[:len(dst)].copy_(torch.tensor(dst))  # the first upload may not have read buf yet
        dst_gpu = buf[:len(dst)].to(device, non_blocking=True)
        rows, lengths = token_ids_gpu[src_gpu].clone(), num_tokens_gpu[src_gpu].clone()
        token_ids_gpu[dst_gpu] = rows
        num_tokens_gpu[dst_gpu] = lengths
        batch.prev_req_id_to_index = dict(batch.req_id_to_index)  # moved: let the solution do the rest
    update(batch, token_ids_gpu, num_tokens_gpu, new_reqs, device)


def update_copies_moved_rows_from_host(batch, token_ids_gpu, num_tokens_gpu, new_reqs, device):
    """Treats every request as new: the host's placeholders overwrite the device-only tokens."""
    batch.prev_req_id_to_index = None
    update(batch, token_ids_gpu, num_tokens_gpu, new_reqs, device)


def update_keeps_old_lengths(batch, token_ids_gpu, num_tokens_gpu, new_reqs, device):
    before = num_tokens_gpu.clone()
    update(batch, token_ids_gpu, num_tokens_gpu, new_reqs, device)
    num_tokens_gpu.copy_(torch.maximum(before, torch.zeros_like(before)))  # the refresh from the host is lost


def update_hard_pinned(batch, token_ids_gpu, num_tokens_gpu, new_reqs, device):
    torch.empty(1, pin_memory=True)  # the review's catch: pinning asked for where there is none
    update(batch, token_ids_gpu, num_tokens_gpu, new_reqs, device)


WRONG_UPDATE = [
    (update_ngram_gpu_tensors_incremental_baseline, "0 syncs per step"),
    (update_one_staging_buffer, "no pinned buffer written"),
    (update_copies_moved_rows_from_host, "scripted steps"),
    (update_copies_moved_rows_from_host, "random steps"),
    (update_keeps_old_lengths, "scripted steps"),
    (update_hard_pinned, "WSL"),
]


@pytest.mark.parametrize("wrong,failing_check", WRONG_UPDATE, ids=[f"{w.__name__}-{c}" for w, c in WRONG_UPDATE])
def test_each_update_check_catches_a_wrong_version(wrong, failing_check):
    """Each wrong version fails its check; every check it passes witnesses what the solution's does."""
    report = ch3.check_ngram_update(wrong, seed=0)
    assert outcome(report, failing_check) in ("failed", "crashed"), str(report)
    right = _right_witnesses(ch3.check_ngram_update, update)
    assert_passes_witness_as(report, right)


def test_the_race_is_named_with_its_line():
    report = ch3.check_ngram_update(update_one_staging_buffer, seed=0)
    matches_report_snapshot(report)  # names buf[:len(src)].to(device, non_blocking=True)
    assert outcome(report, "random steps") == "passed"  # the values are right: only the streams see the race


def test_moved_rows_copied_from_the_host_are_named():
    report = ch3.check_ngram_update(update_copies_moved_rows_from_host, seed=0)
    matches_report_snapshot(report)


# ----------------------------------------------------------------------------- wrong versions of bad words


def ban_last_token_only(logits, bad_words_token_ids, past_tokens_ids):
    for word in bad_words_token_ids:
        logits[word[-1]:word[-1] + 1] = _SMALLEST_LOGIT  # the prefix is never compared


def ban_on_a_copy(logits, bad_words_token_ids, past_tokens_ids):
    ban(logits.clone(), bad_words_token_ids, past_tokens_ids)


def ban_with_masked_fill(logits, bad_words_token_ids, past_tokens_ids):
    mask = torch.zeros_like(logits, dtype=torch.bool)
    ban(torch.zeros_like(logits), bad_words_token_ids, past_tokens_ids)
    for word in bad_words_token_ids:
        mask[word[-1]] = True  # a host scalar copied over, per word
    logits.masked_fill_(mask & torch.isinf(logits), _SMALLEST_LOGIT)
    ban(logits, bad_words_token_ids, past_tokens_ids)


WRONG_BAD_WORDS = [
    (_apply_bad_words_single_batch_baseline, "0 syncs"),
    (ban_with_masked_fill, "0 syncs"),
    (ban_last_token_only, "fixed cases"),
    (ban_last_token_only, "random batches"),
    (ban_on_a_copy, "fixed cases"),
]


@pytest.mark.parametrize("wrong,failing_check", WRONG_BAD_WORDS,
                         ids=[f"{w.__name__}-{c}" for w, c in WRONG_BAD_WORDS])
def test_each_bad_words_check_catches_a_wrong_version(wrong, failing_check):
    """Each wrong version fails its check; every check it passes witnesses what the solution's does."""
    report = ch3.check_bad_words(wrong, seed=0)
    assert outcome(report, failing_check) in ("failed", "crashed"), str(report)
    right = _right_witnesses(ch3.check_bad_words, ban)
    assert_passes_witness_as(report, right)


@functools.cache
def _right_witnesses(check, right_answer) -> dict[str, str]:
    """Each check's witness for the solution on seed 0 (computed once for every wrong version): the checks that
    compare rows, lengths or banned tokens are verified."""
    right = witnesses(check(right_answer, seed=0))
    assert sum(map(bool, right.values())) >= 3
    return right


def test_every_check_is_shown_to_fail():
    assert_every_check_shown_to_fail(ch3.CHECKS_3_8, WRONG_UPDATE + WRONG_BAD_WORDS)


def test_one_report_for_both_functions():
    report = ch3.check_ngram_and_bad_words(update, ban_last_token_only, seed=0)
    assert outcome(report, "0 syncs per step") == "passed" and outcome(report, "bad words, fixed cases") == "failed"


def off_by_one_length_guard(logits, bad_words_token_ids, past_tokens_ids):  # `>=` where the rule is `>`
    for bad_word_ids in bad_words_token_ids:
        if len(bad_word_ids) >= len(past_tokens_ids) + 1:
            continue
        prefix = len(bad_word_ids) - 1
        if (past_tokens_ids[-prefix:] if prefix else []) == bad_word_ids[:prefix]:
            logits[bad_word_ids[-1]:bad_word_ids[-1] + 1] = _SMALLEST_LOGIT


def test_an_off_by_one_length_guard_is_shown_the_tokens_it_missed_on_every_seed():
    for seed in range(20):
        report = ch3.check_bad_words(off_by_one_length_guard, seed=seed)
        (fixed,) = [o for o in report.outcomes if "fixed" in o.name]
        assert fixed.status == "failed", str(report)
        assert "not banned that should be" in fixed.message and fixed.expected != fixed.got, str(report)
        assert "also banned (row, token): [(0, 6)]" in fixed.expected  # the word exactly the history plus one
