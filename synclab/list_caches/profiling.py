"""Chapter 5: the chapter's measurements: counts, timings (each with its declared claim) and traces.

A room of :mod:`synclab.list_caches` (its docstring tells the chapter).
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from synclab.claims import Faster, Grows, declare, validated
from synclab.dispatch import count_torch_calls
from synclab.engine.mm_inputs import PlaceholderRangeBaseline, make_mask
from synclab.engine.scheduler import SchedulerConfig
from synclab.list_caches.checks import _SchedulerReference, make_request
from synclab.list_caches.workloads import RangeClass, SchedulerClass, framed


# ----------------------------------------------------------------------------- profiling helpers


# PR #40143's description: Gemma-4-E4B, 128 concurrent requests, 32 images each.
PR_FIGURES = {"request throughput": "+26.9%", "output tokens/s": "+27.0%", "mean TTFT": "-9.8%"}


GRID = ((8, 4), (32, 8), (64, 16), (128, 32))  # (running requests, images per request); the last is the PR's
IMAGE_TOKENS = 256  # placeholder positions per image, framed by a start and an end token


QUESTIONS: dict[str, Callable[[Any], Callable[[], Any]]] = {  # what the scheduler asks an item, per step
    "get_num_embeds()": lambda pr: pr.get_num_embeds,
    "get_embeds_indices_in_range(100, 200)": lambda pr: lambda: pr.get_embeds_indices_in_range(100, 200),
}


_CH5_PER_CALL = ("Each question is answered at least 5× faster by the list cache than by the tensor cache.",
                 [Faster(fast=1, slow=0, by=5.0)])


declare("ch5.per_call", cpu=_CH5_PER_CALL, gpu=_CH5_PER_CALL)  # host-only work: the same sentence on any machine


def per_call_costs(impls: dict[str, RangeClass], length: int = IMAGE_TOKENS) -> Any:
    """Time of one call of each of :data:`QUESTIONS` per variant, interleaved (the first call builds the cache)."""
    from synclab.reference import record
    from synclab.timing import run_time, sweep

    mask = make_mask(framed(length))

    def factory(cls: RangeClass) -> Callable[[str], Callable[[], Any]]:
        return lambda question: QUESTIONS[question](cls(offset=0, length=length, is_embed=mask))

    variants = {name: factory(cls) for name, cls in impls.items()}
    result = validated("ch5.per_call", lambda: sweep(variants, "question", list(QUESTIONS),
                                                     min_run_time=run_time(0.2, 0.5), reference=next(iter(impls))))
    record("ch5", "per_call", result.to_dict())
    return result


def op_breakdown(range_cls: RangeClass, length: int = IMAGE_TOKENS) -> list[tuple[str, float, float]]:
    """The torch ops behind one ``get_num_embeds()`` (profiler): (op, per call, self us per call)."""
    from synclab.profiling import ops_per_call

    pr = range_cls(offset=0, length=length, is_embed=torch.ones(length, dtype=torch.bool))
    return ops_per_call(pr.get_num_embeds)


def decode_step(scheduler_cls: SchedulerClass, range_cls: RangeClass, num_reqs: int, images: int,
                length: int = IMAGE_TOKENS) -> Callable[[], tuple]:
    """One repeatable ``schedule()`` of ``num_reqs`` decoding requests with ``images`` images each.

    Every image was encoded long ago, yet the loop asks each one its number of
    embeddings before skipping it: the PR's workload (c=128, 32 images).
    """
    mask = framed(length)
    scheduler = scheduler_cls(SchedulerConfig(max_num_batched_tokens=8192))
    for r in range(num_reqs):
        features = [(f"img-{r}-{k}", 16 + k * (length + 16), length, mask) for k in range(images)]
        num_prompt = 16 + images * (length + 16) + 32
        scheduler.add_request(make_request(range_cls, features, num_prompt, f"req-{r}", num_computed_tokens=num_prompt,
                                           max_tokens=10**9))
        scheduler.running[-1].num_output_tokens = 1  # decoding: one token to compute per step
    return lambda: scheduler.schedule().as_tuple()


_CH5_STEP = ("The list cache's step is at least 3× faster than the tensor cache's at every size and at least 5× at "
             "the PR's 128×32; both grow at least 20× from 8×4 to 128×32.",
             [Faster(fast=1, slow=0, by=3.0), Faster(fast=1, slow=0, by=5.0, from_value="128x32"),
              Grows(variant=0, by=20.0), Grows(variant=1, by=20.0)])


declare("ch5.step_sweep", cpu=_CH5_STEP, gpu=_CH5_STEP)


def step_sweep(variants: dict[str, tuple[SchedulerClass, RangeClass]], grid: tuple = GRID) -> Any:
    """Host time of one scheduler step over (requests x images), per (scheduler, range) variant."""
    from synclab.reference import record
    from synclab.timing import run_time, sweep

    values = [f"{n}x{k}" for n, k in grid]

    def factory(sched_cls: SchedulerClass, range_cls: RangeClass) -> Callable[[str], Callable[[], tuple]]:
        return lambda value: decode_step(sched_cls, range_cls, *map(int, value.split("x")))

    factories = {name: factory(*pair) for name, pair in variants.items()}
    result = validated("ch5.step_sweep", lambda: sweep(factories, "requests x images", values,
                                                       min_run_time=run_time(0.1, 0.3), reference=next(iter(variants))))
    record("ch5", "step_sweep", result.to_dict())
    return result


def scheduler_to_profile(reader_scheduler: SchedulerClass) -> SchedulerClass:
    """The reader's scheduler once Exercise 5.2 passed its checks and asks the items of a decode step their
    questions; until then the lab's reference, with a line that says why.

    A 5.2 that asks ``get_num_embeds()`` only of the items it schedules passes the checks (the page's pitfalls say
    so), but in a decode step it schedules no item, asks nothing, and both caches would count and time alike."""
    from synclab.checks import unfinished

    reason = unfinished("5.2")
    if reason is None and _asks_in_a_decode_step(reader_scheduler):
        return reader_scheduler
    if reason is None:
        reason = ("your 5.2 asks get_num_embeds() only of the items it schedules, and a decode step schedules none: "
                  "it asks no question, so both caches would count and time alike (vLLM's loop at #40143 asks every "
                  "item it reaches, the workload the PR measured)")
    print(f"the scheduler steps below run the lab's reference scheduler: {reason}.")
    return _SchedulerReference


def _asks_in_a_decode_step(scheduler_cls: SchedulerClass) -> bool:
    """Whether ``scheduler_cls`` asks the tensor cache anything (a torch call) in a small decode step."""
    step = decode_step(scheduler_cls, PlaceholderRangeBaseline, num_reqs=2, images=2)
    step()  # build the caches first
    with count_torch_calls() as calls:
        step()
    return calls.count > 0


def calls_per_step(variants: dict[str, tuple[SchedulerClass, RangeClass]], num_reqs: int = 128,
                   images: int = 32) -> dict[str, tuple[int, int]]:
    """Per variant: (host-device syncs, torch calls) in one decode step, counted (the same on any machine)."""
    from synclab.syncs import count_syncs

    counts = {}
    for name, (sched_cls, range_cls) in variants.items():
        step = decode_step(sched_cls, range_cls, num_reqs, images)
        step()  # build the caches first
        with count_syncs() as syncs, count_torch_calls() as calls:
            step()
        counts[name] = (syncs.count, calls.count)
    return counts


def busy_fraction(step_us: list[float], device_step_us: float) -> list[float]:
    """MODEL: the device's busy share of an async loop whose step takes max(host, device)."""
    return [device_step_us / max(h, device_step_us) for h in step_us]


def gpu_loop(scheduler_cls: SchedulerClass, range_cls: RangeClass, num_reqs: int = 128, images: int = 32,
             steps: int = 30, hidden: int = 4096, layers: int = 8) -> dict[str, float] | None:
    """A real async loop on a GPU: queue step i's forward, schedule step i+1 on the host, then wait for step i.

    The forward is ``layers`` matmuls of [num_reqs, hidden] x [hidden, hidden]. Returns the
    device's busy share (forward time by CUDA events / wall time) and ms per step. None without a GPU.
    """
    import time

    from synclab.device import has_cuda, host_wait_event

    if not has_cuda():
        return None
    weights = [torch.randn(hidden, hidden, device="cuda") / hidden ** 0.5 for _ in range(layers)]
    x = torch.randn(num_reqs, hidden, device="cuda")

    def forward() -> torch.Tensor:
        h = x
        for w in weights:
            h = torch.tanh(h @ w)  # [num_reqs, hidden]
        return h

    step = decode_step(scheduler_cls, range_cls, num_reqs, images)
    for _ in range(3):  # warm-up, untimed: cuBLAS's handle and workspace and the allocator's blocks come once
        forward()
    events = []
    torch.cuda.synchronize()
    start = time.perf_counter()
    previous = None
    for _ in range(steps):
        begin, end = host_wait_event(enable_timing=True), host_wait_event(enable_timing=True)
        begin.record()
        forward()
        end.record()
        events.append((begin, end))
        step()  # the host schedules the next step while this one runs
        if previous is not None:
            previous.synchronize()  # the sampled tokens of the step before
        previous = end
    torch.cuda.synchronize()
    elapsed_ms = (time.perf_counter() - start) * 1e3
    busy_ms = sum(b.elapsed_time(e) for b, e in events)
    return {"busy_fraction": busy_ms / elapsed_ms, "ms_per_step": elapsed_ms / steps,
            "device_ms_per_step": busy_ms / steps}


def disagreeing_forwards(stored: dict[str, Any], ratio: float = 2.0) -> list[tuple[str, float, float]]:
    """The loads of a stored :func:`gpu_loops` run at which the tensor cache's forwards took over ``ratio`` times the
    list cache's for the same work: (load, tensor ms, list ms) per step. Their busy shares are read as high (chapter
    5's GPU figure says which, and why it is not established)."""
    loops = list(stored.get("loops", {}).values())  # [tensor cache, list cache], a run per load
    if len(loops) != 2:
        return []
    return [(load, t["device_ms_per_step"], l["device_ms_per_step"]) for load, t, l in zip(stored["grid"], *loops)
            if t["device_ms_per_step"] > ratio * l["device_ms_per_step"]]


def gpu_loops(variants: dict[str, tuple[SchedulerClass, RangeClass]], grid: tuple = GRID) -> dict[str, Any] | None:
    """``gpu_loop`` for every variant over ``grid``, recorded for ``bench``; None without a GPU."""
    from synclab.reference import record

    results: dict[str, Any] = {"grid": [f"{n}x{k}" for n, k in grid], "loops": {name: [] for name in variants}}
    for point, (n, k) in enumerate(grid):
        # the variants take turns going first: neither always meets a device fresh from the other's work
        names = list(variants) if point % 2 == 0 else list(reversed(variants))
        for name in names:
            run = gpu_loop(*variants[name], n, k)
            if run is None:
                return None
            results["loops"][name].append(run)
    record("ch5", "gpu_loops", results)
    return results
