"""Tests for synclab.profiling: what the profiler timeline shows, on this CPU and from a made-up GPU trace."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from torch.profiler import record_function

from synclab.device import to_device
from synclab.profiling import (CATEGORY_COLORS, Trace, TraceEvent, _events_from_chrome_trace, profile,
                               timeline_figure)
from synclab.provenance import Provenance
from synclab.syncs import PROFILER_MARK, count_syncs
from tests.notebook_code import load_function

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

X = to_device(torch.arange(64.0))  # device memory (simulated here): its reads are syncs


def three_scalar_reads():
    total = 0.0
    for _ in range(3):
        total += X.sum().item()  # item() calls _local_scalar_dense inside: one sync, not two
    return total


def no_scalar_reads():
    return (X * 2).sum() + X.max()


def with_region():
    with record_function("step"):
        return (X + 1).sum()


# ----------------------------------------------------------------------------- profile()


def test_three_item_calls_are_three_host_syncs():
    trace = profile(three_scalar_reads)
    syncs = [e for e in trace.events if e.category == "sync"]
    assert len(syncs) == 3
    assert trace.count("sync") == 3
    assert all(e.row == "host" for e in syncs)
    assert {e.name for e in syncs} == {"item"}
    assert [e.name for e in trace.events if e.row == "host" and e.category == "host op"] == ["aten::sum", "aten::item"] * 3
    items = [e for e in trace.events if e.name == "aten::item"]
    for mark, op in zip(syncs, items):  # each mark sits where its read begins
        assert mark.start_us <= op.start_us + op.dur_us
    assert trace.duration_us > 0
    assert trace.host_busy_us() > 0
    assert min(e.start_us for e in trace.events) == 0  # times are relative to the start of the trace


def test_no_scalar_reads_no_syncs():
    trace = profile(no_scalar_reads)
    assert trace.count("sync") == 0
    assert trace.count("host op") >= 3  # mul, sum, max, add
    assert {e.row for e in trace.events} == {"host"}


def test_only_the_profiled_call_is_recorded():
    calls = []

    def fn():
        calls.append(1)
        return X.sum().item()

    trace = profile(fn, warmup=2)
    # 2 warm-up calls, then two profiled as they run and two counted: under the profiler, a first call lets it
    # settle (its first op can take a millisecond of its own) and is cut from the trace
    assert len(calls) == 6
    assert trace.count("sync") == 1
    assert [e.name for e in trace.events if e.category == "host op"] == ["aten::sum", "aten::item"]


def test_the_bars_come_from_the_call_without_the_counter_and_the_marks_land_on_them():
    """The counter's hooks slow every torch call down: the drawn ops and times are those of a call outside it."""
    from synclab.syncs import _counting

    def fn():
        extra = 3 if _counting.get() is not None else 0  # inside count_syncs this call does more
        for _ in range(1 + extra):
            X.add(1)
        return X.max().item()

    trace = profile(fn)
    host = [e for e in trace.events if e.category == "host op"]
    assert [e.name for e in host] == ["aten::add", "aten::max", "aten::item"]  # the plain call's ops
    (mark,) = [e for e in trace.events if e.category == "sync"]
    item = host[-1]
    assert item.start_us <= mark.start_us <= item.start_us + item.dur_us  # on the plain call's item()


def test_a_host_tensor_read_is_no_sync():
    """Host metadata (never marked as device memory) costs no wait on a GPU: no mark, as the counter says."""
    on_host = torch.arange(8)
    assert profile(lambda: on_host.sum().item() + len(on_host.tolist())).count("sync") == 0


def every_route(x):
    """Each way this lab's checks know to read device memory on the host, once."""
    x.tolist()
    x.sum().item()
    bool(x[0] > 0)
    torch.nonzero(x > 3)
    x[x > 3]
    x.cpu()
    x.to("cpu", non_blocking=True)  # a fresh pinned destination: no wait (and no data until one)
    int(x[1])
    x.untyped_storage().tolist()
    to_device(torch.arange(4))  # a blocking upload
    to_device(torch.arange(4), non_blocking=True)  # from pageable memory: a staging copy


def test_the_timeline_marks_every_sync_the_counter_counts():
    """The timeline's marks and the counter's count are one number, even where a CPU profile has no op."""
    with count_syncs() as report:
        every_route(X)
    trace = profile(every_route, X)
    assert report.count >= 9 and report.staged_count == 1
    assert trace.count("sync") == report.count
    assert trace.count("staged copy") == report.staged_count
    assert [e.name.split(" (")[0] for e in trace.events if e.category == "sync"] == [e.kind.value for e in report.events]
    fig = timeline_figure({"all routes": trace, "none": profile(lambda x: x + 1, X)})
    marks = [d for d in fig.data if d.name.startswith("sync (count_syncs)")]
    assert [d.name for d in marks] == [f"sync (count_syncs): {report.count} in all routes", "sync (count_syncs): 0 in none"]
    assert len(marks[0].x) == report.count and list(marks[1].x) == [None]  # no mark, its legend entry kept
    staged = [d.name for d in fig.data if d.name.startswith("staging copy (count_syncs)")]
    assert staged == ["staging copy (count_syncs): 1 in all routes", "staging copy (count_syncs): 0 in none"]


def test_a_refused_read_still_raises_under_the_profiler():
    """np.asarray of a device tensor raises on CUDA; the profiled call raises as the counted one does."""
    with pytest.raises(TypeError):
        profile(lambda: np.asarray(X), warmup=0)


def test_args_and_kwargs_reach_fn():
    def fn(x, *, times):
        for _ in range(times):
            x.max().item()

    assert profile(fn, X, times=2).count("sync") == 2


def test_record_function_shows_on_the_regions_row():
    trace = profile(with_region)
    regions = [e for e in trace.events if e.row == "regions"]
    assert [(e.name, e.category) for e in regions] == [("step", "region")]
    (step,) = regions
    inside = [e for e in trace.events if e.row == "host"]
    assert inside
    for e in inside:  # the host ops of the region lie inside it
        assert step.start_us <= e.start_us and e.start_us + e.dur_us <= step.start_us + step.dur_us + 1


def test_host_depth_shows_nested_ops():
    def fn():
        return torch.nn.functional.linear(X.view(8, 8), torch.ones_like(X.view(8, 8)))  # both on the device

    top = {e.name for e in profile(fn).events if e.row == "host"}
    deeper = [e.name for e in profile(fn, host_depth=3).events if e.row == "host"]
    assert top <= set(deeper)
    assert len(deeper) > len(top)


def test_trace_carries_cpu_provenance():
    prov = profile(no_scalar_reads).provenance
    assert (prov.device, prov.is_gpu, prov.torch_version) == ("cpu", False, torch.__version__)


def test_profiler_logs_do_not_reach_fd2(capfd):
    def noisy():
        os.write(2, b"PROFILER-NOISE on fd 2\n")  # stands in for the profiler's C++ log lines
        return X.sum()

    trace = profile(noisy, warmup=0)
    os.write(2, b"after profile\n")  # fd 2 is restored afterwards
    err = capfd.readouterr().err
    assert "PROFILER-NOISE" not in err
    assert "after profile" in err
    assert trace.count("host op") == 1


# ----------------------------------------------------------------------------- raw chrome traces (GPU rows too)


def _span(name, cat, ts, dur, **args):
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "args": args}


def test_chrome_trace_rows_and_categories():
    raw = [
        _span("aten::add", "cpu_op", 100, 10),
        _span(f"{PROFILER_MARK}ITEM item", "cpu_op", 119, 0),  # the counter's marks: the syncs
        _span("aten::item", "cpu_op", 120, 30),
        _span("aten::_local_scalar_dense", "cpu_op", 121, 28),  # nested in item: not drawn at depth 0
        _span("aten::item", "cpu_op", 160, 5),
        _span("aten::_local_scalar_dense", "cpu_op", 161, 3),
        _span(f"{PROFILER_MARK}TOLIST tolist", "cpu_op", 166, 0),  # no op of its own on a CPU
        _span("aten::copy_", "cpu_op", 170, 5),
        _span("aten::_to_copy", "cpu_op", 171, 1),  # nested, not a sync: hidden at host_depth 0
        _span("decode", "user_annotation", 95, 100),
        _span("cudaLaunchKernel", "cuda_runtime", 102, 3),
        _span("cudaStreamSynchronize", "cuda_runtime", 125, 20),
        _span("add_kernel", "kernel", 106, 8, stream=7),
        _span("Memcpy DtoH", "gpu_memcpy", 140, 2, stream=7),
        _span("ProfilerStep", "python_function", 0, 1000),  # other categories are ignored
        {"ph": "i", "name": "instant", "ts": 130},
    ]
    events = _events_from_chrome_trace(raw, host_depth=0)
    by_row: dict[str, list[tuple[str, str]]] = {}
    for e in events:
        by_row.setdefault(e.row, []).append((e.name, e.category))
    assert by_row["host"] == [("aten::add", "host op"), ("aten::item", "host op"), ("aten::item", "host op"),
                              ("aten::copy_", "host op"), ("item", "sync"), ("tolist", "sync")]
    assert by_row["regions"] == [("decode", "region")]
    assert by_row["CUDA runtime"] == [("cudaLaunchKernel", "runtime"), ("cudaStreamSynchronize", "wait")]
    assert by_row["device stream 7"] == [("add_kernel", "kernel"), ("Memcpy DtoH", "copy")]
    assert set(by_row) == {"host", "regions", "CUDA runtime", "device stream 7"}
    assert min(e.start_us for e in events) == 0  # relative to the first op / region (ts 95)
    assert next(e for e in events if e.name == "add_kernel").start_us == 11


def test_gpu_trace_waits_staging_copies_driver_calls_and_device_regions():
    """A Kineto trace as a GPU run writes it: each kind of call lands on its row with what it means."""
    raw = [
        _span("aten::copy_", "cpu_op", 0, 50),
        _span("cudaMemcpyAsync", "cuda_runtime", 1, 9, correlation=1),  # from pageable: staged by the host
        _span("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", 5, 3, stream=7, correlation=1),
        _span("cudaMemcpyAsync", "cuda_runtime", 12, 2, correlation=2),  # from pinned: asynchronous
        _span("Memcpy HtoD (Pinned -> Device)", "gpu_memcpy", 14, 3, stream=7, correlation=2),
        _span("cudaMemcpyAsync", "cuda_runtime", 20, 8, correlation=3),  # into pageable: returns when done
        _span("Memcpy DtoH (Device -> Pageable)", "gpu_memcpy", 22, 4, stream=7, correlation=3),
        _span("cudaEventSynchronize", "cuda_runtime", 30, 5),
        _span("cudaStreamSynchronize", "cuda_runtime", 36, 5),
        _span("cudaMemcpy", "cuda_runtime", 42, 3),
        _span("cuLaunchKernel", "cuda_driver", 46, 1),
        _span("cuStreamSynchronize", "cuda_driver", 47, 2),
        _span("step", "gpu_user_annotation", 5, 30, stream=7),
        _span("Memset (Device)", "gpu_memset", 40, 1, stream=7),
    ]
    events = _events_from_chrome_trace(raw, host_depth=0)
    by_row: dict[str, list[tuple[str, str]]] = {}
    for e in events:
        by_row.setdefault(e.row, []).append((e.name, e.category))
    assert [c for _, c in by_row["CUDA runtime"]] == ["staging", "runtime", "wait", "wait", "wait", "wait"]
    assert by_row["CUDA driver"] == [("cuLaunchKernel", "runtime"), ("cuStreamSynchronize", "wait")]
    assert by_row["device regions"] == [("step", "region")]
    assert [c for _, c in by_row["device stream 7"]] == ["copy"] * 4  # device-side copies and memsets drawn
    fig = timeline_figure(_trace(*events))
    assert list(fig.layout.yaxis.categoryarray) == ["device stream 7", "device regions", "CUDA driver",
                                                    "CUDA runtime", "host"]
    assert {bar.name for bar in fig.data} >= {"staging", "wait", "copy", "region"}
    assert "sync (count_syncs): 0 in the run" in {d.name for d in fig.data}  # no counter ran: no mark


def test_chrome_trace_host_depth_one_shows_nested_non_sync_ops():
    raw = [_span("aten::copy_", "cpu_op", 0, 5), _span("aten::_to_copy", "cpu_op", 1, 1)]
    assert [e.name for e in _events_from_chrome_trace(raw, host_depth=0)] == ["aten::copy_"]
    assert [e.name for e in _events_from_chrome_trace(raw, host_depth=1)] == ["aten::copy_", "aten::_to_copy"]


def test_a_mark_nested_in_a_plain_op_is_shown():
    """`x[mask]` is aten::index at the top, the counter's nonzero mark inside it: drawn at any depth."""
    raw = [_span("aten::index", "cpu_op", 0, 10), _span("aten::nonzero", "cpu_op", 2, 5),
           _span(f"{PROFILER_MARK}NONZERO aten.nonzero.default", "cpu_op", 3, 0)]
    events = _events_from_chrome_trace(raw, host_depth=0)
    assert [(e.name, e.category) for e in events] == [("aten::index", "host op"),
                                                      ("data-dependent output size (aten.nonzero.default)", "sync")]


def test_empty_chrome_trace():
    assert _events_from_chrome_trace([], host_depth=0) == []


# ----------------------------------------------------------------------------- timeline_figure


def _trace(*events: TraceEvent) -> Trace:
    prov = Provenance(device="cpu", is_gpu=False, torch_version="2.9.0", date="2026-01-02", host="x86_64")
    return Trace(list(events), prov)


def test_timeline_figure_stacks_named_traces():
    t1 = profile(three_scalar_reads)
    t2 = profile(with_region)
    fig = timeline_figure({"a": t1, "b": t2}, title="Two runs")
    rows = {y for bar in fig.data for y in bar.y if y is not None}
    assert rows == {"a · host", "b · host", "b · regions"}
    assert all(row.startswith(("a · ", "b · ")) for row in rows)
    assert fig.layout.title.text.startswith("Two runs")
    assert t1.provenance.label in fig.layout.title.text
    assert "cpu (no GPU)" in fig.layout.title.text
    # one row per (trace, row), in trace order: a's rows above b's, regions above host
    assert list(fig.layout.yaxis.categoryarray) == ["b · host", "b · regions", "a · host"]
    marks = [d for d in fig.data if d.name.startswith("sync")]
    assert [d.name for d in marks] == ["sync (count_syncs): 3 in a", "sync (count_syncs): 0 in b"]
    assert list(marks[0].y) == ["a · host"] * 3 and marks[0].marker.color == CATEGORY_COLORS["sync"]


def test_timeline_figure_single_trace_has_plain_rows():
    trace = _trace(TraceEvent("host", "aten::item", "host op", 0.0, 0.1),
                   TraceEvent("host", "item", "sync", 0.0, 0.0),
                   TraceEvent("regions", "step", "region", 0.0, 5.0),
                   TraceEvent("device stream 7", "k", "kernel", 1.0, 2.0))
    fig = timeline_figure(trace)
    assert {y for bar in fig.data for y in bar.y if y is not None} == {"host", "regions", "device stream 7"}
    assert list(fig.layout.yaxis.categoryarray) == ["device stream 7", "host", "regions"]
    assert fig.layout.title.text == "Profiler timeline<br><sub>cpu (no GPU) · torch 2.9.0 · 2026-01-02</sub>"
    (op,) = [bar for bar in fig.data if bar.name == "host op"]
    assert list(op.x) == [0.5]  # tiny ops get a minimum visible width
    (marks,) = [d for d in fig.data if d.name.startswith("sync")]
    assert marks.name == "sync (count_syncs): 1 in the run" and list(marks.x) == [0.0]


# ----------------------------------------------------------------------------- regressions


def test_profile_of_pure_python_code():
    trace = profile(lambda: sum(range(100)))
    assert trace.count("sync") == 0


def test_timeline_names_that_prefix_each_other():
    ev = TraceEvent("host", "aten::sum", "host op", 0.0, 1.0)
    fig = timeline_figure({"a": _trace(ev), "ab": _trace(ev)})
    assert sorted(fig.layout.yaxis.categoryarray) == ["a · host", "ab · host"]


# ----------------------------------------------------------------------------- every chapter's timeline


def _solution(notebook: str, *names: str) -> list:
    namespace: dict = {}
    return [load_function(f"solutions/{notebook}.ipynb", name, namespace) for name in names]


def _chapter_timelines():
    """Each chapter's profiling helper, called as its lab calls it (baseline first, then the solutions)."""
    from synclab import lazy_streams as ch2, pinned_transfers as ch3, primer, slice_then_split as ch1
    from synclab.engine.model_runner import SyncOutputRunner
    from synclab.engine.pooler_baseline import AllPoolBaseline
    from synclab.engine.sampler import SamplerBaseline

    (decode_step,) = _solution("00_primer", "decode_step")
    all_pool, no_sync = _solution("01_slice_then_split", "AllPool", "AllPoolNoSync")
    (async_runner,) = _solution("02_lazy_streams", "AsyncOutputRunner")
    (pinned_sampler,) = _solution("03_pinned_transfers", "PinnedSampler")
    return {
        "ch0": (primer.profiling, lambda: primer.profile_steps({"baseline": primer.decode_step_baseline,
                                                                "solution": decode_step})),
        "ch1": (ch1.profiling, lambda: ch1.profile_calls({"baseline": AllPoolBaseline, "1.1": all_pool,
                                                          "1.2": no_sync})),
        "ch2": (ch2.profiling, lambda: ch2.profile_loop({"sync": SyncOutputRunner, "async": async_runner})),
        "ch3": (None, lambda: ch3.check_gather_specific_token_logprobs(pinned_sampler).passed  # the lab's order
                and ch3.profile_gather(SamplerBaseline, pinned_sampler)),
    }


@pytest.mark.parametrize("chapter", ["ch0", "ch1", "ch2", "ch3"])
def test_each_chapters_timeline_marks_what_the_counter_counts(chapter, monkeypatch):
    """The figure's sync marks, run by run, are what count_syncs counts for the very call profiled."""
    import synclab.profiling

    real_profile, counted = synclab.profiling.profile, []

    def profile_and_count(fn, *args, warmup=1, host_depth=0, **kwargs):
        trace = real_profile(fn, *args, warmup=warmup, host_depth=host_depth, **kwargs)
        with count_syncs() as report:  # the same call once more (warmed up): its count
            fn(*args, **kwargs)
        counted.append(report.count)
        return trace

    module, run = _chapter_timelines()[chapter]
    monkeypatch.setattr(synclab.profiling, "profile", profile_and_count)
    if module is not None:
        monkeypatch.setattr(module, "profile", profile_and_count)
    traces = run()
    assert len(traces) == len(counted) >= 2
    assert [t.count("sync") for t in traces.values()] == counted
    assert counted[0] > 0, "the baseline syncs in every chapter"
    legend = [d.name for d in timeline_figure(traces).data if d.name.startswith("sync (count_syncs)")]
    assert legend == [f"sync (count_syncs): {n} in {run}" for run, n in zip(traces, counted)]


def test_chapter_3s_timeline_is_drawn_on_the_machine_with_pinned_memory():
    """The page says the new row has no sync and two asynchronous copies. On a CPU without pinned memory the
    sampler's pin flag, read when it is built, would be False, and both its uploads would be staging copies: the
    profile plays the machine with pinned memory, as the checks do."""
    from synclab import pinned_transfers as ch3
    from synclab.engine.sampler import SamplerBaseline

    (pinned_sampler,) = _solution("03_pinned_transfers", "PinnedSampler")
    traces = ch3.profile_gather(SamplerBaseline, pinned_sampler)
    before, after = traces.values()
    assert before.count("sync") > 0
    assert after.count("sync") == 0 and after.count("staged copy") == 0


def test_counting_and_drawing_a_timeline_import_no_compiler_stack():
    """Every kernel counts and profiles: neither may pull in torch._dynamo / torch._inductor (2 s of CPU each)."""
    import subprocess
    import sys

    code = ("import sys, torch\n"
            "from synclab.device import to_device\n"
            "from synclab.profiling import ops_per_call, profile\n"
            "from synclab.syncs import count_syncs\n"
            "x = to_device(torch.arange(4.0))\n"
            "with count_syncs() as report:\n"
            "    x.sum().item()\n"
            "trace = profile(lambda: x.sum().item())\n"
            "ops_per_call(lambda: x + 1, calls=2)\n"
            "assert report.count == 1 and trace.count('sync') == 1\n"
            "print(sorted(m for m in ('torch._dynamo', 'torch._inductor') if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout
