"""Chapter 4: the chapter's measurements: counts, timings (each with its declared claim) and traces.

A room of :mod:`synclab.reverse_scan` (its docstring tells the chapter).
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from synclab.claims import Faster, Flat, Grows, declare, validated
from synclab.engine.input_batch import PLACEHOLDER
from synclab.reverse_scan.workloads import BatchClass, ReadyEvent, build_step


# ----------------------------------------------------------------------------- profiling helpers


OUTPUT_LENGTHS = (100, 1_000, 10_000, 60_000, 100_000)
PROFILE_REQS = 128
PR_OUTPUT_TOKENS = 60_000  # the one output length PR #42938 measured at (128 requests, 4,096 tokens in)
# What PR #42938 reported, at that length only: (output tokens, tokens/s).
PR_TOKENS_PER_S = {"before #42938": (PR_OUTPUT_TOKENS, 1_937.0), "after": (PR_OUTPUT_TOKENS, 12_178.0)}
PR_TPOT_MS = {"before #42938": 65.0, "after": 10.0}


def decode_step(batch_cls: BatchClass, output_len: int, num_reqs: int = PROFILE_REQS) -> Callable[[], list[int]]:
    """One step of the async loop's host bookkeeping, repeatable: append a placeholder to each request, repair.

    Returns a callable whose result (each request's last token) lets ``sweep`` compare variants.
    """
    outputs = [[3] * output_len for _ in range(num_reqs)]  # small ints: one shared object, ~8 bytes per slot
    batch, states = build_step(batch_cls, outputs, [[7]] * num_reqs, list(range(num_reqs)), ReadyEvent())

    def step() -> list[int]:
        for state in states:
            state.output_token_ids.append(PLACEHOLDER)  # _bookkeeping_sync: the token in flight
        batch.update_async_output_token_ids()
        last = [state.output_token_ids[-1] for state in states]
        for state in states:  # back to output_len tokens: a timed run repeats the step thousands of times, and
            state.output_token_ids.pop()  # the length on the chart must be the length measured (O(1), both variants)
        return last

    step.states = states  # type: ignore[attr-defined]  # the requests it works on, for tests
    return step


_CH4_COST = ("From 100 to 100,000 tokens the forward scan's cost grows at least 50× and the reverse scan's stays "
             "within 1.5×; at 60,000 tokens the reverse scan is at least 100× faster.",
             [Grows(variant=0, by=50.0), Flat(variant=1, within=1.5), Faster(fast=1, slow=0, by=100.0, from_value=60_000)])


declare("ch4.cost_sweep", cpu=_CH4_COST, gpu=_CH4_COST)  # host-only work: the same sentence on any machine


def cost_sweep(impls: dict[str, BatchClass], lengths: tuple[int, ...] = OUTPUT_LENGTHS,
               num_reqs: int = PROFILE_REQS) -> Any:
    """Host time per step of the bookkeeping (append + repair) over output lengths, on this machine."""
    from synclab.reference import record
    from synclab.timing import run_time, sweep

    variants = {name: (lambda cls: lambda n: decode_step(cls, n, num_reqs))(cls) for name, cls in impls.items()}
    result = validated("ch4.cost_sweep", lambda: sweep(variants, "output tokens per request", lengths,
                                                       min_run_time=run_time(0.05, 0.3), reference=next(iter(impls))))
    record("ch4", "cost_sweep", result.to_dict())
    return result


def loop_model(host_us: dict[str, list[float]], lengths: tuple[int, ...], device_step_us: float,
               num_reqs: int = PROFILE_REQS) -> dict[str, list[float]]:
    """MODEL: tokens/s of an async decode loop whose step takes max(host, device) (perfect overlap otherwise)."""
    return {name: [num_reqs / max(h, device_step_us) * 1e6 for h in costs] for name, costs in host_us.items()}


def gpu_loop(batch_cls: BatchClass, output_len: int, steps: int = 30, num_reqs: int = PROFILE_REQS,
             hidden: int = 4096, layers: int = 8) -> dict[str, float] | None:
    """A real async decode loop on a GPU: queue step i's forward, then do step i-1's bookkeeping. None without a GPU.

    The forward is ``layers`` matmuls of [num_reqs, hidden] x [hidden, hidden]; the sampled ids go to
    pinned host memory on the compute stream and an event marks them. Returns tokens/s, ms per step, and the
    device's share of it: the forwards' own time (CUDA events around each), per step.
    """
    import time

    from synclab.device import has_cuda, host_wait_event

    if not has_cuda():
        return None
    weights = [torch.randn(hidden, hidden, device="cuda") / hidden ** 0.5 for _ in range(layers)]
    x = torch.randn(num_reqs, hidden, device="cuda")
    outputs = [[3] * output_len for _ in range(num_reqs)]
    batch, states = build_step(batch_cls, outputs, [[7]] * num_reqs, list(range(num_reqs)), None)
    host_ids = torch.empty(num_reqs, 1, dtype=torch.int64, pin_memory=True)
    forward_events = [(host_wait_event(enable_timing=True), host_wait_event(enable_timing=True))
                      for _ in range(steps)]  # read once the loop has drained: they time, nothing waits on them
    torch.cuda.synchronize()
    start = time.perf_counter()
    for began, ended in forward_events:
        began.record()
        h = x
        for w in weights:
            h = torch.tanh(h @ w)
        sampled = h.argmax(dim=-1, keepdim=True)  # [num_reqs, 1] device
        ended.record()
        event = host_wait_event()  # the repair waits on it: a sleeping wait, as chapter 2 teaches
        batch.update_async_output_token_ids()  # step i-1's repair runs while step i's forward is queued
        host_ids.copy_(sampled, non_blocking=True)
        event.record()
        batch.set_async_sampled_token_ids(host_ids, event)
        for state in states:
            state.output_token_ids.append(PLACEHOLDER)
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    forward_ms = sum(began.elapsed_time(ended) for began, ended in forward_events)
    return {"tokens_per_s": steps * num_reqs / elapsed, "ms_per_step": elapsed / steps * 1e3,
            "device_ms_per_step": forward_ms / steps}


GPU_LOOP_LENGTHS = (100, 10_000, 60_000)
GPU_LOOP_ROUNDS = 3


def gpu_loop_sweep(impls: dict[str, BatchClass], lengths: tuple[int, ...] = GPU_LOOP_LENGTHS,
                   rounds: int = GPU_LOOP_ROUNDS, steps: int = 30) -> dict[str, Any] | None:
    """MEASURED on a GPU: :func:`gpu_loop` for every scan at each output length, the scans interleaved over
    ``rounds``; the median time per step and the forwards' share of it, with the PR's TPOT beside them (its own
    model and machine: a reference point, not a comparison). ``python -m synclab bench ch4`` stores it as
    ``gpu_loop``. None without a GPU."""
    import statistics

    from synclab.device import has_cuda
    from synclab.reference import record

    if not has_cuda():
        return None
    runs: dict[str, dict[int, list[dict[str, float]]]] = {name: {n: [] for n in lengths} for name in impls}
    for n in lengths:
        for _ in range(rounds):
            for name, cls in impls.items():  # interleaved: a drift of the machine touches every scan alike
                runs[name][n].append(gpu_loop(cls, n, steps))
    def per_length(measure: str, of_rounds: Callable[[list[float]], Any]) -> dict[str, list[Any]]:
        return {name: [of_rounds([r[measure] for r in runs[name][n]]) for n in lengths] for name in impls}

    result = {"lengths": list(lengths), "num_reqs": PROFILE_REQS, "steps": steps, "rounds": rounds,
              "forward": "8 matmuls of [128, 4096] x [4096, 4096] in fp32, tanh between",
              "ms_per_step": per_length("ms_per_step", statistics.median),
              "ms_per_step_range": per_length("ms_per_step", lambda ms: [min(ms), max(ms)]),
              "device_ms_per_step": per_length("device_ms_per_step", statistics.median),
              "pr_tpot_ms": {"output tokens": PR_OUTPUT_TOKENS, **PR_TPOT_MS}}
    record("ch4", "gpu_loop", result)
    return result
