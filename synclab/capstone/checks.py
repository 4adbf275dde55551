"""Chapter 6's checks: the sync hunt (6.1), the ablation's counts (6.2) and their reading (6.3).

Taught in chapter 6 (the capstone). Every check counts; none times anything. The runner the hunt starts
from is :class:`synclab.capstone.planted.PlantedRunner`.
"""

from __future__ import annotations

import random
import re
import statistics
from dataclasses import replace
from functools import lru_cache
from typing import Any, Callable

from synclab.capstone.workloads import (RunnerClass, Workload, ablation_workload, comparable, first_difference,
                                        last_loaded_fixes, min_tokens_mix,
                                        book_fixes, host_work_in_decode_step, random_mix, run_engine,
                                        step_syncs)
from synclab.checks import Check, CheckFailed, CheckReport, Clause, expect, found_right, run_checks
from synclab.capstone.planted import PlantedRunner
from synclab.engine.engine_core import PATTERNS, Components, EngineConfig, EngineRunner
from synclab.answer_keys import answer_in, answer_key, refuse
from synclab.answer_keys.runners import runs_with_the_answer
from synclab.answer_keys.stored import AnswerNotStored
from synclab.syncs import SyncEvent, SyncKind


FLAT_BOUND = 1.5  # host work may grow by at most this factor while outputs grow 16x or images 8x


# ----------------------------------------------------------------------------- 6.1 the sync hunt

HUNT_CASES = 3


FIXED_MIX = "the fixed mix: min_tokens at its boundary, a fractional logit bias, an embedding request first"
FIXED_MIX_NO_BIAS = "the fixed mix again, its biased request left out: min_tokens with no logit bias in the batch"
FIXED_MIX_OTHER_STOPS = ("the fixed mix's request ids again, each request with other stop tokens, the biased one with "
                         "another biased token")


# min_tokens_mix with its biased request, then without it, then its ids with other stop tokens: the clauses random
# draws reach only by chance
FIXED_MIXES = ({"fixed": "min_tokens"}, {"fixed": "min_tokens", "with_bias": False},
               {"fixed": "min_tokens", "other_stops": True})


def _hunt_mixes(rng: random.Random) -> list[dict]:
    """The fixed mixes first (:data:`FIXED_MIXES`, so that their messages name the fault on every seed), then random
    mixes. Each as data (:func:`hunt_mix` builds it), so that the process holding the runner builds the same mix."""
    return [*FIXED_MIXES] + [{"seed": rng.getrandbits(32), "num_requests": rng.randint(3, 7)} for _ in range(HUNT_CASES)]


def _mix_name(mix: dict, number: int) -> str:
    """How a report names a hunt mix: the fixed one, with or without its bias, or the ``number``-th random one."""
    if mix.get("other_stops"):
        return FIXED_MIX_OTHER_STOPS
    if mix.get("fixed"):
        return FIXED_MIX if mix.get("with_bias", True) else FIXED_MIX_NO_BIAS
    return f"random mix {number} of {HUNT_CASES}"


def hunt_mix(mix: dict) -> Workload:
    """The hunt's mix that ``mix`` names: a random one by its seed and size, or the stop rule's fixed boundary."""
    if mix.get("fixed") == "min_tokens":
        return min_tokens_mix(with_bias=mix.get("with_bias", True), other_stops=mix.get("other_stops", False))
    return random_mix(random.Random(mix["seed"]), num_requests=mix["num_requests"], hunt_features=True)


_BUILT: list[tuple[Callable[[], RunnerClass], RunnerClass]] = []  # the last few factories and the class each made


def _built(factory: Callable[[], RunnerClass]) -> RunnerClass:
    """``factory()`` once per factory: one class serves every mix, as a runner class serves every engine made with
    it (state kept on the class, not on the runner, would carry one run's requests into the next). Looked up by
    identity: a factory need not be hashable."""
    for made_by, runner_cls in _BUILT:
        if made_by is factory:
            return runner_cls
    _BUILT[:] = [*_BUILT[-7:], (factory, factory())]
    return _BUILT[-1][1]


def _runner(factory: Callable[[], RunnerClass], fresh: bool = False) -> RunnerClass:
    """The reader's runner class: their own, not the planted one handed back nor the engine's plain runner; the
    class every mix shares, or with ``fresh``, one made for this run alone."""
    runner_cls = factory() if fresh else _built(factory)
    key = answer_in(runner_cls, "6.1")
    if key is not None:
        raise refuse(key)
    expect(runner_cls is not EngineRunner, "clean_runner() returned the engine's plain EngineRunner",
           got="EngineRunner", hint="EngineRunner has none of the three features; subclass PlantedRunner and "
                                    "rewrite its hooks without the syncs")
    return runner_cls


# ----------------------------------------------------------------------------- runners: the reader's runner
# The checks reach the reader's runner class through these (synclab.answer_keys.runners): in a notebook they run here;
# in the grader they run in the answer's process, which runs the engine with it and sends back what the run gave as
# data: its tokens, each step's syncs, the host work of a decode step. Those counts are that process's word (the
# grader's report says so). The planted runner's outputs, which the run's must equal, the checks compute themselves.


def _events(steps: list[list[SyncEvent]]) -> list[list[dict]]:
    """Each step's sync events as data: the kind, where, the line."""
    return [[{"kind": e.kind, "where": e.where, "code": e.code} for e in step] for step in steps]


@runs_with_the_answer
def hunt_outcome(clean_runner: Callable[[], RunnerClass], mix: dict, fresh: bool = False) -> dict:
    """The reader's runner over the hunt's ``mix`` (:func:`hunt_mix`) with the book's fixes, each step counted: its
    outputs (:func:`comparable`) and, per step, its stray syncs, its staging copies, the waits the reader's code
    marked allowed, and its planned waits."""
    syncs, results = step_syncs(hunt_mix(mix), EngineConfig(), _runner(clean_runner, fresh), book_fixes())
    return {"outputs": comparable(results), "stray": _events(syncs.stray), "staged": _events(syncs.staged),
            "marked": _events(syncs.marked_by_reader), "planned": list(syncs.planned),
            "early": _events(syncs.early_reads)}


@runs_with_the_answer
def host_work_outcome(clean_runner: Callable[[], RunnerClass], output_len: int, images: int,
                      decode_tokens: int) -> dict:
    """The host work of one decode step of the reader's runner (:func:`host_work_in_decode_step`, the hunt's
    features on): its total and what dominated it."""
    work = host_work_in_decode_step(_runner(clean_runner), EngineConfig(), output_len, images, book_fixes(),
                                    hunt_features=True, decode_tokens=decode_tokens)
    return {"total": work.total, "largest": work.largest()}


@lru_cache(maxsize=32)
def _planted_outputs(mix: Workload) -> dict[str, Any]:
    """The planted runner's outputs on ``mix`` with the book's fixes (they are right): the same for every runner
    checked on that mix, so run once per process (a frozen Workload is its own key)."""
    return comparable(run_engine(mix, EngineConfig(), book_fixes(), PlantedRunner))


def _lines(steps: list[list[dict]], kind: bool = True) -> list[str]:
    """Each line that made an event, once, in the order met."""
    return list(dict.fromkeys((f"{e['kind'].value} at " if kind else "") + f"{e['where']} `{e['code']}`"
                              for step in steps for e in step))


def _check_outputs_and_syncs(clean_runner: Callable[[], RunnerClass], rng: random.Random) -> None:
    """On each mix, the counted run's own tokens against the planted runner's; then that run's syncs."""
    for i, mix in enumerate(_hunt_mixes(rng)):
        case = _mix_name(mix, i - len(FIXED_MIXES) + 1)  # named before the run: a hang says where
        workload = hunt_mix(mix)
        want = _planted_outputs(workload)
        seen = hunt_outcome(clean_runner, mix)  # the syncs count on a run whose results count too: this very run
        outputs, stray, steps = seen["outputs"], seen["stray"], len(seen["stray"])
        diff = first_difference(outputs, want)
        if diff is not None and i > 0 and first_difference(hunt_outcome(clean_runner, mix, True)["outputs"],
                                                           want) is None:  # right from a class of its own
            raise CheckFailed("your runner's outputs on this mix are right from a new class, and wrong after the "
                              "class served an earlier mix", got=diff, case=case, names_fault=True,
                              hint="state kept on the class (or in the module) carries one run's requests into the "
                                   "next, and the check's runs reuse request ids: keep state on the runner, self "
                                   "(set in __init__), never on the class")
        early = _lines(seen["early"], kind=False)  # a read before its copy landed reads -12345: outputs differ by it
        early_said = (f"{sum(map(len, seen['early']))} read(s) of a download before it landed, in {steps} steps, "
                      f"from {len(early)} line(s): " + "; ".join(early))
        expect(diff is None or not early, f"your runner's outputs differ from the planted runner's, after {early_said}",
               got=diff, case=case, hint=_EARLY_READ_HINT)
        spec = next((s for s in workload.requests if diff and diff.startswith(f"{s.request_id}:")), None)
        asked = f"; that request asked for {_sampling_in_words(spec.sampling)}" if spec is not None and spec.sampling else ""
        expect(diff is None, f"your runner's outputs differ from the planted runner's (which are right){asked}",
               got=diff, case=case,  # the request's sampling in the message, which is never shortened
               # without its bias, the same requests' mix with it has passed: the ban hangs on the bias
               hint=_NO_BIAS_HINT if mix.get("with_bias") is False else
               _OTHER_STOPS_HINT if mix.get("other_stops") else _feature_hint(spec, outputs, want))
        found_right(outputs)  # the grader's seed drew this mix
        lines = _lines(stray)
        kinds = dict.fromkeys(e["kind"] for step in stray for e in step)
        inherited = sorted({e["where"].split(" in ")[-1] for step in stray for e in step if _PLANTED_FILE in e["where"]})
        expect(not lines, f"{sum(map(len, stray))} stray sync(s) in {steps} steps, from "
               f"{len(lines)} line(s): " + "; ".join(lines), expected="0 per step", case=case,
               hint=(f"a line in {_PLANTED_FILE} is the colleague's code, still running: your class does not "
                     f"override {' and '.join(inherited)} (or calls super() there), so override it. Every"
                     if inherited else "every")
                    + " line that made the host wait, once each: rewrite each without the wait. "
                    + " ".join(dict.fromkeys(_REMEDIES[k] for k in kinds if k in _REMEDIES)))
        staged = _lines(seen["staged"], kind=False)
        expect(not staged, f"{sum(map(len, seen['staged']))} upload(s) from pageable memory in {steps} "
               f"steps, from {len(staged)} line(s): " + "; ".join(staged), expected="every upload from pinned memory",
               case=case, hint="a non_blocking copy from pageable memory is a staging copy, as chapter 3 counts it: "
                               "the host copies the data itself, and may wait for a staging buffer. Upload host data "
                               "with self.upload(data, dtype), chapter 3's async_tensor_h2d")
        marked = _lines(seen["marked"])
        expect(not marked, f"{sum(map(len, seen['marked']))} sync(s) your code marked allowed with "
               f"gpu_sync_allowed(), from {len(marked)} line(s): " + "; ".join(marked),
               expected="0 stray syncs: gpu_sync_allowed() marks a wait as meant, it does not remove it", case=case,
               hint="a wait inside gpu_sync_allowed() still stops the host until the device's queue drains; the one "
                    "planned wait a step may make is the engine's, for the previous step's output. Remove the wait "
                    "rather than mark it")
        expect(not early, early_said, expected="every host read after its copy has landed", case=case,
               hint=_EARLY_READ_HINT)
        worst = max(seen["planned"], default=0)
        expect(worst <= 1, "a step waited more than once on the output copy", expected="at most 1 planned wait",
               got=f"{worst} in one step", case=case)


_EARLY_READ_HINT = ("a non_blocking copy to the host returns before the data arrives: read at once, the buffer holds "
                    "whatever the memory held (here -12345; on a GPU, stale values, which could stop a request). "
                    "Judge the tokens in stopped_on_host, on the step's output once it reaches the host")


def _gone_from_states_hint(said: str) -> str:
    """A KeyError in the host stop hook: a request that finished is released before its last output comes back."""
    if "stopped_on_host" not in said and "self.states" not in said:  # the hook, or (in a comprehension) its line
        return ""
    return ("a request that finished may be gone from self.states by the time its last output reaches "
            "stopped_on_host: read the step's output (output.req_ids, output.sampled_token_ids) and requests there")


# The mix with a bias passed and the same requests without it did not: the ban hangs on the bias
_NO_BIAS_HINT = ("the same requests passed beside a logit bias and fail without one: is min_tokens' ban applied only "
                 "when some request has a bias (inside an if on the bias's lists, or after a return when they are "
                 "empty)? The two features are independent: apply each on its own")


# The first fixed mix passed and its request ids with other stop tokens did not: something kept by request id
_OTHER_STOPS_HINT = ("these requests have the first fixed mix's ids, which passed, and other stop tokens and another "
                     "biased token: your runner "
                     "keeps something by request id from an earlier run (on the class or in the module). Keep state "
                     "on the runner, self (set in __init__), or read each request's sampling params where you need "
                     "them")


_PLANTED_FILE = "capstone/planted.py"  # where the colleague's hooks live: a sync there is a hook not overridden

# What removes a stray sync of each kind the hunt meets (hint 2's three remedies, said where the kind shows).
_REMEDIES = {
    SyncKind.H2D_COPY: "A synchronous copy up: send host data with self.upload(data, dtype); host tensors used as "
                       "indices into a device tensor go up the same way (upload them), and a Python number written "
                       "through device indices (x[rows, cols] = v) is such a copy too: write a device tensor of the "
                       "values (index_put_ with uploaded values, or masked_fill_ with an uploaded mask).",
    SyncKind.NONZERO: "A result sized by device data (nonzero): where the host made the mask, use its host copy "
                      "(nonzero there, then upload the indices; or masked_fill_ with the uploaded mask); where the "
                      "device computed it from sampled values, read those from the step's host copy, in "
                      "stopped_on_host.",
    SyncKind.BOOL_MASK_INDEX: "Boolean-mask indexing sizes its result by device data: masked_fill_ with the mask "
                              "keeps the shape.",
    **dict.fromkeys((SyncKind.ITEM, SyncKind.BOOL, SyncKind.TOLIST, SyncKind.D2H_COPY),
                    "A device value read back: read the step's host copy instead, output.sampled_token_ids in "
                    "stopped_on_host (not a device tensor kept from the step)."),
}

_PAIRING = ("a request stops on the token it sampled itself: pair each sampled token with its own request, in the "
            "output's order (output.req_ids), not the requests' order (an embedding request is never sampled)")
_STATE = ("or state kept from an earlier run (the check's runs reuse request ids: keep state on the runner, self, "
          "never on the class or in the module)")
_FEATURES_HINT = ("keep every feature: logit bias, min_tokens (stop tokens banned until then) and stop tokens; a stop "
                  "takes effect when the step's output reaches the host, as before")
_MIN_TOKENS_RULE = ("bans stop tokens while fewer than that many tokens are out (<, not <=), counting the tokens "
                    "generated in this run, as PlantedRunner does (its output so far less prior_output_token_ids)")


def _sampling_in_words(params: Any) -> str:
    """``SamplingParams(...)`` with each long tuple cut to its first five values: a 63-token stop list buries the
    message it is quoted in."""
    shown = {name: _short_ids(value) if isinstance(value, tuple) and len(value) > 6 else repr(value)
             for name, value in vars(params).items()}
    return f"{type(params).__name__}(" + ", ".join(f"{name}={text}" for name, text in shown.items()) + ")"


def _short_ids(ids: tuple) -> str:
    """A long tuple of ids in words: a run with a few gaps by its ends and its gaps (an elided list looked whole to a
    learner, whose sampled token was one of the gaps), else its first five."""
    if all(isinstance(i, int) for i in ids):
        missing = sorted(set(range(min(ids), max(ids) + 1)) - set(ids))
        if len(missing) <= 3:
            but = f" but {', '.join(map(str, missing))}" if missing else ""
            return f"({min(ids)} to {max(ids)}{but}: {len(ids)} in all)"
    return f"({', '.join(map(str, ids[:5]))}, ... {len(ids)} in all)"


def _feature_hint(spec: Any, got: dict[str, Any], want: dict[str, Any]) -> str:
    """Which feature the first differing request's tokens point at: a stop too late or too early, or the bias."""
    if spec is None or spec.sampling is None or spec.request_id not in got:
        return _FEATURES_HINT
    mine, right = got[spec.request_id][0], want[spec.request_id][0]  # the token lists
    stops, min_tokens = set(spec.sampling.stop_token_ids or ()), spec.sampling.min_tokens or 0
    if len(mine) > len(right) and mine[:len(right)] == right and right and right[-1] in stops:
        listed = list(spec.sampling.stop_token_ids)
        # a later stop token of its list: a run that reads the first alone misses it
        shown = f"[{', '.join(map(str, listed))}]" if len(listed) <= 6 else _short_ids(tuple(listed))
        anyone = (f" If your check reads only the first of the request's {len(listed)} stop tokens "
                  f"{shown}: token {right[-1]} is another, and any of them ends it."
                  if len(listed) > 1 and right[-1] != listed[0] else "")
        if len(mine) == len(right) + 1 and len(right) - 1 == min_tokens:  # at the ban's edge: which side of it?
            return (f"yours kept one token past the stop token {right[-1]} it sampled at output position "
                    f"{len(right) - 1}, exactly min_tokens ({min_tokens}): there the ban has ended, and the stop "
                    f"counts. Either your stop test refuses the boundary (with {min_tokens} token(s) already out a "
                    "stop counts: tokens out >= min_tokens, not >), or the stop was reported a step late, by a later "
                    "call of a hook (report it in the call that sees the token: _stopped_on_device gets this step's "
                    f"sampled, stopped_on_host this step's output).{anyone}")
        if len(mine) == len(right) + 1:  # one token more: the stop was seen, a call too late
            return (f"yours kept one token past the stop token {right[-1]} it sampled at output position "
                    f"{len(right) - 1}, then stopped: the stop was reported a step late, by a later call of a hook "
                    "(judged on an earlier output, or kept for the next call). Report it in the call that sees the "
                    f"token: _stopped_on_device gets this step's sampled, stopped_on_host this step's output.{anyone}")
        if len(right) - 1 != min_tokens:  # past min_tokens' boundary: no ban kept it going, its stop was missed
            return (f"yours went on past the stop token {right[-1]} it sampled at output position {len(right) - 1}, "
                    f"where the right run stopped (min_tokens {min_tokens} was behind it): {_PAIRING}; {_STATE}."
                    f"{anyone}")
        # a ban held too long would have kept the stop token from being sampled at all: here no hook reported it
        return (f"yours went on past the stop token {right[-1]} at output position {len(right) - 1}, where the right "
                "run stopped. No stop hook reported it: _stopped_on_device or stopped_on_host must name the request, "
                "judged on the token this step sampled (the tokens self.states holds are a step behind, placeholders "
                f"while a step is in flight); {_STATE}.{anyone}")
    if len(mine) < len(right) and right[:len(mine)] == mine and mine and mine[-1] not in stops:
        return (f"yours stopped after {len(mine)} token(s), on token {mine[-1]}, which is not one of its stop tokens: "
                f"{_PAIRING}; or your stop test reads more than the token this step sampled; {_STATE}")
    if len(mine) < len(right) and right[:len(mine)] == mine and mine and mine[-1] in stops:
        return (f"yours stopped on the stop token {mine[-1]} after {len(mine)} token(s), where the right run went on: "
                f"min_tokens ({min_tokens}) bans stop tokens until that many tokens are out")
    at = next((k for k, (m, r) in enumerate(zip(mine, right)) if m != r), None)
    prior = len(getattr(spec, "prior_output_token_ids", ()) or ())
    if at is not None and mine[at] in stops and at < min_tokens and prior and at + prior >= min_tokens:
        return (f"at output position {at} yours sampled the stop token {mine[at]}, which min_tokens ({min_tokens}) "
                f"still bans there: this request resumed with {prior} tokens already out, and those do not count. "
                "Count the tokens generated in this run: its output so far less prior_output_token_ids, as "
                "PlantedRunner does")
    if at is not None and mine[at] in stops and at < min_tokens:  # the ban did not hold where it must
        return (f"at output position {at} yours sampled the stop token {mine[at]}, which min_tokens ({min_tokens}) "
                "still bans there: your ban never reached the logits (masked_fill without its underscore returns a "
                "new tensor, and rebinding logits in the hook changes nothing outside it), or it went to another row")
    if at is not None and right[at] in stops and at == min_tokens:  # a ban held one token too long, or a bias astray
        return (f"at output position {at} the right run sampled the stop token {right[at]}, yours {mine[at]}. If "
                f"your ban still held it: min_tokens ({min_tokens}) {_MIN_TOKENS_RULE}. If not, look at the logit "
                "bias: each request's own pairs, on its own row")
    if at is not None and (mine[at] in stops or right[at] in stops):
        which = mine[at] if mine[at] in stops else right[at]
        return (f"at output position {at} the stop token {which} was sampled in one run and banned in the other: "
                f"min_tokens ({min_tokens}) {_MIN_TOKENS_RULE}; or your ban never reached the logits (masked_fill "
                "without its underscore returns a new tensor, and rebinding logits in the hook changes nothing "
                "outside it)")
    if at is not None:
        return ("other tokens from output position " + str(at) + ": look at the logit bias (each request's own "
                "pairs, its float values, added to its row)")
    mine_lp, right_lp = got[spec.request_id][1], want[spec.request_id][1]  # per output position, the logprobs asked
    differ = [k for k, (m, r) in enumerate(zip(mine_lp, right_lp)) if m != r]
    at = differ[0] if differ else None
    if at is not None and _banned_but_finite(mine_lp[at], right_lp[at]):
        return (f"the same tokens, other logprobs from output position {at}: the right run gives -inf where yours "
                "gives a finite (if very negative) logprob. A token min_tokens bans must become impossible: set its "
                "logit to float('-inf'), not to a large negative number")
    if at is not None and stops and set(differ) <= {min_tokens - 1, min_tokens}:
        # a ban one token too long or too short moves the logprobs at min_tokens' boundary alone; a bias dropped or
        # misapplied moves them wherever the biased tokens are asked, step after step
        return (f"the same tokens, other logprobs from output position {at}, min_tokens' boundary ({min_tokens}): "
                f"min_tokens {_MIN_TOKENS_RULE}")
    if at is not None:
        return (f"the same tokens, other logprobs from output position {at}: look at the logit bias (its float "
                "values, on its request's row, added with += where an = would replace the logit)")
    return _FEATURES_HINT


def _banned_but_finite(mine: Any, right: Any) -> bool:
    """Whether a logprob the right run has at -inf is finite in the reader's (one value, or one per id asked)."""
    pairs = zip(mine, right) if isinstance(right, (list, tuple)) and isinstance(mine, (list, tuple)) else [(mine, right)]
    return any(r == float("-inf") and isinstance(m, float) and m != float("-inf") for m, r in pairs)


def _check_flat_in(parameter: str) -> Callable[[Callable[[], RunnerClass], random.Random], None]:
    def check(clean_runner: Callable[[], RunnerClass], rng: random.Random) -> None:
        # (tokens already out, images, tokens decoded in the run) of the small and the large case
        cases = {"output length": ((16, 2, 6), (256, 2, 6)), "images": ((16, 2, 6), (16, 16, 6)),
                 "tokens generated": ((16, 2, 6), (16, 2, 96))}[parameter]
        work = [host_work_outcome(clean_runner, n, m, d) for n, m, d in cases]
        small, at = (case[("output length", "images", "tokens generated").index(parameter)] for case in cases)
        expect(work[1]["total"] <= FLAT_BOUND * work[0]["total"], f"host work per decode step grows with {parameter}",
               expected=f"at most {FLAT_BOUND}x",
               got=f"{work[0]['total']} -> {work[1]['total']} (torch calls + history elements); "
                   f"the most at {parameter} {at}: {work[1]['largest']}",
               case=f"one decode step, {parameter} {small} against {at}",
               hint="look for code of yours that walks a request's whole output history (or every image, or every "
                    "token generated so far) each step: keep a count instead, or ask the list its len(); the "
                    "switches' fixes (chapters 4 and 5) already keep theirs flat")
    return check


# A stop hook that returned None: the engine's union of the two hooks' sets raises where no line of the reader's is
_NONE_STOPS_HINT = ("a stop hook returned None: _stopped_on_device and stopped_on_host each return a set of request "
                    "ids, an empty set() when no request stops")


def _stops_type_hint(said: str) -> str:
    """The union of the two hooks' answers failed: name what the hook returned (a learner's list was called None)."""
    returned = [t for t in re.findall(r"'(\w+)'", said.split("for |", 1)[-1]) if t != "set"]
    if not returned or returned[0] == "NoneType":
        return _NONE_STOPS_HINT
    return (f"a stop hook returned a {returned[0]}: _stopped_on_device and stopped_on_host each return a set of "
            "request ids (the engine takes their union with |), an empty set() when no request stops")


HUNT_CRASH_HINTS = (("KeyError", _gone_from_states_hint), ("'NoneType' object is not iterable", _NONE_STOPS_HINT),
                    ("unsupported operand type(s) for |", _stops_type_hint))

NO_STRAY = "the planted runner's outputs, with 0 stray syncs per step and at most 1 planned wait"
# The planted runner already has the right outputs and flat host work: the work counts once its syncs are gone, on
# a run whose tokens are right, so a runner that changes nothing earns nothing.
# Each runs whole engines: about 4 s on an idle 2-core machine, and several times that on a loaded one, which must
# not read as a hung answer (a learner's review saw a correct one time out at a load of 6)
HUNT_CHECKS = [
    Check("6.1", NO_STRAY, _check_outputs_and_syncs, points=2, timeout_s=90.0, id="planted-outputs",
          crash_hints=HUNT_CRASH_HINTS),
    Check("6.1", "host work per step flat in output length", _check_flat_in("output length"), after="planted-outputs",
          timeout_s=90.0, random=False, id="flat-in-output-length", crash_hints=HUNT_CRASH_HINTS),
    Check("6.1", "host work per step flat in images per request", _check_flat_in("images"), after="planted-outputs",
          timeout_s=90.0, random=False, id="flat-in-images", crash_hints=HUNT_CRASH_HINTS),
    Check("6.1", "host work per step flat in tokens generated", _check_flat_in("tokens generated"),
          after="planted-outputs", timeout_s=90.0, random=False, id="flat-in-tokens-generated",
          crash_hints=HUNT_CRASH_HINTS),
]
HUNT_LIMIT_S = 200.0  # the four together (the grader gives an exercise 240 s)


def check_sync_hunt(clean_runner: Callable[[], RunnerClass], seed: int | None = None) -> CheckReport:
    """Exercise 6.1: ``clean_runner()`` returns ``PlantedRunner``'s subclass without stray syncs."""
    return run_checks("Exercise 6.1 (the sync hunt)", HUNT_CHECKS, clean_runner, seed=seed, limit_s=HUNT_LIMIT_S)



# ----------------------------------------------------------------------------- 6.2 the ablation's counts

AblationRow = Callable[[EngineConfig, Workload, Components], dict[str, float]]
ROW_KEYS = ("steps", "tokens", "stray_per_step", "planned_per_step")


ROW_LENGTH = 16  # the ablation workload's output length the row is checked on


@answer_key("6.2", role="answer (the lab's own counts)")
def _ablation_row_reference(config: EngineConfig) -> dict[str, float]:
    """The lab's own answer to Exercise 6.2, what the checks compare with: the ablation workload's run under
    ``config`` with the book's fixes. A row handed fixes of which some are not written counts as the book's do under
    the configuration those fixes really run (``Components.effective``: an unfinished fix runs the code before its
    PR)."""
    syncs, results = step_syncs(ablation_workload(ROW_LENGTH), config, components=book_fixes())
    return {"steps": len(syncs.stray), "tokens": sum(len(r.token_ids) for r in results.values()),
            "stray_per_step": syncs.stray_per_step, "planned_per_step": sum(syncs.planned) / len(syncs.planned)}


ROW_MESSAGES = {
    "steps": "steps is not the number of engine steps the run took",
    "tokens": "tokens is not the number of tokens the run produced",
    "stray_per_step": "stray_per_step is not what count_syncs counts",
    "planned_per_step": "planned_per_step is not what count_syncs counts",
}


def _row_hint(key: str, got: dict[str, float], want: dict[str, float]) -> str:
    """What the wrong value most likely counted, said for that key."""
    if key == "tokens":
        if got[key] == len(ablation_workload(ROW_LENGTH).requests):
            return "you counted the requests: count their tokens, the sum of len(result.token_ids) over the results"
        return "sum len(result.token_ids) over every request's result"
    if key == "steps":
        return "one step per call of each_step's context manager: count those blocks (not the tokens, not the syncs)"
    per_step = [k for k in ("stray_per_step", "planned_per_step") if k == key]
    if per_step and want["steps"] > 1 and want[key] and any(
            abs(got[key] - want[key] * want["steps"] / n) < 1e-9 for n in (want["steps"] - 1, want["steps"] + 1)):
        return (f"the right count over another number of steps: per step is the run's total divided by its "
                f"{want['steps']:g} steps, every step counted (the first and the last too)")
    if per_step and want["tokens"] and want["tokens"] != want["steps"] and \
            abs(got[key] - want[key] * want["steps"] / want["tokens"]) < 1e-9:
        return (f"the run's total divided by its {want['tokens']:g} tokens: per step is per engine step, the total "
                f"divided by the {want['steps']:g} steps (a step samples a token for each decoding request)")
    if key == "stray_per_step" and got[key] > want[key]:
        return ("more than the steps make: count each step in its own count_syncs() block, opened by each_step's "
                "context manager (a sync outside every step, the engine's setup, belongs to none); count "
                "report.events only (a staging copy, report.staged, is not a sync); leave out the planned wait "
                "(ch6.is_planned)")
    return "one count_syncs block per step; a planned wait is what synclab.capstone.is_planned says"


def _held_back(rng: random.Random) -> str:
    """The sync fix the row's fixes hold back (marked not written: it runs the code before its PR), so that a row
    which ignores the fixes it is handed (and runs the notebook's or the book's instead) counts differently.

    Never the lazy stream: without its fix no step has a planned wait, and a row that counts the planned wait as
    stray would pass on that draw."""
    return rng.choice(["slice_then_split", "pinned_uploads"])


def _switches(config: EngineConfig) -> dict[str, bool]:
    return {p: getattr(config, p) for p in PATTERNS}


def _handed_fixes(held_back: str) -> Components:
    """The fixes a row is handed: the book's, with ``held_back`` marked not written (it runs the code before its PR)."""
    return replace(book_fixes(), unfinished=frozenset({held_back}))


@runs_with_the_answer
def row_outcome(ablation_row: AblationRow, switches: dict, held_back: str) -> dict:
    """The reader's row for the configuration ``switches`` (each pattern's fix on or off) on the ablation workload,
    handed the book's fixes with ``held_back`` not written; beside it, the switches the fixes the notebook loaded
    would really run under that configuration (None: it loaded none), which a hint compares with."""
    config = EngineConfig(**switches)
    row = ablation_row(config, ablation_workload(ROW_LENGTH), _handed_fixes(held_back))
    loaded = last_loaded_fixes()
    return {"row": row, "loaded_runs": None if loaded is None else _switches(loaded.effective(config))}


def _counts_under(switches: dict[str, bool]) -> dict[str, float] | None:
    """The book's counts under ``switches``, for a hint; None where this install neither ships nor stores them (a
    students' install, on a configuration no public case runs): the hint then says less."""
    try:
        return _ablation_row_reference(EngineConfig(**switches))
    except AnswerNotStored:
        return None


def _check_row(fn: AblationRow, rng: random.Random) -> None:
    combos = list(EngineConfig.all_combinations())
    held_back = _held_back(rng)  # 6.2 counts with the fixes it is handed, whatever they are
    for config in [EngineConfig.baseline(), EngineConfig(), *rng.sample(combos, 2)]:
        runs = _switches(_handed_fixes(held_back).effective(config))  # what the handed fixes really run
        want = _ablation_row_reference(EngineConfig(**runs))
        seen = row_outcome(fn, _switches(config), held_back)
        got = seen["row"]
        if isinstance(got, dict) and got.get("stray_per_step") != want["stray_per_step"]:
            # counted with other fixes than the ones handed in: the book's, or the ones the notebook loaded
            for whose, others in (("the book's fixes", _switches(config)),
                                  ("the fixes your notebook loaded", seen["loaded_runs"])):
                theirs = None if others is None or others == runs else _counts_under(others)
                if theirs is None:
                    continue
                expect(got.get("stray_per_step") != theirs["stray_per_step"] or theirs == want,
                       "the row ignores the fixes it is handed", case=config.label,
                       expected=f"{want['stray_per_step']:.2f} stray syncs per step (the check holds the {held_back} "
                                f"fix back on purpose: it runs the code before its PR)",
                       got=f"{got.get('stray_per_step'):.2f}, what {whose} count",
                       hint="run the configuration with the fixes in the third argument: "
                            "ch6.run_engine(workload, config, fixes, each_step=...)")
        expect(isinstance(got, dict) and set(ROW_KEYS) <= set(got), "the row must be a dict with every key",
               expected=list(ROW_KEYS), got=sorted(got) if isinstance(got, dict) else type(got).__name__)
        as_stray = want["planned_per_step"] > 0 and abs(  # whatever it says of the planned ones
            got["stray_per_step"] - want["stray_per_step"] - want["planned_per_step"]) < 1e-9
        case = f"{config.label} (the check holds the {held_back} fix back on purpose: it runs the code before its PR)"
        expect(not as_stray, "your stray count includes the planned waits", case=case,
               expected=f"{want['stray_per_step']:.2f} stray and {want['planned_per_step']:.2f} planned per step",
               got=f"{got['stray_per_step']:.2f} stray and {got['planned_per_step']:.2f} planned per step",
               hint="the one wait on the previous step's output copy is planned (the engine marks it with "
                    "gpu_sync_allowed()): ch6.is_planned(event) is True for it; count it apart from the stray ones")
        for key in ROW_KEYS:
            expect(abs(got[key] - want[key]) < 1e-9, ROW_MESSAGES[key], expected=want[key], got=got[key],
                   case=case, hint=_row_hint(key, got, want))
        found_right([round(got[key], 6) for key in ROW_KEYS])  # the grader's seed chose the configurations


ABLATION_CHECKS = [Check("6.2", "counts per configuration", _check_row, timeout_s=60, id="counts", crash_hints=(
    ("'_GeneratorContextManager' object has no attribute", "each_step(engine) must return a new context manager for "
     "every step: open a fresh count_syncs() inside it each time (one used twice cannot be entered again)"),))]


def check_ablation_row(fn: AblationRow, seed: int | None = None) -> CheckReport:
    """Exercise 6.2: ``fn(config, workload, fixes)`` counts one configuration's run."""
    return run_checks("Exercise 6.2 (the ablation's counts)", ABLATION_CHECKS, fn, seed=seed, limit_s=90)


# ----------------------------------------------------------------------------- 6.3 reading the ablation

READING_QUESTIONS = {
    "removes_most_syncs": "the one fix that, alone, removes the most stray syncs per step",
    "removes_no_syncs": "every fix that, alone, removes no stray sync (a set)",
    "cuts_history_reads": "the one fix that cuts the output-history elements the host reads per step",
    "cuts_torch_calls": "the one fix that cuts the host's torch calls per step the most (the torch calls alone, "
                        "as the figure of what each fix removes counts them; the host-work figure adds the history "
                        "elements to them)",
    "saving_grows_with": "for each of those two fixes, what its saving grows with: 'output length' or 'images' "
                         "(a dict whose keys are the two fixes' names)",
    "one_fix_alone": "why one sync fix alone buys little while the device has work queued (the MODEL at 2 ms of device "
                     "work per step): a letter of ch6.ALONE_REASONS",
}
ALONE_REASONS = {
    "a": "its code is slower on a GPU than the code before its PR",
    "b": "each stray sync left still makes the host wait for the device's queue to drain, and the device then idles "
         "while the host queues the next work, whichever syncs the fix removed",
    "c": "the fixes change the tokens, so a run generates fewer of them",
    "d": "a fix alone adds back as many syncs as it removes",
}
GROWS_WITH = ("output length", "images")


_READING: dict[str, Any] = {}  # counted once per process


@answer_key("6.3", role="answer (the lab's own reading of its counts)")
def _measured_reading() -> dict[str, Any]:
    """The answers, from the counts the profile draws (the book's fixes; yours give the same once chapters 1-5 pass)."""
    if not _READING:
        _READING.update(_read_counts())
    return _READING


@answer_key("6.3", role="answer (the lab's own reading of its counts)")
def _read_counts() -> dict[str, Any]:
    from synclab.capstone.profiling import HOST_WORK_POINTS, book_ablation_counts, book_host_work

    counts = book_ablation_counts()  # every configuration; the baseline and each fix alone are read here
    med = {label: {m: statistics.median(v) for m, v in row.items()} for label, row in counts.items()}
    base = med["baseline"]
    saved = {p: {m: base[m] - med[p][m] for m in base} for p in PATTERNS}
    table = book_host_work()
    assert HOST_WORK_POINTS[:3] == ((16, 2), (256, 2), (16, 16))  # few/short, then longer, then more images

    def grows_with(fix: str) -> str:
        gain = [b - f for b, f in zip(table["baseline"], table[fix])]
        by_length, by_images = gain[1] - gain[0], gain[2] - gain[0]
        return "output length" if by_length > by_images else "images"

    return {
        "removes_most_syncs": max(PATTERNS, key=lambda p: saved[p]["stray syncs"]),
        "removes_no_syncs": frozenset(p for p in PATTERNS if saved[p]["stray syncs"] == 0),
        "cuts_history_reads": max(PATTERNS, key=lambda p: saved[p]["history elements read"]),
        "cuts_torch_calls": max(PATTERNS, key=lambda p: saved[p]["torch calls"]),
        "saving_grows_with": {fix: grows_with(fix) for fix in ("reverse_scan", "list_cache")},
        "one_fix_alone": "b",
        "_saved": saved,
    }


def _reading_why(question: str, truth: dict[str, Any], said: Any = None) -> str:
    saved = truth["_saved"]
    extra = sorted(said - truth[question]) if question == "removes_no_syncs" and isinstance(said, frozenset) else []
    if extra:  # one too many: which does not belong, by its row (its number is the reader's to read)
        one = len(extra) == 1
        rows = "its row" if one else "their rows"
        return (f"{', '.join(extra)} {'does' if one else 'do'} not belong: compare {rows} in the counts above with "
                "the baseline's stray syncs per step")
    if question == "removes_most_syncs":
        return "per step, " + ", ".join(f"{p} removes {saved[p]['stray syncs']:g}" for p in PATTERNS)
    if question == "removes_no_syncs":  # the rows to read, not their numbers: the set is the reader's to name
        return ("a set of every fix whose row alone leaves the baseline's stray syncs per step as they are: compare "
                "each fix's row in the counts above (the book's rows, where yours are not written) with the "
                "baseline's, and name every one that matches it, not only the first")
    if question == "cuts_history_reads":
        return "history elements per step saved: " + ", ".join(f"{p} {saved[p]['history elements read']:g}"
                                                                for p in PATTERNS)
    if question == "cuts_torch_calls":
        return "torch calls per step saved: " + ", ".join(f"{p} {saved[p]['torch calls']:g}" for p in PATTERNS)
    if question == "saving_grows_with":
        return ("read the host-work table (or its figure): a fix's saving is the gap to the baseline; see which gap "
                "widens from 16 to 256 tokens out, and which from 2 to 16 images")
    against = {"a": "each fix's code queues no more work on the device than the code before it",
               "c": "every configuration computes the same tokens, as 6.1's check holds them to",
               "d": "no fix alone has more stray syncs than the baseline"}  # only the letter chosen: no elimination
    said_letter = str(said).strip("() .").lower()[:1]
    why = f" ({said_letter}: {against[said_letter]})" if said_letter in against else ""
    return (f"not a reason the counts support{why}. Look at the MODEL at 2 ms of device work: what does the device "
            "do while the host waits at a sync, and how many syncs does one fix alone leave?")


def _pattern_name(answer: Any) -> Any:
    """A fix as a reader may write it ("Pinned uploads", "list-cache") in the ablation's spelling (pinned_uploads)."""
    return answer.strip().lower().replace(" ", "_").replace("-", "_") if isinstance(answer, str) else answer


def _growth_name(answer: Any) -> Any:
    """What a saving grows with, as a reader may say it ("Output length", "images per request", "tokens out") in the
    reading's words ("output length", "images")."""
    if not isinstance(answer, str):
        return answer
    said = answer.strip().lower().replace("_", " ").replace("-", " ")
    if "image" in said:
        return "images"
    if "output" in said or "length" in said or "token" in said:
        return "output length"
    return said


SHAPE_OF_GROWS = "the format: a dict keyed by the two fixes, {'reverse_scan': ..., 'list_cache': ...}"


def _check_reading(answer: Callable[[], dict[str, Any]], rng: random.Random) -> None:
    reading = answer()
    expect(isinstance(reading, dict), "my_reading() must return a dict", got=type(reading).__name__)
    missing = [q for q in READING_QUESTIONS if q not in reading]
    unknown = [q for q in reading if q not in READING_QUESTIONS]
    expect(not missing and not unknown, "answer every question, keyed as in ch6.READING_QUESTIONS",
           got="; ".join(([f"missing: {', '.join(missing)}"] if missing else [])
                         + ([f"not a question: {', '.join(map(repr, unknown))}"] if unknown else [])),
           expected=list(READING_QUESTIONS))
    normal = dict(reading)
    if isinstance(normal["removes_no_syncs"], (list, tuple, set, frozenset)):
        normal["removes_no_syncs"] = frozenset(normal["removes_no_syncs"])
    if isinstance(normal["one_fix_alone"], str):  # "b", "B", "b)" as the cell prints the options, "(b)", or the
        said = normal["one_fix_alone"].strip().lower()  # option copied whole: "b) each stray sync left ..."
        letter = re.match(r"\(?([a-z])\)", said)
        normal["one_fix_alone"] = letter.group(1) if letter else said.strip("().")
    for q in ("removes_most_syncs", "cuts_history_reads", "cuts_torch_calls"):  # "Pinned uploads" is pinned_uploads
        normal[q] = _pattern_name(normal[q])
    if isinstance(normal["removes_no_syncs"], frozenset):
        normal["removes_no_syncs"] = frozenset(map(_pattern_name, normal["removes_no_syncs"]))
    if isinstance(normal["saving_grows_with"], dict):
        normal["saving_grows_with"] = {_pattern_name(k): _growth_name(v)
                                       for k, v in normal["saving_grows_with"].items()}
    unnamed = {q for q in ("removes_most_syncs", "cuts_history_reads", "cuts_torch_calls") if normal[q] not in PATTERNS}
    truth = _measured_reading()
    grows = normal["saving_grows_with"]
    misshapen = not (isinstance(grows, dict) and set(grows) == {"reverse_scan", "list_cache"})
    wrong = [q for q in READING_QUESTIONS if normal[q] != truth[q]]
    # each answer's reason in the message itself, which is never shortened (a value's room is 300 characters)
    expect(not wrong, f"{len(wrong)} of {len(READING_QUESTIONS)} answers do not match the counts. " + "; ".join(
               f"{q}: {SHAPE_OF_GROWS}, not {reading[q]!r}" if q == "saving_grows_with" and misshapen
               else f"{q}: name a fix by its pattern ({', '.join(PATTERNS)}), not {reading[q]!r}"
               if q in unnamed else f"{q}: you said {reading[q]!r}, but {_reading_why(q, truth, normal[q])}"
               for q in wrong),
           share=1 - len(wrong) / len(READING_QUESTIONS), case="the six answers, against the capstone workload's counts",
           hint="each answer can be read off the profile's counts: the stray syncs, torch calls and history "
                "elements per step of each fix alone, against the baseline's")
    found_right({q: normal[q] for q in READING_QUESTIONS})  # every right answer, however written, reads the same


READING_CHECKS = [Check("6.3", "each answer matches the ablation's counts", _check_reading, timeout_s=120,
                        random=False, id="answers")]

# What the grader may compute before any answer is loaded, per exercise: the counts 6.3's answers come from (the
# package's own runs, seconds; several times that under the grader's watch over the answer's checks).
GRADER_WARM_UP: dict[str, Callable[[], Any]] = {"6.3": _measured_reading}


# ----------------------------------------------------------------------------- the clauses of 6.1-6.3
# Each clause of the contracts (the page's "The lab", the lab's exercise): its check, fixed case, honest mistake
# (tests/honest/wrong/<wrong>.py) and the words its failure holds; tests/test_clauses.py holds them to it. 6.1's
# "fixed case" is a mix drawn from the seed: every seed's mixes hold every feature (random_mix(hunt_features=True)).

CLAUSES = [
    Clause("6.1-outputs", "every feature kept, every token the same", "planted-outputs", "the fixed mix",
           "6.1-min-tokens-at-or-below", "min_tokens"),
    Clause("6.1-own-stop", "every token the same", "planted-outputs", "an embedding request first",
           "6.1-stops-paired-by-arrival", "pair each sampled token with its own request"),
    Clause("6.1-bias", "a per-request logit bias", "planted-outputs", "a fractional logit bias",
           "6.1-bias-uploaded-as-integers", "its float values"),
    Clause("6.1-no-stray", "0 stray syncs per step", "planted-outputs", "the fixed mix", "6.1-one-tolist-per-step",
           "rewrite each without the wait"),
    Clause("6.1-planned", "one planned wait at most", "planted-outputs", "the fixed mix", "6.1-marks-its-syncs-allowed",
           "Remove the wait rather than mark it", lab="at most one planned wait"),
    Clause("6.1-pinned", "no upload from pageable memory", "planted-outputs", "the fixed mix", "6.1-to-non-blocking",
           "self.upload(data, dtype)"),
    Clause("6.1-landed", "no read of a download before it lands", "planted-outputs", "the fixed mix",
           "6.1-reads-the-download-at-once", "before it landed"),
    Clause("6.1-flat", "in the tokens generated so far", "flat-in-tokens-generated", "tokens generated 6 against 96",
           "6.1-counts-generated-by-walking", "keep a count instead"),
    Clause("6.2-planned", "the stray syncs and planned waits per step", "counts", "all fixes",
           "6.2-staged-counted", "count it apart from the stray ones",
           lab="per step the stray syncs and the planned waits"),
    Clause("6.2-handed", "with the fixes it is handed", "counts", "all fixes",
           "6.2-runs-the-books-fixes", "the fixes in the third argument", lab="Count with the fixes you are handed"),
    Clause("6.3-shares", "Each right answer earns its share", "answers", "the six answers",
           "6.3-list-cache-cuts-reads", "do not match the counts", lab="Each answer earns its share"),
]


def check_ablation_reading(my_reading: Callable[[], dict[str, Any]], seed: int | None = None) -> CheckReport:
    """Exercise 6.3: the reader's reading of the ablation, against the counts it reads."""
    return run_checks("Exercise 6.3 (reading the ablation)", READING_CHECKS, my_reading, seed=seed, limit_s=150)
