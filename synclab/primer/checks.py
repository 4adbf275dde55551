"""Chapter 0 (the primer): the checks of the chapter's exercises, each a Check that names the reader's fault.

A room of :mod:`synclab.primer` (its docstring tells the chapter).
"""

from __future__ import annotations

import numbers
import random
from contextlib import nullcontext
from typing import Callable

import torch

from synclab.checks import (Check, CheckFailed, Clause, CheckReport, expect, expect_equal, keyed_by_name, run_checks,
                            found_right)
from synclab.device import DeviceLike, pick_device, to_device
from synclab.answer_keys import answer_key  # marks the package's versions: no answer may call them


from synclab.answer_keys.runners import runs_with_the_answer
from synclab.primer.workloads import DecodeBatch, StepOutput, batch_of
from synclab.syncs import IN_FLIGHT, SyncReport, count_syncs


# ----------------------------------------------------------------------------- checks for Exercise 0.1


DecodeStep = Callable[[DecodeBatch], StepOutput]


@answer_key("0.1")
def _decode_step_reference(case: dict) -> dict:
    """What a right step does to the batch ``case`` names (:func:`batch_of`), worked out on the host (a reference is
    the grader's work, not the device's): the batch made there, everything copied to Python first. Its result (the
    step's output, the lists and both lengths after it) is plain data."""
    batch = batch_of(case, torch.device("cpu"))
    logits = batch.logits.cpu()
    if torch.isnan(logits).any():
        raise ValueError("NaN in logits")
    sampled = [int(row.argmax()) for row in logits] if batch.num_reqs else []
    lens = batch.seq_lens_cpu.tolist()
    finished = [t == batch.eos_token_id or n + 1 >= batch.max_model_len for t, n in zip(sampled, lens)]
    return {"sampled": sampled, "finished": finished,
            "outputs": [out + [t] for out, t in zip(batch.output_token_ids, sampled)],
            "seq_lens": [n + 1 for n in lens]}


def _host_values(values: list) -> list:
    """Each of ``values`` as a check compares it, the same wherever the step ran: a Python int or bool as itself,
    anything else as what it is (its type, its dimensions when a tensor, its repr)."""
    return [v if type(v) in (int, bool) else
            {"not plain": _type_name(v), "dim": v.dim() if isinstance(v, torch.Tensor) else None,
             "repr": repr(v)[:200]} for v in values]


@runs_with_the_answer
def step_outcome(impl: DecodeStep, case: dict, counted: bool = False) -> dict:
    """``impl`` run on the batch ``case`` names: what it returned and what it left in the batch, as data, and, when
    ``counted``, the syncs of the call (a runner: Exercise 0.1's checks reach the reader's step by it)."""
    batch = batch_of(case)
    lists_before = [id(o) for o in batch.output_token_ids]
    lens_before = [len(o) for o in batch.output_token_ids]
    with count_syncs() if counted else nullcontext() as report:
        got = impl(batch)
    outcome: dict = {"returned": type(got).__name__, "step_output": isinstance(got, StepOutput)}
    if isinstance(got, StepOutput):
        outcome["sampled"] = _host_values(list(got.sampled_token_ids))
        outcome["finished"] = _host_values(list(got.finished))
    outcome["appended"] = _host_values([o[n] for o, n in zip(batch.output_token_ids, lens_before) if len(o) > n])
    outcome["outputs"] = [_host_values(list(o)) for o in batch.output_token_ids]
    outcome["in_place"] = [id(o) for o in batch.output_token_ids] == lists_before
    outcome["seq_lens_cpu"] = batch.seq_lens_cpu.tolist()
    outcome["seq_lens_gpu"] = batch.seq_lens_gpu.cpu().tolist()
    if report is not None:
        outcome["syncs"] = _syncs_as_data(report)
    return outcome


@runs_with_the_answer
def rejected_step_outcome(impl: DecodeStep, case: dict, counted: bool = False) -> dict:
    """``impl`` run on the batch ``case`` names (NaN logits): whether it raised ValueError, and then what it left in
    the batch, as data, with the syncs of the call when ``counted`` (a runner, as :func:`step_outcome`)."""
    batch = batch_of(case)
    try:
        with count_syncs() if counted else nullcontext() as report:
            impl(batch)
    except ValueError:
        return {"raised": True, "outputs": [_host_values(list(o)) for o in batch.output_token_ids],
                "seq_lens_cpu": batch.seq_lens_cpu.tolist(), "seq_lens_gpu": batch.seq_lens_gpu.cpu().tolist(),
                "syncs": _syncs_as_data(report) if report is not None else None}
    return {"raised": False}


def _syncs_as_data(report: SyncReport) -> dict:
    """What the checks read of a count: the syncs, the first four of them (kind, reader's line) and the bytes read."""
    return {"count": report.count, "first": [f"{e.kind.value} at {e.where}" for e in report.events[:4]],
            "bytes_to_host": report.bytes_to_host}


def _expect_host_values(values: list, kind: type, what: str, case: str, fix: str) -> None:
    """Each item of ``values`` (:func:`_host_values`) is a plain ``kind``, not a tensor only equal to one."""
    for pos, value in enumerate(values):
        if type(value) is kind:
            continue
        if isinstance(value, dict) and value["dim"] is not None:
            raise CheckFailed(f"{what} must hold Python {kind.__name__}s, not tensors", expected=kind.__name__,
                              got=f"a {value['dim']}-d tensor at index {pos}: {value['repr']}", case=case,
                              hint="a 0-d tensor compares equal to its value (tensor(5) == 5 is true), so the values "
                                   "look right; but the host needs Python values: the engine reads these after the "
                                   "step (to detokenize, to stop a request), and each read of a 0-d device tensor "
                                   f"is a sync of its own, later. {fix}")
        name, text = (value["not plain"], value["repr"]) if isinstance(value, dict) else (_type_name(value),
                                                                                           repr(value))
        # the remedy for what was found: a NumPy scalar, or a Python value of another type (int flags for bools)
        how = (".tolist() gives Python values from a NumPy array" if name.startswith("numpy") else
               f"{kind.__name__}(x) turns a host value into one; a tensor's .tolist() gives its dtype's Python type "
               f"(a bool tensor bools, an int64 one ints)")
        raise CheckFailed(f"{what} must hold Python {kind.__name__}s", expected=kind.__name__,
                          got=f"{name} {text} at index {pos}", case=case, hint=f"{fix} ({how})")


def _type_name(value: object) -> str:
    """``numpy.bool`` rather than ``bool``: NumPy's scalar types share the names of Python's."""
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _finished_hint(batch: dict, got: list, want: list[bool], sampled: list[int]) -> str:
    """The finish rule, applied to the first request whose flag is wrong, with that request's numbers."""
    rule = "finished = EOS sampled, or seq_len + 1 >= max_model_len, with seq_len as it was before this step"
    wrong = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
    if len(got) != len(want) or not wrong:
        return rule
    i, before = wrong[0], batch_of(batch)
    length = int(before.seq_lens_cpu[i])
    return (f"{rule}. Request {i}: length {length} before this step, max_model_len {before.max_model_len}, sampled "
            f"{sampled[i]} (EOS is {before.eos_token_id}), so it is {'' if want[i] else 'not '}finished" + (f" ({len(wrong)} requests differ)" if len(wrong) > 1 else ""))


# A download with non_blocking=True returns before its copy lands (the lab's device fills the host buffer with
# IN_FLIGHT, -12345, until then, as a GPU leaves whatever the memory held); only the counted calls run on it.
_READ_TOO_EARLY = (f"{int(IN_FLIGHT)} is what the lab's device leaves in a host buffer whose copy has not landed: "
                   ".to('cpu', non_blocking=True) returns before the copy, and reading the result then reads "
                   "garbage. Read back with one blocking .tolist(): the step's one sync")


def _same_step(impl: DecodeStep, batch: dict, case: str, *, counted: bool = False) -> dict | None:
    """Run ``impl`` on the batch ``batch`` names (:func:`batch_of`) and compare everything with the reference; ``counted``: its syncs
    counted, which come back (the call whose syncs count is a call whose results count)."""
    want = _decode_step_reference(batch)
    try:
        got = step_outcome(impl, batch, counted)
    except ValueError as error:  # over logits that hold no NaN: the NaN flag it read was not the one computed
        if batch["kind"] == "nan":
            raise
        raise CheckFailed("the step raised ValueError over logits that hold no NaN", expected="no exception",
                          got=f"ValueError: {error}", case=case,
                          hint="a NaN flag read before its copy landed is not 0: " + _READ_TOO_EARLY) from None
    expect(got["step_output"], "decode_step must return a StepOutput", got=got["returned"], case=case)
    # Values alone cannot tell an int from a 0-d tensor holding it: check the types first.
    ints = "Read the token ids back in the step's one .tolist(): it gives Python ints"
    _expect_host_values(got["sampled"], int, "sampled_token_ids", case, ints)
    _expect_host_values(got["finished"], bool, "finished", case,
                        "Decide finished on the host, from the ints of the step's one .tolist() and seq_lens_cpu; "
                        "a 0/1 flag read back with the ids becomes one with bool(flag)")
    _expect_host_values(got["appended"], int, "the tokens appended to output_token_ids", case, ints)
    expect_equal(got["sampled"], want["sampled"], what="sampled_token_ids", case=case,
                 hint=_READ_TOO_EARLY if int(IN_FLIGHT) in got["sampled"] else
                 "the next token is the argmax of each request's logits row")
    expect_equal(got["finished"], want["finished"], what="finished", case=case,
                 hint=_finished_hint(batch, got["finished"], want["finished"], want["sampled"]))
    expect_equal(got["outputs"], want["outputs"], what="output_token_ids after the step", case=case,
                 hint="append each sampled token to its request's list")
    expect(got["in_place"], "output lists must be updated in place (the request state holds the same list objects)",
           case=case)
    expect_equal(got["seq_lens_cpu"], want["seq_lens"], what="seq_lens_cpu", case=case,
                 hint="both copies of the lengths grow by one per step: the host's is the one the finish rule reads")
    expect_equal(got["seq_lens_gpu"], want["seq_lens"], what="seq_lens_gpu", case=case,
                 hint="both copies of the lengths grow by one per step")
    return got.get("syncs")


def _case(num_reqs: int, seed: int, kind: str = "plain", vocab: int = 128, nan_at: list[int] | None = None) -> dict:
    """A batch of Exercise 0.1's checks, as data (:func:`batch_of`)."""
    return {"num_reqs": num_reqs, "vocab": vocab, "seed": seed, "kind": kind, "nan_at": nan_at}


def _check_fixed(impl: DecodeStep, rng: random.Random) -> None:
    for num_reqs in (1, 3, 8):
        _same_step(impl, _case(num_reqs, num_reqs), f"fixed batch of {num_reqs}")
    _same_step(impl, _case(4, 1, "eos"), "every request samples EOS")
    _same_step(impl, _case(4, 2, "at_limit"), "every request reaches max_model_len")
    _same_step(impl, _case(4, 3, "one_short"), "every request one token short of max_model_len")


def _check_empty(impl: DecodeStep, rng: random.Random) -> None:
    _same_step(impl, _case(0, rng.randrange(10**6)), "empty batch (0 requests)")


def _check_random(impl: DecodeStep, rng: random.Random) -> None:
    for trial in range(25):
        num_reqs, vocab = rng.randrange(0, 65), rng.choice([2, 17, 128, 1000])
        _same_step(impl, _case(num_reqs, rng.randrange(10**6), vocab=vocab),
                   f"random batch #{trial}: {num_reqs} requests, vocab {vocab}")


def _nan_case(rng: random.Random) -> dict:
    return _case(5, rng.randrange(10**6), "nan", nan_at=[rng.randrange(5), rng.randrange(128)])


def _rejects_nan(impl: DecodeStep, batch: dict, case: str, *, counted: bool = False) -> dict | None:
    """``impl`` over NaN logits raises ValueError and changes nothing; ``counted``: its syncs counted, where only
    answers that raised uncounted arrive (the NaN check reports what a rejected step leaves as found right)."""
    got = rejected_step_outcome(impl, batch, counted)
    if not got["raised"]:
        raise CheckFailed("a step over NaN logits must raise ValueError", expected="ValueError", got="no exception",
                          case=case, hint="keep the NaN check; bring its answer back with the tokens")
    before = batch_of(batch)  # the batch as it was, built here
    expect_equal(got["outputs"], before.output_token_ids, what="output lists after a rejected step",
                 hint="raise before changing any state", case=case, same_for_every_pass=not counted)
    for what in ("seq_lens_cpu", "seq_lens_gpu"):
        expect_equal(got[what], before.seq_lens_cpu.tolist(), what=f"{what} after a rejected step", case=case,
                     same_for_every_pass=not counted,
                     hint="a refused step changes nothing: advance the lengths only after the NaN test has passed, "
                          "as the output lists")
    return got["syncs"]


def _check_nan(impl: DecodeStep, rng: random.Random) -> None:
    # the last request's row first: a step that raises inside its loop has changed every earlier request by then
    _rejects_nan(impl, _case(5, 5, "nan", nan_at=[4, 7]), "NaN in logits (in the last request's row)")
    _rejects_nan(impl, _nan_case(rng), "NaN in logits")


READ_BACK_BYTES_PER_REQUEST = 64  # the contract's budget: a few int64 values per request (a token, flags), no logits


def _check_syncs(impl: DecodeStep, rng: random.Random) -> None:
    # 257: past the random batches' 64 and the profile's 256, and no power of two, so a read back in chunks of any
    # size up to 256 makes a second sync here
    for num_reqs in (1, 16, 64, 257):
        requests = f"{num_reqs} request{'s' * (num_reqs != 1)}"
        case = requests  # named before the call: a hang reports it
        batch = _case(num_reqs, rng.randrange(10**6))
        report = _same_step(impl, batch, f"the counted call, {requests}", counted=True)
        assert report is not None
        expect(report["count"] <= 1, f"{report['count']} syncs in one step of {requests}", expected="at most 1",
               got=f"{report['count']}: " + "; ".join(report["first"]), case=case,
               hint="compute argmax and the NaN test for the whole batch on the device, bring them back in ONE "
                    ".tolist(), and use seq_lens_cpu (the host already knows the lengths)")
        budget = READ_BACK_BYTES_PER_REQUEST * (num_reqs + 1)  # a few values per request, never a row of logits
        row_bytes = 4 * batch["vocab"]  # float32 logits
        expect(report["bytes_to_host"] <= budget, f"{report['bytes_to_host']} bytes read back to the host",
               expected=f"at most {budget} bytes for {requests}: 64 per request (eight int64 values) and 64 more for "
                        f"the batch (a row of logits alone is {row_bytes} bytes)",
               got=report["bytes_to_host"], case=case,
               hint="one sync, but not a copy of the logits: reduce on the device (argmax) before reading back, and "
                    "read back a few values per request")
    # the NaN test is part of the step's one sync: a step that skips it while counted saves that sync. One that
    # never raises is the NaN check's fault to name, not this one's: only a step that raises uncounted is held to
    # raising while counted
    nan_case = _nan_case(rng)
    if not rejected_step_outcome(impl, nan_case)["raised"]:
        return
    report = _rejects_nan(impl, nan_case, "the counted call, NaN in logits", counted=True)
    assert report is not None
    expect(report["count"] <= 1, f"{report['count']} syncs in one step over NaN logits", expected="at most 1",
           got=f"{report['count']}: " + "; ".join(report["first"]), case="5 requests, NaN in logits",
           hint="bring the NaN test's answer back with the tokens, in the step's one .tolist(), then raise")


CHECKS_0_1 = [
    Check("0.1", "same result as the reference on fixed cases", _check_fixed, random=False, id="fixed-cases"),
    Check("0.1", "empty batch", _check_empty,
          hint="a step of 0 requests has no row to read: return two empty lists, reading nothing by index",
              id="empty-batch"),
    Check("0.1", "same result on random batches (0 to 64 requests)", _check_random, id="random-batches"),
    Check("0.1", "NaN logits raise ValueError before any update", _check_nan, id="nan-raises"),
    Check("0.1", "at most 1 sync per step, whatever the batch size; no logits read back", _check_syncs, id="one-sync"),
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
    "h": "`if` needs a Python bool: the sum and the comparison are queued on the device, and only the `if` reads "
         "their one result back to the host",
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


def _check_predictions(predict: Callable[[], dict[str, int]], rng: random.Random) -> None:
    preds = predict()
    expect(isinstance(preds, dict), "my_predictions() must return a dict", got=type(preds).__name__)
    preds = keyed_by_name(preds, SNIPPETS)
    missing, unknown = [k for k in SNIPPETS if k not in preds], [k for k in preds if k not in SNIPPETS]
    expect(not missing and not unknown, "predict every snippet, keyed by its letter",
           got="; ".join(([f"missing: {', '.join(repr(k) for k in missing)}"] if missing else [])
                         + ([f"not a snippet: {', '.join(repr(k) for k in unknown)}"] if unknown else [])),
           hint="the keys are the snippets' letters, lowercase ('a' to 'h': 'A' is not 'a'); a letter with its "
                "snippet, 'a: x[2:9].sum()', is read the same")
    # an int: a bool is not a count; a NumPy integer (a count taken with np.sum, say) or a subclass of int (an
    # IntEnum) is read as the Python int it holds, here as in the grader, where a subclass arrives as its value alone
    # (so an int whose __eq__ says yes to everything earns what its values earn, and the review names it)
    preds = {k: v.item() if type(v).__module__ == "numpy" and isinstance(v, numbers.Integral) else
             int(v) if isinstance(v, int) and not isinstance(v, bool) else v
             for k, v in preds.items()}
    not_counts = {k: v for k, v in preds.items() if type(v) is not int}
    expect(not not_counts, "each prediction is a number of syncs (an int)",
           got="; ".join(f"{k}: {v!r} (a {type(v).__name__})" for k, v in not_counts.items()),
           hint="write 0, 1, 2, ... as Python ints, not strings or booleans")
    measured = _measure_snippet_syncs()
    wrong = {k: preds[k] for k in SNIPPETS if preds[k] != measured[k]}
    # the reasons in the message itself, which is never shortened (a value's room is 300 characters)
    expect(not wrong, f"{len(wrong)} of {len(SNIPPETS)} prediction(s) off. " + "; ".join(
               f"{k}: you said {p}, but {WHY[k.split(':')[0]]}" for k, p in wrong.items()),
           share=1 - len(wrong) / len(SNIPPETS), case=f"the {len(SNIPPETS)} snippets, each counted",
           hint="a sync happens when the host needs a device VALUE or a data-dependent SHAPE")
    found_right({k: preds[k] for k in SNIPPETS})  # every right answer says the same


CHECKS_0_2 = [Check("0.2", "predicted sync counts match count_syncs", _check_predictions, random=False,
                    id="predictions")]


def check_predictions(predict: Callable[[], dict[str, int]], seed: int | None = None) -> CheckReport:
    """Exercise 0.2: compare the reader's predicted sync counts (``predict()``) with the measured ones."""
    return run_checks("Exercise 0.2 — predict the syncs", CHECKS_0_2, predict, seed=seed)


# ----------------------------------------------------------------------------- the clauses of 0.1 and 0.2
# Each clause of the contracts (the page's "The lab", the lab's exercise): its check, fixed case, honest mistake
# (tests/honest/wrong/<wrong>.py) and the words its failure holds; tests/test_clauses.py holds them to it.

CLAUSES = [
    Clause("0.1-finish", "the next length reaching max_model_len", "fixed-cases", "every request reaches max_model_len",
           "0.1-length-off-by-one", "seq_len + 1 >= max_model_len", also=("random-batches", "one-sync"),
           lab="its next length reaches max_model_len"),
    Clause("0.1-host-values", "as Python ints and bools, not tensors", "fixed-cases", "fixed batch of 1",
           "0.1-finished-as-tensor-list", "not tensors", also=("random-batches", "one-sync")),
    Clause("0.1-nan", "before any state changes", "nan-raises", "NaN in logits",
           "0.1-appends-before-nan-test", "raise before changing any state", also=("one-sync",)),
    Clause("0.1-empty", "the empty one included", "empty-batch", "empty batch (0 requests)",
           "0.1-nan-flag-from-first-row", "no row to read", also=("random-batches",), lab="the empty batch included"),
    Clause("0.1-one-sync", "at most one sync per step, whatever the batch size", "one-sync", "1 request",
           "0.1-item-then-tolist", "in ONE .tolist()"),
    Clause("0.2-counts", "predict how many times the host must wait", "predictions",
           "the 8 snippets, each counted", "0.2-tensor-slice-one-read",
           "each tensor bound is read back on its own"),
    Clause("0.1-lists-in-place", "each token appended to its request's list in place", "fixed-cases",
           "fixed batch of 1", "0.1-token-lists-rebuilt", "updated in place", also=("random-batches", "one-sync"),
           lab="in place (the request state holds those very lists)"),
    Clause("0.1-both-lengths", "both copies of the lengths one longer", "fixed-cases", "fixed batch of 1",
           "0.1-host-lengths-left-behind", "the host's is the one the finish rule reads",
           also=("random-batches", "one-sync"), lab="both seq_lens_gpu and seq_lens_cpu grow by one"),
    Clause("0.1-no-logits", "never the logits", "one-sync", "1 request", "0.1-logits-read-back",
           "not a copy of the logits", lab="never the logits themselves"),
]
