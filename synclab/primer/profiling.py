"""Chapter 0 (the primer): the chapter's measurements: counts, timings (each with its declared claim) and traces.

A room of :mod:`synclab.primer` (its docstring tells the chapter).
"""

from __future__ import annotations

import random
from typing import Callable

from synclab.claims import Faster, declare, validated
from synclab.primer.checks import DecodeStep
from synclab.primer.workloads import StepOutput, make_batch
from synclab.profiling import Trace, profile
from synclab.reference import record
from synclab.syncs import count_syncs
from synclab.timing import Sweep, run_time, sweep


# ----------------------------------------------------------------------------- profiling helpers


BATCH_SIZES = (1, 4, 16, 64, 256)
PROFILE_VOCAB = 1024  # small enough that the host's per-request work, not the argmax, dominates on a CPU


def sync_counts(impls: dict[str, DecodeStep], batch_sizes: tuple[int, ...] = BATCH_SIZES) -> dict[str, list[int]]:
    """Syncs per step of each implementation at each batch size (counted, so the same on any machine)."""
    counts: dict[str, list[int]] = {}
    for name, impl in impls.items():
        counts[name] = []
        for n in batch_sizes:
            batch = make_batch(n, PROFILE_VOCAB, rng=random.Random(n))
            with count_syncs() as report:
                impl(batch)
            counts[name].append(report.count)
    record("ch0", "sync_counts", {"batch_sizes": list(batch_sizes), "counts": counts})
    return counts


declare("ch0.timing",
        cpu=("On this CPU the solution is at least 1.5× faster than the baseline from 16 requests up, and at least "
             "2× from 64 up.",
             [Faster(fast=-1, slow=0, by=1.5, from_value=16), Faster(fast=-1, slow=0, by=2.0, from_value=64)]),
        gpu=("On a GPU the solution is at least 2× faster than the baseline from 16 requests up.",
             [Faster(fast=-1, slow=0, by=2.0, from_value=16)]))


def timing_sweep(impls: dict[str, DecodeStep], batch_sizes: tuple[int, ...] = BATCH_SIZES) -> Sweep:
    """Median time of one decode step per implementation and batch size, on this device."""

    def factory(impl: DecodeStep) -> Callable[[int], Callable[[], StepOutput]]:
        def build(n: int) -> Callable[[], StepOutput]:
            batch = make_batch(n, PROFILE_VOCAB, rng=random.Random(n), max_model_len=2**62)
            return lambda: impl(batch)

        return build

    variants = {name: factory(impl) for name, impl in impls.items()}
    result = validated("ch0.timing", lambda: sweep(variants, "batch size", batch_sizes,
                                                   min_run_time=run_time(0.1, 0.5), reference=next(iter(impls))))
    record("ch0", "timing", result.to_dict())
    return result


def profile_steps(impls: dict[str, DecodeStep], batch_size: int = 16) -> dict[str, Trace]:
    """One profiled decode step per implementation (same batch size), ready for ``timeline_figure``."""
    traces = {}
    for name, impl in impls.items():
        batch = make_batch(batch_size, PROFILE_VOCAB, rng=random.Random(batch_size), max_model_len=2**62)
        traces[name] = profile(impl, batch, warmup=2)
    record("ch0", "profile", {name: {"duration_us": t.duration_us, "host_syncs": t.count("sync")}
                              for name, t in traces.items()})
    return traces
