"""Chapter 6's measurements: the ablation (each fix alone, all, none), the device's busy share, one step's timeline.

Taught in chapter 6 (the capstone), Exercise 6.2 and its profiling cells.

* :func:`sync_table` — stray syncs and planned waits per step, per configuration (counted);
* :func:`busy_share` — the fraction of a window with a kernel running on the device, from
  kernel intervals (overlaps merged): the arithmetic behind "the device was busy x% of the step";
* :func:`host_time_sweep` — host time per step of each configuration (``synclab.timing``, claim-checked);
* :func:`gpu_ablation` — on a GPU: a profiler trace per configuration, the busy share of its steps,
  tokens/s, and the timeline; ``None`` on a CPU;
* :func:`step_host_events` — one step's host events **in order, counted** (not timed): every torch
  call the host makes, each tagged with the part of the step that made it, with the step's syncs
  placed between them. The same on any machine;
* :func:`modelled_busy_share` — the MODEL of chapter 0 (:mod:`synclab.timeline_model`) fed with the
  counted stray syncs of each step;
* :func:`trace_lanes` — on a GPU, the kernels and the host's sync calls of a real profiler trace.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from torch.overrides import TorchFunctionMode

from synclab.capstone.workloads import (ABLATION_LENGTHS, Workload, ablation_configs, ablation_workload, current_fixes,
                                        host_work_in_decode_step, is_planned, run_engine, step_syncs)
from synclab.claims import Faster, Within, declare, validated
from synclab.device import called_from_device_layer, has_cuda
from synclab.engine.engine_core import EngineConfig, EngineCore, EngineRunner
from synclab.syncs import SyncReport, attribute_syncs_to_callers, count_syncs
from synclab.timeline_model import simulate


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
               runner_cls: type[EngineRunner] = EngineRunner, components: Any = None) -> dict[str, tuple[float, float]]:
    """Per configuration: (stray syncs per step, planned waits per step), counted (the same on any machine)."""
    table = {}
    for config in configs or ablation_configs():
        syncs, _ = step_syncs(workload, config, runner_cls, components)
        label = (components or current_fixes()).label_for(config)
        table[label] = (syncs.stray_per_step, sum(syncs.planned) / max(len(syncs.planned), 1))
    return table


# (tokens each request already produced, images per request): where the scans of chapters 4 and 5 grow.
HOST_WORK_POINTS = ((16, 2), (256, 2), (16, 16), (256, 16))


def host_work_table(configs: list[EngineConfig] | None = None,
                    points: Sequence[tuple[int, int]] = HOST_WORK_POINTS, components: Any = None) -> dict[str, list[int]]:
    """Per configuration, at each point: the host's work in one decode step, torch calls plus elements of the output
    histories touched (:func:`~synclab.capstone.workloads.host_work_in_decode_step`).

    Counted, so the same on any machine (the simulated device's own calls are left out): what each fix buys the
    host, which a CPU's wall time cannot show while the model's work runs on the host too.
    """
    components = components or current_fixes()
    return {components.label_for(config): [host_work_in_decode_step(EngineRunner, config, n, m, components).total
                                           for n, m in points]
            for config in configs or ablation_configs()}


def host_work_figure(table: dict[str, list[int]], points: Sequence[tuple[int, int]] = HOST_WORK_POINTS) -> Any:
    """:func:`host_work_table` as grouped bars: one group per workload, one bar per configuration."""
    from synclab import figures

    return figures.sync_counts_figure("workload (tokens already out, images per request)",
                                      [f"{n} out, {m} images" for n, m in points], table,
                                      "Host work in one decode step, per configuration",
                                      yaxis_title="torch calls + history elements touched",
                                      counted_with="count_torch_calls and CountingList")


_CH6_HOST_CPU = ("On this CPU every configuration's run takes within 1.5× of the baseline's: the model's own work, "
                 "done by the host here, hides what the fixes save.",
                 [Within(a=-1, b=0, factor=1.5)])
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

    fixes = current_fixes()
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
    baseline and of all fixes, :func:`trace_lanes`) for ``data/reference/``.
    """
    if not has_cuda():
        return None
    import torch
    from torch.profiler import ProfilerActivity, profile

    from synclab.engine.tiny_llm import GPU_MODEL
    from synclab.reference import record

    fixes = current_fixes()
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


# ----------------------------------------------------------------------------- one step's timeline

attribute_syncs_to_callers(__file__)  # a sync seen while recording belongs to the engine's line, not ours

# The engine's methods, innermost first wins: a call made inside _sample belongs to "sample".
PHASE_OF_FUNCTION = {
    "schedule": "schedule", "update_from_output": "schedule",
    "_layout": "inputs", "upload": "inputs",
    "_encode": "forward", "execute_model": "forward",  # what execute_model does itself: embed, encoder, model
    "_pool": "pool",
    "_sample": "sample", "_apply_sampling_extras": "sample", "_stopped_on_device": "sample",
    "_copy_to_host": "copy", "_queue_copies": "copy", "_sync_device": "copy",
    "get_output": "collect", "_process": "collect", "stopped_on_host": "collect", "release": "collect",
}
PHASES = ("schedule", "inputs", "forward", "pool", "sample", "copy", "collect", "other")


@dataclass(frozen=True)
class HostEvent:
    """One thing the host did in a step: a torch ``call``, a ``stray`` sync or a ``planned`` wait."""

    kind: str
    name: str  # the torch function, or where the sync happened
    phase: str


def phase_of(frame: Any) -> str:
    """The innermost engine method on the stack above ``frame`` ("other" when none is)."""
    while frame is not None:
        phase = PHASE_OF_FUNCTION.get(frame.f_code.co_name)
        if phase is not None:
            return phase
        frame = frame.f_back
    return "other"


class _Recording(TorchFunctionMode):
    """Logs each torch call in order, and the syncs ``report`` saw since the call before."""

    def __init__(self, report: SyncReport, events: list[HostEvent]) -> None:
        super().__init__()
        self.report, self.events, self.seen = report, events, 0

    def flush_syncs(self, phase: str) -> None:
        for sync in self.report.events[self.seen:]:
            kind = "planned" if is_planned(sync) else "stray"
            where = PHASE_OF_FUNCTION.get(sync.function, phase)  # a wait outside torch calls: by its own function
            self.events.append(HostEvent(kind, f"{sync.op}: {sync.where}", where))
        self.seen = len(self.report.events)

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: tuple = (), kwargs: dict | None = None):
        phase = phase_of(sys._getframe(1))
        self.flush_syncs(phase)  # a sync outside torch calls (an event's wait) comes before this call
        if not called_from_device_layer(sys._getframe(1)):  # the simulation's own calls differ from CUDA's
            self.events.append(HostEvent("call", getattr(func, "__name__", str(func)), phase))
        result = func(*args, **(kwargs or {}))
        self.flush_syncs(phase)  # this call's own syncs come right after it
        return result


def step_host_events(workload: Workload, config: EngineConfig, step: int,
                     runner_cls: type[EngineRunner] = EngineRunner, components: Any = None) -> list[HostEvent]:
    """The host's events in step ``step`` of a run of ``workload``, in the order they happened."""
    events: list[HostEvent] = []

    @contextmanager
    def record(engine: EngineCore) -> Iterator[None]:
        if engine.steps != step:
            yield
            return
        with count_syncs() as report:
            recording = _Recording(report, events)
            with recording:
                yield
            recording.flush_syncs("collect")

    run_engine(workload, config, components or current_fixes(), runner_cls, each_step=record)
    if not events:
        raise ValueError(f"the run ended before step {step}")
    return events


def modelled_busy_share(stray_per_step: Sequence[int], host_us: float, device_us: float) -> float:
    """MODEL: the device's busy share over steps with these stray syncs, each step as in chapter 0's model.

    Every step is modelled in steady state with its own count: its time is what one more step adds to a
    long run of such steps (:func:`synclab.timeline_model.simulate`), so the first step's start-up is not
    counted. The share is the device's work over the steps' total time.
    """
    if not stray_per_step:
        raise ValueError("no steps")
    step_time = {k: simulate(host_us, device_us, k, steps=9).total_us - simulate(host_us, device_us, k, steps=8).total_us
                 for k in set(stray_per_step)}
    return len(stray_per_step) * device_us / sum(step_time[k] for k in stray_per_step)


# CUDA runtime calls that block the host until the device catches up (cudaMemcpyAsync does not)
SYNC_CALLS = frozenset({"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy"})


def kernel_intervals(events: Sequence[Any]) -> list[tuple[float, float]]:
    """``(begin, end)`` in µs of every device kernel among ``torch.profiler`` events."""
    return [(e.time_range.start, e.time_range.end) for e in events
            if e.device_type.name == "CUDA" and e.time_range.end > e.time_range.start]


def trace_lanes(events: Sequence[Any], window_us: float) -> dict[str, list[tuple[float, float]]]:
    """Kernels and host sync calls of a profiler trace, in µs from the first kernel, cut to ``window_us``.

    ``events`` are ``torch.profiler`` events (``device_type``, ``name``, ``time_range``).
    """
    kernels = kernel_intervals(events)
    if not kernels:
        return {"kernels": [], "syncs": []}
    origin = min(b for b, _ in kernels)
    syncs = [(e.time_range.start, e.time_range.end) for e in events
             if e.device_type.name == "CPU" and e.name in SYNC_CALLS]

    def window(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
        return sorted((round(b - origin, 2), round(min(e, origin + window_us) - origin, 2))
                      for b, e in spans if origin <= b < origin + window_us)

    return {"kernels": window(kernels), "syncs": window(syncs)}


def busy_share_model(workload: Workload, configs: Sequence[EngineConfig], host_us: float,
                     device_steps_us: Sequence[float]) -> dict[str, list[float]]:
    """MODEL, per configuration: :func:`modelled_busy_share` of its counted stray syncs, at each device step."""
    shares = {}
    for config in configs:
        syncs, _ = step_syncs(workload, config)
        counts = [len(step) for step in syncs.stray]
        shares[current_fixes().label_for(config)] = [modelled_busy_share(counts, host_us, d) for d in device_steps_us]
    return shares
