"""Chapter 3, Exercise 3.7: the data-parallel all-reduce on a real process group, and its checks.

Every check calls the reader's ``_run_ar`` / ``_synchronize_dp_ranks`` on every rank of
a :class:`synclab.distributed.RankGroup` (two spawned processes, gloo on a CPU-only
machine) with a different contribution per rank, counts the syncs on each rank, and
compares what each rank got with the plain-Python reference. The group is started
once per ``check_dp_sync`` call and always stopped, however the reader's code ends.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from synclab.checks import Check, CheckFailed, CheckReport, CheckTimeout, expect, run_checks
from synclab.device import is_device_tensor
from synclab.distributed import CALL_TIMEOUT_S, RankError, RankGroup, RankTimeout
from synclab.engine.dp_utils import Contribution, ParallelConfig, dp_reference, run_ar_reference
from synclab.engine.sim_pinning import PinnedMemoryUnavailable, simulated_pinning
from synclab.pinned_transfers.common import PIN_HINT, WSL_HINT
from synclab.syncs import SyncKind, count_syncs

RunArFunction = Callable[..., Any]
SyncRanksFunction = Callable[..., Any]

WORLD_SIZE = 2
FIELD_WRITE_HINT = ("tensor[f][rank] = value on a device tensor copies each value over, blocking: write the fields "
                    "into a host tensor (pinned where available), then upload it once with non_blocking=True")
ONE_READ_HINT = ("read the reduced table back once (tensor.cpu()), then run vLLM's readers on the host copy "
                 "(synclab.engine.dp_utils.post_process): .item() on a host tensor waits for nothing")
COLLECTIVE_HINT = "every rank must call dist.all_reduce on the group from _get_device_and_group, with the same shape"


@dataclass
class DPImpl:
    """What the checks run: the reader's two functions, and the ranks to run them on."""

    run_ar: RunArFunction
    synchronize_dp_ranks: SyncRanksFunction
    ranks: RankGroup


# ----------------------------------------------------------------------------- on each rank


def rank_call(rank: int, fn: Callable[..., Any], what: str, contributions: Sequence[Contribution],
              num_ubatches: int, cpu_group: bool, pinning: bool) -> dict[str, Any]:
    """On one rank: call the reader's function with this rank's contribution, counted. Plain data back."""
    should_ubatch, orig, padded, mode = contributions[rank]
    config = ParallelConfig(len(contributions), rank, num_ubatches, cpu_group)
    try:
        with simulated_pinning(pinning), count_syncs() as report:
            if what == "run_ar":
                out = fn(should_ubatch, orig, padded, mode, config)
            else:  # vLLM's order: unpadded, padded, should_attempt_ubatching, cudagraph_mode, config
                out = fn(orig, padded, should_ubatch, mode, config)
    except PinnedMemoryUnavailable as exc:
        return {"pinning_refused": str(exc).split(":")[0]}
    except NotImplementedError as exc:  # a stub: not a crash, the ranks stay up for the next check
        return {"not_implemented": str(exc)}
    result: dict[str, Any] = {"syncs": report.count, "staged": report.staged_count,
                              "kinds": sorted({e.kind.value for e in report.events}),
                              "events": [f"{e.kind.value} at {e.where} `{e.code}`" for e in report.events],
                              "staged_at": [f"{e.where} `{e.code}`" for e in report.staged]}
    if what == "run_ar":
        result.update(_tensor_summary(out))
    else:
        ok = isinstance(out, tuple) and len(out) == 3
        result["returned"] = type(out).__name__ if not ok else "tuple"
        if ok:
            result["should_ubatch"], padding, result["cudagraph_mode"] = out[0], out[1], out[2]
            result["padding"] = _tensor_summary(padding)
    return result


def _tensor_summary(t: Any) -> dict[str, Any]:
    if not isinstance(t, torch.Tensor):
        return {"type": type(t).__name__}
    return {"type": "Tensor", "on_device": is_device_tensor(t), "dtype": str(t.dtype).replace("torch.", ""),
            "values": t.cpu().tolist()}


# ----------------------------------------------------------------------------- in the checking process


def _on_ranks(impl: DPImpl, what: str, contributions: Sequence[Contribution], case: str, num_ubatches: int = 2,
              cpu_group: bool = False, pinning: bool = True) -> list[dict[str, Any]]:
    fn = impl.run_ar if what == "run_ar" else impl.synchronize_dp_ranks
    try:
        results = impl.ranks.run(rank_call, fn, what, list(contributions), num_ubatches, cpu_group, pinning)
    except RankTimeout as exc:  # the ranks were stopped; the exercise's other checks are skipped
        raise CheckTimeout(f"{what} did not return on every rank ({case}): {exc}", hint=COLLECTIVE_HINT) from None
    except RankError as exc:
        raise CheckFailed(f"{what} raised on rank {exc.rank}", got=exc.detail.strip().splitlines()[-1],
                          hint="the full traceback:\n" + exc.detail, case=case) from None
    for rank, result in enumerate(results):
        if "not_implemented" in result:  # a stub: say so, as the other exercises' checks do
            raise NotImplementedError(result["not_implemented"])
        if "pinning_refused" in result:
            raise CheckFailed("asked for pinned memory where the platform has none", got=result["pinning_refused"],
                              hint=WSL_HINT, case=f"{case}, rank {rank}")
    return results


def _random_contributions(rng: random.Random, n: int = WORLD_SIZE) -> list[Contribution]:
    out = []
    for _ in range(n):
        orig = rng.choice([0, rng.randint(1, 64), rng.randint(64, 8192)])
        out.append((rng.random() < 0.6, orig, orig + rng.choice([0, rng.randint(1, 64)]), rng.choice([0, 1, 2])))
    return out


FIXED_CASES: list[tuple[str, list[Contribution]]] = [
    ("both ranks micro-batch, CUDA graphs on both", [(True, 100, 128, 2), (True, 120, 128, 2)]),
    ("rank 1 does not want micro-batches; modes 1 and 2", [(True, 300, 304, 1), (False, 20, 32, 2)]),
    ("the last micro-batch of rank 0 would be empty: no micro-batching, no padding",
     [(True, 10, 16, 0), (True, 200, 256, 0)]),
    ("CUDA graphs off on rank 0: no padding", [(False, 5, 8, 0), (False, 700, 704, 2)]),
    ("rank 1 has nothing to run (a dummy step)", [(False, 64, 64, 2), (False, 0, 0, 2)]),
]


def _expect_table(result: dict[str, Any], contributions: Sequence[Contribution], case: str, device: bool) -> None:
    expect(result.get("type") == "Tensor", "_run_ar returns the reduced tensor", got=result.get("type"), case=case)
    expect(result["dtype"] == "int32", "the table is int32, as vLLM's", got=result["dtype"], case=case)
    want = run_ar_reference(contributions)
    expect(result["values"] == want, "the reduced table differs",
           expected=want, got=result["values"],
           hint="a [4, dp_size] table of zeros, this rank's column filled with its four fields "
                "(orig, padded, should_ubatch as 0/1, cudagraph_mode), then one all_reduce (a sum)", case=case)
    where = "on the device" if device else "in host memory (the CPU group's collective runs on the host)"
    expect(result["on_device"] == device, f"the reduced table must be {where}",
           got="on the device" if result["on_device"] else "in host memory",
           hint="use the device and group from _get_device_and_group(parallel_config)", case=case)


def _check_run_ar_values(impl: DPImpl, rng: random.Random) -> None:
    cases = FIXED_CASES + [(f"random ranks {i}", _random_contributions(rng)) for i in range(3)]
    for case, contributions in cases:
        for rank, result in enumerate(_on_ranks(impl, "run_ar", contributions, case)):
            _expect_table(result, contributions, f"{case}, rank {rank}", device=True)


def _check_run_ar_syncs(impl: DPImpl, rng: random.Random) -> None:
    case, contributions = FIXED_CASES[0]
    for rank, result in enumerate(_on_ranks(impl, "run_ar", contributions, case)):
        copies = SyncKind.H2D_COPY.value in result["kinds"]
        expect(result["syncs"] == 0, "_run_ar made the host wait", expected="0 syncs",
               got=f"{result['syncs']}: " + "; ".join(result["events"][:4]),
               hint=FIELD_WRITE_HINT if copies else "no value crosses back before the all-reduce",
               case=f"{case}, rank {rank}")
        expect(result["staged"] == 0, "_run_ar uploaded from pageable memory: the host copied into a staging buffer",
               expected="0 staging copies", got="; ".join(result["staged_at"]), hint=PIN_HINT,
               case=f"{case}, rank {rank}")


def _expect_agreement(result: dict[str, Any], contributions: Sequence[Contribution], num_ubatches: int,
                      case: str) -> None:
    expect(result["returned"] == "tuple", "return (should_ubatch, num_tokens_after_padding, cudagraph_mode)",
           got=result["returned"], case=case)
    ubatch, padding, mode = dp_reference(contributions, num_ubatches)
    got_padding = result["padding"]
    expect(result["cudagraph_mode"] == mode, "the CUDA-graph mode differs (the lowest any rank asked for)",
           expected=mode, got=result["cudagraph_mode"], case=case)
    expect(result["should_ubatch"] == ubatch, "the micro-batching decision differs", expected=ubatch,
           got=result["should_ubatch"],
           hint="all ranks must want it, and no rank's last micro-batch may be empty (is_last_ubatch_empty)",
           case=case)
    expect(got_padding.get("type") == "Tensor" and not got_padding["on_device"],
           "num_tokens_after_padding is a host tensor", got=got_padding.get("type"), case=case)
    expect(got_padding["values"] == padding, "tokens per rank after padding differ", expected=padding,
           got=got_padding["values"], hint="pad every rank to the largest when CUDA graphs are on or micro-batching",
           case=case)


def _check_sync_values(impl: DPImpl, rng: random.Random) -> None:
    cases = FIXED_CASES + [(f"random ranks {i}", _random_contributions(rng)) for i in range(4)]
    for case, contributions in cases:
        num_ubatches = rng.choice([2, 2, 3])
        for rank, result in enumerate(_on_ranks(impl, "sync", contributions, case, num_ubatches)):
            _expect_agreement(result, contributions, num_ubatches, f"{case} ({num_ubatches} micro-batches), rank {rank}")


def _check_sync_one_read(impl: DPImpl, rng: random.Random) -> None:
    for case, contributions in FIXED_CASES[:2]:
        for rank, result in enumerate(_on_ranks(impl, "sync", contributions, case)):
            expect(result["syncs"] == 1, "_synchronize_dp_ranks must read the reduced table back exactly once",
                   expected="1 sync", got=f"{result['syncs']}: " + "; ".join(result["events"][:6]),
                   hint=ONE_READ_HINT if result["syncs"] > 1 else "the result lives on the host: read it back",
                   case=f"{case}, rank {rank}")


def _check_cpu_group(impl: DPImpl, rng: random.Random) -> None:
    case, contributions = "disable_nccl_for_dp_synchronization: host tensors over the CPU group", FIXED_CASES[1][1]
    for rank, result in enumerate(_on_ranks(impl, "run_ar", contributions, case, cpu_group=True)):
        _expect_table(result, contributions, f"{case}, rank {rank}", device=False)
    for rank, result in enumerate(_on_ranks(impl, "sync", contributions, case, cpu_group=True)):
        _expect_agreement(result, contributions, 2, f"{case}, rank {rank}")
        expect(result["syncs"] == 0, "on the CPU group nothing lives on the device: no sync at all",
               got=f"{result['syncs']}: " + "; ".join(result["events"][:4]),
               hint="take the device from _get_device_and_group: it is the host here", case=f"{case}, rank {rank}")


def _check_wsl(impl: DPImpl, rng: random.Random) -> None:
    case, contributions = "WSL: no pinned memory", FIXED_CASES[0][1]
    for rank, result in enumerate(_on_ranks(impl, "run_ar", contributions, case, pinning=False)):
        _expect_table(result, contributions, f"{case}, rank {rank}", device=True)
        expect(result["syncs"] == 0, "_run_ar made the host wait", got="; ".join(result["events"][:4]),
               hint="keep non_blocking=True: without pinning it is the best there is", case=f"{case}, rank {rank}")


CHECKS_3_7 = [
    Check("3.7", "_run_ar: every rank gets the full table (fixed and random rank inputs)", _check_run_ar_values),
    Check("3.7", "_run_ar: 0 syncs on every rank; one upload from pinned memory", _check_run_ar_syncs),
    Check("3.7", "_synchronize_dp_ranks: every rank agrees with the reference (micro-batching, padding, mode)",
          _check_sync_values),
    Check("3.7", "_synchronize_dp_ranks: exactly 1 sync per call on every rank (the one read back)",
          _check_sync_one_read),
    Check("3.7", "CPU group (disable_nccl_for_dp_synchronization): host tensors, same answers, 0 syncs",
          _check_cpu_group),
    Check("3.7", "WSL (no pinned memory): no error, same table, 0 syncs", _check_wsl),
]


def check_dp_sync(run_ar: RunArFunction, synchronize_dp_ranks: SyncRanksFunction, seed: int | None = None,
                  timeout_s: float = CALL_TIMEOUT_S, ranks: RankGroup | None = None) -> CheckReport:
    """Exercise 3.7: run every check against the reader's ``_run_ar`` and ``_synchronize_dp_ranks`` on 2 ranks.

    A call that does not return on every rank within ``timeout_s`` stops the ranks and the remaining checks.
    ``ranks``: a running group to use (and leave running); by default one is started and stopped here.
    """
    title = "Exercise 3.7 — _run_ar on a process group"
    if ranks is not None:
        return run_checks(title, CHECKS_3_7, DPImpl(run_ar, synchronize_dp_ranks, ranks), seed=seed,
                          skip_after_timeout=True)
    with RankGroup(WORLD_SIZE, call_timeout_s=timeout_s) as own:  # a hang stops the ranks: nothing left to run on
        return run_checks(title, CHECKS_3_7, DPImpl(run_ar, synchronize_dp_ranks, own), seed=seed,
                          skip_after_timeout=True)


# ----------------------------------------------------------------------------- profiling


def dp_sync_counts(run_ar: RunArFunction, synchronize_dp_ranks: SyncRanksFunction,
                   before: tuple[RunArFunction, SyncRanksFunction],
                   ranks: RankGroup | None = None) -> dict[str, dict[str, int]]:
    """Syncs per call on rank 0, before and after, of ``_run_ar`` and of the whole coordination (counted).

    ``ranks``: a running group to use (and leave running); by default one is started and stopped here.
    """
    if ranks is None:
        with RankGroup(WORLD_SIZE) as own:
            return dp_sync_counts(run_ar, synchronize_dp_ranks, before, own)
    contributions = FIXED_CASES[0][1]  # both ranks micro-batch: vLLM's readers take their longest path
    counts: dict[str, dict[str, int]] = {"_run_ar": {}, "_synchronize_dp_ranks": {}}
    for label, (ar, sync) in (("before", before), ("after", (run_ar, synchronize_dp_ranks))):
        impl = DPImpl(ar, sync, ranks)
        counts["_run_ar"][label] = _on_ranks(impl, "run_ar", contributions, "count")[0]["syncs"]
        counts["_synchronize_dp_ranks"][label] = _on_ranks(impl, "sync", contributions, "count")[0]["syncs"]
    return counts

