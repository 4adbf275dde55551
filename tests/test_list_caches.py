"""Chapter 5: the checks pass on the solution, and each check fails on a plausible wrong version."""

from __future__ import annotations

import random
from pathlib import Path
from functools import cached_property

import pytest
import torch

from synclab import list_caches as ch5
from synclab.dispatch import count_torch_calls
from synclab.engine.encoder_cache_manager import EncoderCacheManager
from synclab.engine.mm_inputs import MultiModalFeatureSpec, PlaceholderRange, PlaceholderRangeBaseline, make_mask
from synclab.list_caches.checks import _PlaceholderRangeReference
from synclab.engine.scheduler import Request, SchedulerConfig
from tests.check_reports import assert_every_check_shown_to_fail, assert_passes_witness_as, outcome, right_witnesses
from tests.notebook_code import load_function

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

NOTEBOOK = "solutions/05_list_based_caches.ipynb"
_namespace: dict = {}
ListCachedRange = load_function(NOTEBOOK, "ListCachedRange", _namespace)
EncoderScheduler = load_function(NOTEBOOK, "EncoderScheduler", _namespace)


def test_solution_passes_every_check():
    assert ch5.check_placeholder_range(ListCachedRange).passed
    assert ch5.check_encoder_scheduler(EncoderScheduler).passed


def test_review_examples_on_the_solution_and_the_baseline():
    pr = ListCachedRange(0, 5, make_mask("FTFTT"))
    assert pr.get_embeds_indices_in_range(0, 0) == (0, 0)
    assert PlaceholderRangeBaseline(0, 5, make_mask("FTFTT")).get_embeds_indices_in_range(0, 0) == (0, 3)  # the bug
    assert ListCachedRange(0, 0, make_mask("")).get_num_embeds() == 0
    with pytest.raises(IndexError):
        PlaceholderRangeBaseline(0, 0, make_mask("")).get_num_embeds()


def test_torch_calls_are_counted_per_question():
    pr = PlaceholderRangeBaseline(0, 4, make_mask("TFTT"))
    pr.get_num_embeds()
    with count_torch_calls() as calls:
        pr.get_num_embeds()
        pr.get_embeds_indices_in_range(1, 3)
    assert calls.count == 6 and calls.by_name["__int__"] == 3
    listed = ListCachedRange(0, 4, make_mask("TFTT"))
    listed.get_num_embeds()
    with count_torch_calls() as calls:
        listed.get_num_embeds()
    assert calls.count == 0 and str(calls) == "0 torch calls"


def test_calls_per_step_grow_with_requests_times_images_for_the_tensor_cache_only():
    variants = {"tensor": (EncoderScheduler, PlaceholderRangeBaseline), "list": (EncoderScheduler, ListCachedRange)}
    small, large = ch5.calls_per_step(variants, 2, 2), ch5.calls_per_step(variants, 8, 4)
    assert small == {"tensor": (0, 8), "list": (0, 0)}  # 2 torch calls per image per step, no sync
    assert large == {"tensor": (0, 64), "list": (0, 0)}


def test_placeholder_ranges_compare_by_value():
    assert PlaceholderRange(1, 3, make_mask("TFT")) == PlaceholderRange(1, 3, make_mask("TFT"))
    assert PlaceholderRange(1, 3, make_mask("TFT")) != PlaceholderRange(1, 3, make_mask("TTT"))
    assert PlaceholderRange(1, 3) != PlaceholderRange(1, 3, make_mask("TTT"))


def test_encoder_cache_evicts_freeable_items_oldest_first():
    def request(rid, ident, n):
        return Request(rid, 100, [MultiModalFeatureSpec(ident, _PlaceholderRangeReference(0, n))])

    m = EncoderCacheManager(10)
    a, b, c = request("r1", "A", 4), request("r2", "B", 4), request("r3", "C", 6)
    m.allocate(a, 0)
    m.allocate(b, 0)
    m.free_encoder_input(a, 0)
    m.free_encoder_input(b, 0)
    assert (m.num_free_slots, m.num_freeable_slots) == (2, 10)
    assert m.can_allocate(c, 0, encoder_compute_budget=100, num_embeds_to_schedule=0)
    assert m.freed == ["A"] and "B" in m.cached  # one eviction was enough
    assert m.check_and_update_cache(request("r4", "B", 4), 0) and m.num_freeable_slots == 6
    assert not m.can_allocate(c, 0, encoder_compute_budget=5, num_embeds_to_schedule=0)  # over the budget


def test_decode_step_is_repeatable_and_variants_agree():
    tensor = ch5.decode_step(EncoderScheduler, PlaceholderRangeBaseline, 4, 3, length=16)
    listed = ch5.decode_step(EncoderScheduler, ListCachedRange, 4, 3, length=16)
    assert tensor() == listed() == listed()
    assert tensor()[0] == {f"req-{r}": 1 for r in range(4)}


def test_busy_fraction_model():
    assert ch5.busy_fraction([5_000.0, 20_000.0], 10_000.0) == [1.0, 0.5]


def test_random_mixes_depend_on_the_seed():
    assert ch5.random_mix(random.Random(1)) != ch5.random_mix(random.Random(2))


# ----------------------------------------------------------------------------- wrong versions of 5.1


class NoGuards(ListCachedRange):  # the PR's first commit: the review's two bugs
    def get_num_embeds(self):
        return self.length if self.embeds_cumsum is None else self.embeds_cumsum[-1]

    def get_embeds_indices_in_range(self, start_idx, end_idx):
        if self.embeds_cumsum is None:
            return start_idx, end_idx
        return (self.embeds_cumsum[start_idx - 1] if start_idx > 0 else 0), self.embeds_cumsum[end_idx - 1]


class NotCached(ListCachedRange):  # a property: the list is rebuilt on every question
    @property
    def embeds_cumsum(self):
        return None if self.is_embed is None else self.is_embed.cumsum(dim=0).tolist()


class ListOfTensors(ListCachedRange):  # list(tensor): a list of 0-d tensors
    @cached_property
    def embeds_cumsum(self):
        return None if self.is_embed is None else list(self.is_embed.cumsum(dim=0))


class OffByOne(ListCachedRange):  # cumsum[i] counts position i itself
    def get_embeds_indices_in_range(self, start_idx, end_idx):
        if self.embeds_cumsum is None or not self.embeds_cumsum:
            return super().get_embeds_indices_in_range(start_idx, end_idx)
        last = len(self.embeds_cumsum) - 1
        return self.embeds_cumsum[min(start_idx, last)], self.embeds_cumsum[min(end_idx, last)]


class CountsTokens(ListCachedRange):  # the placeholder tokens, not the embeddings
    def get_num_embeds(self):
        return self.length


class SumsTheMask(ListCachedRange):  # right answers, straight from the tensor every time
    def get_num_embeds(self):
        return self.length if self.is_embed is None else int(self.is_embed.sum())

    def get_embeds_indices_in_range(self, start_idx, end_idx):
        if self.is_embed is None:
            return start_idx, end_idx
        return int(self.is_embed[:start_idx].sum()), int(self.is_embed[:end_idx].sum())


class RemembersAnswers(ListCachedRange):  # red team, second round: the tensor per new question, each answer kept
    @cached_property
    def answers(self) -> dict:
        return {}

    def get_num_embeds(self):
        if self.is_embed is None:
            return self.length
        if "num" not in self.answers:
            self.answers["num"] = int(self.is_embed.cumsum(0)[-1]) if self.length else 0
        return self.answers["num"]

    def get_embeds_indices_in_range(self, start_idx, end_idx):
        if self.is_embed is None:
            return start_idx, end_idx
        if (start_idx, end_idx) not in self.answers:
            count = lambda i: int(self.is_embed.cumsum(0)[i - 1]) if i > 0 else 0  # noqa: E731
            self.answers[start_idx, end_idx] = count(start_idx), count(end_idx)
        return self.answers[start_idx, end_idx]


WRONG_5_1 = [
    (PlaceholderRangeBaseline, "fixed cases"),
    (PlaceholderRangeBaseline, "cached list of int"),
    (PlaceholderRangeBaseline, "random masks"),
    (PlaceholderRangeBaseline, "no torch call per question"),
    (PlaceholderRangeBaseline, "faster than the tensor cache"),
    (NoGuards, "fixed cases"),
    (NoGuards, "random masks"),
    (NotCached, "cached list of int"),
    (NotCached, "no torch call per question"),
    (ListOfTensors, "cached list of int"),
    (ListOfTensors, "fixed cases"),
    (OffByOne, "fixed cases"),
    (CountsTokens, "fixed cases"),
    (SumsTheMask, "no torch call per question"),
    (SumsTheMask, "faster than the tensor cache"),
    (RemembersAnswers, "no torch call per question"),  # the counted questions are new ones, as each step's are
    (RemembersAnswers, "faster than the tensor cache"),  # and so is every timed call's
]


@pytest.mark.parametrize("wrong,failing_check", WRONG_5_1, ids=[f"{w.__name__}-{c}" for w, c in WRONG_5_1])
def test_5_1_checks_catch_wrong_versions(wrong, failing_check):
    """Each wrong version fails its check; every check it passes witnesses what the solution's does."""
    report = ch5.check_placeholder_range(wrong, seed=0)
    assert outcome(report, failing_check) in ("failed", "crashed"), str(report)
    right = right_witnesses(ch5.check_placeholder_range, ListCachedRange)
    assert_passes_witness_as(report, right)


# ----------------------------------------------------------------------------- wrong versions of 5.2


class BudgetInTokens(EncoderScheduler):  # charges the placeholder tokens, not the embeddings
    def _try_schedule_encoder_inputs(self, request, num_computed_tokens, num_new_tokens, encoder_compute_budget):
        chosen, n, budget = super()._try_schedule_encoder_inputs(request, num_computed_tokens, num_new_tokens,
                                                                 encoder_compute_budget)
        spent = sum(request.mm_features[i].mm_position.length for i in chosen)
        return chosen, n, encoder_compute_budget - spent


class NoEmbedsCheck(EncoderScheduler):  # encodes an item as soon as the window touches its span
    def _try_schedule_encoder_inputs(self, request, num_computed_tokens, num_new_tokens, encoder_compute_budget):
        patched = [MultiModalFeatureSpec(f.identifier, _AllEmbeds(f.mm_position)) for f in request.mm_features]
        shadow = Request(request.request_id, request.num_prompt_tokens, patched, request.max_tokens,
                         request.num_computed_tokens, request.num_output_tokens)
        return super()._try_schedule_encoder_inputs(shadow, num_computed_tokens, num_new_tokens,
                                                    encoder_compute_budget)


class _AllEmbeds(_PlaceholderRangeReference):
    def __init__(self, pos):
        super().__init__(pos.offset, pos.length, pos.is_embed)

    def get_embeds_indices_in_range(self, start_idx, end_idx):
        return start_idx, end_idx


class IgnoresEncoderCache(EncoderScheduler):  # never asks the cache: re-encodes what it holds
    def __init__(self, config):
        super().__init__(config)
        self.encoder_cache_manager.check_and_update_cache = lambda request, input_id: False


class PeeksAtCache(EncoderScheduler):  # looks the identifier up without recording the request
    def __init__(self, config):
        super().__init__(config)
        manager = self.encoder_cache_manager
        manager.check_and_update_cache = lambda r, i: r.mm_features[i].identifier in manager.cached


class NoDedupe(EncoderScheduler):  # the same image twice in a request is encoded twice
    def _try_schedule_encoder_inputs(self, request, num_computed_tokens, num_new_tokens, encoder_compute_budget):
        for k, feature in enumerate(request.mm_features):
            feature.identifier = f"{feature.identifier}#{k}"  # make every identifier unique
        return super()._try_schedule_encoder_inputs(request, num_computed_tokens, num_new_tokens,
                                                    encoder_compute_budget)


class ZeroOnBudget(EncoderScheduler):  # no tokens at all when an item does not fit
    def _try_schedule_encoder_inputs(self, request, num_computed_tokens, num_new_tokens, encoder_compute_budget):
        chosen, n, budget = super()._try_schedule_encoder_inputs(request, num_computed_tokens, num_new_tokens,
                                                                 encoder_compute_budget)
        return chosen, (n if n == num_new_tokens else 0), budget


class ForgetsScheduledEmbeds(EncoderScheduler):  # asks can_allocate as if nothing were scheduled yet
    def __init__(self, config):
        super().__init__(config)
        allocate = self.encoder_cache_manager.can_allocate
        self.encoder_cache_manager.can_allocate = lambda r, i, budget, scheduled: allocate(r, i, budget, 0)


class ReadsTheMask(EncoderScheduler):  # right decisions, but sums is_embed itself every step
    def _try_schedule_encoder_inputs(self, request, num_computed_tokens, num_new_tokens, encoder_compute_budget):
        for feature in request.mm_features:
            if feature.mm_position.is_embed is not None:
                int(feature.mm_position.is_embed.sum())
        return super()._try_schedule_encoder_inputs(request, num_computed_tokens, num_new_tokens,
                                                    encoder_compute_budget)


WRONG_5_2 = [
    (BudgetInTokens, "fixed cases"),
    (BudgetInTokens, "random request mixes"),
    (NoEmbedsCheck, "fixed cases"),
    (IgnoresEncoderCache, "fixed cases"),
    (IgnoresEncoderCache, "random request mixes"),
    (PeeksAtCache, "random calls"),
    (NoDedupe, "fixed cases"),
    (ZeroOnBudget, "fixed cases"),
    (ForgetsScheduledEmbeds, "fixed cases"),
    (ReadsTheMask, "no torch call of its own"),
]


def _edited_5_2(name: str, edits: list[tuple[str, str]]) -> type:
    """The solution's 5.2 with ``edits`` made to its text, as a learner's version that differs in one clause."""
    import nbformat

    from tests.notebook_code import ROOT

    source = next(c.source for c in nbformat.read(ROOT / NOTEBOOK, as_version=4).cells
                  if "### BEGIN SOLUTION 5.2" in c.source)
    wrong = source
    for old, new in edits:
        assert old in wrong, old
        wrong = wrong.replace(old, new)
    namespace = dict(_namespace)
    exec(wrong.replace("class EncoderScheduler(", f"class {name}("), namespace)
    return namespace[name]


def _unclamped() -> type:
    """5.2 without the clamp of its window to the item: a negative start, an end past the item's length."""
    return _edited_5_2("Unclamped", [("max(0, num_computed_tokens - start_pos)", "num_computed_tokens - start_pos"),
                                     ("min(num_encoder_tokens, window_end - start_pos)", "window_end - start_pos")])


_GUARD = ("            if (self.scheduler_config.disable_chunked_mm_input and num_computed_tokens < start_pos\n"
          "                    and window_end < start_pos + num_encoder_tokens):\n"
          "                num_new_tokens = start_pos - num_computed_tokens  # do not split the item: stop before it\n"
          "                break\n")
_AFTER_ALLOCATE = "            # Does the window hold any of this item's embedding rows"

CACHE_STATE_MISTAKES = [
    ("NoEarlyReturn", [("if num_new_tokens == 0 or not request.has_encoder_inputs:",
                        "if not request.has_encoder_inputs:")],
     "no new tokens, the item's output cached"),
    ("StrictWindowEnd", [("if start_pos >= window_end:", "if start_pos > window_end:")],
     "the window ends where the item starts, its output cached"),
    ("GuardAfterAllocate", [(_GUARD, ""), (_AFTER_ALLOCATE, _GUARD + _AFTER_ALLOCATE)],
     "disable_chunked_mm_input: the window would split the item, the cache full"),
]


# Rule e's two strict comparisons, each broken alone: each fails on the fixed case at its boundary, told "strict <".
RULE_E_MISTAKES = [
    ("StartsAtOrBefore", [("num_computed_tokens < start_pos\n", "num_computed_tokens <= start_pos\n")],
     "disable_chunked_mm_input: the window starts at the item's offset"),
    ("EndsAtOrInside", [("window_end < start_pos + num_encoder_tokens", "window_end <= start_pos + num_encoder_tokens")],
     "disable_chunked_mm_input: the window covers the item"),
]


@pytest.mark.parametrize("name, edits, case", RULE_E_MISTAKES, ids=[m[0] for m in RULE_E_MISTAKES])
def test_5_2_rule_e_is_strict_on_both_sides_and_says_so(name, edits, case):
    wrong = _edited_5_2(name, edits)
    for seed in range(3):
        report = ch5.check_encoder_scheduler(wrong, seed=seed)
        fixed = next(o for o in report.outcomes if "fixed cases" in o.name)
        assert fixed.status == "failed" and fixed.case.startswith(case) and "strict <" in fixed.hint, str(report)


@pytest.mark.parametrize("name, edits, case", CACHE_STATE_MISTAKES, ids=[m[0] for m in CACHE_STATE_MISTAKES])
def test_5_2_a_clause_on_the_encoder_cache_fails_on_its_fixed_case_on_every_seed(name, edits, case):
    wrong = _edited_5_2(name, edits)
    for seed in range(3):
        report = ch5.check_encoder_scheduler(wrong, seed=seed)
        fixed = next(o for o in report.outcomes if "fixed cases" in o.name)
        assert fixed.status == "failed" and case in fixed.case, str(report)


def test_5_2_an_unclamped_window_breaks_vllms_contract_inside_the_checks():
    """The checks hand 5.2 a range that holds vLLM's contract, so the fault fails a check, not a later cell."""
    report = ch5.check_encoder_scheduler(_unclamped(), seed=0)
    assert outcome(report, "fixed cases") == "failed", str(report)
    fixed = next(o for o in report.outcomes if "fixed cases" in o.name)
    assert "get_embeds_indices_in_range(" in fixed.message and "clamp the window" in fixed.hint, str(report)


@pytest.mark.parametrize("wrong,failing_check", WRONG_5_2, ids=[f"{w.__name__}-{c}" for w, c in WRONG_5_2])
def test_5_2_checks_catch_wrong_versions(wrong, failing_check):
    """Each wrong version fails its check; every check it passes witnesses what the solution's does."""
    report = ch5.check_encoder_scheduler(wrong, seed=0)
    assert outcome(report, failing_check) in ("failed", "crashed"), str(report)
    right = right_witnesses(ch5.check_encoder_scheduler, EncoderScheduler)
    assert_passes_witness_as(report, right)


class ShortcutWhenCounted(ListCachedRange):  # right from the list, but cheap and wrong whenever a torch mode is on
    def get_num_embeds(self):
        return self.length if torch.overrides._get_current_function_mode_stack() else super().get_num_embeds()

    def get_embeds_indices_in_range(self, start_idx, end_idx):
        if torch.overrides._get_current_function_mode_stack():
            return start_idx, end_idx
        return super().get_embeds_indices_in_range(start_idx, end_idx)


class SchedulesNothingWhenCounted(EncoderScheduler):  # right, but encodes nothing whenever a torch mode is on
    def _try_schedule_encoder_inputs(self, request, num_computed_tokens, num_new_tokens, encoder_compute_budget):
        if torch.overrides._get_current_function_mode_stack():
            return [], num_new_tokens, encoder_compute_budget
        return super()._try_schedule_encoder_inputs(request, num_computed_tokens, num_new_tokens,
                                                    encoder_compute_budget)


def test_5_1_a_call_that_is_counted_is_also_checked():
    """Code that can tell it is counted gains nothing: the torch calls count only on questions whose answers count."""
    report = ch5.check_placeholder_range(ShortcutWhenCounted, seed=0)
    assert outcome(report, "fixed cases") == outcome(report, "random masks") == "passed", str(report)  # uncounted
    counted = next(o for o in report.outcomes if "no torch call per question" in o.name)
    assert counted.status == "failed" and "the counted call" in counted.message, str(report)


def test_5_2_a_call_that_is_counted_is_also_checked():
    """The scheduler's steps count torch calls only on steps whose decisions are compared with the reference."""
    report = ch5.check_encoder_scheduler(SchedulesNothingWhenCounted, seed=0)
    assert all(o.status == "passed" for o in report.outcomes if "counted" not in o.name), str(report)
    counted = next(o for o in report.outcomes if "no torch call of its own" in o.name)
    assert counted.status == "failed" and "of the counted run" in counted.message, str(report)


def test_every_check_is_shown_to_fail():
    assert_every_check_shown_to_fail(ch5.CHECKS_5_1, WRONG_5_1)
    assert_every_check_shown_to_fail(ch5.CHECKS_5_2, WRONG_5_2)


def test_scheduler_config_defaults_hold_a_whole_image():
    assert SchedulerConfig().max_num_encoder_input_tokens >= ch5.IMAGE_TOKENS
    assert torch.equal(make_mask("TF"), torch.tensor([True, False]))


def test_a_timeout_names_the_call_that_hung(monkeypatch):
    """The case is named before the reader's code runs: a hang on random call 2 reports random call 2."""
    from synclab.checks import TIME_SCALE_ENV, run_checks

    monkeypatch.setenv(TIME_SCALE_ENV, "0.1")  # 3 s for the check instead of 30

    class HangsOnItsThirdCall(EncoderScheduler):
        calls = 0

        def _try_schedule_encoder_inputs(self, *args):
            type(self).calls += 1
            while type(self).calls == 3:
                pass
            return super()._try_schedule_encoder_inputs(*args)

    random_calls = next(c for c in ch5.CHECKS_5_2 if "random calls" in c.name)
    (hung,) = run_checks("5.2", [random_calls], HangsOnItsThirdCall, seed=0).outcomes
    assert hung.status == "timed out" and hung.case.startswith("random call 2 "), hung


def test_a_running_sum_over_bools_is_named_as_such_and_never_crashes_the_timing():
    import functools
    import itertools

    class Accumulates(ListCachedRange):  # a learner's: itertools.accumulate over the mask's bools
        @functools.cached_property
        def embeds_cumsum(self):
            return None if self.is_embed is None else list(itertools.accumulate(self.is_embed.tolist()))

    report = ch5.check_placeholder_range(Accumulates, seed=0)
    text = str(report)
    assert "please file an issue" not in text and "crashed" not in text, text
    (cumsum,) = [o for o in report.outcomes if "cached list of int" in o.name]
    assert cumsum.status == "failed" and "accumulate(map(int, mask))" in cumsum.hint, text
    (ratio,) = [o for o in report.outcomes if "faster than the tensor cache" in o.name]
    assert ratio.status == "failed" and ratio.message.startswith("not timed"), text


def test_a_slower_version_is_reported_as_slower_not_as_a_speed_up():
    from synclab.list_caches.checks import speed_words

    assert speed_words(1 / 2.1) == "2.1x slower"
    assert speed_words(2.1) == "2.1x faster"


def test_chapter_5s_worked_cases_are_the_checks_own():
    """The page's table of 5.2 cases is drawn from the fixed cases the checks hold a reader's loop to."""
    from synclab import list_caches as ch5

    names = {case[0] for case in ch5.FIXED_SCHEDULES}
    assert set(ch5.WORKED_CASES) <= names
    table = ch5.worked_cases_markdown().splitlines()
    assert len(table) == 2 + len(ch5.WORKED_CASES)
    assert table[2] == "| an item inside the window | [0, 20) | `img-a` 10–17, 8 embeds | 100 | `([0], 20, 92)` |"
    page = (Path(__file__).resolve().parent.parent / "book" / "05_list_based_caches.md").read_text()
    assert ch5.worked_cases_markdown() in page and "ch5.worked_case_figure()" in page  # the table, as the code draws it
    figure = ch5.worked_case_figure()  # the drawn case returns what its row says: ([0], 20, 4)
    assert "encode [0], budget left 4" in str(figure.to_dict()["layout"]["annotations"])


@pytest.mark.parametrize("check, right, wrong", [(ch5.check_placeholder_range, ListCachedRange, ShortcutWhenCounted),
                                                  (ch5.check_encoder_scheduler, EncoderScheduler,
                                                   SchedulesNothingWhenCounted)],
                         ids=lambda x: getattr(x, "__name__", ""))
def test_a_passed_check_witnesses_what_a_right_answer_does_whatever_else_is_wrong(check, right, wrong):
    """The grader verifies each passed check of 5.1 and 5.2 but the timed one by its witness against a right
    answer's on the same seed: a shortcut taken only while counted must not change another check's witness (the
    wrong versions' witnesses are checked where each is shown to fail)."""
    mine = right_witnesses(check, right)
    assert all(w for key, w in mine.items() if key != "5.1/faster-questions")  # every check but the timed one
    report = check(wrong, seed=0)
    assert_passes_witness_as(report, mine)


# ----------------------------------------------------------------------------- the GPU's busy share, as stored


GPUS = {"H100": "nvidia-h100-80gb-hbm3", "H200": "nvidia-h200"}
TENSOR, LIST = "tensor cache (before #40143)", "list cache (5.1)"


def _stored_loops(slug: str, repeat: bool = False) -> dict:
    import json

    root = Path(__file__).resolve().parent.parent / "data" / "reference" / slug
    data = json.loads(((root / "repeat") if repeat else root).joinpath("ch5.json").read_text())
    assert data["provenance"]["is_gpu"]
    loops = data["results"]["gpu_loops"]
    return {variant: dict(zip(loops["grid"], runs)) for variant, runs in loops["loops"].items()}


def test_the_pages_gpu_busy_shares_are_the_stored_runs():
    """Every number and comparison the page states of the measured busy share is the stored runs', at the PR's 128x32."""
    page = " ".join((Path(__file__).resolve().parent.parent / "book" / "05_list_based_caches.md").read_text().split())
    loops = {name: _stored_loops(slug) for name, slug in GPUS.items()}
    share = {name: {v: loops[name][v]["128x32"]["busy_fraction"] for v in (TENSOR, LIST)} for name in GPUS}
    said = (f"the device was busy {share['H200'][TENSOR]:.1%} of the time with the tensor cache and "
            f"{share['H200'][LIST]:.1%} with the list cache on the H200, {share['H100'][TENSOR]:.1%} and "
            f"{share['H100'][LIST]:.1%} on the H100: more than three times busier, and still idle most of each step, "
            f"waiting for the host.")
    assert said in page, said
    runs = [*loops.values(), _stored_loops(GPUS["H200"], repeat=True)]
    for run in runs:
        tensor, listed = run[TENSOR]["128x32"], run[LIST]["128x32"]
        assert listed["busy_fraction"] > 3 * tensor["busy_fraction"]  # more than three times busier
        assert listed["busy_fraction"] < 0.5  # still idle most of each step
        for r in (tensor, listed):  # "each step's forward (under 1 ms at 128×32)", and a step longer than it
            assert r["device_ms_per_step"] < 1.0 < r["ms_per_step"]
    assert "each step's forward (under 1 ms at 128×32) is queued" in page
    # the MODEL's caption: "whose forwards also took just under 1 ms a step at 128×32 but whose host spent more per
    # step than the scheduler alone": each loop's step (host-bound: the device idle most of it) is longer than the
    # same GPU's scheduler step at that load, for both caches
    assert all(0.8 < run[c]["128x32"]["device_ms_per_step"] < 1.0 for run in runs for c in (TENSOR, LIST))
    assert ("whose forwards also took just under 1 ms a step at 128×32 but whose host spent more per step than the "
            "scheduler alone") in page
    for name, slug in GPUS.items():
        stored = Path(__file__).resolve().parent.parent / "data" / "reference" / slug / "ch5.json"
        sweep = __import__("json").loads(stored.read_text())["results"]["step_sweep"]
        at = sweep["values"].index("128x32")
        for cache in (TENSOR, LIST):
            scheduler_ms = sweep["timings"][cache][at]["median_us"] / 1000
            assert loops[name][cache]["128x32"]["ms_per_step"] > scheduler_ms, (name, cache)
    # the caption: the tensor cache's forwards measured slower at every load, most at the two smallest
    for run in runs:
        slower = {load: run[TENSOR][load]["device_ms_per_step"] / run[LIST][load]["device_ms_per_step"]
                  for load in run[TENSOR]}
        assert all(s > 1 for s in slower.values())
        assert min(slower["8x4"], slower["32x8"]) > max(slower["64x16"], slower["128x32"])
    # the lab names the same loads, from the package's reading of each stored run (8x4 and 32x8 on both GPUs)
    import json

    from synclab.list_caches import disagreeing_forwards

    for slug in GPUS.values():
        stored = json.loads((Path(__file__).resolve().parent.parent / "data" / "reference" / slug / "ch5.json")
                            .read_text())["results"]["gpu_loops"]
        assert [load for load, _, _ in disagreeing_forwards(stored)] == ["8x4", "32x8"], slug
    assert disagreeing_forwards({}) == []  # a run without the loops: nothing to say
    assert ("Read the tensor cache's bars at the two smallest loads as overstated: its loops ran first at each load, "
            "and their forwards measured slower than the list cache's (hover over a bar)") in page


def test_the_busy_share_is_drawn_from_the_stored_gpu_runs_with_their_provenance(tmp_path):
    import json

    from synclab.provenance import Provenance
    from synclab.reference import REFERENCE_DIR, headline_figures, load

    figures = headline_figures("ch5", "gpu_loops", "The device's busy share in a real loop")
    stored = load("ch5")
    assert len(figures) == len(stored) == 2
    for figure, (slug, data) in zip(figures, stored.items()):
        prov = data["provenance"]
        title = figure["layout"]["title"]["text"]
        assert slug in title and Provenance.from_dict(prov).label in title
        assert all(str(prov[key]) in title for key in ("device", "torch_version", "date"))
        bars = {trace["name"]: list(trace["y"]) for trace in figure["data"] if trace["type"] == "bar"}
        assert bars == {v: [r["busy_fraction"] for r in runs]
                        for v, runs in data["results"]["gpu_loops"]["loops"].items()}
    marks = [t for t in figures[1]["data"] if t["type"] == "scatter"]  # the H200's second run, kept in repeat/
    assert [list(t["y"]) for t in marks] == [[r["busy_fraction"] for r in runs] for runs in
                                            json.loads((REFERENCE_DIR / "nvidia-h200" / "repeat" / "ch5.json")
                                                       .read_text())["results"]["gpu_loops"]["loops"].values()]
    # a CPU run is never drawn as a GPU's
    cpu = json.loads((REFERENCE_DIR / "nvidia-h200" / "ch5.json").read_text())
    cpu["provenance"] = {**cpu["provenance"], "device": "cpu", "is_gpu": False}
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "ch5.json").write_text(json.dumps(cpu))
    assert headline_figures("ch5", "gpu_loops", "t", root=tmp_path) == []


class AsksLate(EncoderScheduler):
    """A right 5.2 that asks get_num_embeds() only of the items it goes on to schedule (the page's pitfalls: a step the
    checks accept); in a decode step it asks nothing."""

    def _try_schedule_encoder_inputs(self, request, num_computed_tokens, num_new_tokens, encoder_compute_budget):
        if all(f.mm_position.offset + f.mm_position.length <= num_computed_tokens for f in request.mm_features):
            return [], num_new_tokens, encoder_compute_budget  # every item computed: nothing asked
        return super()._try_schedule_encoder_inputs(request, num_computed_tokens, num_new_tokens,
                                                    encoder_compute_budget)


def test_the_profile_runs_a_scheduler_that_asks_its_questions(capsys, monkeypatch):
    """A learner's 5.2 that asked late passed its checks, then profiled both caches alike (1.00x, 0 torch calls): the
    profile runs the lab's scheduler in its place and says why; a 5.2 that asks in vLLM's order is profiled as it is."""
    import synclab.checks

    monkeypatch.setattr(synclab.checks, "unfinished", lambda task: None)  # as if 5.2 had passed
    assert ch5.check_encoder_scheduler(AsksLate, seed=0).passed
    assert ch5.scheduler_to_profile(EncoderScheduler) is EncoderScheduler and capsys.readouterr().out == ""
    assert ch5.scheduler_to_profile(AsksLate) is not AsksLate
    assert "asks get_num_embeds() only of the items it schedules" in capsys.readouterr().out
