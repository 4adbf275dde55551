"""Chapter 5: the checks of the chapter's exercises, each a Check that names the reader's fault.

A room of :mod:`synclab.list_caches` (its docstring tells the chapter).
"""

from __future__ import annotations

import random
from functools import cached_property
from typing import Any, Callable

from synclab.checks import Check, CheckFailed, Clause, CheckReport, expect, expect_equal, run_checks, found_right
from synclab.dispatch import count_torch_calls
from synclab.engine.mm_inputs import MultiModalFeatureSpec, PlaceholderRange, PlaceholderRangeBaseline, make_mask
from synclab.engine.scheduler import Request, Scheduler, SchedulerConfig
from synclab.answer_keys import answer_key, as_written
from synclab.answer_keys.runners import runs_with_the_answer


from synclab.list_caches.workloads import (GivenCountsRange, RangeClass, SchedulerClass, cumsum_of, image_mask,
                                          pattern_of, range_answers, running_counts)


# ----------------------------------------------------------------------------- the references (kept from the reader)


@answer_key("5.1")
class _PlaceholderRangeReference(PlaceholderRange):
    """Plain counting over the mask read once as a list of bools: slow (O(length) per query) and obviously right.

    Its queries make no torch call once the mask is read. It has no ``embeds_cumsum``.
    """

    @cached_property
    def mask(self) -> list[bool]:
        return [True] * self.length if self.is_embed is None else self.is_embed.tolist()

    def get_num_embeds(self) -> int:
        return sum(self.mask)

    def get_embeds_indices_in_range(self, start_idx: int, end_idx: int) -> tuple[int, int]:
        return sum(self.mask[:start_idx]), sum(self.mask[:end_idx])


@answer_key("5.2")
class _SchedulerReference(Scheduler):
    """The scheduler the checks compare against. A class, so that the students' install ships it (the profile runs it
    in place of a reader's 5.2 not written yet); an answer's process holds none of it."""

    def _try_schedule_encoder_inputs(self, request: Request, num_computed_tokens: int, num_new_tokens: int,
                                     encoder_compute_budget: int) -> tuple[list[int], int, int]:
        """The decisions written plainly: embeddings counted position by position, from the mask.

        It asks each item it reaches its ``get_num_embeds()`` first, as vLLM's loop does (at #40143 and since), though
        it decides from the mask: that question is what the profile times.
        """
        if num_new_tokens == 0 or not request.has_encoder_inputs:
            return [], num_new_tokens, encoder_compute_budget
        manager = self.encoder_cache_manager
        window = range(num_computed_tokens, num_computed_tokens + num_new_tokens)
        chosen: list[int] = []
        seen: set[str] = set()
        embeds_chosen = 0
        for i, feature in enumerate(request.mm_features):
            pos = feature.mm_position
            pos.get_num_embeds()  # the question vLLM's loop asks of every item it reaches (the profile times it)
            span = range(pos.offset, pos.offset + pos.length)
            if pos.offset >= window.stop:
                break  # this item and every later one start after the window
            if span.stop <= num_computed_tokens:
                continue  # its tokens are all computed already
            if feature.identifier in seen or manager.check_and_update_cache(request, i):
                continue
            if (self.scheduler_config.disable_chunked_mm_input and num_computed_tokens < pos.offset
                    and window.stop < span.stop):
                num_new_tokens = pos.offset - num_computed_tokens  # stop just before the item
                break
            if not manager.can_allocate(request, i, encoder_compute_budget, embeds_chosen):
                num_new_tokens = max(pos.offset - num_computed_tokens, 0)
                break
            mask = [True] * pos.length if pos.is_embed is None else pos.is_embed.tolist()
            embeds_in_window = sum(mask[p - pos.offset] for p in window if p in span)
            if embeds_in_window == 0:
                continue  # the window holds only this item's non-embedding tokens
            num_embeds = sum(mask)
            embeds_chosen += num_embeds
            encoder_compute_budget -= num_embeds
            seen.add(feature.identifier)
            chosen.append(i)
        return chosen, num_new_tokens, encoder_compute_budget


# ----------------------------------------------------------------------------- Exercise 5.1


# (case, mask pattern or None, length, query, expected): "num" is get_num_embeds(), (s, e) a range query.
FIXED_QUERIES: list[tuple[str, str | None, int, Any, Any]] = [
    ("no mask: every position is an embedding", None, 5, "num", 5),
    ("no mask: the range comes back unchanged", None, 5, (2, 4), (2, 4)),
    ("empty mask (length 0): the review's IndexError", "", 0, "num", 0),
    ("empty mask, empty range", "", 0, (0, 0), (0, 0)),
    ("all True", "TTTTT", 5, "num", 5),
    ("all True, inner range", "TTTTT", 5, (1, 3), (1, 3)),
    ("all False: no embeddings", "FFF", 3, "num", 0),
    ("all False, full range", "FFF", 3, (0, 3), (0, 0)),
    ("mixed mask", "FTFTT", 5, "num", 3),
    ("vLLM's docstring example", "FTFTT", 5, (3, 5), (1, 3)),
    ("a range starting at 0", "FTFTT", 5, (0, 2), (0, 1)),
    ("end_idx == 0: the review's negative index", "FTFTT", 5, (0, 0), (0, 0)),
    # an embedding first: an index clamped to 0 (cumsum[max(end_idx - 1, 0)]) reads 1 where the range holds none
    ("end_idx == 0 with an embedding first", "TFTF", 4, (0, 0), (0, 0)),
    ("start == end inside the mask", "TFTF", 4, (2, 2), (1, 1)),
    ("the full range", "FTFTT", 5, (0, 5), (0, 3)),
    ("a range holding only the leading non-embedding token", "FTTF", 4, (0, 1), (0, 0)),
    ("a range holding only the trailing non-embedding token", "FTTF", 4, (3, 4), (2, 2)),
    ("a range cutting through non-embedding positions", "TFFTFT", 6, (1, 5), (1, 2)),
    ("one position", "T", 1, "num", 1),
]


def _ask(range_cls: RangeClass, pattern: str | None, length: int, query: Any, offset: int = 7) -> Any:
    """One question of one item, asked of the reader's class wherever it lives (:func:`range_answers`)."""
    return range_answers(range_cls, pattern, length, offset, [query])[0]


_FLOAT_HINT = ("a float mask's running sum (is_embed.float().cumsum(0)) gives floats, and .tolist() keeps the dtype: "
               "sum the mask as ints (is_embed.cumsum(0) of the bool mask is int64, or .long() first)")
_BOOL_HINT = ("True and False are bools, not ints: a running sum over the mask's bools (itertools.accumulate) starts "
              "with the first bool itself; sum ints (accumulate(map(int, mask))), or take is_embed.cumsum(0).tolist()")


def _not_ints_hint(kinds: set[str], otherwise: str) -> str:
    """What answering with ``kinds`` instead of Python ints says: NumPy scalars from list(array), bools from a running
    sum, floats from a float mask."""
    if any(kind.startswith(("int", "uint", "float")) and kind not in ("int", "float") for kind in kinds):
        return ("NumPy scalars (int64 ...): list(array) keeps them, each a NumPy object that the scheduler's + and - "
                "handle slowly; array.tolist() gives Python ints")
    return _BOOL_HINT if "bool" in kinds else _FLOAT_HINT if "float" in kinds else otherwise


def _check_fixed(range_cls: RangeClass, rng: random.Random) -> None:
    for case, pattern, length, query, want in FIXED_QUERIES:
        got = _ask(range_cls, pattern, length, query)
        what = "get_num_embeds()" if query == "num" else f"get_embeds_indices_in_range{query}"
        kinds = {type(x).__name__ for x in (got if isinstance(got, tuple) else (got,))}
        expect(kinds == {"int"}, f"{what} must answer with Python ints", expected="int", got=", ".join(sorted(kinds)),
               hint=_not_ints_hint(kinds, "a 0-d tensor makes every later + and - in the scheduler a torch call"),
               case=case)
        edge = query == "num" and not length or isinstance(query, tuple) and 0 in query  # where the guards matter
        expect_equal(got, want, what=what, case=f"{case}: mask {pattern!r}" if pattern is not None else case,
                     hint="guard the two edges: an empty cumsum has no [-1]; index end_idx - 1 only if end_idx > 0"
                     if edge else "get_num_embeds() is the count of True positions, the cumsum's last entry (0 "
                     "for an empty mask), not the mask's length" if query == "num" else "the count of embeddings "
                     "before position i is cumsum[i - 1] (0 at i == 0): the range is (the count before start_idx, "
                     "the count before end_idx)")


def _check_cumsum(range_cls: RangeClass, rng: random.Random) -> None:
    none = cumsum_of(range_cls, None, 4)["value"]
    expect(none is None, "no mask: embeds_cumsum must be None", got=none, case="is_embed=None")
    for pattern, want in (("FTFTT", [0, 1, 1, 2, 3]), ("TTT", [1, 2, 3]), ("", [])):
        read = cumsum_of(range_cls, pattern, len(pattern))
        got = read["value"]
        # a plain Python sequence: a list, as vLLM's (a subclass of it too), or a tuple, read the same way
        expect(isinstance(got, (list, tuple)), "embeds_cumsum must be a Python list", expected="list",
               got=type(got).__name__, hint="tensor.cumsum(dim=0).tolist(): one conversion when the cache is built",
               case=f"mask {pattern!r}")
        kinds = {type(x).__name__ for x in got}
        expect(kinds <= {"int"}, "its items must be Python ints", expected="int", got=", ".join(sorted(kinds)),
               hint=_not_ints_hint(kinds, "list(tensor) gives 0-d tensors; .tolist() gives ints"),
               case=f"mask {pattern!r}")
        expect_equal(list(got), want, what="embeds_cumsum", case=f"mask {pattern!r}")
        expect(read["cached"], "embeds_cumsum must be computed once and cached (the same object)",
               hint="@cached_property, as the baseline's", case=f"mask {pattern!r}")


def _check_random(range_cls: RangeClass, rng: random.Random) -> None:
    for trial in range(200):
        length = rng.choice([0, 1, 2, rng.randint(3, 64)])
        mask = image_mask(rng, length)
        offset = rng.randint(0, 500)
        start = rng.randint(0, length)
        end = rng.choice([start, rng.randint(start, length)])
        pattern = pattern_of(mask)
        case = f"random case {trial}: mask {pattern!r}, length {length}"
        ref = _PlaceholderRangeReference(offset, length, mask)
        num, indices = range_answers(range_cls, pattern, length, offset, ["num", (start, end)])
        expect_equal(num, ref.get_num_embeds(), what="get_num_embeds()", case=case)
        expect_equal(indices, ref.get_embeds_indices_in_range(start, end),
                     what=f"get_embeds_indices_in_range({start}, {end})", case=case)


def query_workload(range_cls: RangeClass, num_items: int = 64, length: int = 256, seed: int = 0
                   ) -> Callable[[], list[Any]]:
    """The scheduler's questions about ``num_items`` images of ``length`` positions, as one callable.

    Each item is asked its number of embeddings and two adjacent ranges (``[a, b)`` and ``[b, c)``), as a chunked
    prefill would. Each call asks new ranges, as each step does: an answer remembered from an earlier call does not
    answer this one (the cache is of the mask, not of the answers). Two workloads of one seed ask the same questions
    in the same order. Ranges start after 0, so the baseline's ``end_idx == 0`` bug does not change the answers.
    """
    import numpy as np

    rng = random.Random(seed)
    masks = [image_mask(rng, length) for _ in range(num_items)]
    items = [range_cls(offset=1000 * i, length=length, is_embed=m) for i, m in enumerate(masks)]
    draw = np.random.default_rng(seed)
    starts: list[list[int]] = []  # [round][item]: a, b and c of each round drawn so far
    cuts: list[list[int]] = []
    ends: list[list[int]] = []

    def draw_rounds(n: int = 256) -> None:  # 256 rounds at a time: a draw per round would cost more than its questions
        a = draw.integers(1, length - 1, size=(n, num_items))  # 1 <= a < b <= c <= length
        b = a + 1 + (draw.random((n, num_items)) * (length - 1 - a)).astype(np.int64)
        c = b + (draw.random((n, num_items)) * (length + 1 - b)).astype(np.int64)
        starts.extend(a.tolist())
        cuts.extend(b.tolist())
        ends.extend(c.tolist())

    asked = [0]

    def ask_all() -> list[Any]:
        k = asked[0]
        asked[0] += 1
        if k == len(starts):
            draw_rounds()
        return [(pr.get_num_embeds(), pr.get_embeds_indices_in_range(a, b), pr.get_embeds_indices_in_range(b, c))
                for pr, a, b, c in zip(items, starts[k], cuts[k], ends[k])]

    return ask_all


# A counted call whose answers differ from the reference: code that took another path because it was counted.
_COUNTED_HINT = ("the same questions the other checks ask, here counted: the fixed cases' and random cases' messages "
                 "say what is wrong with the answer")


@runs_with_the_answer
def counted_questions(range_cls: RangeClass, seed: int, edges: list[tuple[str | None, int, Any]]) -> dict[str, Any]:
    """The scheduler's questions about 16 items (seed ``seed``) and the ``edges`` (pattern, length, question), asked
    once the caches are built, with the torch calls they make counted: the answers and the count (a runner)."""
    ask = query_workload(range_cls, num_items=16, length=64, seed=seed)
    items = [range_cls(offset=7, length=length, is_embed=None if pattern is None else make_mask(pattern))
             for pattern, length, _ in edges]
    ask()  # the first questions may build the cache; the counted ones are new, so only the cache answers them
    for item in items:  # the cache built (the contract's embeds_cumsum), none of the questions asked
        item.embeds_cumsum
        item.get_num_embeds()
    with count_torch_calls() as calls:
        got = ask()
        got_edges = [item.get_num_embeds() if query == "num" else item.get_embeds_indices_in_range(*query)
                     for item, (_, _, query) in zip(items, edges)]
    return {"answers": got, "edges": got_edges, "count": calls.count, "cumsums": calls.by_name["cumsum"],
            "said": str(calls)}


def _check_no_torch_calls(range_cls: RangeClass, rng: random.Random) -> None:
    seed = rng.randrange(1000)
    # the review's edges too (no mask, an empty mask, end_idx == 0): a question is counted where it is hardest
    counted = counted_questions(range_cls, seed, [(pattern, length, query)
                                                  for _, pattern, length, query, _ in FIXED_QUERIES])
    # the answers counted are answers that count: a shortcut taken only while counted fails here
    reference = query_workload(_PlaceholderRangeReference, num_items=16, length=64, seed=seed)
    reference()
    want = reference()
    for item, (g, w) in enumerate(zip(counted["answers"], want)):
        expect_equal(g, w, what=f"the counted call's answers for item {item} (get_num_embeds(), "
                                "get_embeds_indices_in_range(a, b), (b, c))",
                     case=f"the counted call: 16 items of 64 positions (seed {seed})",
                     hint=_COUNTED_HINT)
    for (case, _, _, query, want_edge), g in zip(FIXED_QUERIES, counted["edges"]):
        what = "get_num_embeds()" if query == "num" else f"get_embeds_indices_in_range{query}"
        expect_equal(g, want_edge, what=f"the counted call's {what}", case=f"the counted call: {case}",
                     hint=_COUNTED_HINT)
    expect(counted["count"] == 0, "answering from the cache must not call into torch",
           expected=f"0 torch calls for {3 * len(counted['answers']) + len(FIXED_QUERIES)} questions",
           got=counted["said"], hint=_REBUILT_HINT if counted["cumsums"] else "every t[i] and int(t) goes through "
           "torch's dispatcher; index a Python list instead",
           case=f"16 items, each asked 3 new questions, and the {len(FIXED_QUERIES)} fixed cases, after a first round "
                "of other ranges")


QUERY_RATIO_BOUND = 3.0  # the list must answer at least this many times faster than the tensor cache


def speed_words(ratio: float) -> str:
    """A time ratio (the tensor cache's ÷ yours) as a reader says it: "2.1x faster", or "2.1x slower" under 1."""
    return f"{ratio:.1f}x faster" if ratio >= 1 else f"{1 / ratio:.1f}x slower"


def query_ratio(range_cls: RangeClass, min_run_time: float = 0.3) -> float:
    """Time of the scheduler's questions with the tensor cache / with ``range_cls``, measured in one run (their
    fastest rounds)."""
    from synclab.timing import compare

    # timed as written, not behind a guard; each call asks new ranges, so no answer is remembered from an earlier one
    baseline = query_workload(as_written(PlaceholderRangeBaseline))
    candidate = query_workload(range_cls)
    timings = compare({"tensor cache": baseline, "yours": candidate}, min_run_time=min_run_time,
                      expected={"yours": baseline()}, decides_a_check=True)  # interleaved: both see the same noise
    # each side's fastest round: a busy machine's preemptions only ever add time, so the fastest round is the call's
    # own cost (timeit's advice), where a median of rounds on a loaded machine compresses the ratio towards 1
    return timings["tensor cache"].low_us / timings["yours"].low_us


@runs_with_the_answer
def timed_questions(range_cls: RangeClass) -> dict[str, Any]:
    """The first questions the timed run asks, answered by ``range_cls``, and, when they are ints and right, the
    time ratio of :func:`query_ratio` (else None): measured where the answer runs (a runner)."""
    first = query_workload(range_cls)()
    right = first == query_workload(as_written(PlaceholderRangeBaseline))() and all(
        type(x) is int for triple in first for part in triple for x in (part if isinstance(part, tuple) else (part,)))
    return {"first": first, "ratio": query_ratio(range_cls) if right else None}


def _check_ratio(range_cls: RangeClass, rng: random.Random) -> None:
    # the first questions the timed run asks (its first call is compared again, with the tensor cache's answers)
    timed = timed_questions(range_cls)
    got, want = timed["first"], query_workload(_PlaceholderRangeReference)()
    if got != want:  # timed answers are compared with the tensor cache's: a wrong one is not timed
        raise CheckFailed("not timed: the answers differ from the tensor cache's", expected=want, got=got,
                          hint="see the fixed cases' and random masks' checks")  # the report shortens both
    answers = [x for triple in got for part in triple for x in (part if isinstance(part, tuple) else (part,))]
    odd = sorted({type(x).__name__ for x in answers if type(x) is not int})
    if odd:  # timed answers are compared with the tensor cache's: only ints compare as the scheduler uses them
        raise CheckFailed("not timed: the answers must be Python ints first", expected="int", got=", ".join(odd),
                          hint=_BOOL_HINT if "bool" in odd else "see the fixed cases' check")
    ratio = timed["ratio"]
    expect(ratio >= QUERY_RATIO_BOUND, "the questions are not several times faster than with the tensor cache",
           expected=f">= {QUERY_RATIO_BOUND:.0f}x faster", got=speed_words(ratio),
           hint="a torch call costs on the order of a microsecond, a list index tens of nanoseconds",
           case="64 images x 3 questions, both timed in this run")


_REBUILT_HINT = ("the list is built again for each question (cumsum, tolist on every access): cache it, "
                 "@cached_property, so that it is built once and every question indexes it")
_EMPTY_CUMSUM_HINT = ("an empty mask's running count is the empty list, with no last element to read: "
                      "get_num_embeds() is 0 there, and a range ending at 0 needs no lookup (the review's two guards)")

CHECKS_5_1 = [
    Check("5.1", "fixed cases: no mask, empty mask, all True/False, end_idx == 0, start == end, full and cut ranges",
          _check_fixed, crash_hints=(("list index out of range", _EMPTY_CUMSUM_HINT),), random=False, id="fixed-cases"),
    Check("5.1", "embeds_cumsum is a cached list of int (None without a mask)", _check_cumsum, random=False,
          id="cached-list"),
    Check("5.1", "same as a plain reference on 200 random masks and ranges", _check_random, id="random-masks"),
    Check("5.1", "no torch call per question once the cache is built (counted)", _check_no_torch_calls,
          id="no-torch-calls"),
    Check("5.1", f"questions >= {QUERY_RATIO_BOUND:.0f}x faster than the tensor cache (timed in one run)",
          _check_ratio, timeout_s=60.0, random=False, id="faster-questions"),
]


def check_placeholder_range(range_cls: RangeClass, seed: int | None = None) -> CheckReport:
    """Exercise 5.1: run every check against the reader's ``PlaceholderRange`` subclass."""
    return run_checks("Exercise 5.1 — PlaceholderRange with a list cache", CHECKS_5_1, range_cls, seed=seed)


# ----------------------------------------------------------------------------- Exercise 5.2: building schedulers


# A feature as plain values: (identifier, offset, length, mask pattern or None).
FeatureSpec = tuple[str, int, int, "str | None"]


def make_request(range_cls: RangeClass, features: list[FeatureSpec], num_prompt_tokens: int, req_id: str = "req-0",
                 num_computed_tokens: int = 0, max_tokens: int = 1) -> Request:
    mm = [MultiModalFeatureSpec(ident, range_cls(offset, length, None if p is None else make_mask(p)))
          for ident, offset, length, p in features]
    return Request(req_id, num_prompt_tokens, mm, max_tokens=max_tokens, num_computed_tokens=num_computed_tokens)


IMG = ("img-a", 10, 8, None)  # 8 placeholder positions at 10..17, all embeddings
FRAMED = ("img-f", 10, 8, "FTTTTTTF")  # start and end tokens around 6 embeddings


# (case, features, computed, new, budget, config overrides, pre-cached input ids, expected, hint)
FIXED_SCHEDULES: list[tuple[str, list[FeatureSpec], int, int, int, dict, list[int], tuple, str]] = [
    ("no multimodal items", [], 0, 20, 100, {}, [], ([], 20, 100), "return at once"),
    ("no new tokens", [IMG], 0, 0, 100, {}, [], ([], 0, 100), "return at once when num_new_tokens == 0"),
    ("the window ends where the item starts", [IMG], 0, 10, 100, {}, [], ([], 10, 100),
     "an item starting at or after the window's end is not needed yet: stop the loop"),
    ("an item inside the window", [IMG], 0, 20, 100, {}, [], ([0], 20, 92),
     "schedule it and take its get_num_embeds() from the budget"),
    ("the window starts inside the item, output not cached", [IMG], 12, 4, 100, {}, [], ([0], 4, 92),
     "the whole item is encoded, whatever part of it the window holds"),
    ("the item is computed already (decoding)", [IMG], 30, 1, 100, {}, [], ([], 1, 100),
     "skip an item whose positions all lie before num_computed_tokens"),
    ("the item's output is in the encoder cache", [IMG], 12, 4, 100, {}, [0], ([], 4, 100),
     "ask encoder_cache_manager.check_and_update_cache(request, i) and skip a hit"),
    ("encoder budget too small: stop before the item", [IMG], 0, 20, 5, {}, [], ([], 10, 5),
     "when can_allocate says no, schedule only the tokens before the item"),
    ("encoder budget too small, window inside the item (prefix cache)", [IMG], 12, 4, 5, {}, [], ([], 0, 5),
     "num_computed_tokens is past the item's start: nothing can be scheduled"),
    ("encoder cache too small", [IMG], 0, 20, 100, {"encoder_cache_size": 4}, [], ([], 10, 100),
     "can_allocate also checks the cache's space"),
    ("the window holds only the item's leading start token", [FRAMED], 0, 11, 100, {}, [], ([], 11, 100),
     "no embedding row in the window (get_embeds_indices_in_range gives an empty range): not yet"),
    ("the window reaches the item's first embedding", [FRAMED], 0, 12, 100, {}, [], ([0], 12, 94),
     "budget is taken in embeddings (6), not placeholder tokens (8)"),
    ("budget too small, the window holding only the item's leading tokens", [("img-l", 10, 8, "FFTTTTTT")], 0, 12, 3,
     {}, [], ([], 10, 3), "ask can_allocate (rule f) before skipping an item with no embedding row in the window "
     "(rule g): an item that does not fit stops the window before it, whatever part of it the window holds"),
    ("an item with no embeddings", [("img-z", 10, 4, "FFFF")], 0, 20, 100, {}, [], ([], 20, 100),
     "an item that maps to zero embeddings is never encoded"),
    ("an item of length 0", [("img-e", 5, 0, "")], 0, 10, 100, {}, [], ([], 10, 100),
     "an empty item has no embedding row"),
    ("the same image twice in one request", [IMG, ("img-a", 20, 8, None)], 0, 40, 100, {}, [], ([0], 40, 92),
     "encode an identifier once per step: keep a set of the ones scheduled"),
    ("two items, budget for the first only", [IMG, ("img-b", 20, 8, None)], 0, 40, 12, {}, [], ([0], 20, 4),
     "can_allocate gets the embeddings already scheduled this step (num_embeds_to_schedule)"),
    ("two items, cache space for the first only", [IMG, ("img-b", 20, 8, None)], 0, 40, 100,
     {"encoder_cache_size": 12}, [], ([0], 20, 92), "pass the embeddings scheduled so far to can_allocate"),
    ("disable_chunked_mm_input: the window would split the item", [IMG], 0, 14, 100,
     {"disable_chunked_mm_input": True}, [], ([], 10, 100), "roll back to just before the item"),
    ("disable_chunked_mm_input: the window would split an item whose output is cached", [IMG], 0, 14, 100,
     {"disable_chunked_mm_input": True}, [0], ([], 14, 100),
     "a cached item is not encoded, so no window splits it: ask check_and_update_cache (rule d) before rule e "
     "rolls the window back"),
    ("disable_chunked_mm_input: the window covers the item", [IMG], 0, 18, 100,
     {"disable_chunked_mm_input": True}, [], ([0], 18, 92),
     "a whole item is fine: a window that ends exactly at the item's end does not end inside it (strict <)"),
    ("disable_chunked_mm_input: the window starts at the item's offset", [IMG], 10, 4, 100,
     {"disable_chunked_mm_input": True}, [], ([0], 4, 92),
     "rule e rolls back only a window that starts before the item (num_computed_tokens < offset, strict <): a "
     "window that starts at the item's offset is not rolled back, and the item is scheduled"),
]


# The cases chapter 5's page works through, by name (the checks' own fixed cases: the page cannot drift from them).
WORKED_CASES = ("an item inside the window", "the window ends where the item starts",
                "the item is computed already (decoding)", "the item's output is in the encoder cache",
                "encoder budget too small: stop before the item",
                "encoder budget too small, window inside the item (prefix cache)",
                "the window reaches the item's first embedding", "two items, budget for the first only",
                "disable_chunked_mm_input: the window would split the item")


def worked_cases_markdown(names: tuple[str, ...] = WORKED_CASES) -> str:
    """Exercise 5.2's worked cases as a markdown table: the window, the items, the budget, and what comes back."""
    def item(spec: FeatureSpec) -> str:
        ident, offset, length, pattern = spec
        embeds = length if pattern is None else pattern.count("T")
        return f"`{ident}` {offset}–{offset + length - 1}, {embeds} embeds"

    rows = ["| the case | window | items | budget | returns |", "|---|---|---|---|---|"]
    by_name = {case[0]: case for case in FIXED_SCHEDULES}
    for name in names:
        _, features, computed, new, budget, overrides, cached, (inputs, tokens, left), _ = by_name[name]
        where = "; ".join(item(f) for f in features) + (" (its output cached)" if cached else "")
        setting = "".join(f", {k.replace('_', ' ')} {v}" for k, v in overrides.items())
        rows.append(f"| {name} | [{computed}, {computed + new}) | {where} | {budget}{setting} | "
                    f"`({inputs}, {tokens}, {left})` |")
    return "\n".join(rows)


def worked_case_figure(name: str = "two items, budget for the first only") -> Any:
    """One of 5.2's fixed cases drawn: the window offered, the items, and what the loop returns."""
    from synclab import figures

    _, features, computed, new, budget, _, _, (inputs, tokens, left), _ = {c[0]: c for c in FIXED_SCHEDULES}[name]
    items = [(ident, offset, length, length if p is None else p.count("T")) for ident, offset, length, p in features]
    return figures.encoder_window_figure(computed, new, items, budget, inputs, tokens, left, f"Exercise 5.2: {name}")


def _scheduler_for(scheduler_cls: SchedulerClass, overrides: dict) -> Scheduler:
    return scheduler_cls(SchedulerConfig(**overrides))


def _pre_cache(scheduler: Scheduler, request: Request, input_ids: list[int]) -> None:
    """Put items' outputs in the encoder cache, as if encoded for an earlier request now gone (freeable)."""
    manager = scheduler.encoder_cache_manager
    earlier = Request("earlier", request.num_prompt_tokens, request.mm_features)
    for i in input_ids:
        fits = earlier.get_num_encoder_embeds(i) <= manager.num_free_slots
        if fits and request.mm_features[i].identifier not in manager.cached:
            manager.allocate(earlier, i)
            manager.free_encoder_input(earlier, i)


# The contract's clauses on the encoder cache itself: a call that schedules nothing for an item leaves its entry as it
# was (neither claimed back from the freeable ones nor evicted for it). (case, features, computed, new, budget,
# config overrides, pre-cached input ids, another image's (identifier, embeddings) cached and freeable, expected, hint)
FIXED_CACHE_STATES: list[tuple[str, list[FeatureSpec], int, int, int, dict, list[int], tuple | None, tuple, str]] = [
    ("no new tokens, the item's output cached (freeable)", [IMG], 12, 0, 100, {}, [0], None, ([], 0, 100),
     "return before the loop when num_new_tokens == 0: check_and_update_cache would claim the freeable entry"),
    ("the window ends where the item starts, its output cached (freeable)", [IMG], 0, 10, 100, {}, [0], None,
     ([], 10, 100), "an item starting at or after the window's end (start_pos >= num_computed_tokens + "
                    "num_new_tokens) is not needed yet: stop before check_and_update_cache claims its entry"),
    ("the item ends where the window starts, its output cached (freeable)", [IMG], 18, 1, 100, {}, [0], None,
     ([], 1, 100), "an item whose positions all lie before num_computed_tokens (start_pos + length <= "
                   "num_computed_tokens, equal included) is computed already: skip it before check_and_update_cache "
                   "claims its entry"),
    ("disable_chunked_mm_input: the window would split the item, the cache full of another freeable image", [IMG], 0,
     14, 100, {"disable_chunked_mm_input": True, "encoder_cache_size": 8}, [], ("img-old", 8), ([], 10, 100),
     "roll back before can_allocate: it evicts the other image to make room for an item you then do not schedule"),
]


def _pre_cache_other(scheduler: Scheduler, identifier: str, num_embeds: int) -> None:
    """Another request's image, encoded earlier and now freeable: what can_allocate may evict."""
    other = Request("earlier-other", num_embeds, [MultiModalFeatureSpec(
        identifier, GivenCountsRange(0, num_embeds, None, running_counts(None, num_embeds)))])
    scheduler.encoder_cache_manager.allocate(other, 0)
    scheduler.encoder_cache_manager.free_encoder_input(other, 0)


def _cache_state(scheduler: Scheduler) -> dict:
    """The encoder cache as the contract speaks of it: who refers to what, what is freeable (in order), what was
    evicted, and the free space."""
    m = scheduler.encoder_cache_manager
    return {"references": {k: sorted(v) for k, v in m.cached.items()}, "freeable": list(m.freeable),
            "evicted": list(m.freed), "free slots": m.num_free_slots, "freeable slots": m.num_freeable_slots}


def _given(features: list[FeatureSpec]) -> list[tuple]:
    """``features`` with each item's running counts (:func:`running_counts`): the 5.2 runners' items, as data."""
    return [(ident, offset, length, pattern, running_counts(pattern, length))
            for ident, offset, length, pattern in features]


def _given_request(features: list[tuple], num_prompt_tokens: int, req_id: str = "req-0",
                   num_computed_tokens: int = 0, max_tokens: int = 1) -> Request:
    """A request of :func:`_given` items, each a :class:`GivenCountsRange`."""
    mm = [MultiModalFeatureSpec(ident, GivenCountsRange(offset, length, None if p is None else make_mask(p), counts))
          for ident, offset, length, p, counts in features]
    return Request(req_id, num_prompt_tokens, mm, max_tokens=max_tokens, num_computed_tokens=num_computed_tokens)


@runs_with_the_answer
def scheduled_call(scheduler_cls: SchedulerClass, call: dict[str, Any]) -> dict[str, Any]:
    """One call of ``_try_schedule_encoder_inputs`` on a fresh scheduler of ``scheduler_cls``: the case as data
    (:func:`_call`), what it returned and the encoder cache after it as data (a runner: Exercise 5.2's checks reach the
    reader's scheduler by it and :func:`mix_steps`)."""
    scheduler = _scheduler_for(scheduler_cls, call["config"])
    request = _given_request(call["features"], call["num_prompt"], num_computed_tokens=call["computed"])
    _pre_cache(scheduler, request, call["cached"])
    if call["other"] is not None:
        _pre_cache_other(scheduler, *call["other"])
    got = scheduler._try_schedule_encoder_inputs(request, call["computed"], call["new"], call["budget"])
    return {"result": tuple(got), "cache": _cache_state(scheduler), "manager": _manager_state(scheduler)}


def _call(features: list[FeatureSpec], num_prompt: int, computed: int, new: int, budget: int, config: dict,
          cached: list[int], other: tuple | None = None) -> dict[str, Any]:
    """A case of :func:`scheduled_call`: the request's items, the window, the budget, the scheduler's config, the
    items whose outputs are cached already and another image cached and freeable (or None)."""
    return {"features": _given(features), "num_prompt": num_prompt, "computed": computed, "new": new,
            "budget": budget, "config": config, "cached": cached, "other": other}


def _check_sched_fixed(scheduler_cls: SchedulerClass, rng: random.Random) -> None:
    cases = [(*case[:7], None, *case[7:]) for case in FIXED_SCHEDULES] + FIXED_CACHE_STATES
    for case, features, computed, new, budget, overrides, cached, other, want, hint in cases:
        where = f"{case}: computed {computed}, new {new}, budget {budget}"
        call = _call(features, 40, computed, new, budget, overrides, cached, other)
        got = scheduled_call(scheduler_cls, call)
        expect_equal(got["result"], want, what="(inputs to schedule, num_new_tokens, encoder budget)", hint=hint,
                     case=where)
        expect_equal(got["cache"], scheduled_call(_SchedulerReference, call)["cache"],
                     what="the encoder cache after the call", hint=hint, case=where)


def random_features(rng: random.Random, num_prompt_tokens: int, shared: list[str]) -> list[FeatureSpec]:
    """Up to 5 items at increasing offsets inside the prompt; identifiers sometimes shared between requests."""
    features, position = [], rng.randint(0, 6)
    for _ in range(rng.randint(0, 5)):
        length = rng.choice([0, 1, rng.randint(2, 24)])
        if position + length > num_prompt_tokens:
            break
        mask = image_mask(rng, length)
        pattern = None if mask is None else "".join("T" if b else "F" for b in mask.tolist())
        ident = rng.choice(shared) if shared and rng.random() < 0.3 else f"img-{rng.randrange(10**6)}"
        features.append((ident, position, length, pattern))
        position += length + rng.randint(0, 8)
    return features


def _manager_state(scheduler: Scheduler) -> tuple:
    m = scheduler.encoder_cache_manager
    return ({k: sorted(v) for k, v in m.cached.items()}, m.num_free_slots, m.num_freeable_slots)


def _check_sched_random(scheduler_cls: SchedulerClass, rng: random.Random) -> None:
    for trial in range(150):
        seed = rng.randrange(10**9)
        r = random.Random(seed)
        num_prompt = r.randint(1, 120)
        features = random_features(r, num_prompt, shared=["img-s1", "img-s2"])
        config = {"encoder_cache_size": r.randint(0, 80), "disable_chunked_mm_input": r.random() < 0.3}
        computed = r.randint(0, num_prompt)
        new = r.randint(0, num_prompt - computed)
        cached = [i for i in range(len(features)) if r.random() < 0.25]
        budget = r.randint(0, 60)
        # named before the call: a call that hangs is reported with its own case, not the one before
        case = f"random call {trial} (seed {seed}): computed {computed}, new {new}, budget {budget}, {features}"
        call = _call(features, num_prompt, computed, new, budget, config, cached)
        got, want = scheduled_call(scheduler_cls, call), scheduled_call(_SchedulerReference, call)
        expect(got["result"] == want["result"], "wrong (inputs to schedule, num_new_tokens, encoder budget)",
               case=case, expected=_said_result(want["result"]), got=_said_result(got["result"]))
        hint = ("with no new tokens, return before asking the cache anything: check_and_update_cache records a hit "
                "for the request, which changed the cache here" if new == 0 else
                "check hits with check_and_update_cache (it records the request), in vLLM's order, and only for "
                "items the window reaches")
        expect(got["manager"] == want["manager"], "the encoder cache is not left as the reference leaves it",
               case=case, expected=_said_cache(want["manager"]), got=_said_cache(got["manager"]), hint=hint)
        found_right((got["result"], got["manager"]))  # compared exactly above, and found right


def _said_result(result: tuple) -> str:
    """A result of ``_try_schedule_encoder_inputs``, each part named."""
    if not (isinstance(result, tuple) and len(result) == 3):
        return repr(result)
    inputs, new, budget = result
    return f"inputs {inputs}, num_new_tokens {new}, budget left {budget}"


def _said_cache(state: tuple) -> str:
    """An encoder cache's state (:func:`_manager_state`), each part named."""
    cached, free, freeable = state
    return f"entries {cached} (item: requests using it), {free} free slots, {freeable} freeable"


def random_mix(rng: random.Random) -> tuple[dict, list[tuple[int, list[FeatureSpec], int]]]:
    """A scheduler config and requests (prompt tokens, items, max tokens) as plain values."""
    max_item = 24
    config = {"max_num_batched_tokens": rng.randint(8, 160),
              "max_num_encoder_input_tokens": rng.randint(max_item, 96),
              "encoder_cache_size": rng.randint(max_item, 160),
              "disable_chunked_mm_input": rng.random() < 0.3}
    shared = [f"img-s{k}" for k in range(3)]
    requests = []
    for _ in range(rng.randint(1, 10)):
        num_prompt = rng.randint(1, 120)
        requests.append((num_prompt, random_features(rng, num_prompt, shared), rng.randint(1, 4)))
    return config, requests


def build_mix(scheduler_cls: SchedulerClass, mix: tuple[dict, list]) -> Scheduler:
    """A scheduler of ``scheduler_cls`` holding the requests of ``mix`` (:func:`random_mix`, each item given its
    running counts: :func:`given_mix`)."""
    config, requests = mix
    scheduler = scheduler_cls(SchedulerConfig(**config))
    for i, (num_prompt, features, max_tokens) in enumerate(requests):
        scheduler.add_request(_given_request(features, num_prompt, f"req-{i}", max_tokens=max_tokens))
    return scheduler


def given_mix(mix: tuple[dict, list]) -> tuple[dict, list]:
    """A :func:`random_mix` with each item's running counts (:func:`_given`): what :func:`build_mix` builds."""
    config, requests = mix
    return config, [(num_prompt, _given(features), max_tokens) for num_prompt, features, max_tokens in requests]


def run_mix(scheduler: Scheduler, max_steps: int = 60) -> list[tuple]:
    """Step the scheduler until every request finishes (or ``max_steps``); each step's decisions."""
    steps = []
    for _ in range(max_steps):
        if not scheduler.running:
            break
        output = scheduler.schedule()
        steps.append(output.as_tuple())
        scheduler.update_from_output(output)
    return steps


@runs_with_the_answer
def mix_steps(scheduler_cls: SchedulerClass, mix: tuple[dict, list], max_steps: int = 60, counted: bool = False
              ) -> dict[str, Any]:
    """Each step's decisions of a scheduler of ``scheduler_cls`` running ``mix`` (:func:`given_mix`), and, when
    ``counted``, the torch calls the steps made (a runner, as :func:`scheduled_call`)."""
    scheduler = build_mix(scheduler_cls, mix)
    if not counted:
        return {"steps": run_mix(scheduler, max_steps)}
    with count_torch_calls() as calls:
        steps = run_mix(scheduler, max_steps)
    return {"steps": steps, "count": calls.count, "said": str(calls)}


def _check_sched_mixes(scheduler_cls: SchedulerClass, rng: random.Random) -> None:
    for trial in range(20):
        mix = given_mix(random_mix(rng))
        case = f"random mix {trial}: {len(mix[1])} requests, config {mix[0]}"
        got = mix_steps(scheduler_cls, mix)["steps"]
        want = mix_steps(_SchedulerReference, mix)["steps"]
        for step, (g, w) in enumerate(zip(got, want)):
            expect_equal(g, w, what=f"step {step}: (tokens, encoder inputs, encoder budget left, token budget left)",
                         case=case)
        expect_equal(len(got), len(want), what="number of steps to finish", case=f"random mix {trial}")


def _check_sched_no_torch(scheduler_cls: SchedulerClass, rng: random.Random) -> None:
    mix = random_mix(rng)
    mix[1].append((64, [("img-t", 4, 16, "FTTTTTTTTTTTTTTF")], 2))  # at least one item with a mask
    mix = given_mix(mix)  # its items answer from their counts: every torch call counted is the scheduler's own
    counted = mix_steps(scheduler_cls, mix, 5, True)
    got = counted["steps"]
    # the steps counted are steps that count: a shortcut taken only while counted fails here
    want = mix_steps(_SchedulerReference, mix, 5)["steps"]
    case = f"the counted run: {len(mix[1])} requests, config {mix[0]}"
    for step, (g, w) in enumerate(zip(got, want)):
        expect_equal(g, w, what=f"step {step} of the counted run: (tokens, encoder inputs, encoder budget left, "
                                "token budget left)", case=case, hint=_COUNTED_HINT)
    expect_equal(len(got), len(want), what="number of steps of the counted run", case=case, hint=_COUNTED_HINT)
    expect(counted["count"] == 0, "the scheduler itself calls into torch", expected="0 torch calls in 5 steps",
           got=counted["said"], hint="ask the item's PlaceholderRange (get_num_embeds, get_embeds_indices_in_range); "
                                     "never read is_embed in the loop", case=f"{len(mix[1])} requests")


CHECKS_5_2 = [
    Check("5.2", "fixed cases: window, cache hits, budget and cache limits, zero-embedding items, duplicates, "
                 "no chunking", _check_sched_fixed, random=False, id="fixed-cases"),
    Check("5.2", "same decisions and cache state as a plain reference on 150 random calls", _check_sched_random,
          id="random-calls"),
    Check("5.2", "same steps as the reference scheduler on 20 random request mixes", _check_sched_mixes,
          id="random-mixes"),
    Check("5.2", "no torch call of its own in a scheduler step (counted)", _check_sched_no_torch, id="no-torch-calls"),
]


def check_encoder_scheduler(scheduler_cls: SchedulerClass, seed: int | None = None) -> CheckReport:
    """Exercise 5.2: run every check against the reader's ``Scheduler`` subclass."""
    return run_checks("Exercise 5.2 — _try_schedule_encoder_inputs", CHECKS_5_2, scheduler_cls, seed=seed)


# ----------------------------------------------------------------------------- the clauses of 5.1 and 5.2
# Each clause of the contracts (the page's "The lab", the lab's exercise): its check, fixed case, honest mistake
# (tests/honest/wrong/<wrong>.py) and the words its failure holds; tests/test_clauses.py holds them to it.

CLAUSES = [
    Clause("5.1-empty-mask", "0 for an empty mask", "fixed-cases", "empty mask (length 0)", "5.1-unguarded-edges",
           "the empty list, with no last element to read", also=("random-masks", "no-torch-calls"),
           lab="An empty mask (length 0) has no last element: return 0"),
    Clause("5.1-end-guard", "for 0 <= start_idx <= end_idx <= length", "fixed-cases", "empty mask, empty range",
           "5.1-end-unguarded", "a range ending at 0 needs no lookup", also=("random-masks", "no-torch-calls"),
           lab="Guard both ends"),
    Clause("5.1-no-torch", "no question calls into torch once the cache is built", "no-torch-calls",
           "16 items, each asked 3 new questions", "5.1-tensor-cache-kept", "index a Python list instead",
           also=("faster-questions",)),
    Clause("5.2-cache-first", "check_and_update_cache(request, i): a hit", "fixed-cases",
           "the cache full of another freeable image", "5.2-fit-before-cache", "roll back before can_allocate",
           also=("random-calls", "no-torch-calls"), lab="self.encoder_cache_manager.check_and_update_cache(request, i)"),
    Clause("5.2-rule-a", "it starts at or after window_end", "fixed-cases", "the window ends where the item starts",
           "5.2-rule-a-past-the-end", "is not needed yet", also=("random-calls",),
           lab="the item starts at or after the window's end"),
    Clause("5.2-rule-b", "all of it lies before num_computed_tokens", "fixed-cases",
           "the item ends where the window starts", "5.2-rule-b-ends-at-start", "is computed already",
           also=("random-calls",), lab="all of the item lies before num_computed_tokens"),
    Clause("5.2-rule-c", "its identifier was already scheduled in this call", "fixed-cases",
           "the same image twice in one request", "5.2-no-dedupe", "encode an identifier once per step",
           also=("random-calls", "random-mixes", "no-torch-calls")),
    Clause("5.2-rule-f", "says it does not fit (budget, cache space) | stop before it", "fixed-cases",
           "encoder budget too small: stop before the item", "5.2-nothing-when-no-fit",
           "schedule only the tokens before the item", also=("random-calls", "random-mixes", "no-torch-calls"),
           lab="the window ends at the item's offset, or is empty when it starts inside the item"),
    Clause("5.2-rule-g", "the window, clamped to the item, holds none of its embedding rows", "fixed-cases",
           "the window holds only the item's leading start token", "5.2-no-embeds-check",
           "no embedding row in the window", also=("random-calls", "random-mixes", "no-torch-calls")),
    Clause("5.2-rule-h", "its full get_num_embeds() is charged", "fixed-cases",
           "the window starts inside the item, output not cached", "5.2-charges-window-part",
           "the whole item is encoded", also=("random-calls", "random-mixes")),
    Clause("5.2-rule-e", "the window starts before it and would end inside it", "fixed-cases",
           "the window starts at the item's offset", "5.2-rule-e-at-offset", "strict <",
           also=("random-calls",), lab="the window starts before the item and would end in"),
    Clause("5.2-first-rule", "the first rule that applies decides", "fixed-cases",
           "the window would split an item whose output is cached", "5.2-rule-e-before-cache-hit", "rule d",
           also=("random-calls", "random-mixes")),
    Clause("5.2-nothing-to-do", "asking no item and not the encoder cache", "fixed-cases",
           "no new tokens, the item's output cached", "5.2-no-early-return",
           "check_and_update_cache would claim the freeable entry", also=("random-calls",),
           lab="without asking any item or the encoder cache anything"),
    Clause("5.1-built-once", "built once (the same object on every access)", "cached-list", "mask 'FTFTT'",
           "5.1-cumsum-as-property", "@cached_property", also=("no-torch-calls", "faster-questions"),
           lab="a cached_property holding cumsum(is_embed)"),
]
