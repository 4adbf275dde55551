"""Chapter 3, Exercise 3.8: the n-gram proposer's uploads and the bad-words ban, and their checks.

``update_ngram_gpu_tensors_incremental`` is checked over whole steps, as the engine
runs it: requests finish, arrive and move between rows; between two updates each
request gains tokens **on the device** (the host's copy holds placeholders), and the
step ends with a wait. The steps run under ``simulated_cuda()``, whose streams notice
a host write into a pinned buffer before the upload reading it has run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

import torch

from synclab.answer_keys import answer_key
from synclab.answer_keys.runners import runs_with_the_answer
from synclab.checks import Check, CheckReport, expect, run_checks, found_right
from synclab.device import DeviceLike, is_pin_memory_available, pick_device, simulated_device, to_device
from synclab.engine.bad_words import apply_bad_words
from synclab.engine.ngram_proposer_gpu import CachedRequestState, NgramInputBatch
from synclab.pinned_transfers.checks.common import (PIN_HINT, counted, expect_no_syncs, pinning_refused,
                                                    report_data)
from synclab.sim import cuda as sim_cuda
from synclab.sim.pinning import PinnedMemoryUnavailable, simulated_pinning
from synclab.syncs import SyncReport

UpdateFunction = Callable[..., None]
SingleBatchFunction = Callable[[torch.Tensor, list[list[int]], list[int]], None]

PLACEHOLDER = -1  # what the host holds where only the device has the sampled token yet
STALE = -7  # what device rows hold before anything was copied there
MOVE_HINT = ("a moved request's newest tokens exist only on the device: move its row (and length) on the device, "
             "token_ids_gpu_tensor[dst] = token_ids_gpu_tensor[src].clone(), with src/dst uploaded as index tensors")
REORDER_SYNC_HINT = ("torch.tensor(list, device=...) is a synchronous copy: send the index lists through "
                     "async_tensor_h2d (Exercise 3.1)")


# ----------------------------------------------------------------------------- n-gram steps


@dataclass
class NgramSteps:
    """A persistent batch over several steps: the truth per request, and the tensors the update keeps in line."""

    device: DeviceLike
    max_reqs: int = 8
    max_len: int = 48
    truth: dict[str, list[int]] = field(default_factory=dict)  # every token of each active request
    rows: dict[str, int] = field(default_factory=dict)  # this step's row of each active request
    prev: dict[str, int] | None = None
    next_id: int = 0

    def __post_init__(self) -> None:
        pin = is_pin_memory_available()
        self.host = torch.full((self.max_reqs, self.max_len), PLACEHOLDER, dtype=torch.int32, pin_memory=pin)
        self.num_tokens = [0] * self.max_reqs
        self.token_ids_gpu = to_device(torch.full((self.max_reqs, self.max_len), STALE, dtype=torch.int32),
                                       self.device)  # [max_reqs, max_len]
        self.num_tokens_gpu = to_device(torch.zeros(self.max_reqs, dtype=torch.int32), self.device)  # [max_reqs]

    def admit(self, rng: random.Random) -> str:
        """A new request id (its tokens come with :meth:`plan`)."""
        self.next_id += 1
        return f"req-{self.next_id - 1}"

    def plan(self, rng: random.Random, finish: list[str], arrive: list[str],
             rows: dict[str, int] | None = None) -> list[CachedRequestState]:
        """Finish requests, (re)admit ``arrive`` with fresh tokens, place every active one in a row; the new ones.

        Rows are random unless ``rows`` names them. A request in ``arrive`` that is already active is
        *resumed*: it comes back with tokens the device has never seen.
        """
        old = dict(self.rows)
        for req_id in finish:
            del self.truth[req_id]
        for req_id in arrive:
            self.truth[req_id] = [rng.randrange(1000) for _ in range(rng.randint(1, self.max_len // 3))]
        if rows is None:
            rows = dict(zip(self.truth, rng.sample(range(self.max_reqs), len(self.truth))))
        snapshot = self.host.clone()
        self.rows = rows
        for req_id, row in rows.items():  # the host's table follows the requests, as vLLM's InputBatch does
            tokens = self.truth[req_id]
            self.num_tokens[row] = len(tokens)
            if req_id in arrive:
                self.host[row, :len(tokens)] = torch.tensor(tokens, dtype=torch.int32)
            else:
                self.host[row] = snapshot[old[req_id]]
        return [CachedRequestState(req_id) for req_id in arrive]

    def batch(self) -> NgramInputBatch:
        return NgramInputBatch(dict(self.rows), None if self.prev is None else dict(self.prev),
                               list(self.num_tokens), self.host)

    def sample_on_device(self, rng: random.Random) -> None:
        """The proposer's step: new tokens written on the device; the host learns their count, not their values."""
        for req_id, row in self.rows.items():
            n = len(self.truth[req_id])
            k = min(rng.randint(1, 3), self.max_len - n)
            tokens = [rng.randrange(1000) for _ in range(k)]
            self.token_ids_gpu[row, n:n + k] = to_device(torch.tensor(tokens, dtype=torch.int32), self.device)
            self.num_tokens_gpu[row] = n + k
            self.truth[req_id] += tokens
            self.host[row, n:n + k] = PLACEHOLDER
        self.prev = dict(self.rows)

    def problems(self) -> list[str]:
        """Rows and lengths on the device that differ from the truth."""
        return _problems(self.rows, self.truth, self.token_ids_gpu.cpu().tolist(), self.num_tokens_gpu.cpu().tolist())


def _problems(rows: dict[str, int], truth: dict[str, list[int]], tokens: list[list[int]],
              lengths: list[int]) -> list[str]:
    """Rows and lengths of the device's tables (``tokens`` [max_reqs, max_len], ``lengths`` [max_reqs], as lists)
    that differ from the truth of the requests in ``rows``."""
    out = []
    for req_id, row in sorted(rows.items(), key=lambda kv: kv[1]):
        want = truth[req_id]
        got = tokens[row][:len(want)]
        if got != want:
            first = next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)
            out.append(f"row {row} ({req_id}): token {first} is {got[first]}, expected {want[first]}"
                       + (" (a host placeholder)" if got[first] == PLACEHOLDER else
                          " (never written)" if got[first] == STALE else ""))
        if int(lengths[row]) != len(want):
            out.append(f"row {row} ({req_id}): length {int(lengths[row])}, expected {len(want)}")
    return out


def run_step(update: UpdateFunction, steps: NgramSteps, new_reqs: list[CachedRequestState]) -> SyncReport:
    """One update, counted; then the step's end (the device appends, a wait)."""
    batch = steps.batch()
    _, report = counted(lambda: update(batch, steps.token_ids_gpu, steps.num_tokens_gpu, new_reqs, steps.device),
                        simulate=True)  # the steps run on the simulated device, on any machine
    return report


def _finish_step(steps: NgramSteps, rng: random.Random) -> None:
    torch.cuda.synchronize()  # the step's end: every copy of this step has run (simulated)
    steps.sample_on_device(rng)


_OVERWRITTEN_HINT = ("a moved row holds another request's tokens: a move wrote over a row before that row's own move "
                     "read it (a swap, a chain). Gather every moved row first (token_ids[src].clone()), then scatter "
                     "them to their new rows")


def _overwritten(rows: dict[str, int], truth: dict[str, list[int]], tokens: list[list[int]]) -> bool:
    """Whether a row on the device holds the tokens of another request of this step (moved over before it was read)."""
    for req_id, row in rows.items():
        want = truth[req_id]
        got = tokens[row][:len(want)]
        if got != want and any(other != req_id and theirs[:len(got)] == got[:len(theirs)] and theirs
                               for other, theirs in truth.items()):
            return True
    return False


def _expect_rows(known: dict[str, Any], said: dict[str, Any], hint: str = "") -> None:
    """The device's tables after a step (``said``: as the answer's runner read them) against the step's truth
    (``known``: replayed here, :func:`_replayed`)."""
    rows, truth, case = known["rows"], known["truth"], known["case"]
    problems = _problems(rows, truth, said["tokens"], said["lengths"])
    placeholders = any("placeholder" in p for p in problems)
    overwritten = bool(problems) and not placeholders and _overwritten(rows, truth, said["tokens"])
    expect(not problems, f"{len(problems)} row(s) or length(s) differ on the device", got="; ".join(problems[:4]),
           hint=MOVE_HINT if placeholders else _OVERWRITTEN_HINT if overwritten else hint, case=case)
    # every row and length found equal to the truth: reported as the truth, row by row
    found_right([[row, truth[req_id]] for req_id, row in sorted(rows.items(), key=lambda kv: kv[1])])


Plan = Iterator[tuple[str, list[CachedRequestState]]]  # each step's case and new requests, planned in turn


def _scripted(steps: NgramSteps, rng: random.Random) -> Plan:
    """Five steps that visit every path: first step, a swap, a chain, a resumed request, an empty batch."""
    a, b, c, d = (steps.admit(rng) for _ in range(4))
    plans = [
        ("first step: three requests in rows 0, 1, 2", [], [a, b, c], {a: 0, b: 1, c: 2}),
        ("a and b swap rows; c stays", [], [], {a: 1, b: 0, c: 2}),
        ("a finishes; b moves into a's row, c into b's, a new request into c's", [a], [d], {b: 1, c: 0, d: 2}),
        ("b is resumed in another row (copied from the host, not moved); c moves", [], [b], {b: 5, c: 4, d: 2}),
        ("every request finishes: an empty batch", [b, c, d], [], {}),
    ]
    for case, finish, arrive, rows in plans:
        yield case, steps.plan(rng, finish, arrive, rows)
        _finish_step(steps, rng)


def _random_steps(steps: NgramSteps, rng: random.Random, num_steps: int = 10) -> Plan:
    for step in range(num_steps):
        active = list(steps.truth)
        finish = rng.sample(active, rng.randint(0, len(active) // 2)) if step else []
        room = steps.max_reqs - (len(active) - len(finish))
        arrive = [steps.admit(rng) for _ in range(rng.randint(0 if step else 1, min(3, room)))]
        if step and active and rng.random() < 0.3:
            arrive.append(rng.choice([r for r in active if r not in finish] or active[:1]))  # resumed
            finish = [r for r in finish if r not in arrive]
        new_reqs = steps.plan(rng, finish, arrive)
        yield f"random step {step}: {len(steps.rows)} requests, {len(arrive)} new, {len(finish)} finished", new_reqs
        _finish_step(steps, rng)


Segments = list[tuple[str, int]]  # ("scripted", 5) or ("random", n): runs of steps, each on a fresh batch


def _plans(segments: Segments, rng: random.Random) -> Iterator[tuple[NgramSteps, str, list[CachedRequestState]]]:
    """Every step of ``segments``, in order, drawn from ``rng``: what depends on the workload alone, never on the
    update, so that the grader replays here what the answer's process ran."""
    for kind, num_steps in segments:
        steps = NgramSteps(simulated_device())
        plans = _scripted(steps, rng) if kind == "scripted" else _random_steps(steps, rng, num_steps)
        for case, new_reqs in plans:
            yield steps, case, new_reqs


@runs_with_the_answer
def ngram_steps(update: UpdateFunction, segments: Segments, seed: int, pinning: bool = True,
                until_wrong: bool = True) -> dict[str, Any]:
    """The steps of ``segments`` (drawn from ``seed``), each update counted, on the simulated device and streams,
    where pinned memory is available or not (WSL): per step, the device's tables after the update and its syncs,
    then the streams' races; or what a call that asked for pinned memory without any was told. ``until_wrong``: stop
    after a step whose tables are wrong (a check of the rows stops there). A runner
    (:mod:`synclab.answer_keys.runners`)."""
    rng, said = random.Random(seed), []
    with simulated_pinning(pinning), sim_cuda.simulated_cuda() as device:
        try:
            for steps, case, new_reqs in _plans(segments, rng):
                report = run_step(update, steps, new_reqs)
                said.append({"case": case, "tokens": steps.token_ids_gpu.cpu().tolist(),
                             "lengths": steps.num_tokens_gpu.cpu().tolist(), "syncs": report_data(report)})
                if until_wrong and steps.problems():
                    break
        except PinnedMemoryUnavailable as exc:
            return {"unavailable": str(exc).split(":")[0]}
    return {"steps": said, "races": [str(race) for race in device.races]}


def _replayed(segments: Segments, seed: int) -> list[dict[str, Any]]:
    """Each step's case, rows and truth, replayed here from ``seed`` without any update."""
    known = []
    with simulated_pinning(True), sim_cuda.simulated_cuda():
        for steps, case, _ in _plans(segments, random.Random(seed)):
            known.append({"case": case, "rows": dict(steps.rows),
                          "truth": {req_id: list(steps.truth[req_id]) for req_id in steps.rows}})
    return known


def _judged_steps(update: UpdateFunction, rng: random.Random,
                  segments: Segments) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    """Run the steps of ``segments`` with the reader's update, wherever it is, and judge each step's tables here:
    each step's case and syncs (as data), and the races."""
    seed = rng.randrange(2 ** 31)
    said = ngram_steps(update, segments, seed)
    known = _replayed(segments, seed)
    for truth, step in zip(known, said["steps"]):
        _expect_rows(truth, step)
    expect(len(said["steps"]) == len(known), "the steps stopped before the last", expected=len(known),
           got=len(said["steps"]))
    return [(truth["case"], step["syncs"]) for truth, step in zip(known, said["steps"])], said["races"]


def _check_ngram_scripted(update: UpdateFunction, rng: random.Random) -> None:
    _judged_steps(update, rng, [("scripted", 5)])


def _check_ngram_random(update: UpdateFunction, rng: random.Random) -> None:
    _judged_steps(update, rng, [("random", 10)])


def _check_ngram_syncs(update: UpdateFunction, rng: random.Random) -> None:
    reports, _ = _judged_steps(update, rng, [("scripted", 5), ("random", 4)])
    for case, report in reports:
        expect_no_syncs(report, "the update", REORDER_SYNC_HINT + "; " + PIN_HINT, case)


def _check_ngram_races(update: UpdateFunction, rng: random.Random) -> None:
    races = ngram_steps(update, [("random", 6)], rng.randrange(2 ** 31), until_wrong=False)["races"]  # rows: not here
    expect(not races, "the host wrote a pinned buffer while an upload from it could still be queued",
           got=races[0] if races else "",
           hint="a non_blocking upload reads its source when the stream gets to it, not when .to() returns: give "
                "each upload its own pinned buffer (async_tensor_h2d makes one per call) or wait before refilling one")


def _check_ngram_wsl(update: UpdateFunction, rng: random.Random) -> None:
    """Without pinned memory the update must run, without a wait, and leave the tables it leaves with pinned memory
    (whether those are right is the other checks' to say)."""
    segments, seed = [("random", 4)], rng.randrange(2 ** 31)
    wsl = ngram_steps(update, segments, seed, pinning=False, until_wrong=False)
    if "unavailable" in wsl:
        raise pinning_refused(wsl["unavailable"], "4 steps")
    pinned = ngram_steps(update, segments, seed, until_wrong=False)
    for on_wsl, with_pinning in zip(wsl["steps"], pinned["steps"]):
        case = on_wsl["case"]
        expect_no_syncs(on_wsl["syncs"], "the update", "keep non_blocking=True", case, staged_ok=True)
        expect(on_wsl["tokens"] == with_pinning["tokens"] and on_wsl["lengths"] == with_pinning["lengths"],
               "without pinned memory the tables differ from those with it", case=case,
               hint="the update must do the same work whether or not memory can be pinned: pin only where "
                    "is_pin_memory_available() says so, and upload the same rows either way")


CHECKS_3_8_NGRAM = [
    Check("3.8", "n-gram state, scripted steps: first step, a swap, a chain of moves, a resumed request, no request",
          _check_ngram_scripted, id="ngram-scripted"),
    Check("3.8", "n-gram state, 10 random steps: every row and length as the truth", _check_ngram_random,
          id="ngram-random"),
    Check("3.8", "n-gram state: 0 syncs per step", _check_ngram_syncs, id="ngram-no-syncs"),
    Check("3.8", "n-gram state: no pinned buffer written before its upload ran (simulated streams)",
          _check_ngram_races, id="ngram-no-refill-race"),
    Check("3.8", "n-gram state, WSL (no pinned memory): no error, same rows", _check_ngram_wsl, id="ngram-wsl"),
]


def check_ngram_update(update: UpdateFunction, seed: int | None = None) -> CheckReport:
    """Exercise 3.8, first half: run every check against the reader's ``update_ngram_gpu_tensors_incremental``."""
    return run_checks("Exercise 3.8 — update_ngram_gpu_tensors_incremental", CHECKS_3_8_NGRAM, update, seed=seed)


def _simulated(fn: Callable[[], Any], pinning: bool = True) -> tuple[Any, Any]:
    """Run ``fn`` on the simulated device with simulated streams (on any machine), with or without pinning."""
    with simulated_pinning(pinning), sim_cuda.simulated_cuda() as device:
        return fn(), device


def count_reorder_step(update: UpdateFunction, num_reqs: int, rng: random.Random) -> int:
    """Syncs of one update in which all ``num_reqs`` requests move to other rows (simulated device and streams)."""
    def run() -> int:
        steps = NgramSteps(simulated_device(), max_reqs=max(2 * num_reqs, 8))
        ids = [steps.admit(rng) for _ in range(num_reqs)]
        run_step(update, steps, steps.plan(rng, [], ids, {r: i for i, r in enumerate(ids)}))
        _finish_step(steps, rng)
        steps.plan(rng, [], [], {r: num_reqs + i for i, r in enumerate(ids)})
        return run_step(update, steps, []).count

    return _simulated(run)[0]


# ----------------------------------------------------------------------------- bad words


@runs_with_the_answer
def banned_outcome(single_batch: SingleBatchFunction, vocab: int, bad_words: dict[int, list[list[int]]],
                   past: list[list[int]]) -> dict[str, Any]:
    """``apply_bad_words`` with the reader's ``single_batch`` on zero logits ``[len(past), vocab]``, counted: the
    ``(row, token)`` pairs it set to -inf, the first other values it changed, and its syncs. A runner
    (:mod:`synclab.answer_keys.runners`)."""
    logits = to_device(torch.zeros(len(past), vocab), pick_device())  # [batch, vocab]
    _, report = counted(lambda: apply_bad_words(logits, bad_words, past, single_batch))
    after = logits.cpu()
    others = after[~torch.isinf(after)]
    return {"banned": [tuple(pair) for pair in torch.isinf(after).nonzero().tolist()],
            "changed": others[others != 0][:4].tolist(), "syncs": report_data(report)}


def _banned(single_batch: SingleBatchFunction, vocab: int, bad_words: dict[int, list[list[int]]],
            past: list[list[int]], case: str) -> dict[str, Any]:
    """The reader's bans against the reference's; the call's syncs, as data."""
    said = banned_outcome(single_batch, vocab, bad_words, past)
    got = set(said["banned"])
    want = _bad_words_reference(bad_words, past)
    missing, extra = sorted(want - got), sorted(got - want)
    expect(got == want, "banned tokens differ: " + "; ".join(
               ([f"{len(missing)} not banned that should be"] if missing else [])
               + ([f"{len(extra)} banned that should not be"] if extra else [])),
           expected=f"also banned (row, token): {missing[:8]}" if missing else "nothing more banned",
           got=f"banned too (row, token): {extra[:8]}" if extra else "nothing extra banned",
           hint="a word's last token is banned when the request's last tokens equal the rest of the word "
                "(a one-token word: always); skip words longer than the history plus one; change the row in place",
           case=case)
    expect(not said["changed"], "only banned logits may change", got=said["changed"], case=case)
    found_right(sorted(want))  # the banned (row, token) pairs, found equal to the reference's
    return said["syncs"]


_BAD_WORD_CASES = [
    ("a one-token word is always banned", 8, {0: [[3]]}, [[1, 2]]),
    ("prefix matches the last tokens", 8, {0: [[1, 2, 5]]}, [[7, 1, 2]]),
    ("prefix does not match", 8, {0: [[1, 2, 5]]}, [[1, 2, 7]]),
    ("word longer than the history plus one: skipped", 8, {0: [[1, 2, 3, 4]]}, [[2, 3]]),
    ("word exactly the history plus one", 8, {0: [[2, 3, 6]]}, [[2, 3]]),
    ("no history yet", 8, {0: [[4], [1, 5]]}, [[]]),
    ("two words ban the same token; a request without bad words", 8, {1: [[6], [2, 6]]}, [[1], [9, 2]]),
]


def _check_bad_words_fixed(single_batch: SingleBatchFunction, rng: random.Random) -> None:
    for case, vocab, words, past in _BAD_WORD_CASES:
        _banned(single_batch, vocab, words, past, case)


def _bad_words_case(rng: random.Random, batch: int, vocab: int) -> tuple[dict[int, list[list[int]]], list[list[int]]]:
    past = [[rng.randrange(vocab) for _ in range(rng.randint(0, 6))] for _ in range(batch)]
    words: dict[int, list[list[int]]] = {}
    for row in rng.sample(range(batch), rng.randint(0, batch)):
        words[row] = []
        for _ in range(rng.randint(1, 4)):
            if past[row] and rng.random() < 0.5:  # a word that matches the end of the history
                k = rng.randint(1, len(past[row]))
                words[row].append(past[row][-k:] + [rng.randrange(vocab)])
            else:
                words[row].append([rng.randrange(vocab) for _ in range(rng.randint(1, 3))])
    return words, past


def _check_bad_words_random(single_batch: SingleBatchFunction, rng: random.Random) -> None:
    for trial in range(12):
        batch, vocab = rng.randint(1, 16), rng.choice([4, 32, 500])
        words, past = _bad_words_case(rng, batch, vocab)
        _banned(single_batch, vocab, words, past, f"random trial {trial}: {batch} requests, vocab {vocab}")


def count_bad_words(single_batch: SingleBatchFunction, num_reqs: int) -> int:
    """Syncs of ``apply_bad_words`` when each of ``num_reqs`` requests bans one token."""
    logits = to_device(torch.zeros(num_reqs, 64), pick_device())  # [num_reqs, vocab]
    words = {row: [[row % 64]] for row in range(num_reqs)}
    return counted(lambda: apply_bad_words(logits, words, [[]] * num_reqs, single_batch))[1].count


def _check_bad_words_syncs(single_batch: SingleBatchFunction, rng: random.Random) -> None:
    words, past = _bad_words_case(random.Random(7), 16, 500)
    report = _banned(single_batch, 500, words, past, "16 requests")
    expect_no_syncs(report, "apply_bad_words",
                    "logits[token] = -inf copies the value over (both sides are 0-d): write through a one-element "
                    "slice, logits[token:token + 1] = -inf, which becomes a fill", "16 requests")


CHECKS_3_8_BAD_WORDS = [
    Check("3.8", "bad words, fixed cases: one-token words, prefixes, too long, no history, repeats",
          _check_bad_words_fixed, random=False, id="bad-words-fixed"),
    Check("3.8", "bad words: same as a plain reference on random batches", _check_bad_words_random,
          id="bad-words-random"),
    Check("3.8", "bad words: 0 syncs", _check_bad_words_syncs, random=False, id="bad-words-no-syncs"),
]


def _on(index: int, check: Check) -> Check:
    """``check`` run on one of the two functions of Exercise 3.8."""
    return replace(check, run=lambda impls, rng: check.run(impls[index], rng))


CHECKS_3_8 = [_on(0, c) for c in CHECKS_3_8_NGRAM] + [_on(1, c) for c in CHECKS_3_8_BAD_WORDS]


def check_ngram_and_bad_words(update: UpdateFunction, single_batch: SingleBatchFunction,
                              seed: int | None = None) -> CheckReport:
    """Exercise 3.8: every check of both functions, in one report."""
    return run_checks("Exercise 3.8 — the n-gram update and bad words", CHECKS_3_8, (update, single_batch), seed=seed)


def check_bad_words(single_batch: SingleBatchFunction, seed: int | None = None) -> CheckReport:
    """Exercise 3.8, second half: run every check against the reader's ``_apply_bad_words_single_batch``."""
    return run_checks("Exercise 3.8 — _apply_bad_words_single_batch", CHECKS_3_8_BAD_WORDS, single_batch, seed=seed)


@answer_key("3.8")
def _bad_words_reference(bad_words_token_ids: dict[int, list[list[int]]],
                        past_tokens_ids: list[list[int]]) -> set[tuple[int, int]]:
    """The ``(row, token)`` pairs whose logit must be ``-inf`` after :func:`apply_bad_words`."""
    banned = set()
    for row, words in bad_words_token_ids.items():
        past = past_tokens_ids[row]
        for word in words:
            prefix = word[:-1]
            if len(prefix) <= len(past) and (not prefix or past[len(past) - len(prefix):] == prefix):
                banned.add((row, word[-1]))
    return banned
