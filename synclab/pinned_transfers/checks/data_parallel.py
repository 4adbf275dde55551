"""Chapter 3, Exercise 3.7: the data-parallel all-reduce on a real process group, and its checks.

Every check calls the reader's ``_run_ar`` / ``_synchronize_dp_ranks`` on every rank of
a :class:`synclab.pinned_transfers.ranks.RankGroup` (two processes forked from a fork server, gloo on
a CPU-only machine) with a different contribution per rank, counts the syncs on each rank, and
compares what each rank got with the plain-Python reference. Each rank also watches its
``dist.all_reduce`` calls (which tensor, which group, the reduced table: NCCL's rules hold even
where gloo would let them pass) and any ``non_blocking`` read-back no wait covered. A rank that
returns without joining the all-reduce is named as such within seconds. The group is started
once per ``check_dp_sync`` call and always stopped, however the reader's code ends.

The checks reach the ranks through one runner, :func:`rank_replies` (:mod:`synclab.answer_keys.runners`): in a
notebook it runs here, on that group; in the grader it runs in the answer's process, which starts its own group on
first use, and only the ranks' replies come back, as data.
"""

from __future__ import annotations

import atexit
import linecache
import os
import random
import sys
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import torch

from synclab.answer_keys.runners import runs_with_the_answer
from synclab.checks import Check, CheckFailed, CheckReport, CheckTimeout, expect, run_checks, found_right
from synclab.device import has_cuda, is_device_tensor, unmark_device
from synclab.pinned_transfers.ranks import RankError, RankGroup, RankTimeout
from synclab.sim import cuda as sim_cuda
from synclab.engine.dp_utils import FIELDS, Contribution, ParallelConfig, _get_device_and_group, is_last_ubatch_empty
from synclab.answer_keys import AnswerKeyRefused, Key, answer_key, checking, refuse


from synclab.sim.pinning import PinnedMemoryUnavailable, simulated_pinning
from synclab.pinned_transfers.checks.common import PIN_HINT, WAIT_HINT, WSL_HINT, unwaited, watch_async_reads
from synclab.syncs import SyncKind, count_syncs, location

RunArFunction = Callable[..., Any]
SyncRanksFunction = Callable[..., Any]

WORLD_SIZE = 2
FIELD_WRITE_HINT = ("tensor[f][rank] = value on a device tensor copies each value over, blocking: write the fields "
                    "into a host tensor (pinned where available), then upload it once with non_blocking=True")
ONE_READ_HINT = ("read the reduced table back once (tensor.cpu()), then run vLLM's readers on the host copy "
                 "(synclab.engine.dp_utils.post_process): .item() on a host tensor waits for nothing")
COLLECTIVE_HINT = "every rank must call dist.all_reduce on the group from _get_device_and_group, with the same shape"
SKIPPED_HINT = ("every rank joins the all-reduce on every step, even one with nothing to run (0 tokens: vLLM runs a "
                "dummy step): its column of zeros is its part of the sum, and the others wait in all_reduce until "
                "every rank of the group has called it")
NCCL_HINT = ("the CPU (gloo) group accepts host tensors, NCCL does not (it reduces device memory only): upload the "
             "host table first, tensor = tensor_cpu.to(device, non_blocking=True), then dist.all_reduce(tensor, "
             "group=group) on the device copy")
GROUP_HINT = ("pass group=group from _get_device_and_group(parallel_config): without it all_reduce runs on the "
              "default (world) group, which in vLLM holds every rank of every parallel dimension (tensor, pipeline "
              "and data parallel), and on NCCL even with disable_nccl_for_dp_synchronization")
ORDER_HINT = ("_run_ar(should_ubatch, orig_num_tokens_per_ubatch, padded_num_tokens_per_ubatch, cudagraph_mode, "
              "parallel_config) writes rows orig, padded, should_ubatch, cudagraph_mode; _synchronize_dp_ranks gets "
              "(num_tokens_unpadded, num_tokens_padded, should_attempt_ubatching, ...): a different order. Pass "
              "the arguments by keyword, as vLLM does, and write each field into its own row")
RANK_CALL_TIMEOUT_S = 20.0  # below a check's own 30 s: a hang is reported by the ranks, naming the collective
STRAGGLER_S = 3.0  # how long the other ranks get once one has returned without joining the all-reduce


@dataclass
class DPImpl:
    """What the checks run: the reader's two functions, and the ranks to run them on (None: where the functions
    live, in an answer's own process, which starts its own)."""

    run_ar: RunArFunction
    synchronize_dp_ranks: SyncRanksFunction
    ranks: RankGroup | None
    call_timeout_s: float = RANK_CALL_TIMEOUT_S


_GROUPS: list[RankGroup] = []  # the group the checks (or a profile) run on in this process, innermost last
_OWN: list[RankGroup] = []  # an answer's process's own group, started on first use, stopped as the process ends


@contextmanager
def _running_on(ranks: RankGroup | None) -> Iterator[None]:
    """:func:`rank_replies` runs on ``ranks`` in the block (None: on the group it finds)."""
    if ranks is not None:
        _GROUPS.append(ranks)
    try:
        yield
    finally:
        if ranks is not None:
            _GROUPS.pop()


def _ranks(timeout_s: float) -> RankGroup:
    """The ranks to run on: the checks' group in this process; else, in an answer's own process (where the grader
    runs :func:`rank_replies`), a group of its own, started again after a time-out stopped it."""
    if _GROUPS:
        return _GROUPS[-1]
    if not _OWN or not _OWN[-1].running:
        group = RankGroup(WORLD_SIZE, call_timeout_s=timeout_s)
        group.start()
        atexit.register(group.close)
        _OWN.append(group)
    return _OWN[-1]


# ----------------------------------------------------------------------------- on each rank


@contextmanager
def _watch_all_reduce(expected_group: Any) -> Iterator[list[dict[str, Any]]]:
    """Every ``dist.all_reduce`` the block makes: on which tensor, on which group, where; and the result."""
    import torch.distributed as dist

    calls: list[dict[str, Any]] = []
    original = dist.all_reduce

    def all_reduce(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        frame = sys._getframe(1)
        code = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
        group = kwargs["group"] if "group" in kwargs else args[1] if len(args) > 1 else None
        call = {"on_device": isinstance(tensor, torch.Tensor) and is_device_tensor(tensor),
                "group": "expected" if group is expected_group else "default" if group is None else "other",
                "where": location(frame.f_code.co_filename, frame.f_lineno, code),
                "tensor": tensor}  # popped before the reply: only its description travels
        calls.append(call)
        out = original(tensor, *args, **kwargs)
        if isinstance(tensor, torch.Tensor) and out is None:  # async_op=True: not reduced until its wait()
            call["after"] = tensor.detach().clone()  # read back once the counted block is over
        return out

    dist.all_reduce = all_reduce
    try:
        yield calls
    finally:
        dist.all_reduce = original


def _plain_key(key: Key) -> dict[str, Any]:
    """A refused answer's key as plain data: what a rank sends back is read as nothing more (ranks.plain_loads)."""
    return {"tasks": list(key.tasks), "name": key.name, "role": key.role, "scope": key.scope}


def rank_call(rank: int, fn: Callable[..., Any], what: str, contributions: Sequence[Contribution],
              num_ubatches: int, cpu_group: bool, pinning: bool, sources: dict[str, list[str]] | None = None
              ) -> dict[str, Any]:
    """On one rank: call the reader's function with this rank's contribution, counted. Plain data back.

    On a CPU-only machine the call runs on simulated streams (a wait on a stream or an event works, and
    counts, as on a GPU); the reader's ``non_blocking`` copies still land at once, and one read before
    any wait is listed (``unwaited_reads``) instead.
    """
    for filename, lines in (sources or {}).items():  # the reader's cells, so each location shows its line
        linecache.cache[filename] = (sum(map(len, lines)), None, lines, filename)
    should_ubatch, orig, padded, mode = contributions[rank]
    config = ParallelConfig(len(contributions), rank, num_ubatches, cpu_group)
    _, expected_group = _get_device_and_group(config)
    streams = sim_cuda.simulated_cuda(async_copies=False) if not has_cuda() else nullcontext()
    try:
        with checking("3.7") as watch, simulated_pinning(pinning), streams, _watch_all_reduce(expected_group) as collectives, \
                count_syncs() as report, watch_async_reads(report) as reads:
            if what == "run_ar":
                out = fn(should_ubatch, orig, padded, mode, config)
            else:  # vLLM's order: unpadded, padded, should_attempt_ubatching, cudagraph_mode, config
                out = fn(orig, padded, should_ubatch, mode, config)
    except PinnedMemoryUnavailable as exc:
        return {"pinning_refused": str(exc).split(":")[0]}
    except NotImplementedError as exc:  # a stub: not a crash, the ranks stay up for the next check
        return {"not_implemented": str(exc)}
    except AnswerKeyRefused as exc:  # the reader's code called the package's answer: the checking process says so
        return {"refused": _plain_key(exc.key)}
    if watch.refused:  # even if the reader's code caught the refusal
        return {"refused": _plain_key(watch.refused[0])}
    for call in collectives:
        after = call.pop("after", None)
        if after is not None:
            call["values"] = unmark_device(after).cpu().tolist()
        reduced = call.pop("tensor", None)
        call["reduced"] = _describe(reduced)
        call["is_returned"] = isinstance(reduced, torch.Tensor) and isinstance(out, torch.Tensor) and (
            reduced.untyped_storage().data_ptr() == out.untyped_storage().data_ptr())
    result: dict[str, Any] = {"syncs": report.count, "staged": report.staged_count,
                              "kinds": sorted({e.kind.value for e in report.events}),
                              "events": [f"{e.kind.value} at {e.where} `{e.code}`" for e in report.events],
                              "staged_at": [f"{e.where} `{e.code}`" for e in report.staged],
                              "all_reduces": collectives, "unwaited_reads": unwaited(reads, report)}
    if what == "run_ar":
        result.update(_tensor_summary(out))
        result["returned_desc"] = _describe(out)
    else:
        ok = isinstance(out, tuple) and len(out) == 3
        result["returned"] = type(out).__name__ if not ok else "tuple"
        if ok:
            result["should_ubatch"], padding, result["cudagraph_mode"] = out[0], out[1], out[2]
            result["padding"] = _tensor_summary(padding)
    return result


def _describe(t: Any) -> str:
    """``a [4, 2] int32 device tensor``: what a reader's variable holds, in words."""
    if not isinstance(t, torch.Tensor):
        return f"a {type(t).__name__}"
    side = "device" if is_device_tensor(t) else "host"
    return f"a {list(t.shape)} {str(t.dtype).replace('torch.', '')} {side} tensor"


def _tensor_summary(t: Any) -> dict[str, Any]:
    if not isinstance(t, torch.Tensor):
        return {"type": type(t).__name__}
    return {"type": "Tensor", "on_device": is_device_tensor(t), "dtype": str(t.dtype).replace("torch.", ""),
            "values": t.cpu().tolist()}


# ----------------------------------------------------------------------------- the runner: the ranks, where the answer is


@runs_with_the_answer
def rank_replies(fn: Callable[..., Any], what: str, contributions: list, num_ubatches: int, cpu_group: bool,
                 pinning: bool, timeout_s: float) -> dict[str, Any]:
    """``fn`` (the reader's ``_run_ar``, or ``_synchronize_dp_ranks`` for ``what="sync"``) called on every rank by
    :func:`rank_call`, with these contributions: each rank's reply, or the time-out or the error that stopped them,
    as data (a runner: the checks reach the reader's functions by it)."""
    sources = {f: linecache.getlines(f) for f in _source_files(fn)}
    try:
        return {"replies": _ranks(timeout_s).run(rank_call, fn, what, [tuple(c) for c in contributions], num_ubatches,
                                                 cpu_group, pinning, sources, timeout_s=timeout_s,
                                                 straggler_s=_straggler_s)}
    except RankTimeout as exc:  # the ranks were stopped; the exercise's other checks are skipped
        return {"timeout": str(exc), "replies": dict(exc.replies), "missing": list(exc.missing)}
    except RankError as exc:
        return {"error": exc.detail, "rank": exc.rank}


# ----------------------------------------------------------------------------- in the checking process


def _on_ranks(impl: DPImpl, what: str, contributions: Sequence[Contribution], case: str, num_ubatches: int = 2,
              cpu_group: bool = False, pinning: bool = True) -> list[dict[str, Any]]:
    fn = impl.run_ar if what == "run_ar" else impl.synchronize_dp_ranks
    name = "_run_ar" if what == "run_ar" else "_synchronize_dp_ranks"  # as the reader wrote it
    with _running_on(impl.ranks):
        seen = rank_replies(fn, what, [list(c) for c in contributions], num_ubatches, cpu_group, pinning,
                            impl.call_timeout_s)
    if "timeout" in seen:
        replies = seen["replies"]
        skipped = sorted(rank for rank, reply in replies.items() if _skipped_all_reduce(reply))
        if skipped:
            others = ", ".join(str(r) for r in seen["missing"])
            raise CheckTimeout(f"{name}: rank {', '.join(map(str, skipped))} never reached dist.all_reduce (it "
                               f"returned without calling it), so rank {others} waited in all_reduce for it "
                               f"({case}). {seen['timeout']}", hint=SKIPPED_HINT)
        done = "; ".join(f"rank {rank} returned after {len(reply['all_reduces'])} all_reduce call(s)"
                         for rank, reply in sorted(replies.items())
                         if isinstance(reply, dict) and "all_reduces" in reply)
        raise CheckTimeout(f"{name} did not return on every rank ({case}): {seen['timeout']}"
                           + (f" ({done})" if done else ""), hint=COLLECTIVE_HINT)
    if "error" in seen:
        raise CheckFailed(f"{name} raised on rank {seen['rank']}", got=seen["error"].strip().splitlines()[-1],
                          hint="the full traceback:\n" + seen["error"], case=case)
    results = seen["replies"]
    for rank, result in enumerate(results):
        if "not_implemented" in result:  # a stub: say so, as the other exercises' checks do
            raise NotImplementedError(result["not_implemented"])
        if "refused" in result:
            key = result["refused"]
            raise refuse(Key(tuple(key["tasks"]), key["name"], key["role"], key["scope"]))
        if "pinning_refused" in result:
            raise CheckFailed("asked for pinned memory where the platform has none", got=result["pinning_refused"],
                              hint=WSL_HINT, case=f"{case}, rank {rank}")
    return results


def _source_files(fn: Callable[..., Any]) -> set[str]:
    """The files the reader's function (and the functions its module defines) come from: a rank has no linecache."""
    libraries = (sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    functions = [fn, *(v for v in (getattr(fn, "__globals__", None) or {}).values() if callable(v))]
    files = {f.__code__.co_filename for f in functions if hasattr(f, "__code__")}
    return {f for f in files if not f.startswith(libraries) and linecache.getlines(f)}


def _skipped_all_reduce(reply: Any) -> bool:
    """A rank's answer says it returned without calling dist.all_reduce (a stub's answer says nothing)."""
    return isinstance(reply, dict) and reply.get("all_reduces") == []


def _straggler_s(replies: dict[int, Any]) -> float | None:
    """Once a rank has returned without joining the all-reduce, the others are waiting in it for nothing."""
    return STRAGGLER_S if any(_skipped_all_reduce(reply) for reply in replies.values()) else None


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


def differing_rows(got: Any, want: list[list[int]]) -> str:
    """The rows of the table that differ, by field ("row 3 (cudagraph_mode)"); "" if the shapes differ."""
    if not (isinstance(got, list) and len(got) == len(want)):
        return ""
    return ", ".join(f"row {i} ({FIELDS[i]})" for i, (g, w) in enumerate(zip(got, want)) if g != w)


def misplaced_rows(got: Any, want: list[list[int]]) -> str:
    """Which rows of the table hold another field's values (the arguments in the wrong order); else ""."""
    if not (isinstance(got, list) and len(got) == len(want) and all(isinstance(r, list) for r in got)):
        return ""
    moved = []
    for i, row in enumerate(got):
        if row != want[i]:
            j = next((j for j, w in enumerate(want) if j != i and w == row and any(w)), None)  # a row of 0s says nothing
            if j is not None:
                moved.append(f"row {i} ({FIELDS[i]}) holds the values of row {j} ({FIELDS[j]})")
    return "; ".join(moved)


def _expect_table(result: dict[str, Any], contributions: Sequence[Contribution], case: str, device: bool) -> None:
    expect(result.get("type") == "Tensor", "_run_ar returns the reduced tensor", got=result.get("type"), case=case)
    expect(result["dtype"] == "int32", "the table is int32, as vLLM's", got=result["dtype"], case=case)
    reduced = result.get("all_reduces", [])
    host_table_uploaded = any(not call["on_device"] for call in reduced) and result["on_device"]  # named elsewhere
    expect(not reduced or host_table_uploaded or any(call.get("is_returned") for call in reduced),
           f"you reduced {reduced[0]['reduced'] if reduced else ''}, but returned {result.get('returned_desc')}",
           got=f"all_reduce at {reduced[0]['where']}" if reduced else "",
           hint="dist.all_reduce sums in place: return the very tensor you handed it (not a copy made before, "
                "nor the host table it was uploaded from)", case=case)
    want = _run_ar_reference(contributions)
    moved = misplaced_rows(result["values"], want)
    differ = differing_rows(result["values"], want)
    expect(result["values"] == want, "the fields landed in the wrong rows: " + moved if moved
           else "the reduced table differs" + (f" in {differ}" if differ else ""), expected=want, got=result["values"],
           hint=ORDER_HINT if moved else
           "a [4, dp_size] table of zeros, this rank's column filled with its four fields "
           "(orig, padded, should_ubatch as 0/1, cudagraph_mode), then one all_reduce (a sum)", case=case)
    where = "on the device" if device else "in host memory (the CPU group's collective runs on the host)"
    expect(result["on_device"] == device, f"the reduced table must be {where}",
           got="on the device" if result["on_device"] else "in host memory",
           hint="use the device and group from _get_device_and_group(parallel_config)", case=case)
    found_right(want)  # the reduced table, found equal to the reference's


def _expect_collective(result: dict[str, Any], case: str, device: bool) -> None:
    """What the reader passed to dist.all_reduce: the DP group, and (NCCL's rule) device memory on the device group."""
    for call in result.get("all_reduces", []):
        expect(call["group"] == "expected", "dist.all_reduce did not run on the group from _get_device_and_group"
               + (": no group= given, so it ran on the default (world) group" if call["group"] == "default" else ""),
               expected="group=group", got=call["where"], hint=GROUP_HINT, case=case)
        if device:
            expect(call["on_device"], "dist.all_reduce was given a host tensor: NCCL, vLLM's device group, reduces "
                   "device tensors only (gloo took it here; NCCL would raise)", expected="the device table",
                   got=call["where"], hint=NCCL_HINT, case=case)


def _check_run_ar_values(impl: DPImpl, rng: random.Random) -> None:
    cases = FIXED_CASES + [(f"random ranks {i}", _random_contributions(rng)) for i in range(3)]
    for case, contributions in cases:
        for rank, result in enumerate(_on_ranks(impl, "run_ar", contributions, case)):
            _expect_table(result, contributions, f"{case}, rank {rank}", device=True)
            _expect_collective(result, f"{case}, rank {rank}", device=True)


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
    ubatch, padding, mode = _dp_reference(contributions, num_ubatches)
    right = (result["cudagraph_mode"] == mode and result["should_ubatch"] == ubatch
             and result["padding"].get("values") == padding)
    if not right and result["unwaited_reads"]:
        expect(False, "the reduced table was read through a non_blocking copy nothing waited for: its values had not "
               "arrived yet", got=result["unwaited_reads"][0], hint=WAIT_HINT, case=case)
    tables = [call["values"] for call in result["all_reduces"] if "values" in call]
    want = _run_ar_reference(contributions)
    if tables and tables[-1] != want:
        moved = misplaced_rows(tables[-1], want)
        differ = differing_rows(tables[-1], want)
        expect(False, ("the fields landed in the wrong rows of the table _run_ar all-reduced: " + moved) if moved
               else "the table _run_ar all-reduced differs" + (f" in {differ}" if differ else ""),
               expected=want, got=tables[-1],
               hint=ORDER_HINT if moved else "check both ends: _synchronize_dp_ranks hands _run_ar this rank's four "
               "values, by keyword, and _run_ar writes each, unchanged, into this rank's column", case=case)
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
    found_right([ubatch, padding, mode])  # the three answers, found equal to the reference's


def _check_sync_values(impl: DPImpl, rng: random.Random) -> None:
    cases = FIXED_CASES + [(f"random ranks {i}", _random_contributions(rng)) for i in range(4)]
    for case, contributions in cases:
        num_ubatches = rng.choice([2, 2, 3])
        for rank, result in enumerate(_on_ranks(impl, "sync", contributions, case, num_ubatches)):
            _expect_agreement(result, contributions, num_ubatches, f"{case} ({num_ubatches} micro-batches), rank {rank}")


def _check_sync_one_read(impl: DPImpl, rng: random.Random) -> None:
    for case, contributions in FIXED_CASES[:2]:
        for rank, result in enumerate(_on_ranks(impl, "sync", contributions, case)):
            if result["syncs"] == 0 and result["unwaited_reads"]:
                expect(False, "the reduced table was read through a non_blocking copy that nothing waited for",
                       expected="1 sync: a wait before the host reads the copy",
                       got="0 syncs; the copy at " + result["unwaited_reads"][0], hint=WAIT_HINT,
                       case=f"{case}, rank {rank}")
            expect(result["syncs"] == 1, "_synchronize_dp_ranks must read the reduced table back exactly once",
                   expected="1 sync", got=f"{result['syncs']}: " + "; ".join(result["events"][:6]),
                   hint=ONE_READ_HINT if result["syncs"] > 1 else "the result lives on the host: read it back",
                   case=f"{case}, rank {rank}")


def _check_cpu_group(impl: DPImpl, rng: random.Random) -> None:
    case, contributions = "disable_nccl_for_dp_synchronization: host tensors over the CPU group", FIXED_CASES[1][1]
    for rank, result in enumerate(_on_ranks(impl, "run_ar", contributions, case, cpu_group=True)):
        _expect_table(result, contributions, f"{case}, rank {rank}", device=False)
        _expect_collective(result, f"{case}, rank {rank}", device=False)
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
    Check("3.7", "_run_ar: every rank gets the full table (fixed and random rank inputs)", _check_run_ar_values,
          id="run-ar-table"),
    Check("3.7", "_run_ar: 0 syncs and no staging copy on every rank (uploads from pinned memory)",
          _check_run_ar_syncs, random=False, id="run-ar-no-syncs"),
    Check("3.7", "_synchronize_dp_ranks: every rank agrees with the reference (micro-batching, padding, mode)",
          _check_sync_values, id="dp-ranks-agree"),
    Check("3.7", "_synchronize_dp_ranks: exactly 1 sync per call on every rank (the one read back)",
          _check_sync_one_read, random=False, id="dp-ranks-one-sync"),
    Check("3.7", "CPU group (disable_nccl_for_dp_synchronization): host tensors, same answers, 0 syncs",
          _check_cpu_group, random=False, id="cpu-group"),
    Check("3.7", "WSL (no pinned memory): no error, same table, 0 syncs", _check_wsl, random=False, id="wsl"),
]


def check_dp_sync(run_ar: RunArFunction, synchronize_dp_ranks: SyncRanksFunction, seed: int | None = None,
                  timeout_s: float = RANK_CALL_TIMEOUT_S, ranks: RankGroup | None = None) -> CheckReport:
    """Exercise 3.7: run every check against the reader's ``_run_ar`` and ``_synchronize_dp_ranks`` on 2 ranks.

    A call that does not return on every rank within ``timeout_s`` (below a check's own limit, so the
    report names the collective, not an endless loop) stops the ranks and the remaining checks; so does
    a rank that returns without joining the all-reduce, after :data:`STRAGGLER_S`.
    ``ranks``: a running group to use (and leave running); by default one is started and stopped here (in the grader,
    where the functions live in the answer's process, :func:`rank_replies` starts one there).
    """
    title = "Exercise 3.7 — _run_ar on a process group"
    there = getattr(run_ar, "run_there", None)
    held_elsewhere = callable(there) and not isinstance(run_ar, type)  # the grader's: the ranks start where it is
    if ranks is not None or held_elsewhere:
        return run_checks(title, CHECKS_3_7, DPImpl(run_ar, synchronize_dp_ranks, ranks, timeout_s), seed=seed,
                          skip_after_timeout=True)
    with RankGroup(WORLD_SIZE, call_timeout_s=timeout_s) as own:  # a hang stops the ranks: nothing left to run on
        return run_checks(title, CHECKS_3_7, DPImpl(run_ar, synchronize_dp_ranks, own, timeout_s), seed=seed,
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


@answer_key("3.7")
def _run_ar_reference(contributions: Sequence[Contribution]) -> list[list[int]]:
    """The all-reduced table ``[4][dp_size]`` as lists: column r holds rank r's four fields."""
    return [[int(c[1]) for c in contributions], [int(c[2]) for c in contributions],
            [int(bool(c[0])) for c in contributions], [int(c[3]) for c in contributions]]


@answer_key("3.7")
def _dp_reference(contributions: Sequence[Contribution], num_ubatches: int) -> tuple[bool, list[int], int]:
    """What every rank must agree on: (micro-batch?, tokens per rank after padding, CUDA-graph mode)."""
    orig = [c[1] for c in contributions]
    padded = [c[2] for c in contributions]
    mode = min(c[3] for c in contributions)
    ubatch = all(c[0] for c in contributions) and not is_last_ubatch_empty(min(orig), max(padded), num_ubatches)
    pad = mode != 0 or ubatch
    return ubatch, [max(padded)] * len(padded) if pad else padded, mode
