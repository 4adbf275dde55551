"""Chapter 6's measurements: the ablation (each fix alone, all, none) and the device's busy share.

Taught in chapter 6 (the capstone), Exercise 6.2 and its profiling cells.

* :func:`ablation_configs` — baseline, each fix alone, all fixes;
* :func:`busy_share` — the fraction of a window with a kernel running on the device, from
  kernel intervals (overlaps merged): the arithmetic behind "the device was busy x% of the step";
* :func:`host_time_sweep` — host time per step of each configuration (``synclab.timing``, claim-checked);
* :func:`gpu_ablation` — on a GPU: a profiler trace per configuration, the busy share of its steps,
  tokens/s, and the timeline; ``None`` on a CPU.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from typing import Any, Callable, Sequence

from synclab.capstone.checks import decode_workload, step_syncs
from synclab.capstone.fixes import load_fixes
from synclab.capstone.workloads import Workload, run_engine
from synclab.claims import Faster, Within, declare, validated
from synclab.device import has_cuda
from synclab.engine.engine_core import PATTERNS, EngineConfig, EngineRunner


def ablation_configs() -> list[EngineConfig]:
    """Baseline, then each fix alone (in chapter order), then all five."""
    return [EngineConfig.baseline(), *(EngineConfig.only(p) for p in PATTERNS), EngineConfig()]


def busy_share(kernels: Sequence[tuple[float, float]], start: float, end: float) -> float:
    """Fraction of ``[start, end)`` during which at least one kernel ran (``kernels``: ``(begin, end)`` pairs).

    Overlapping kernels (two streams) count once; parts outside the window are cut off.
    """
    if end <= start:
        raise ValueError(f"an empty window: [{start}, {end})")
    clipped = sorted((max(b, start), min(e, end)) for b, e in kernels if e > start and b < end and e > b)
    busy, reach = 0.0, start
    for b, e in clipped:
        if e <= reach:
            continue  # inside what is already counted
        busy += e - max(b, reach)
        reach = e
    return busy / (end - start)


def sync_table(workload: Workload, configs: list[EngineConfig] | None = None,
               runner_cls: type[EngineRunner] = EngineRunner) -> dict[str, tuple[float, float]]:
    """Per configuration: (stray syncs per step, planned waits per step), counted (the same on any machine)."""
    table = {}
    for config in configs or ablation_configs():
        syncs, _ = step_syncs(workload, config, runner_cls)
        table[config.label] = (syncs.stray_per_step, sum(syncs.planned) / max(len(syncs.planned), 1))
    return table


ABLATION_LENGTHS = (16, 64)  # tokens each request has already produced (decode_workload)


def ablation_workload(length: int = 64) -> Workload:
    """4 decoding requests with 4 images each (2 of them asking for logprobs) and 2 embedding requests."""
    return decode_workload(length, images=4, embeddings=2)


_CH6_HOST_CPU = ("On this CPU every configuration's run takes within 1.25× of the baseline's: the model's own work, "
                 "done by the host here, hides what the fixes save.",
                 [Within(a=-1, b=0, factor=1.25)])
_CH6_HOST_GPU = ("On the GPU, the run with all five fixes takes less wall time than the baseline's at both output "
                 "lengths.", [Faster(fast=-1, slow=0, by=1.0)])
declare("ch6.host_time", cpu=_CH6_HOST_CPU, gpu=_CH6_HOST_GPU)


def host_time_sweep(configs: list[EngineConfig] | None = None, lengths: tuple[int, ...] = ABLATION_LENGTHS) -> Any:
    """Wall time of a whole run of :func:`~synclab.capstone.checks.decode_workload` per configuration, interleaved.

    On a CPU every step's work runs on the host (the model's too): the time is the host's. On a GPU
    it is the wall time of the run, queueing and waiting included.
    """
    from synclab.reference import record
    from synclab.timing import run_time, sweep

    fixes = load_fixes()
    configs = configs or ablation_configs()

    def factory(config: EngineConfig) -> Callable[[int], Callable[[], Any]]:
        def at(length: int) -> Callable[[], Any]:
            workload = ablation_workload(length)
            return lambda: {k: r.token_ids for k, r in run_engine(workload, config, fixes).items()}
        return at

    variants = {config.label: factory(config) for config in configs}
    result = validated("ch6.host_time", lambda: sweep(variants, "tokens already out per request", list(lengths),
                                                      min_run_time=run_time(0.05, 0.5), rounds=3,
                                                      reference=configs[0].label))
    record("ch6", "host_time", result.to_dict())
    return result


TIMELINE_CONFIGS = ("baseline", "all fixes")  # the two whose traces the page draws
TIMELINE_STEPS = 3  # decode steps shown


def gpu_ablation(configs: list[EngineConfig] | None = None, length: int = 64) -> dict[str, Any] | None:
    """On a GPU: per configuration, the busy share of the device over a profiled run, tokens/s, and a trace.

    Records ``gpu_ablation`` and ``timeline`` (the kernels and sync calls of the first steps of the
    baseline and of all fixes, :func:`synclab.capstone.timeline.trace_lanes`) for ``data/reference/``.
    """
    if not has_cuda():
        return None
    import torch
    from torch.profiler import ProfilerActivity, profile

    from synclab.capstone.timeline import kernel_intervals, trace_lanes
    from synclab.engine.tiny_llm import GPU_MODEL
    from synclab.reference import record

    fixes = load_fixes()
    workload = ablation_workload(length)
    workload = Workload(workload.requests, workload.scheduler, GPU_MODEL)
    out: dict[str, Any] = {"model": repr(GPU_MODEL), "output_length": length, "configs": {}}
    timeline: dict[str, Any] = {}
    for config in configs or ablation_configs():
        run_engine(workload, config, fixes)  # warm-up: kernels loaded, allocator warm
        torch.cuda.synchronize()
        steps = []
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            started = time.perf_counter()
            results = run_engine(workload, config, fixes, each_step=lambda engine: _count_into(steps))
            torch.cuda.synchronize()
            wall_s = time.perf_counter() - started
        events = prof.events()
        kernels = kernel_intervals(events)
        begin = min((b for b, _ in kernels), default=0.0)
        end = max((e for _, e in kernels), default=1.0)
        tokens = sum(len(r.token_ids) for r in results.values())
        out["configs"][config.label] = {"busy_share": busy_share(kernels, begin, end), "wall_s": wall_s,
                                        "steps": len(steps), "tokens": tokens, "tokens_per_s": tokens / wall_s,
                                        "device_busy_us": sum(e - b for b, e in kernels)}
        if config.label in TIMELINE_CONFIGS:
            timeline[config.label] = trace_lanes(events, window_us=(end - begin) * TIMELINE_STEPS / max(len(steps), 1))
    record("ch6", "gpu_ablation", out)
    if timeline:
        record("ch6", "timeline", timeline)
    return out


def _count_into(steps: list[int]) -> Any:
    steps.append(1)
    return nullcontext()
