"""Chapter 0 (the primer): the checks of the chapter's exercises, each a Check that names the reader's fault.

A room of :mod:`synclab.primer` (its docstring tells the chapter).
"""

from __future__ import annotations

import random
from contextlib import nullcontext
from typing import Callable

import torch

from synclab.checks import (Check, CheckFailed, Clause, CheckReport, expect, expect_equal, keyed_by_name, run_checks,
                            found_right)
from synclab.device import DeviceLike, pick_device, to_device
from synclab.answer_keys import answer_key


from synclab.primer.workloads import DecodeBatch, StepOutput, copy_batch, make_batch
from synclab.syncs import SyncReport, count_syncs


# ----------------------------------------------------------------------------- checks for Exercise 0.1


DecodeStep = Callable[[DecodeBatch], StepOutput]


@answer_key("0.1")
def _decode_step_reference(batch: DecodeBatch) -> StepOutput:
    """A plain host-side reference for the checks: everything copied to Python first."""
    logits = batch.logits.cpu()
    if torch.isnan(logits).any():
        raise ValueError("NaN in logits")
    sampled = [int(row.argmax()) for row in logits] if batch.num_reqs else []
    lens = batch.seq_lens_cpu.tolist()
    finished = [t == batch.eos_token_id or n + 1 >= batch.max_model_len for t, n in zip(sampled, lens)]
    for out, t in zip(batch.output_token_ids, sampled):
        out.append(t)
    batch.seq_lens_gpu += 1
    batch.seq_lens_cpu += 1
    return StepOutput(sampled, finished)


def _expect_host_values(values: list, kind: type, what: str, case: str, fix: str,
                        also: tuple[type, ...] = ()) -> None:
    """Each item of ``values`` is a plain ``kind`` (or one of ``also``), not a tensor only equal to one."""
    for pos, value in enumerate(values):
        if type(value) is kind or type(value) in also:
            continue
        if isinstance(value, torch.Tensor):
            raise CheckFailed(f"{what} must hold Python {kind.__name__}s, not tensors", expected=kind.__name__,
                              got=f"a {value.dim()}-d tensor at index {pos}: {value!r}", case=case,
                              hint="a 0-d tensor compares equal to its value (tensor(5) == 5 is true), so the values "
                                   "look right; but the host needs Python values: the engine reads these after the "
                                   "step (to detokenize, to stop a request), and each read of a 0-d device tensor "
                                   f"is a sync of its own, later. {fix}")
        raise CheckFailed(f"{what} must hold Python {kind.__name__}s", expected=kind.__name__,
                          got=f"{type(value).__name__} {value!r} at index {pos}", case=case,
                          hint=f"{fix} ({kind.__name__}(x) turns a host value into one)")


def _same_step(impl: DecodeStep, batch: DecodeBatch, case: str, *, counted: bool = False) -> SyncReport | None:
    """Run ``impl`` on a copy of ``batch`` and compare everything with the reference; ``counted``: under
    ``count_syncs``, whose report comes back (the call whose syncs count is a call whose results count)."""
    mine, ref = copy_batch(batch), copy_batch(batch)
    lists_before = [id(o) for o in mine.output_token_ids]
    lens_before = [len(o) for o in mine.output_token_ids]
    want = _decode_step_reference(ref)
    with count_syncs() if counted else nullcontext() as report:
        got = impl(mine)
    expect(isinstance(got, StepOutput), "decode_step must return a StepOutput", got=type(got).__name__, case=case)
    # Values alone cannot tell an int from a 0-d tensor holding it: check the types first.
    ints = "Read the token ids back in the step's one .tolist(): it gives Python ints"
    _expect_host_values(list(got.sampled_token_ids), int, "sampled_token_ids", case, ints)
    _expect_host_values(list(got.finished), bool, "finished", case,
                        "Decide finished on the host, from the ints of the step's one .tolist() and seq_lens_cpu; "
                        "a 0/1 flag read back with the ids becomes one with bool(flag)")
    appended = [o[n] for o, n in zip(mine.output_token_ids, lens_before) if len(o) > n]
    _expect_host_values(appended, int, "the tokens appended to output_token_ids", case, ints)
    expect_equal(list(got.sampled_token_ids), want.sampled_token_ids, what="sampled_token_ids", case=case,
                 hint="the next token is the argmax of each request's logits row")
    expect_equal([bool(f) for f in got.finished], want.finished, what="finished", case=case,
                 hint="finished = EOS sampled, or seq_len + 1 >= max_model_len")
    expect_equal(mine.output_token_ids, ref.output_token_ids, what="output_token_ids after the step", case=case,
                 hint="append each sampled token to its request's list")
    expect([id(o) for o in mine.output_token_ids] == lists_before,
           "output lists must be updated in place (the request state holds the same list objects)", case=case)
    expect_equal(mine.seq_lens_cpu.tolist(), ref.seq_lens_cpu.tolist(), what="seq_lens_cpu", case=case,
                 hint="both copies of the lengths grow by one per step: the host's is the one the finish rule reads")
    expect_equal(mine.seq_lens_gpu.cpu().tolist(), ref.seq_lens_gpu.cpu().tolist(), what="seq_lens_gpu", case=case,
                 hint="both copies of the lengths grow by one per step")
    return report


def _check_fixed(impl: DecodeStep, rng: random.Random) -> None:
    for num_reqs in (1, 3, 8):
        _same_step(impl, make_batch(num_reqs, rng=random.Random(num_reqs)), f"fixed batch of {num_reqs}")
    eos_everywhere = make_batch(4, rng=random.Random(1))
    eos_everywhere.logits[:, eos_everywhere.eos_token_id] = 100.0
    _same_step(impl, eos_everywhere, "every request samples EOS")
    at_limit = make_batch(4, rng=random.Random(2))
    at_limit.seq_lens_cpu.fill_(at_limit.max_model_len - 1)
    at_limit.seq_lens_gpu.fill_(at_limit.max_model_len - 1)
    _same_step(impl, at_limit, "every request reaches max_model_len")


def _check_empty(impl: DecodeStep, rng: random.Random) -> None:
    _same_step(impl, make_batch(0, rng=rng), "empty batch (0 requests)")


def _check_random(impl: DecodeStep, rng: random.Random) -> None:
    for trial in range(25):
        num_reqs, vocab = rng.randrange(0, 65), rng.choice([2, 17, 128, 1000])
        _same_step(impl, make_batch(num_reqs, vocab, rng=rng), f"random batch #{trial}: {num_reqs} requests, vocab {vocab}")


def _nan_batch(rng: random.Random) -> DecodeBatch:
    batch = make_batch(5, rng=rng)
    batch.logits[rng.randrange(5), rng.randrange(128)] = float("nan")
    return batch


def _rejects_nan(impl: DecodeStep, batch: DecodeBatch, case: str, *, counted: bool = False) -> SyncReport | None:
    """``impl`` over NaN logits raises ValueError and changes nothing; ``counted``: under ``count_syncs``, where only
    answers that raised uncounted arrive (the NaN check reports what a rejected step leaves as found right)."""
    before = [list(o) for o in batch.output_token_ids]
    lens_cpu, lens_gpu = batch.seq_lens_cpu.tolist(), batch.seq_lens_gpu.cpu().tolist()
    try:
        with count_syncs() if counted else nullcontext() as report:
            impl(batch)
    except ValueError:
        expect_equal(batch.output_token_ids, before, what="output lists after a rejected step",
                     hint="raise before changing any state", case=case, same_for_every_pass=not counted)
        for what, now, was in (("seq_lens_cpu", batch.seq_lens_cpu.tolist(), lens_cpu),
                               ("seq_lens_gpu", batch.seq_lens_gpu.cpu().tolist(), lens_gpu)):
            expect_equal(now, was, what=f"{what} after a rejected step", case=case, same_for_every_pass=not counted,
                         hint="a refused step changes nothing: advance the lengths only after the NaN test has "
                              "passed, as the output lists")
        return report
    raise CheckFailed("a step over NaN logits must raise ValueError", expected="ValueError", got="no exception",
                      case=case, hint="keep the NaN check; bring its answer back with the tokens")


def _check_nan(impl: DecodeStep, rng: random.Random) -> None:
    _rejects_nan(impl, _nan_batch(rng), "NaN in logits")


READ_BACK_BYTES_PER_REQUEST = 64  # the contract's budget: a few int64 values per request (a token, flags), no logits


def _check_syncs(impl: DecodeStep, rng: random.Random) -> None:
    for num_reqs in (1, 16, 64):
        case = f"{num_reqs} requests"  # named before the call: a hang reports it
        batch = make_batch(num_reqs, rng=rng)
        report = _same_step(impl, batch, f"the counted call, {num_reqs} requests", counted=True)
        requests = f"{num_reqs} request{'s' * (num_reqs != 1)}"
        expect(report.count <= 1, f"{report.count} syncs in one step of {requests}", expected="at most 1",
               got=f"{report.count}: " + "; ".join(f"{e.kind.value} at {e.where}" for e in report.events[:4]),
               case=case,
               hint="compute argmax and the NaN test for the whole batch on the device, bring them back in ONE "
                    ".tolist(), and use seq_lens_cpu (the host already knows the lengths)")
        budget = READ_BACK_BYTES_PER_REQUEST * (num_reqs + 1)  # a few values per request, never a row of logits
        expect(report.bytes_to_host <= budget, f"{report.bytes_to_host} bytes read back to the host",
               expected=f"at most {budget} bytes for {requests}: eight 8-byte values per request, and room for one request more (a row of logits alone is "
                        f"{batch.logits.shape[-1] * batch.logits.element_size()} bytes)",
               got=report.bytes_to_host, case=case,
               hint="one sync, but not a copy of the logits: reduce on the device (argmax) before reading back, and "
                    "read back a few values per request")
    # the NaN test is part of the step's one sync: a step that skips it while counted saves that sync. One that
    # never raises is the NaN check's fault to name, not this one's: only a step that raises uncounted is held to
    # raising while counted
    nan_batch = _nan_batch(rng)
    try:
        impl(copy_batch(nan_batch))
    except ValueError:
        pass
    else:
        return
    report = _rejects_nan(impl, nan_batch, "the counted call, NaN in logits", counted=True)
    expect(report.count <= 1, f"{report.count} syncs in one step over NaN logits", expected="at most 1",
           got=f"{report.count}: " + "; ".join(f"{e.kind.value} at {e.where}" for e in report.events[:4]),
           case="5 requests, NaN in logits",
           hint="bring the NaN test's answer back with the tokens, in the step's one .tolist(), then raise")


CHECKS_0_1 = [
    Check("0.1", "same result as the reference on fixed cases", _check_fixed, random=False),
    Check("0.1", "empty batch", _check_empty,
          hint="a step of 0 requests has no row to read: return two empty lists, reading nothing by index"),
    Check("0.1", "same result on random batches (0 to 64 requests)", _check_random),
    Check("0.1", "NaN logits raise ValueError before any update", _check_nan),
    Check("0.1", "at most 1 sync per step, whatever the batch size; no logits read back", _check_syncs),
]


def check_decode_step(impl: DecodeStep, seed: int | None = None) -> CheckReport:
    """Exercise 0.1: run every check against ``impl``."""
    return run_checks("Exercise 0.1 — decode_step", CHECKS_0_1, impl, seed=seed)


# ----------------------------------------------------------------------------- Exercise 0.2: predict the syncs


def _snippets(device: DeviceLike) -> dict[str, Callable[[], object]]:
    """Snippets whose sync count the reader predicts; ``x`` and ``idx`` live on the device."""
    x = to_device(torch.arange(16.0), device)  # [16] device
    idx = to_device(torch.tensor([2, 9]), device)  # [2] device
    sizes_cpu = torch.tensor([4, 12])  # [2] host metadata
    return {
        "a: x[2:9].sum()": lambda: x[2:9].sum(),
        "b: x[idx[0]:idx[1]]": lambda: x[idx[0]:idx[1]],
        "c: x.split(sizes_cpu.tolist())": lambda: x.split(sizes_cpu.tolist()),
        "d: x.max().item()": lambda: x.max().item(),
        "e: x[x > 3]": lambda: x[x > 3],
        "f: x.index_fill_(0, idx, 0.0)": lambda: x.index_fill_(0, idx, 0.0),
        "g: idx.tolist()": lambda: idx.tolist(),
        "h: if x.sum() > 0: pass": lambda: bool(x.sum() > 0),
    }


SNIPPETS = list(_snippets("cpu"))

# What each snippet's line does, said to a reader whose prediction is off (the lesson, not the number).
WHY = {
    "a": "its bounds are Python ints, which the host knows; .sum() is queued on the device and stays there",
    "b": "a slice needs its bounds on the host to make the view, and each tensor bound is read back on its own",
    "c": "sizes_cpu lives in host memory: .tolist() reads the host, and split makes views by host-side sizes",
    "d": ".item() brings one device value to the host",
    "e": "a boolean mask's result size depends on the data: the host must learn it to allocate the output",
    "f": "index_fill_ takes its indices as a device tensor and fills on the device: nothing comes back",
    "g": ".tolist() of a device tensor brings its values to the host, all in one read",
    "h": "`if` needs a Python bool: the comparison's result comes back to the host",
}


@answer_key("0.2", role="prediction measurer")
def _measure_snippet_syncs(device: DeviceLike | None = None) -> dict[str, int]:
    """How many syncs each snippet of Exercise 0.2 really performs, counted with ``count_syncs``."""
    counts = {}
    for name, snippet in _snippets(device or pick_device()).items():
        with count_syncs() as report:
            snippet()
        counts[name] = report.count
    return counts


def check_predictions(predict: Callable[[], dict[str, int]], seed: int | None = None) -> CheckReport:
    """Exercise 0.2: compare the reader's predicted sync counts (``predict()``) with the measured ones."""

    def run(predict: Callable[[], dict[str, int]], rng: random.Random) -> None:
        preds = predict()
        expect(isinstance(preds, dict), "my_predictions() must return a dict", got=type(preds).__name__)
        preds = keyed_by_name(preds, SNIPPETS)
        missing, unknown = [k for k in SNIPPETS if k not in preds], [k for k in preds if k not in SNIPPETS]
        expect(not missing and not unknown, "predict every snippet, keyed by its name or its letter",
               got="; ".join(([f"missing: {', '.join(repr(k) for k in missing)}"] if missing else [])
                             + ([f"not a snippet: {', '.join(repr(k) for k in unknown)}"] if unknown else [])),
               hint="the keys are the snippets' letters ('a' to 'h'); a letter with its snippet, 'a: x[2:9].sum()', is "
                    "read the same")
        # exactly an int: a bool is not a count, and a subclass of int may compare its own way
        not_counts = {k: v for k, v in preds.items() if type(v) is not int}
        expect(not not_counts, "each prediction is a number of syncs (an int)",
               got="; ".join(f"{k}: {v!r} (a {type(v).__name__})" for k, v in not_counts.items()),
               hint="write 0, 1, 2, ... as numbers, not strings or booleans")
        measured = _measure_snippet_syncs()
        wrong = {k: preds[k] for k in SNIPPETS if preds[k] != measured[k]}
        # the reasons in the message itself, which is never shortened (a value's room is 300 characters)
        expect(not wrong, f"{len(wrong)} of {len(SNIPPETS)} prediction(s) off. " + "; ".join(
                   f"{k}: you said {p}, but {WHY[k.split(':')[0]]}" for k, p in wrong.items()),
               share=1 - len(wrong) / len(SNIPPETS), case=f"the {len(SNIPPETS)} snippets, each counted",
               hint="a sync happens when the host needs a device VALUE or a data-dependent SHAPE")
        found_right({k: preds[k] for k in SNIPPETS})  # every right answer says the same

    check = Check("0.2", "predicted sync counts match count_syncs", run, random=False)
    return run_checks("Exercise 0.2 — predict the syncs", [check], predict, seed=seed)


# ----------------------------------------------------------------------------- the clauses of 0.1 and 0.2
# Each clause of the contracts (the page's "The lab", the lab's exercise): its check, fixed case, honest mistake
# (tests/honest/wrong/<wrong>.py) and the words its failure holds; tests/test_clauses.py holds them to it.

_FIXED_0_1, _RANDOM_0_1, _SYNCS_0_1 = (c.name for c in CHECKS_0_1 if c.name.startswith(("same result", "at most")))

CLAUSES = [
    Clause("0.1-finish", "the next length reaching max_model_len", _FIXED_0_1, "every request reaches max_model_len",
           "0.1-length-off-by-one", "seq_len + 1 >= max_model_len", also=(_RANDOM_0_1, _SYNCS_0_1),
           lab="its next length reaches max_model_len"),
    Clause("0.1-host-values", "as Python ints and bools, not tensors", _FIXED_0_1, "fixed batch of 1",
           "0.1-finished-as-tensor-list", "not tensors", also=(_RANDOM_0_1, _SYNCS_0_1)),
    Clause("0.1-nan", "before any state changes", "NaN logits raise ValueError before any update", "NaN in logits",
           "0.1-appends-before-nan-test", "raise before changing any state", also=(_SYNCS_0_1,)),
    Clause("0.1-empty", "the empty one included", "empty batch", "empty batch (0 requests)",
           "0.1-nan-flag-from-first-row", "no row to read", also=(_RANDOM_0_1,), lab="the empty batch included"),
    Clause("0.1-one-sync", "at most one sync per step, whatever the batch size", _SYNCS_0_1, "1 requests",
           "0.1-item-then-tolist", "in ONE .tolist()"),
    Clause("0.2-counts", "predict how many times the host must wait", "predicted sync counts match count_syncs",
           "the 8 snippets, each counted", "0.2-tensor-slice-one-read",
           "each tensor bound is read back on its own"),
    Clause("0.1-lists-in-place", "each token appended to its request's list in place", _FIXED_0_1,
           "fixed batch of 1", "0.1-token-lists-rebuilt", "updated in place", also=(_RANDOM_0_1, _SYNCS_0_1),
           lab="in place (the request state holds those very lists)"),
    Clause("0.1-both-lengths", "both copies of the lengths one longer", _FIXED_0_1, "fixed batch of 1",
           "0.1-host-lengths-left-behind", "the host's is the one the finish rule reads",
           also=(_RANDOM_0_1, _SYNCS_0_1), lab="both seq_lens_gpu and seq_lens_cpu grow by one"),
    Clause("0.1-no-logits", "never the logits", _SYNCS_0_1, "1 requests", "0.1-logits-read-back",
           "not a copy of the logits", lab="never the logits themselves"),
]
