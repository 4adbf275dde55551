"""Chapter 6's whole-step timelines: where in one engine step the host stops.

Taught in chapter 6 (the capstone), "What the profile shows".

* :func:`step_host_events` — one step's host events **in order, counted** (not timed): every torch
  call the host makes, each tagged with the part of the step that made it (schedule, inputs,
  forward, pool, sample, copy, collect), with the step's syncs placed between them. The same on any
  machine; on a CPU this is the timeline the lab can honestly draw.
* :func:`modelled_busy_share` — the MODEL of chapter 0 (:mod:`synclab.timeline_model`) fed with the
  counted stray syncs of each step: what share of the time a device would be busy, for costs you assume.
* :func:`trace_lanes` — on a GPU, the kernels and the host's sync calls of a real profiler trace, as
  intervals for a timeline (``python -m synclab bench ch6`` stores them).
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from torch.overrides import TorchFunctionMode

from synclab.capstone.checks import is_planned, step_syncs
from synclab.capstone.fixes import load_fixes
from synclab.capstone.workloads import Workload, run_engine
from synclab.engine.engine_core import EngineConfig, EngineCore, EngineRunner
from synclab.syncs import SyncEvent, SyncReport, attribute_syncs_to_callers, count_syncs
from synclab.timeline_model import simulate

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

    run_engine(workload, config, components or load_fixes(), runner_cls, each_step=record)
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
        shares[config.label] = [modelled_busy_share(counts, host_us, d) for d in device_steps_us]
    return shares
