"""Chapter 6's measurements: the ablation (each fix alone, all, none), the device's busy share, one step's timeline.

Taught in chapter 6 (the capstone), Exercise 6.2 and its profiling cells.

* :func:`sync_table` — stray syncs and planned waits per step, per configuration (counted);
* :func:`busy_share` — the fraction of a window with a kernel running on the device, from
  kernel intervals (overlaps merged): the arithmetic behind "the device was busy x% of the step";
* :func:`host_time_by_phase` — host time per decode step of each configuration, split into the parts of the step
  (:mod:`synclab.capstone.host_time`), claim-checked;
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

import copy
import statistics
import sys
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Iterator, Sequence

from torch.overrides import TorchFunctionMode

from synclab.capstone.counted_cache import counted_once
from synclab.capstone.host_time import HOST_PHASES, HostPhases, host_phases
from synclab.capstone.workloads import (Workload, ablation_configs,
                                        book_fixes, capstone_workload, counting_histories, current_fixes,
                                        host_work_in_decode_step, is_planned,
                                        run_engine, step_syncs)
from synclab.claims import Faster, claimed_nothing, declare, validated
from synclab.device import called_from_device_layer, has_cuda
from synclab.dispatch import CountingList, count_torch_calls
from synclab.engine.engine_core import EngineConfig, EngineCore, EngineRunner, shared_model
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


SYNC_FIXES = ("slice_then_split", "lazy_stream", "pinned_uploads")  # remove stray syncs
# remove host work that grows with outputs and images, each from its own measure
HOST_WORK_FIXES = {"reverse_scan": "history elements read", "list_cache": "torch calls"}
FEW_CALLS = 10  # what the sync fixes may add to a step's torch calls (a pinned upload is a copy more)
ABLATION_MEASURES = ("stray syncs", "torch calls", "history elements read")


def ablation_counts(workload: Workload | None = None, configs: list[EngineConfig] | None = None,
                    components: Any = None) -> dict[str, dict[str, list[int]]]:
    """Per configuration, per decode step of a run: its stray syncs, torch calls and output-history elements read.

    Counted, so the same on any machine (the simulated device's own torch calls are left out). The first step
    (the prompts' prefill) and the last (it only collects) are left out: what is left is the steady state a long
    decode repeats, and the spread is over its steps. Default: :func:`~synclab.capstone.workloads.capstone_workload`.
    """
    components = components or current_fixes()
    if workload is None and configs is None and components == book_fixes():  # counted once per version of the code
        return book_ablation_counts()
    workload = workload or capstone_workload()

    def count(config: EngineConfig) -> dict[str, list[int]]:
        per_step: dict[str, list[int]] = {measure: [] for measure in ABLATION_MEASURES}

        @contextmanager
        def counted(engine: EngineCore) -> Iterator[None]:
            CountingList.reset()
            with count_syncs() as report, count_torch_calls() as calls:
                yield
            per_step["stray syncs"].append(sum(not is_planned(e) for e in report.events))
            per_step["torch calls"].append(calls.count)
            per_step["history elements read"].append(CountingList.touched)

        run_engine(workload, config, components, counting_histories(EngineRunner), each_step=counted)
        if len(per_step["stray syncs"]) < 3:
            raise ValueError(f"the run took {len(per_step['stray syncs'])} steps: no decode step between its "
                             f"prefill and its end")
        return {measure: values[1:-1] for measure, values in per_step.items()}

    return _each_run_once(configs or ablation_configs(), components, count)


def _each_run_once(configs: list[EngineConfig], components: Any,
                   count: Callable[[EngineConfig], Any]) -> dict[str, Any]:
    """``count(config)`` per configuration, by its label; a configuration whose fixes are not all written runs the
    code before them, as an earlier one may already have (``components.effective``): counted once, copied after."""
    counted: dict[EngineConfig, Any] = {}
    rows = {}
    for config in configs:
        ran = components.effective(config)
        if ran not in counted:
            counted[ran] = count(config)
        rows[components.label_for(config)] = copy.deepcopy(counted[ran])
    return rows


def ablation_order_problems(counts: dict[str, dict[str, list[int]]]) -> list[str]:
    """What the five fixes predict for :func:`ablation_counts`, checked on the medians; ``[]`` when it holds.

    Each sync fix removes stray syncs, and all five remove them all; the reverse scan cuts the history elements
    the host reads and the list cache its torch calls, and all five cut each as much, give or take the few
    calls a pinned upload adds; no fix adds a stray sync.
    """
    # a label names a fix not written yet in brackets ("all fixes (list_cache not written: ...)"): keyed without them
    med = {label.split(" (")[0]: {what: statistics.median(values) for what, values in row.items()}
           for label, row in counts.items()}
    unwritten = [label.split(" (")[0] for label in counts if " (" in label and not label.startswith("all fixes")]
    base, every = med["baseline"], med["all fixes"]
    problems = [f"{fix} runs the code before its fix: write that chapter's exercise to see what it buys"
                for fix in unwritten]
    if problems:
        return problems  # the order is the fixes' prediction: it needs them all
    if every["stray syncs"] != 0:
        problems.append(f"all fixes leave {every['stray syncs']:g} stray syncs per step, not 0")
    for fix in SYNC_FIXES + tuple(HOST_WORK_FIXES):
        if fix not in med:
            problems.append(f"no row for {fix} (a fix not written yet is labelled so: write it)")
            continue
        mine = med[fix]
        if fix in SYNC_FIXES and not mine["stray syncs"] < base["stray syncs"]:
            problems.append(f"{fix} alone leaves {mine['stray syncs']:g} stray syncs per step, the baseline "
                            f"{base['stray syncs']:g}")
        measure = HOST_WORK_FIXES.get(fix)
        if measure and not (mine[measure] < base[measure] and every[measure] <= mine[measure] + FEW_CALLS):
            problems.append(f"{measure} per step: {fix} alone {mine[measure]:g}, baseline {base[measure]:g}, "
                            f"all fixes {every[measure]:g}")
        if mine["stray syncs"] > base["stray syncs"]:
            problems.append(f"{fix} alone adds stray syncs: {mine['stray syncs']:g} against {base['stray syncs']:g}")
    return problems


@lru_cache(maxsize=1)
def _book_ablation_counts() -> dict[str, dict[str, tuple[int, ...]]]:
    # counted once per version of the package's code (synclab.capstone.counted_cache): every process that checks 6.3
    # reads them back
    counts = counted_once("ch6-book-ablation-counts",
                          lambda: ablation_counts(capstone_workload(), components=book_fixes()))
    return {label: {measure: tuple(v) for measure, v in row.items()} for label, row in counts.items()}


def book_ablation_counts() -> dict[str, dict[str, list[int]]]:
    """:func:`ablation_counts` of the capstone's workload with the book's fixes, every configuration of the ablation.

    Counted once per version of the package's code (:mod:`synclab.capstone.counted_cache`; the counts are the same every
    time): Exercise 6.3's answers, the lab's rows for fixes not written yet, and the tests all read them. A fresh
    copy on every call."""
    return {label: {measure: list(v) for measure, v in row.items()} for label, row in _book_ablation_counts().items()}


def ablation_counts_figure(counts: dict[str, dict[str, list[int]]], title: str) -> Any:
    """:func:`ablation_counts` as two panels of boxes, one per configuration: the spread is over the decode steps."""
    from synclab import figures

    return figures.step_counts_figure(counts, title, counted_with="count_syncs, count_torch_calls and CountingList")


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
    if configs is None and tuple(points) == HOST_WORK_POINTS and components == book_fixes():
        return book_host_work()  # the book's fixes (a lab with none written runs them): counted once per version
    return _each_run_once(configs or ablation_configs(), components,
                          lambda config: [host_work_in_decode_step(EngineRunner, config, n, m, components).total
                                          for n, m in points])


@lru_cache(maxsize=1)
def _book_host_work() -> dict[str, tuple[int, ...]]:
    table = counted_once("ch6-book-host-work", lambda: host_work_table(ablation_configs(), components=book_fixes()))
    return {label: tuple(counts) for label, counts in table.items()}


def book_host_work() -> dict[str, list[int]]:
    """:func:`host_work_table` with the book's fixes, every configuration: counted once per version of the package's
    code (:mod:`synclab.capstone.counted_cache`), a fresh copy."""
    return {label: list(counts) for label, counts in _book_host_work().items()}


def host_work_figure(table: dict[str, list[int]], points: Sequence[tuple[int, int]] = HOST_WORK_POINTS) -> Any:
    """:func:`host_work_table` as grouped bars: one group per workload, one bar per configuration."""
    from synclab import figures

    return figures.sync_counts_figure("workload (tokens already out, images per request)",
                                      [f"{n} out, {m} images" for n, m in points], table,
                                      "Host work in one decode step, per configuration",
                                      yaxis_title="torch calls + history elements read",
                                      counted_with="count_torch_calls and CountingList", by_fix=True)


_CH6_PHASES_CPU = ("On this CPU, at the capstone's workload, the reverse scan alone cuts the host's time per decode step "
                   "at least 1.5×, and all five fixes at least 2×.",
                   [Faster(fast="reverse_scan", slow=0, by=1.5), Faster(fast=-1, slow=0, by=2.0)])
_CH6_PHASES_GPU = ("On the GPU's host, the reverse scan alone cuts the host's time per decode step at least 1.25×, and "
                   "all five fixes at least 1.5×.",  # a faster host scans faster: the scan's part is smaller there
                   [Faster(fast="reverse_scan", slow=0, by=1.25), Faster(fast=-1, slow=0, by=1.5)])
declare("ch6.host_phases", cpu=_CH6_PHASES_CPU, gpu=_CH6_PHASES_GPU,
        cpu_shows="A CPU's host also computes the model, which a GPU's host only launches; the sync fixes save the "
                  "device's time, which a CPU cannot show")


@dataclass
class HostTime:
    """:func:`host_time_by_phase`'s result: the whole step per configuration (claim-checked), and its parts."""

    steps: Any  # synclab.timing.Sweep: one value, the workload; per configuration, its rounds' median steps
    phases: dict[str, HostPhases]
    model_shape: dict[str, Any] | None = None  # the model the workload ran (model_shape)

    def own_us(self) -> dict[str, float]:
        """Per configuration, the host's own part of a decode step in µs (the model's compute left out): what the
        MODEL's host time is (:func:`counted_busy_share_model`)."""
        return {label: row.own_us for label, row in self.phases.items()}

    def table(self) -> str:
        """µs per decode step in each part of the step, a row per configuration: the parts as the figure draws them,
        adding up to the median step (each part's median, scaled by the one factor that makes them add up)."""
        from synclab.figures import BUSY_PARTS_OFF, fix_label

        labels = {label: fix_label(label) for label in self.phases}
        width = max(len(short) for short in [*labels.values(), "host µs per decode step"]) + 2
        rows = [f"{'host µs per decode step':<{width}}" + "".join(f"{p:>9}" for p in HOST_PHASES) + f"{'= step':>9}"]
        for label, row in self.phases.items():
            parts = row.parts_of_step_us()
            rows.append(f"{labels[label]:<{width}}" + "".join(f"{parts[p]:>9,.0f}" for p in HOST_PHASES)
                        + f"{statistics.median(row.round_totals_us):>9,.0f}")
        off = self.parts_off()
        if off <= BUSY_PARTS_OFF:
            rows.append(f"(the step: the median over the rounds; each part: its median over the decode steps, adjusted "
                        f"by at most ±{100 * off:.1f}% so that the parts add up to the step; steps under a tenth apart "
                        "are within a shared machine's noise: the counts above say what each fix removes)")
        else:  # a percentage past 100 reads as nonsense: say what it means instead
            rows.append(f"The parts missed the step by more than {BUSY_PARTS_OFF:.0%}: the machine was busy while it "
                        "measured (on a quiet one they miss by a percent or two), so these parts are not to be read. "
                        "Read the counts above, which no load changes, and run the cell again when it is quiet.")
        checked = self.claim_checked()
        return "\n".join(rows + [checked] if checked else rows)

    def claim_checked(self) -> str:
        """The page's claim, as this run checked it: held or not, with the two ratios it is about ("" unchecked)."""
        checked = getattr(self.steps, "claim", None)
        steps = {label: statistics.median(row.round_totals_us) for label, row in self.phases.items()}
        if not checked or not {"baseline", "reverse_scan", "all fixes"} <= set(steps):
            return ""
        ratios = (f"the reverse scan alone {steps['baseline'] / steps['reverse_scan']:.2f}×, all five "
                  f"{steps['baseline'] / steps['all fixes']:.2f}×")
        said = "held" if checked["holds"] else "did not hold in this run (a busy machine's steps are noisy)"
        return f"The page's claim, checked by this run: {checked['claim']['text']} It {said}: {ratios}."

    def parts_off(self) -> float:
        """How far the parts' medians miss the median step, at most over the configurations: a percent or two on a
        quiet machine, more on a busy one (:data:`synclab.figures.BUSY_PARTS_OFF`)."""
        from synclab.figures import parts_of_step

        return max((abs(parts_of_step(row.per_phase_us, row.round_totals_us)[1] - 1) for row in self.phases.values()),
                   default=0.0)

    def busy_note(self) -> str:
        """What a MODEL fed with these times must say when they were taken on a busy machine ("" on a quiet one)."""
        from synclab.figures import BUSY_PARTS_OFF

        if self.parts_off() <= BUSY_PARTS_OFF:
            return ""
        return ("These host times were measured on a busy machine (the table above says so): the busy shares built "
                "on them are too low. Run the host-time cell again when the machine is quiet.")

    def model(self) -> str:
        """The model the measured workload ran, in words."""
        from synclab.figures import model_words

        return model_words({"model_shape": self.model_shape}) if self.model_shape else ""


def host_time_by_phase(workload: Workload | None = None, configs: list[EngineConfig] | None = None,
                       components: Any = None) -> HostTime:
    """Host time per decode step of each configuration, and of each part of the step: measured, claim-checked.

    The capstone's workload by default (:func:`~synclab.capstone.workloads.capstone_workload`). On a CPU the
    model's part is its compute; everything else is the host's own bookkeeping, what the fixes of chapters 1 and 3-5
    change. With the loaded fixes (``components``: None), recorded as ``host_phases`` (the step) with each
    configuration's parts.
    """
    from synclab.reference import record
    from synclab.timing import Sweep, Timing, measurement_threads
    from synclab.run_modes import deliberate_run, smoke_run

    fixes = components or current_fixes()
    workload = workload or capstone_workload()
    rounds = 2 if smoke_run() else 5 if deliberate_run() else 3
    measured: dict[str, dict[str, HostPhases]] = {}

    def measure() -> Sweep:
        rows = measured["last"] = host_phases(workload, configs, rounds=rounds, components=fixes)
        with measurement_threads():  # its provenance says the one thread it was measured with
            sweep = Sweep("workload", ["capstone"], {})
        for label, row in rows.items():
            q = statistics.quantiles(row.round_totals_us, n=4) if len(row.round_totals_us) > 1 else [0, 0, 0]
            sweep.timings[label] = [Timing(f"{label} workload=capstone", statistics.median(row.round_totals_us),
                                           q[2] - q[0], row.round_totals_us, sweep.provenance)]
        return sweep

    # a fix not written yet runs the code before its PR: the page's sentence speaks of the written fixes
    steps = validated("ch6.host_phases", measure) if not fixes.unfinished else claimed_nothing("ch6.host_phases",
                                                                                                 measure())
    result = HostTime(steps, measured["last"], model_shape(workload.model))
    if components is None:
        record("ch6", "host_phases", {**steps.to_dict(), "model_shape": result.model_shape,
                                      "phases": {label: row.to_dict() for label, row in result.phases.items()}})
    return result


def host_phases_figure(result: HostTime, title: str) -> Any:
    """:class:`HostTime` as stacked bars: per configuration, its median step's parts; the whole step's range over
    the rounds as a marker with error bars."""
    from synclab import figures

    return figures.host_phases_figure({label: row.to_dict() for label, row in result.phases.items()}, title,
                                      result.steps.provenance.label, result.model())


TIMELINE_CONFIGS = ("baseline", "all fixes")  # the two whose traces the page draws
TIMELINE_STEPS = 3  # decode steps shown


GPU_ABLATION_STEPS = 100  # decode steps measured per run, after the warm-up
GPU_ABLATION_WARMUP = 10  # steps run first, unmeasured: kernels loaded, allocator and caches warm
GPU_ABLATION_REPEATS = 5  # runs per configuration, interleaved: the spread
IDLE_WINDOWS = 5  # a profiled run's measured steps cut into this many windows: the idle share's spread
# The profiled run records this many steps after the warm-up, then runs on unprofiled: on the H200, profiling all
# 110 steps of the 8B-like model took 60-65 s per configuration, most of it reading the events back (the whole
# bench ran past its 300 s); 20 steps give each idle window 4 steps and the timeline its 3.
GPU_PROFILED_STEPS = 20


def model_shape(model: Any) -> dict[str, Any]:
    """A model's shape as the bench stores it: its sizes, dtype, parameters and weight bytes (a step reads them)."""
    return {"hidden_size": model.hidden_size, "num_layers": model.num_layers, "num_heads": model.num_heads,
            "vocab_size": model.vocab_size, "dtype": str(model.dtype).removeprefix("torch."),
            "parameters": model.num_parameters, "weight_bytes": model.weight_bytes()}


def gpu_ablation(configs: list[EngineConfig] | None = None, steps: int = GPU_ABLATION_STEPS,
                 repeats: int = GPU_ABLATION_REPEATS, warmup: int = GPU_ABLATION_WARMUP) -> dict[str, Any] | None:
    """On a GPU: per configuration, tokens/s over ``repeats`` interleaved runs and the device's idle share.

    Each run decodes :func:`~synclab.capstone.workloads.capstone_workload` for ``warmup`` + ``steps`` steps
    and times the ``steps`` after the warm-up. Then one profiled run per configuration gives the idle share
    (no kernel running), in :data:`IDLE_WINDOWS` windows of its first :data:`GPU_PROFILED_STEPS` measured steps.
    The claims (:func:`gpu_ablation_problems`) are checked here: a storing run records ``ablation`` only when they hold,
    and otherwise records what the GPU showed as ``ablation_contradicted`` and raises. ``None`` on a CPU.
    """
    if not has_cuda():
        return None
    import torch

    from synclab.claims import ClaimContradicted
    from synclab.device import pick_device
    from synclab.engine.tiny_llm import CPU_MODEL, gpu_model
    from synclab.reference import record
    from synclab.timing import Progress
    from synclab.run_modes import deliberate_run

    fixes = current_fixes()
    configs = configs or ablation_configs()
    model = gpu_model(torch.cuda.get_device_properties(0).total_memory)  # an 8B-like shape where it fits
    workload = capstone_workload(decode_tokens=warmup + steps, model=model)
    generating = sum(spec.sampling is not None for spec in workload.requests)  # one token each per decode step
    tokens_per_s: dict[str, list[float]] = {config.label: [] for config in configs}
    bar = Progress(repeats * len(configs) + len(configs), "GPU ablation runs")
    for repeat in range(repeats):
        order = configs[repeat % len(configs):] + configs[:repeat % len(configs)]  # nobody always goes first
        for config in order:
            seconds = _timed_run(workload, config, fixes, warmup)
            tokens_per_s[config.label].append(generating * steps / seconds)
            bar.step(f"{config.label} ({repeat + 1}/{repeats})")
    out: dict[str, Any] = {"model": repr(model), "model_shape": model_shape(model), "cpu_model": model_shape(CPU_MODEL),
                           "steps": steps, "warmup": warmup, "repeats": repeats, "workload": "capstone_workload",
                           "profiled_steps": min(steps, GPU_PROFILED_STEPS),
                           "configs": {}}
    timeline: dict[str, Any] = {}
    for config in configs:
        idle, lanes = _profiled_idle(workload, config, fixes, warmup, min(steps, GPU_PROFILED_STEPS))
        rates = tokens_per_s[config.label]
        out["configs"][config.label] = {"tokens_per_s": statistics.median(rates), "tokens_per_s_runs": rates,
                                        "idle_share": statistics.median(idle), "idle_share_windows": idle,
                                        # kept for the older figure: the busy share is what is not idle
                                        "busy_share": 1 - statistics.median(idle)}
        if config.label in TIMELINE_CONFIGS:
            timeline[config.label] = lanes
        bar.step(f"{config.label} profiled")
    bar.close()
    # eager, or replayed from CUDA graphs as vLLM's decode steps are (synclab.engine.cuda_graphs), and why not
    out["forward"] = shared_model(workload.model, pick_device()).forward_mode()
    problems = gpu_ablation_problems(out)
    out["claims"] = {"text": GPU_ABLATION_CLAIM, "holds": not problems, "problems": problems}
    if problems:
        record("ch6", "ablation_contradicted", out)
        if deliberate_run():
            raise ClaimContradicted("the GPU ablation contradicts its claims: " + "; ".join(problems) +
                                    ". Recorded as ablation_contradicted, not as the page's figure")
        print("Note: this run contradicts the page: " + "; ".join(problems))
    else:
        record("ch6", "ablation", out)
    if timeline:
        record("ch6", "timeline", timeline)
    return out


GPU_ABLATION_CLAIM = ("On the GPU, the reverse scan alone and all five fixes each serve more tokens per second than the "
                      "baseline, beyond the spread of five runs; no fix alone serves fewer than the baseline, and all "
                      "five serve no fewer than any one alone, beyond the spread; the device's idle share falls.")
# Where a fix must win beyond the spread: the parts of the step it removes, measured on the GPU's host (host_phases).
# The scan is half the baseline's host step there; the scheduler's questions, the list cache's part, are 4-5%, less
# than five runs' spread (the first H200 run: 770-1,008 tok/s for the baseline), so the list cache alone may only not
# lose. The sync fixes leave the other syncs, so the device still waits in every step: they too may only not lose.
GPU_WINS_BEYOND_SPREAD = ("reverse_scan",)


def beats(a: Sequence[float], b: Sequence[float]) -> bool:
    """``a`` beats ``b`` beyond the spread: ``a``'s median is above every run of ``b``."""
    return statistics.median(a) > max(b)


def loses(a: Sequence[float], b: Sequence[float]) -> bool:
    """``a`` loses to ``b`` beyond the spread: ``a``'s median is below every run of ``b``."""
    return statistics.median(a) < min(b)


def gpu_ablation_problems(result: dict[str, Any]) -> list[str]:
    """What contradicts :data:`GPU_ABLATION_CLAIM` in a :func:`gpu_ablation` result; ``[]`` when it holds.

    The reverse scan (:data:`GPU_WINS_BEYOND_SPREAD`) and all five shorten the host's step by more than the runs'
    spread, and the host's step sets the pace while the device idles: each must beat the baseline beyond the
    spread. Every other fix alone, and all five against any one alone, must only not lose beyond it.
    """
    configs = result["configs"]
    runs = {label: c["tokens_per_s_runs"] for label, c in configs.items()}
    base, every = runs["baseline"], runs["all fixes"]

    def spread(label: str) -> str:
        return f"{min(runs[label]):,.0f}-{max(runs[label]):,.0f}"

    problems = []
    for label in (*GPU_WINS_BEYOND_SPREAD, "all fixes"):
        if label in runs and not beats(runs[label], base):
            problems.append(f"{label}{' alone' if label != 'all fixes' else ''}: median "
                            f"{statistics.median(runs[label]):,.0f} tok/s, not above every baseline run "
                            f"({spread('baseline')})")
    for label in (label for label in runs if label not in ("baseline", "all fixes")):
        if loses(runs[label], base):
            problems.append(f"{label} alone: median {statistics.median(runs[label]):,.0f} tok/s, below every "
                            f"baseline run ({spread('baseline')})")
        if loses(every, runs[label]):
            problems.append(f"all fixes: median {statistics.median(every):,.0f} tok/s, below every run of {label} "
                            f"alone ({spread(label)})")
    if not configs["all fixes"]["idle_share"] < configs["baseline"]["idle_share"]:
        problems.append(f"the idle share does not fall: baseline {configs['baseline']['idle_share']:.0%}, all fixes "
                        f"{configs['all fixes']['idle_share']:.0%}")
    return problems


class _StepClock:
    """``each_step`` for :func:`run_engine`: notes the time when step ``start`` begins (no sync: the host's clock)."""

    def __init__(self, start: int) -> None:
        self.start, self.started = start, None

    def __call__(self, engine: EngineCore) -> Any:
        if engine.steps != self.start:
            return nullcontext()
        self.started = time.perf_counter()
        from torch.profiler import record_function

        return record_function(MEASURED_FROM)  # a profiled run finds the step on its own time axis


MEASURED_FROM = "synclab: first measured step"


def _timed_run(workload: Workload, config: EngineConfig, fixes: Any, warmup: int) -> float:
    """Seconds from the start of step ``warmup`` to the end of the run, the device's queue drained."""
    import torch

    clock = _StepClock(warmup)
    run_engine(workload, config, fixes, each_step=clock)
    torch.cuda.synchronize()
    if clock.started is None:
        raise ValueError(f"the run ended before step {warmup}")
    return time.perf_counter() - clock.started


class _ProfiledWindow(_StepClock):
    """``each_step`` for a profiled run: the profiler ``prof`` records steps ``start`` to ``start + steps - 1``
    (the first one marked :data:`MEASURED_FROM`), the device drained before it stops, so that the window's last
    kernels are in it. :meth:`close` stops it where the run ended first."""

    def __init__(self, start: int, steps: int, prof: Any) -> None:
        super().__init__(start)
        self.stop, self.prof, self.recording = start + steps, prof, False

    def __call__(self, engine: EngineCore) -> Any:
        if engine.steps == self.start:
            self.prof.start()
            self.recording = True
        elif engine.steps == self.stop:
            self.close()
        return super().__call__(engine)

    def close(self) -> None:
        if self.recording:
            import torch

            torch.cuda.synchronize()
            self.prof.stop()
            self.recording = False


def _profiled_idle(workload: Workload, config: EngineConfig, fixes: Any, warmup: int,
                   steps: int) -> tuple[list[float], dict[str, Any]]:
    """One profiled run: the idle share in each of :data:`IDLE_WINDOWS` windows of its ``steps`` profiled steps
    after the warm-up, and the lanes of the first :data:`TIMELINE_STEPS` of them."""
    from torch.profiler import ProfilerActivity, profile

    prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    window = _ProfiledWindow(warmup, steps, prof)
    try:
        run_engine(workload, config, fixes, each_step=window)
    finally:
        window.close()  # the run ended inside the window
    events = prof.events()
    kernels = kernel_intervals(events)
    begin = next(e.time_range.start for e in events if e.name == MEASURED_FROM)  # the warm-up is left out
    end = max(e for _, e in kernels)
    width = (end - begin) / IDLE_WINDOWS
    idle = [1 - busy_share(kernels, begin + k * width, begin + (k + 1) * width) for k in range(IDLE_WINDOWS)]
    return idle, trace_lanes(events, window_us=(end - begin) * TIMELINE_STEPS / steps, start_us=begin)


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


def trace_lanes(events: Sequence[Any], window_us: float, start_us: float = float("-inf")
                ) -> dict[str, list[tuple[float, float]]]:
    """Kernels and host sync calls of a profiler trace, in µs from the first kernel at or after ``start_us`` (the
    first measured step, past a warm-up), cut to ``window_us``.

    ``events`` are ``torch.profiler`` events (``device_type``, ``name``, ``time_range``).
    """
    kernels = [(b, e) for b, e in kernel_intervals(events) if b >= start_us]
    if not kernels:
        return {"kernels": [], "syncs": []}
    origin = min(b for b, _ in kernels)
    syncs = [(e.time_range.start, e.time_range.end) for e in events
             if e.device_type.name == "CPU" and e.name in SYNC_CALLS]

    def window(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
        return sorted((round(b - origin, 2), round(min(e, origin + window_us) - origin, 2))
                      for b, e in spans if origin <= b < origin + window_us)

    return {"kernels": window(kernels), "syncs": window(syncs)}


def counted_busy_share_model(counts: dict[str, dict[str, list[int]]], device_steps_us: Sequence[float],
                             host_us: dict[str, float]) -> dict[str, list[float]]:
    """MODEL, per configuration of :func:`ablation_counts`: the device's busy share at each device step.

    Each configuration's host time per step is ``host_us[label]``, measured (:func:`host_time_by_phase`: the host's
    own part of the step, the model's compute left out), and each step carries its counted stray syncs: the host
    time the fixes of chapters 1 and 3-5 save and the syncs the others remove both enter.
    """
    missing = [label for label in counts if label not in host_us]
    if missing:
        raise ValueError(f"no measured host time for {', '.join(missing)}: measure the same configurations")
    return {label: [modelled_busy_share(row["stray syncs"], host_us[label], d) for d in device_steps_us]
            for label, row in counts.items()}


def busy_share_model(workload: Workload, configs: Sequence[EngineConfig], host_us: float,
                     device_steps_us: Sequence[float]) -> dict[str, list[float]]:
    """MODEL, per configuration: :func:`modelled_busy_share` of its counted stray syncs, at each device step."""
    shares = {}
    for config in configs:
        syncs, _ = step_syncs(workload, config)
        counts = [len(step) for step in syncs.stray]
        shares[current_fixes().label_for(config)] = [modelled_busy_share(counts, host_us, d) for d in device_steps_us]
    return shares
