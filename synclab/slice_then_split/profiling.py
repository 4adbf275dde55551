"""Chapter 1 (slice-then-split): the chapter's measurements: counts, timings (each with its declared claim) and traces.

A room of :mod:`synclab.slice_then_split` (its docstring tells the chapter).
"""

from __future__ import annotations

import functools
from typing import Callable

import plotly.graph_objects as go
import torch

from synclab import figures
from synclab.claims import Faster, declare, validated
from synclab.engine.pool_metadata import PoolingCursor
from synclab.engine.pooler import PoolerOutput
from synclab.engine.pooler_baseline import AllPoolBaseline
from synclab.answer_keys import answer_key, as_written
from synclab.profiling import Trace, profile
from synclab.reference import record
from synclab.slice_then_split.checks import host_calls_per_call
from synclab.slice_then_split.workloads import (AllPoolClass, PR_GROUP_OFFSET, PR_GROUP_SIZE, PR_HIDDEN, handed_to,
                                                pr_benchmark_batch)
from synclab.syncs import count_syncs
from synclab.timing import Sweep, run_time, sweep


# ----------------------------------------------------------------------------- the pitfall: iterating device indices


class IteratesDeviceIndices(AllPoolBaseline):
    """A pitfall, not vLLM's code: slice bounds taken by iterating the device index tensors.

    Iterating a device tensor yields 0-d device tensors; a slice bound must be a Python
    integer, so each bound is read back from the device through ``__index__``: 2 syncs
    per request, where vLLM's code before #41163 (:class:`AllPoolBaseline`) read each
    index tensor once with ``.tolist()``.
    """

    @answer_key("1.1", "1.2", role="pitfall (it iterates the device indices)", scope="checks", name="IteratesDeviceIndices.split_hidden_states")
    def split_hidden_states(self, hidden_states: torch.Tensor, cursor: PoolingCursor) -> list[torch.Tensor]:
        return [hidden_states[first:last + 1]  # each bound: a scalar read from the device
                for first, last in zip(cursor.first_token_indices_gpu, cursor.last_token_indices_gpu)]


# ----------------------------------------------------------------------------- profiling helpers


GROUP_SIZES = (1, 8, 32, 48)  # ALL-pooling sub-group sizes swept inside the PR's batch; 32 is the PR's own


# The timed versions share one batch per size (chunked prefill off: no pooling state changes).
_shared_batch = functools.lru_cache(maxsize=1)(pr_benchmark_batch)


def _call(all_pool: AllPoolClass, group_size: int) -> Callable[[], PoolerOutput]:
    # chunked prefill off: its branch is the same in every version, the split is what changed
    hidden_states, group = handed_to(all_pool, *_shared_batch(group_size))
    pool = as_written(all_pool)(enable_chunked_prefill=False)  # the baseline's methods without their guards
    return lambda: pool(hidden_states, group)


def sync_counts(impls: dict[str, AllPoolClass], group_sizes: tuple[int, ...] = GROUP_SIZES) -> dict[str, list[int]]:
    """Syncs per ``forward`` call of each version per sub-group size (counted: the same on any machine)."""
    counts: dict[str, list[int]] = {}
    for name, all_pool in impls.items():
        counts[name] = []
        for n in group_sizes:
            call = _call(all_pool, n)
            with count_syncs() as report:
                call()
            counts[name].append(report.count)
    record("ch1", "sync_counts", {"group_sizes": list(group_sizes), "counts": counts})
    return counts


def torch_call_counts(impls: dict[str, AllPoolClass],
                      group_sizes: tuple[int, ...] = GROUP_SIZES) -> dict[str, list[int]]:
    """Torch calls the host dispatches per ``forward`` call, per sub-group size (counted: the same on any machine)."""
    counts = {name: [host_calls_per_call(cls, n).count for n in group_sizes] for name, cls in impls.items()}
    record("ch1", "torch_call_counts", {"group_sizes": list(group_sizes), "counts": counts})
    return counts


def counts_table(counts: dict[str, list[int]], what: str, group_sizes: tuple[int, ...] = GROUP_SIZES) -> str:
    """Counts per call as a text table: one row per version, one column per sub-group size."""
    width = max(len(name) for name in counts) + 2
    head = f"{what:<{width}}" + "".join(f"{f'{n} req.':>9}" for n in group_sizes)
    return "\n".join([head] + [f"{name:<{width}}" + "".join(f"{c:>9}" for c in row) for name, row in counts.items()])


declare("ch1.timing",
        cpu=("On this CPU, at the PR's sub-group of 32 requests and above, #41163 is at least 1.1× faster than the "
             "baseline and the stretch at least 1.4× faster.",
             [Faster(fast=1, slow=0, by=1.1, from_value=PR_GROUP_SIZE),
              Faster(fast=2, slow=0, by=1.4, from_value=PR_GROUP_SIZE)]),
        gpu=("On a GPU, at the PR's sub-group of 32 requests and above, #41163 is at least 1.2× faster than the "
             "baseline and the stretch at least 1.5× faster.",
             [Faster(fast=1, slow=0, by=1.2, from_value=PR_GROUP_SIZE),
              Faster(fast=2, slow=0, by=1.5, from_value=PR_GROUP_SIZE)]))


def timing_sweep(impls: dict[str, AllPoolClass], group_sizes: tuple[int, ...] = GROUP_SIZES) -> Sweep:
    """Median time of one ``forward`` call per version and sub-group size; every result checked against the first."""
    variants = {name: (lambda n, cls=cls: _call(cls, n)) for name, cls in impls.items()}
    result = validated("ch1.timing", lambda: sweep(variants, "requests in the ALL-pooling sub-group", group_sizes,
                                                   min_run_time=run_time(0.1, 0.5), reference=next(iter(impls))))
    record("ch1", "timing", result.to_dict())
    return result


def profile_calls(impls: dict[str, AllPoolClass], group_size: int = PR_GROUP_SIZE) -> dict[str, Trace]:
    """One profiled ``forward`` call per version at the PR's shape, ready for ``timeline_figure``."""
    traces = {name: profile(_call(cls, group_size), warmup=2) for name, cls in impls.items()}
    record("ch1", "profile", {name: {"duration_us": t.duration_us, "host_syncs": t.count("sync")}
                              for name, t in traces.items()})
    return traces


# PR #41163's description: median of its method-level benchmark of AllPool.forward at the shape above
# (the GPU model is not named).
PR_MEDIAN_BEFORE_US, PR_MEDIAN_AFTER_US = 59.89, 39.65


def compare_with_pr(timings: Sweep) -> str:
    """The PR's before/after beside ``timings`` (baseline first, then the other versions) at each sub-group size."""
    baseline, *others = list(timings.timings)
    lines = [f"PR #41163 (its description; 64 requests x 128 tokens, a sub-group of {PR_GROUP_SIZE} at offset "
             f"{PR_GROUP_OFFSET}, hidden {PR_HIDDEN}, bf16, GPU not named): {PR_MEDIAN_BEFORE_US} us -> "
             f"{PR_MEDIAN_AFTER_US} us, {PR_MEDIAN_BEFORE_US / PR_MEDIAN_AFTER_US:.2f}x",
             f"measured on {timings.provenance.label}, baseline time / version time:",
             f"{'sub-group':>12} {'baseline':>12} " + " ".join(f"{name:>26}" for name in others)]
    for i, value in enumerate(timings.values):
        ratios = [timings.ratio(baseline, name)[i] for name in others]
        mark = "  <- the PR's shape" if value == PR_GROUP_SIZE else ""
        lines.append(f"{value!s:>12} {timings.medians_us(baseline)[i]:>9.1f} us "
                     + " ".join(f"{r:>25.2f}x" for r in ratios) + mark)
    return "\n".join(lines)


def speedup_figure(timings: Sweep) -> go.Figure:
    """Speed-up of each version over the baseline per sub-group size, the PR's own figure marked at its size."""
    return figures.speedup_figure(timings, "AllPool.forward: speed-up over the baseline",
                                  {f"PR #41163 at a sub-group of {PR_GROUP_SIZE} (from the PR)":
                                   (PR_GROUP_SIZE, PR_MEDIAN_BEFORE_US / PR_MEDIAN_AFTER_US)})
