"""Chapter 2 (lazy streams): the chapter's measurements: counts, timings (each with its declared claim) and traces.

A room of :mod:`synclab.lazy_streams` (its docstring tells the chapter).
"""

from __future__ import annotations

import random
import statistics
import time
from contextlib import nullcontext
from typing import Any, Callable

import plotly.graph_objects as go

from synclab import figures
from synclab.claims import Faster, Within, declare, validated
from synclab.device import SIM_DEVICE, has_cuda, synchronize
from synclab.engine.model_runner import ModelRunnerOutput, PoolingBatch, PoolingModelRunner, TinyPoolingModel, make_pooling_batch
from synclab.lazy_streams.checks import inspect_runner
from synclab.lazy_streams.workloads import RunnerClass, resolve
from synclab.profiling import Trace, profile
from synclab.provenance import Provenance
from synclab.reference import record
from synclab.sim import cuda as sim_cuda
from synclab.timeline_model import OutputLoopRun, simulate_output_loop
from synclab.timing import Sweep, run_time, sweep


# ----------------------------------------------------------------------------- profiling helpers


BATCH_SIZES = (1, 8, 64)
LOOP_STEPS = 8


# The PR's own figure (vLLM PR #39113's description): pooling-model benchmark, GPU not stated. It reports no
# latency figure of its own.
PR_THROUGHPUT_GAIN = 0.037


def where_the_host_waits(impls: dict[str, RunnerClass], num_reqs: int = 16) -> dict[str, dict[str, int]]:
    """Syncs per step in ``execute_model`` and in ``get_output()``, counted under simulated CUDA (any machine)."""
    counts = {}
    for name, runner_cls in impls.items():
        evidence = inspect_runner(runner_cls, num_reqs=num_reqs)
        counts[name] = {"in execute_model (_pool)": len(evidence["syncs in _pool"]),
                        "in get_output()": len(evidence["waits in get_output"])}
    record("ch2", "where_the_host_waits", counts)
    return counts


# MODEL costs for output_copy_model (made up, in the proportions of a small pooling model's step: the copy
# of its outputs is a fraction of the forward, the host's queueing less than the forward).
MODEL_HOST_US, MODEL_LAUNCH_US, MODEL_FORWARD_US, MODEL_COPY_US = 30.0, 5.0, 60.0, 25.0


def output_copy_model(waits: dict[str, dict[str, int]], steps: int = 4) -> go.Figure:
    """MODEL: each runner's loop over a few steps, where it waits taken from its counts (``where_the_host_waits``).

    A runner that waits in ``_pool`` drains the device at the end of every step; one that waits in
    ``get_output()`` waits only for its copy, a step later. The costs are made up (``MODEL_*_US``):
    the figure shows the mechanism a CPU cannot time, not a measurement.
    """
    runs, counted = {}, []
    for name, counts in waits.items():
        in_step, in_get = counts["in execute_model (_pool)"], counts["in get_output()"]
        runs[name] = model_run(wait_in_step=in_step > 0, wait_in_get_output=in_get > 0, steps=steps)
        counted.append(f"{name} {in_step} in _pool, {in_get} in get_output()")
    return figures.output_loop_model_figure(runs, f"waits per step as counted above: {'; '.join(counted)}<br>"
                                                  f"{MODEL_COSTS}")


MODEL_COSTS = (f"host {MODEL_HOST_US:g} us, launch {MODEL_LAUNCH_US:g} us, forward {MODEL_FORWARD_US:g} us, "
               f"copy {MODEL_COPY_US:g} us per step: assumed")


def model_run(*, wait_in_step: bool, wait_in_get_output: bool, steps: int = 4) -> OutputLoopRun:
    """The chapter's one MODEL: the output loop at the ``MODEL_*_US`` costs (page, figures and text alike)."""
    return simulate_output_loop(MODEL_HOST_US, MODEL_FORWARD_US, MODEL_COPY_US, wait_in_step=wait_in_step,
                                wait_in_get_output=wait_in_get_output, steps=steps, launch_us=MODEL_LAUNCH_US)


def opening_model_figure() -> go.Figure:
    """Chapter 2's opening picture: the end-of-step wait against the wait in ``get_output()``, in the one MODEL."""
    runs = {"sync (before #39113)": model_run(wait_in_step=True, wait_in_get_output=False),  # the names the lab's
            "async (2.1)": model_run(wait_in_step=False, wait_in_get_output=True)}  # figures give the two runners
    return figures.output_loop_model_figure(runs, MODEL_COSTS)


def profile_model() -> TinyPoolingModel:
    """On a GPU, enough device work per step for the copy to overlap; on a CPU, small enough to run in seconds."""
    if has_cuda():
        return TinyPoolingModel(vocab_size=4096, hidden_size=1024, num_layers=8)
    return TinyPoolingModel(vocab_size=4096, hidden_size=128, num_layers=2)


def step_loop(runner: PoolingModelRunner, batches: list[PoolingBatch], steps: int = LOOP_STEPS,
              consume: Callable[[Any], ModelRunnerOutput] = resolve) -> list:
    """The engine's loop: queue step i, then consume step i-1's output while step i runs on the device."""
    outputs, pending = [], None
    for i in range(steps):
        result = runner.execute_model(batches[i % len(batches)])
        if pending is not None:
            outputs.append(consume(pending).pooler_output)
        pending = result
    outputs.append(consume(pending).pooler_output)
    return outputs


declare("ch2.loop",
        cpu=("On a CPU the two lines agree within 25% at every batch size.", [Within(a=0, b=1, factor=1.25)]),
        gpu=("On a GPU the asynchronous runner is within 5% of the synchronous one, or faster, from 64 requests "
             "per step; below that its fixed cost per step may make it slower.",
             [Faster(fast=1, slow=0, by=0.95, from_value=64)]),
        cpu_shows="both runners take the CPU path (a CPU platform has no streams), so they do the same work and "
                  "a gap between the two lines is this machine's noise (other programs, the kernel's own threads), "
                  "not the runners. A CPU cannot show what #39113 saves, the host's wait for the device and the copy "
                  "overlapping the next forward: the MODEL figure shows that mechanism, a GPU run measures it.")


def loop_sweep(impls: dict[str, RunnerClass], batch_sizes: tuple[int, ...] = BATCH_SIZES) -> Sweep:
    """Time of one :func:`step_loop` call (LOOP_STEPS steps) per runner and batch size, on this machine's real platform."""
    model = profile_model()

    def factory(runner_cls: RunnerClass) -> Callable[[int], Callable[[], Any]]:
        def build(num_reqs: int) -> Callable[[], Any]:
            rng = random.Random(num_reqs)
            batches = [make_pooling_batch(num_reqs, rng=rng, vocab_size=4096, max_len=64) for _ in range(2)]
            runner = runner_cls(model)
            return lambda: step_loop(runner, batches)

        return build

    variants = {name: factory(cls) for name, cls in impls.items()}
    result = validated("ch2.loop", lambda: sweep(variants, "requests per step", batch_sizes,
                                                 min_run_time=run_time(0.1, 0.5), reference=next(iter(impls))))
    record("ch2", "loop", result.to_dict())
    return result


def host_blocked(impls: dict[str, RunnerClass], num_reqs: int = 64, steps: int = 20,
                 repeats: int = 7) -> dict[str, dict[str, float]]:
    """Per step: wall time, and time the host spent waiting (in ``_sync_device`` and ``get_output``), in us.

    Medians over ``repeats`` rounds of ``steps`` steps, the runners interleaved in each round (the order rotating),
    on one intra-op thread on a CPU, as the loop's sweep is measured (its batches are its own: the two need not
    agree). :func:`host_blocked_note` says when the runners' step times part on a CPU, where they take one path.
    """
    from synclab.timing import measurement_threads

    model = profile_model()
    rng = random.Random(num_reqs)
    batches = [make_pooling_batch(num_reqs, rng=rng, vocab_size=4096, max_len=64) for _ in range(2)]
    waited = [0.0]

    def timed(fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                waited[0] += time.perf_counter() - start
        return wrapper

    runners = {}
    for name, runner_cls in impls.items():
        runners[name] = runner_cls(model)
        runners[name]._sync_device = timed(runners[name]._sync_device)  # type: ignore[method-assign]
    walls: dict[str, list[float]] = {name: [] for name in impls}
    waits: dict[str, list[float]] = {name: [] for name in impls}
    names = list(impls)
    with measurement_threads():
        for runner in runners.values():
            step_loop(runner, batches, 3)  # warm-up, and the lazy stream
        for round_ in range(repeats):  # one run is at the mercy of the machine: every runner in every round
            for name in names[round_ % len(names):] + names[:round_ % len(names)]:
                waited[0] = 0.0
                synchronize()
                start = time.perf_counter()
                step_loop(runners[name], batches, steps, consume=timed(resolve))
                synchronize()
                walls[name].append(time.perf_counter() - start)
                waits[name].append(waited[0])
    result = {name: {"step_us": statistics.median(walls[name]) / steps * 1e6,
                     "host_waiting_us": statistics.median(waits[name]) / steps * 1e6} for name in names}
    record("ch2", "host_blocked", {"num_reqs": num_reqs, "steps": steps, "repeats": repeats, "results": result,
                                   "provenance": Provenance.here().to_dict()})
    return result


def host_blocked_note(blocked: dict[str, dict[str, float]], within: float = 1.10) -> str:
    """On a CPU both runners take the CPU path: step times more than ``within`` apart are this machine's noise, said
    so ("" on a GPU, where the gap is the fix's, or when they agree)."""
    steps = [row["step_us"] for row in blocked.values()]
    if has_cuda() or len(steps) < 2 or max(steps) <= within * min(steps):
        return ""
    return (f"the two step times are {max(steps) / min(steps):.2f}x apart: on a CPU both runners make the same calls, "
            "so this is the machine's noise, not a runner. Run the cell again when the machine is quiet; the counts "
            "above (where the host waits) do not depend on it.")


def profile_loop(impls: dict[str, RunnerClass], num_reqs: int = 64, steps: int = 3) -> dict[str, Trace]:
    """A profiled loop of ``steps`` steps per runner: on a GPU, the side stream's copies get a row of their own.

    On a CPU the loop runs on the simulated CUDA device (as the checks do), so that the timeline marks the
    waits the runner would make on a GPU, where it makes them: the CPU platform has no stream to wait for.
    """
    model = profile_model()
    rng = random.Random(num_reqs)
    device = None if has_cuda() else SIM_DEVICE
    batches = [make_pooling_batch(num_reqs, rng=rng, vocab_size=4096, max_len=64, device=device) for _ in range(2)]
    with nullcontext() if has_cuda() else sim_cuda.simulated_cuda():
        traces = {name: profile(step_loop, cls(model), batches, steps, warmup=1) for name, cls in impls.items()}
    record("ch2", "profile", {name: {"duration_us": t.duration_us} for name, t in traces.items()})
    return traces
