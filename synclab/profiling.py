"""Run a block under ``torch.profiler`` and draw its timeline as a plotly figure.

Taught in chapter 0 (the primer); every chapter's profiling section uses it.

The timeline has one row per host thread (the Python side queueing work), one for
the CUDA runtime calls it makes and one for driver calls (``cudaStreamSynchronize``
is where the host waits), one for ``record_function`` ranges as the device ran them,
and one per device stream (kernels and copies).

The sync marks are what :func:`synclab.syncs.count_syncs` counts in the call (red;
purple for a staging copy): a profiler alone cannot draw them all, since a CPU build of
torch runs ``.tolist()`` with no op and a GPU shows one read as several runtime calls.
So the marks on the timeline and the count the checks print are the same number. The
counter's hooks slow every torch call down, so the marks come from a second, counted
run of the call and are placed on the drawn run at the same point of the same op.

On a GPU the calls the host waits in are also drawn as bars (dark red): the runtime's
and driver's synchronize calls, blocking copies and asynchronous copies into pageable
memory; an asynchronous copy from pageable memory is a staging copy (light purple).
"""

from __future__ import annotations

import difflib
import json
import os
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from synclab.device import has_cuda, synchronize
from synclab.provenance import Provenance
from synclab.syncs import PROFILER_MARK, SyncKind, count_syncs
from synclab.timing import measurement_threads, refuse_in_book_build

# CUDA runtime and driver calls that return only once the device has caught up: the host waits in them.
# (cudaMemcpyAsync is not one of them, except into pageable memory: see _runtime_category.)
HOST_WAIT_CALLS = {
    "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy", "cudaMemcpy2D",
    "cuStreamSynchronize", "cuEventSynchronize", "cuCtxSynchronize", "cuMemcpy", "cuMemcpyDtoH_v2",
    "cuMemcpyHtoD_v2", "cuMemcpyDtoD_v2",
}
ASYNC_COPY_CALLS = {"cudaMemcpyAsync", "cuMemcpyAsync", "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2"}
CATEGORY_COLORS = {
    "region": "#9e9e9e",
    "host op": "#4c78a8",
    "sync": "#e45756",  # counted by count_syncs: drawn as marks
    "staged copy": "#b279a2",  # counted by count_syncs: drawn as marks
    "wait": "#9d1f1f",  # a runtime or driver call the host waits in (GPU)
    "staging": "#d4a6c8",  # a runtime call that stages a pageable upload (GPU)
    "runtime": "#72b7b2",
    "kernel": "#54a24b",
    "copy": "#f58518",
}
# The dispatcher's entries into the counter's Python mode: the counter's cost, not the code's ops (not drawn)
COUNTER_DISPATCH = {"PythonDispatchMode", "PythonTLSSnapshot"}
COUNTED = ("sync", "staged copy")  # the categories of count_syncs' marks
MARK_LEGEND = {"sync": "sync", "staged copy": "staging copy"}
NO_MARK_COLOR = "#c8c8c8"  # a run's legend entry with a count of 0: grey, so that it does not read as a sync


@dataclass(frozen=True)
class TraceEvent:
    row: str  # "host", "regions", "CUDA runtime", "device stream 7"
    name: str
    category: str  # a key of CATEGORY_COLORS
    start_us: float  # relative to the start of the trace
    dur_us: float


@dataclass
class Trace:
    """The events of one profiled block, times in microseconds from its start."""

    events: list[TraceEvent]
    provenance: Provenance = field(default_factory=Provenance.here)

    @property
    def duration_us(self) -> float:
        return max((e.start_us + e.dur_us for e in self.events), default=0.0)

    def count(self, category: str) -> int:
        """Events of one category; ``count("sync")`` is what ``count_syncs`` counted in the profiled call."""
        return sum(e.category == category for e in self.events)

    def host_busy_us(self) -> float:
        return sum(e.dur_us for e in self.events if e.row == "host")


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """The profiler's C++ side logs to file descriptor 2; keep it out of notebook outputs."""
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _nesting_depths(events: list[dict]) -> list[int]:
    """Depth of each host op in its thread's call tree (0 = top level), events sorted by start."""
    depths, stack = [], []  # stack of end times
    for ev in events:
        start, end = ev["ts"], ev["ts"] + ev.get("dur", 0)
        while stack and stack[-1] <= start:
            stack.pop()
        depths.append(len(stack))
        stack.append(end)
    return depths


def _host_ops(raw: list[dict]) -> list[tuple[dict, int]]:
    """The host's ops in start order, each with its depth in the call tree (the counter's own entries and marks
    left out): what the timeline draws, and the skeleton two runs of one call share."""
    host = sorted((e for e in raw if e.get("ph") == "X" and e.get("cat") == "cpu_op"
                   and isinstance(e.get("ts"), (int, float))
                   and e["name"] not in COUNTER_DISPATCH and not _counted_mark(e["name"])), key=lambda e: e["ts"])
    return list(zip(host, _nesting_depths(host)))


def _counted_mark(name: str) -> tuple[str, str] | None:
    """(category, label) of a ``PROFILER_MARK`` range that ``count_syncs`` left; None for any other range."""
    if not name.startswith(PROFILER_MARK):
        return None
    kind, _, op = name[len(PROFILER_MARK):].partition(" ")
    category = "staged copy" if kind == SyncKind.STAGED_COPY.name else "sync"
    label = SyncKind[kind].value if kind in SyncKind.__members__ else kind
    return category, op if op.startswith(label) else f"{label} ({op})"


def _events_from_chrome_trace(raw: list[dict], host_depth: int) -> list[TraceEvent]:
    spans = [e for e in raw if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float))]
    marks = [e for e in spans if e.get("cat") in ("cpu_op", "user_annotation") and _counted_mark(e["name"])]
    spans = [e for e in spans if not _counted_mark(e["name"])]
    starts = [e["ts"] for e in spans + marks if e.get("cat") in ("cpu_op", "user_annotation", "kernel", "gpu_memcpy")]
    if not starts:  # the block ran no torch op
        return []
    t0 = min(starts)
    out = [TraceEvent("host", ev["name"], "host op", ev["ts"] - t0, ev.get("dur", 0.0))
           for ev, depth in _host_ops(spans) if depth <= host_depth]
    # a mark may sit inside the op it counts (the dispatch level sees aten::nonzero from within): any depth
    out += [TraceEvent("host", label, category, ev["ts"] - t0, 0.0)
            for ev in marks for category, label in [_counted_mark(ev["name"])]]
    device_copies = {ev.get("args", {}).get("correlation"): ev["name"] for ev in spans if ev.get("cat") == "gpu_memcpy"}
    for ev in spans:
        cat, name = ev.get("cat"), ev["name"]
        args = ev.get("args", {})
        if cat == "user_annotation":
            row, category = "regions", "region"
        elif cat == "gpu_user_annotation":  # record_function ranges as the device ran them
            row, category = "device regions", "region"
        elif cat in ("cuda_runtime", "cuda_driver"):
            row = "CUDA runtime" if cat == "cuda_runtime" else "CUDA driver"
            category = _runtime_category(name, device_copies.get(args.get("correlation")))
        elif cat == "kernel":
            row, category = f"device stream {args.get('stream', '?')}", "kernel"
        elif cat in ("gpu_memcpy", "gpu_memset"):
            row, category = f"device stream {args.get('stream', '?')}", "copy"
        else:
            continue
        out.append(TraceEvent(row, name, category, ev["ts"] - t0, ev.get("dur", 0.0)))
    return out


def _runtime_category(name: str, device_copy: str | None) -> str:
    """A runtime/driver call: a host wait, a staging copy, or plain work.

    An asynchronous copy is named by its device side (Kineto: "Memcpy HtoD (Pageable -> Device)"):
    from pageable memory the host stages the data itself; into pageable memory it waits for the copy.
    """
    if name in HOST_WAIT_CALLS:
        return "wait"
    if name in ASYNC_COPY_CALLS and device_copy:
        if "Device -> Pageable" in device_copy:
            return "wait"
        if "Pageable -> Device" in device_copy:
            return "staging"
    return "runtime"


def _recorder(device: bool) -> Any:
    """The recorder ``torch.profiler.profile`` runs (Kineto), entered directly: the host's ops, and with
    ``device`` on a GPU its kernels and copies (``ProfilerActivity.CUDA``).

    ``torch.profiler.profile`` adds schedules and handlers that these one-shot traces do not use, and its
    start asks ``hasattr(torch, "_inductor")``, which imports the compiler stack: 2 s of CPU the first time,
    in every kernel that draws a timeline.
    """
    from torch.autograd.profiler import profile

    return profile(use_kineto=True, use_device="cuda" if device and has_cuda() else None)


_SETTLING = "synclab: the profiler settling"  # a first call inside the profiler, cut from the trace


def _chrome_trace(call: Callable[[], Any]) -> list[dict]:
    """The raw events of one call under the profiler (its device work waited for).

    The call runs twice inside the profiler and only the second is kept: the profiler's first op after it starts
    can take a millisecond of its own, which drew a call of tens of microseconds as one long block."""
    import torch

    with tempfile.TemporaryDirectory() as tmp, _quiet_stderr():
        with _recorder(device=True) as prof:
            with torch.profiler.record_function(_SETTLING):
                call()
                synchronize()
            call()
            synchronize()  # outside any count: the profile's own wait is not the call's
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    settling = [e for e in events if e.get("name") == _SETTLING and isinstance(e.get("dur"), (int, float))]
    if not settling:
        return events
    end = max(e["ts"] + e["dur"] for e in settling)
    return [e for e in events if not (isinstance(e.get("ts"), (int, float)) and e["ts"] <= end)]


def _aligned(counted: list[str], plain: list[str]) -> dict[int, int]:
    """Each top-level op of the counted run -> the op of the plain run it matches (the counter adds a few)."""
    mapping: dict[int, int] = {}
    for _, i1, i2, j1, j2 in difflib.SequenceMatcher(None, counted, plain, autojunk=False).get_opcodes():
        for k in range(i1, i2):
            mapping[k] = min(j1 + (k - i1), j2 - 1) if j2 > j1 else min(j1, len(plain) - 1)
    return mapping


def _moved_marks(plain: list[dict], counted: list[dict]) -> list[dict]:
    """The counted run's sync marks, placed on the plain run's clock at the same point of the same op.

    A mark inside a top-level op keeps its fraction of that op; a mark between ops (a ``.tolist()``,
    which runs no op on a CPU) goes just before the next op.
    """
    src, dst = ([e for e, depth in _host_ops(run) if depth == 0] for run in (counted, plain))
    index = _aligned([e["name"] for e in src], [e["name"] for e in dst])
    moved = []
    for mark in (e for e in counted if e.get("ph") == "X" and _counted_mark(e["name"])):
        at = next((i for i, op in enumerate(src) if op["ts"] + op.get("dur", 0) > mark["ts"]), None)
        if at is None or not dst:  # after the last op
            ts = max((op["ts"] + op.get("dur", 0) for op in dst), default=0.0)
        else:
            op, target = src[at], dst[index[at]]
            inside = (mark["ts"] - op["ts"]) / op["dur"] if op["ts"] <= mark["ts"] and op.get("dur") else 0.0
            ts = target["ts"] + min(max(inside, 0.0), 1.0) * target.get("dur", 0)
        moved.append({**mark, "ts": ts, "dur": 0})
    return moved


def profile(fn: Callable[..., Any], *args: Any, warmup: int = 1, host_depth: int = 0, **kwargs: Any) -> Trace:
    """Run ``fn(*args, **kwargs)`` under the profiler (after ``warmup`` untimed calls), and mark its syncs.

    Two profiled calls: one as it runs, whose ops and times are drawn, and one inside
    ``count_syncs(profiler_marks=True)``, whose hooks slow every torch call down; each sync it
    counts is moved onto the first call's clock, at the same point of the same top-level op, as a
    ``"sync"`` event on the host row (``trace.count("sync")``). ``host_depth`` chooses how deep
    in the host call tree ops are drawn (0: top-level ops). Wrap phases of ``fn`` in
    ``torch.profiler.record_function("name")`` to label them.
    """
    refuse_in_book_build("profile " + getattr(fn, "__name__", "a call"))

    def counted() -> None:
        with count_syncs(profiler_marks=True):
            fn(*args, **kwargs)

    with measurement_threads():  # the same thread setting as the timings beside it
        for _ in range(warmup):
            fn(*args, **kwargs)
        synchronize()
        plain = _chrome_trace(lambda: fn(*args, **kwargs))
        marked = _chrome_trace(counted)
        provenance = Provenance.here()
    return Trace(_events_from_chrome_trace(plain + _moved_marks(plain, marked), host_depth), provenance)


def ops_per_call(fn: Callable[[], Any], calls: int = 200) -> list[tuple[str, float, float]]:
    """The torch ops one call of ``fn`` runs, under the profiler: (op, ops per call, self us per call).

    Added for chapter 5, where a Python-level call (reading one integer out of a tensor)
    turns out to be several ops. Most expensive first. The profiler's own overhead
    inflates the times: read the counts and the proportions, take time from ``benchmark``.
    """
    refuse_in_book_build("profile " + getattr(fn, "__name__", "a call"))
    fn()  # build caches and warm up outside the profile
    with measurement_threads(), _quiet_stderr(), _recorder(device=False) as prof:
        for _ in range(calls):
            fn()
    rows = [(e.key, e.count / calls, e.self_cpu_time_total / calls) for e in prof.key_averages()]
    return sorted(rows, key=lambda r: -r[2])


def _row_order(rows: list[str]) -> list[str]:
    rank = {"regions": 0, "host": 1, "CUDA runtime": 2, "CUDA driver": 3, "device regions": 4}
    return sorted(set(rows), key=lambda r: (rank.get(r.split(" · ")[-1], 5), r))


def _marks_per_run(marks: list[tuple[str, Any]], traces: dict[str, Trace]) -> list[tuple[str, list[tuple[str, Any]]]]:
    """``marks`` split by the stacked run they belong to (a legend that sums runs misleads)."""
    if list(traces) == [""]:
        return [("the run", marks)]
    return [(name, [(row, ev) for row, ev in marks if row.startswith(f"{name} · ")]) for name in traces]


def timeline_figure(traces: Trace | dict[str, Trace], title: str = "Profiler timeline") -> Any:
    """A plotly timeline: one row per host thread / runtime / device stream, each counted sync marked.

    Pass ``{"baseline": trace_a, "solution": trace_b}`` to stack several runs, each
    starting at 0, so their lengths compare directly. The legend gives each run's
    count of sync marks, an entry per run: the number ``count_syncs`` printed for that call.
    """
    import plotly.graph_objects as go

    if isinstance(traces, Trace):
        traces = {"": traces}
    events = [
        (f"{name} · {ev.row}" if name else ev.row, ev) for name, trace in traces.items() for ev in trace.events
    ]
    order = [r for name in traces
             for r in _row_order([row for row, _ in events if not name or row.startswith(f"{name} · ")])]
    fig = go.Figure()
    for category, color in CATEGORY_COLORS.items():
        picked = [(row, ev) for row, ev in events if ev.category == category]
        if not picked or category in COUNTED:
            continue
        fig.add_trace(
            go.Bar(
                orientation="h",
                y=[row for row, _ in picked],
                x=[max(ev.dur_us, 0.5) for _, ev in picked],  # a minimum width keeps tiny ops visible
                base=[ev.start_us for _, ev in picked],
                name=category,
                marker_color=color,
                hovertext=[f"{ev.name}<br>{ev.dur_us:.1f} us at {ev.start_us:.1f} us" for _, ev in picked],
                hoverinfo="text",
            )
        )
    for category in COUNTED:  # a zero-length point in time: a tall tick, so that none vanishes
        marks = [(row, ev) for row, ev in events if ev.category == category]
        if category != "sync" and not marks:  # "sync: 0 in ..." is worth saying, a staging copy's 0 is not
            continue
        for run, in_run in _marks_per_run(marks, traces):  # a legend entry per run: short lines wrap
            fig.add_trace(go.Scatter(  # a run with no mark keeps its entry: plotly drops an empty trace's
                x=[ev.start_us for _, ev in in_run] or [None], y=[row for row, _ in in_run] or [None], mode="markers",
                # thick: a thin tick hid among the host's bars; a count of 0 grey in the legend, not read as a sync
                marker={"symbol": "line-ns-open", "size": 30, "line": {"width": 3.5},
                        "color": CATEGORY_COLORS[category] if in_run else NO_MARK_COLOR},
                name=f"{MARK_LEGEND[category]} (count_syncs): {len(in_run)} in {run}", showlegend=True,  # 0 too
                hovertext=[f"{ev.name}<br>at {ev.start_us:.1f} us" for _, ev in in_run], hoverinfo="text",
            ))
    provenance = next(iter(traces.values())).provenance.label if traces else ""
    entries = len({trace.name for trace in fig.data if trace.showlegend is not False})  # one line each, at worst
    fig.update_layout(
        title=f"{title}<br><sub>{provenance}</sub>",
        barmode="overlay",
        xaxis_title="time since start of the call (us)",
        yaxis={"categoryorder": "array", "categoryarray": list(reversed(order)), "automargin": True},
        height=190 + 45 * len(order) + 22 * entries,
        # the legend at the figure's foot, the bottom margin sized to its entries: no blank band under it
        legend={"orientation": "h", "yref": "container", "yanchor": "bottom", "y": 0},
        margin={"l": 10, "r": 10, "t": 70, "b": 56 + 22 * entries},
    )
    return fig
