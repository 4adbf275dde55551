"""Chapter {{n}} ({{title}}): the checks of the chapter's exercises, each a Check that names the reader's fault.

A room of :mod:`synclab.{{slug}}`. It imports the chapter's workloads, never its profiling.
"""

from __future__ import annotations

import random
from typing import Callable

import torch

from synclab.answer_keys import answer_key
from synclab.answer_keys.runners import runs_with_the_answer
from synclab.checks import Check, CheckReport, Clause, expect, expect_equal, found_right, run_checks
from synclab.device import is_device_tensor
from synclab.{{slug}}.workloads import make_inputs
from synclab.syncs import count_syncs

SumOnDevice = Callable[[torch.Tensor], torch.Tensor]


@answer_key("{{n}}.1")
def _sum_reference(n: int) -> float:
    """The sum of ``make_inputs(n)``'s values, worked out on the host (the answer the checks keep)."""
    return float(sum(range(n)))


@runs_with_the_answer
def sum_outcome(impl: SumOnDevice, n: int) -> dict:
    """``impl`` run on ``n`` values: what it returned, as data, and the syncs of the call (a runner: the checks reach
    the reader's code by it)."""
    values = make_inputs(n)  # uploaded before the count: the call's own syncs are counted
    with count_syncs() as report:
        got = impl(values)
    tensor = isinstance(got, torch.Tensor)
    return {"tensor": tensor, "on_device": tensor and is_device_tensor(got), "dim": got.dim() if tensor else None,
            "value": float(got) if tensor and got.numel() == 1 else repr(got)[:80],
            "syncs": report.count, "lines": [f"{e.kind.value} at {e.where} `{e.code}`" for e in report.events]}


def _check_fixed(impl: SumOnDevice, rng: random.Random) -> None:
    for n in (0, 1, 8):
        got = sum_outcome(impl, n)
        case = f"{n} values"
        expect(got["on_device"] and got["dim"] == 0, "the sum must be a 0-d tensor on the device", case=case,
               got=f"dim {got['dim']}, on the device: {got['on_device']}" if got["tensor"] else got["value"],
               hint="reduce on the device (values.sum()) and return the tensor itself, not a Python number")
        expect_equal(got["value"], _sum_reference(n), what="the sum", case=case)
        found_right(got["value"])


def _check_no_sync(impl: SumOnDevice, rng: random.Random) -> None:
    for n in (8, 64):
        got = sum_outcome(impl, n)
        expect(got["syncs"] == 0, f"{got['syncs']} sync(s) in one call: " + "; ".join(got["lines"]),
               expected="0", case=f"{n} values",
               hint="each line named read back or sent up a value: nothing here needs the host to read it back "
                    "(no .item(), float() or torch.tensor(..., device=...) of a host number)")


CHECKS_{{n}}_1 = [
    Check("{{n}}.1", "the sum of every value, as a 0-d device tensor", _check_fixed, random=False, id="fixed-cases"),
    Check("{{n}}.1", "0 syncs per call", _check_no_sync, random=False, id="no-sync"),
]


def check_sum_on_device(impl: SumOnDevice, seed: int | None = None) -> CheckReport:
    """Exercise {{n}}.1: run every check against the reader's ``impl``."""
    return run_checks("Exercise {{n}}.1 — sum_on_device", CHECKS_{{n}}_1, impl, seed=seed)


# ----------------------------------------------------------------------------- the clauses of {{n}}.1
# Each clause of the contracts (the page's "The lab", the lab's exercise): its check, fixed case, honest mistake
# (tests/honest/wrong/<wrong>.py) and the words its failure holds; tests/test_clauses.py holds them to it.

CLAUSES = [
    Clause("{{n}}.1-no-sync", "reading nothing back", "no-sync", "8 values", "{{n}}.1-reads-the-sum-back",
           "read back"),
]
