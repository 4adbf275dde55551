"""Plotly figures shared by the chapters: sync counts, timing sweeps, the host/device model.

Introduced in chapter 0 (the primer). Every measured figure's title carries the
device, torch version and date it came from (:class:`synclab.provenance.Provenance`);
the model's figures say MODEL in the title.
"""

from __future__ import annotations

import math
import textwrap
from collections import Counter
from itertools import cycle, islice
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import plotly.graph_objects as go

from synclab.timeline_model import ModelRun, OutputLoopRun, simulate

if TYPE_CHECKING:  # annotations only: a page that draws a model's figure imports no torch (the book build's kernels)
    from synclab.timing import Sweep, Timing

COLORS = {"host": "#4c78a8", "wait": "#e45756", "device": "#54a24b"}
VARIANT_COLORS = ["#e45756", "#4c78a8", "#54a24b", "#f58518", "#b279a2", "#72b7b2", "#9d755d", "#ff9da6"]


def variant_colors(skip: int = 0) -> Iterator[str]:
    """Colours for any number of variants (cycling): never zip a fixed list, which drops the ones past its end."""
    return islice(cycle(VARIANT_COLORS), skip, None)


# ----------------------------------------------------------------------------- chapter 6: one colour per fix

# Every figure of chapter 6 colours a fix the same way: its configuration's bar, the part of the step it works on,
# the host's calls in that part. Grey is "no fix" (the baseline, the parts no fix touches), black all five. None of
# these is the model's blue, red or green (host queueing, waiting, kernel), which the chapter's pictures also use.
FIX_COLORS = {"baseline": "#a3a3a3", "slice_then_split": "#8c564b", "lazy_stream": "#e377c2",
              "pinned_uploads": "#ff7f0e", "reverse_scan": "#9467bd", "list_cache": "#17becf", "all fixes": "#222222"}
FIX_CHAPTERS = {"slice_then_split": 1, "lazy_stream": 2, "pinned_uploads": 3, "reverse_scan": 4, "list_cache": 5}
NOT_WRITTEN = "not written"  # a label's words for a fix that runs the code before its PR (Components.label_for)


def fix_name(label: str) -> str:
    """The configuration a label names: ``"list_cache (list_cache not written: runs ...)"`` -> ``"list_cache"``."""
    return label.split(" (", 1)[0]


def fix_color(label: str) -> str:
    """:data:`FIX_COLORS` of the configuration ``label`` names (a fix not written yet keeps its fix's colour)."""
    return FIX_COLORS.get(fix_name(label), "#bbbbbb")


def fix_label(label: str) -> str:
    """A configuration's label short enough for a tick or a legend: the fix's name, and how many of its fixes are not
    written yet, if any (``"list_cache (not written)"``, ``"all fixes (3 not written)"``); the whole label goes to
    the hover text and :func:`unwritten_note`."""
    name = fix_name(label)
    if name == label or f"{NOT_WRITTEN}:" not in label:  # every fix written, or already short
        return label
    missing = label.split(" (", 1)[1].split(f" {NOT_WRITTEN}")[0].split(", ")
    return f"{name} ({len(missing)} {NOT_WRITTEN})" if name == "all fixes" else f"{name} ({NOT_WRITTEN})"


def unwritten_note(labels: Sequence[str]) -> str:
    """A subtitle's line for labels naming fixes not written yet: ``""`` when every fix is written."""
    if all(fix_name(label) == label for label in labels):
        return ""
    return f"({NOT_WRITTEN}: that chapter's exercise is not done, so the code before its PR runs in its place)"


def counted_here() -> str:
    """Where a counted figure was counted: device, torch version and date (the counts are the same on any machine)."""
    from synclab.provenance import Provenance

    here = Provenance.here()
    return f"counted on {here.device} · torch {here.torch_version} · {here.date}"


def compact(value: float) -> str:
    """A bar's number short enough to stay readable over a narrow bar: ``480048`` -> ``480k``."""
    return f"{value / 1000:,.0f}k" if abs(value) >= 10_000 else f"{value:g}"


def _subtitle(*lines: str) -> str:
    return "<br>".join(line for line in lines if line)


def _layout(fig: go.Figure, title: str, subtitle: str = "", above_plot: int | None = None, **kwargs: Any) -> go.Figure:
    """Title, subtitle, margins and legend. ``above_plot``: the title and its subtitle's lines (``<br>``) set at the
    top of the figure, and the plot ``above_plot`` pixels below the subtitle's last line (subplot titles need room):
    a long subtitle then never runs into the plot."""
    layout = {"margin": {"l": 10, "r": 10, "t": 70, "b": 10}, "legend": {"orientation": "h", "y": -0.2}, **kwargs}
    text = f"{title}<br><sub>{subtitle}</sub>" if subtitle else title
    if above_plot is None:
        fig.update_layout(title=text, **layout)
        return fig
    lines = subtitle.count("<br>") + 1 if subtitle else 0
    # a line is about 19 px; a narrow page (the book's column) may wrap the longest one: room for one more
    layout["margin"] = {**layout["margin"], "t": 64 + 19 * lines + above_plot}
    fig.update_layout(title={"text": text, "y": 1, "yref": "container", "yanchor": "top", "pad": {"t": 14}}, **layout)
    return fig


def retitled(fig: go.Figure, title: str) -> go.Figure:
    """``fig`` under another title, its subtitle (what was measured, where and how) kept."""
    text = fig.layout.title.text or ""
    fig.update_layout(title_text=title + (text[text.index("<br>"):] if "<br>" in text else ""))
    return fig


def sync_counts_figure(parameter: str, values: Sequence[Any], counts: dict[str, Sequence[float]], title: str,
                       yaxis_title: str = "host-device syncs per call",
                       counted_with: str = "synclab.count_syncs", by_fix: bool = False,
                       colors: Sequence[str] | None = None, log_y: bool = False) -> go.Figure:
    """Counts per call (syncs, or torch calls) against a parameter, one bar per variant, each labelled with its count.

    Bars with their numbers, not lines: a variant with 2 syncs stays readable beside one with
    500 (a line at 2 would hide under a line at 0). Sync counts do not depend on the machine,
    so no device label is needed. ``by_fix`` (chapter 6): the variants are configurations, each in its fix's colour
    (:data:`FIX_COLORS`) under a short label, with where it was counted. ``colors``: one per variant, in order.
    ``log_y``: a logarithmic count axis from 0.5, so that a bar of 1 beside one of 500 still shows as a bar (chapter
    0's learners could not see the solution's 1s on a linear axis); a count of 0 then draws no bar, only its label.
    """
    fig = go.Figure()
    crowded = len(counts) * len(values) > 12  # side by side, horizontal numbers would run into each other
    colors = colors or ([fix_color(v) for v in counts] if by_fix else variant_colors())
    for color, (variant, ys) in zip(colors, counts.items()):
        fig.add_trace(go.Bar(x=[str(v) for v in values], y=list(ys), name=fix_label(variant) if by_fix else variant,
                             marker_color=color, hovertext=variant, text=[compact(y) if by_fix else f"{y:g}" for y in ys],
                             textposition="outside", cliponaxis=False,
                             # not shrunk to the bar's width: upright, a crowded group's numbers stay readable
                             constraintext="none" if crowded else None,
                             textangle=-90 if crowded else 0, textfont={"size": 11 if crowded else 12}))
    subtitle = f"counted with {counted_with} (the same on CPU and GPU)"
    if by_fix:
        subtitle = _subtitle(subtitle, counted_here(), unwritten_note(list(counts)))
    axis = {}
    if log_y:
        top = max((y for ys in counts.values() for y in ys), default=1)
        axis = {"yaxis_type": "log", "yaxis_range": [math.log10(0.5), math.log10(max(top, 1) * 2)]}
    return _layout(fig, title, subtitle, barmode="group", xaxis_title=parameter, xaxis_type="category",
                   yaxis_title=yaxis_title, height=400 + 20 * subtitle.count("<br>"),
                   above_plot=30 if crowded else 10, **axis)


def step_counts_figure(counts: dict[str, dict[str, Sequence[int]]], title: str, counted_with: str) -> go.Figure:
    """Per configuration, the median of each measure over the run's steps, its range over them as error bars: one
    panel per measure (chapter 6's ablation). Counts do not depend on the machine."""
    from statistics import median

    from plotly.subplots import make_subplots

    measures = list(next(iter(counts.values())))
    # titles on two lines and room between the panels: a long measure's name must not run over its neighbour
    fig = make_subplots(rows=1, cols=len(measures), subplot_titles=[f"{m}<br>per step" for m in measures],
                        horizontal_spacing=0.12)
    # a panel whose numbers are long ("480k") sets them upright: side by side over narrow bars they would touch
    upright = {m: max(len(compact(median(row[m]))) for row in counts.values()) >= 4 for m in measures}
    tallest = {m: max(max(row[m]) for row in counts.values()) for m in measures}
    for label, row in counts.items():
        short = fix_label(label)
        for col, measure in enumerate(measures, start=1):
            values = list(row[measure])
            mid = median(values)
            # upright numbers go inside a tall bar; over a short one (under a tenth of the panel) a short number
            # lies flat above it, clear of the bar names below the axis
            inside = upright[measure] and mid >= 0.1 * tallest[measure]
            # each panel names its bars (no legend to look up), in the fix's colour, its number compact
            fig.add_trace(go.Bar(x=[short], y=[mid], name=short, marker_color=fix_color(label), showlegend=False,
                                 hovertext=label, text=[compact(mid)], cliponaxis=False, constraintext="none",
                                 textposition="auto" if inside else "outside", textfont={"size": 11},
                                 textangle=-90 if inside else 0,
                                 # no spread, no bar: a zero-length one still draws a tick over the bar's name
                                 error_y=_spread_bars([mid], [min(values)], [max(values)])
                                 if min(values) < max(values) else {"visible": False}), row=1, col=col)
    for col, measure in enumerate(measures, start=1):
        fig.update_yaxes(title_text=measure, title_standoff=4, rangemode="tozero", row=1, col=col)
        fig.update_xaxes(tickangle=-90, row=1, col=col)
    subtitle = _subtitle(f"counted with {counted_with}: the median over the decode steps,",
                         "their range as bars (the same on CPU and GPU); " + counted_here(),
                         unwritten_note(list(counts)))
    return _layout(fig, title, subtitle, height=560 + 20 * subtitle.count("<br>"), showlegend=False,
                   margin={"l": 50, "r": 10, "b": 10}, above_plot=70)


def _spread_bars(mids: Sequence[float], lows: Sequence[float], highs: Sequence[float]) -> dict[str, Any]:
    """Error bars from each ``low`` to its ``high`` around ``mid``: the rounds' spread."""
    return {"type": "data", "symmetric": False, "array": [hi - m for m, hi in zip(mids, highs)],
            "arrayminus": [m - lo for m, lo in zip(mids, lows)]}


def _range_bars(timings: Sequence[Timing]) -> dict[str, Any]:
    """Error bars from the fastest to the slowest per-round median: the spread the protocol measured."""
    mids = [t.median_us for t in timings]
    return {"visible": True, **_spread_bars(mids, [t.low_us for t in timings], [t.high_us for t in timings])}


_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "cross")


def sweep_figure(sweep: Sweep, title: str, log_x: bool = False, log_y: bool = False,
                 yaxis_title: str = "median time per call (us)", labelled_ends: bool = False) -> go.Figure:
    """Median time per call against the swept parameter, the range of the per-round medians as error bars.

    With ``log_x`` the swept values are placed on a log axis (numbers spanning decades); a
    few values that are labels rather than sizes are spread evenly (a category axis). With ``labelled_ends`` a log
    y axis runs from a label at or below the lowest point to one at or above the highest, so that no point sits
    below the axis's first label (chapter 2's loop on a GPU: 2,261 us under a first label of 3,000).
    """
    fig = go.Figure()
    x = list(sweep.values) if log_x else [str(v) for v in sweep.values]
    # a dash and a marker of its own per line: two versions that cost the same draw one line over the other, and
    # the one below still shows through the dashes (a learner saw chapter 3's "before" vanish under "after")
    for color, dash, symbol, (variant, timings) in zip(variant_colors(), cycle(_DASHES), cycle(_SYMBOLS),
                                                   sweep.timings.items()):
        fig.add_trace(go.Scatter(x=x, y=[t.median_us for t in timings], name=variant, mode="lines+markers",
                                 line={"color": color, "dash": dash}, marker={"symbol": symbol, "size": 8},
                                 error_y=_range_bars(timings)))
    # log axes labelled at the values themselves: plotly's own ticks on an axis of under two decades print only
    # minor digits ("2 5 ... 3 4"), so a point at 32 would sit over a "3"
    # short labels, set level: labels a narrow page would tilt push the axis's title down into the legend
    xaxis = {"type": "log", "tickvals": list(sweep.values), "ticktext": [_tick_text(v) for v in sweep.values],
             "tickangle": 0} if log_x else {"type": "category"}
    xaxis["title"] = sweep.parameter
    yaxis: dict[str, Any] = {"title": yaxis_title}
    if log_y:
        medians = [t.median_us for timings in sweep.timings.values() for t in timings]
        ticks = log_ticks(min(medians), max(medians))
        yaxis.update(type="log", tickvals=ticks, ticktext=[f"{t:,g}" for t in ticks])
        if labelled_ends:  # a label at or below the lowest point and one at or above the highest, added if need be
            low_end = max([t for t in ticks if t <= min(medians)], default=_one_two_five(min(medians), below=True))
            high_end = min([t for t in ticks if t >= max(medians)], default=_one_two_five(max(medians), below=False))
            ticks = sorted({low_end, *ticks, high_end})
            yaxis.update(tickvals=ticks, ticktext=[f"{t:,g}" for t in ticks],
                         range=[math.log10(low_end) - 0.02, math.log10(high_end) + 0.02])
    return _layout(fig, title, f"measured on {sweep.provenance.label}; median of {_rounds(sweep)} interleaved rounds",
                   height=420, xaxis=xaxis, yaxis=yaxis)


def _tick_text(value: float) -> str:
    """An axis label: ``60000`` -> ``60k`` (a round thousand from 10,000 up), else the number with commas."""
    return compact(value) if abs(value) >= 10_000 and value % 1000 == 0 else f"{value:,g}"


def _one_two_five(value: float, below: bool) -> float:
    """The nearest of 1, 2 and 5 times a power of ten at or below ``value`` (``below``), else at or above it."""
    power = 10.0 ** math.floor(math.log10(value))
    candidates = [m * power for m in (0.5, 1, 2, 5, 10)]
    return max(c for c in candidates if c <= value) if below else min(c for c in candidates if c >= value)


def log_ticks(low: float, high: float) -> list[float]:
    """1, 2 and 5 times the powers of ten from just under ``low`` to just over ``high``: a log axis's labels. Where
    fewer than three of those fall between ``low`` and ``high`` (data within a factor of two or so), every whole
    multiple does: an axis with one label cannot be read."""
    def ticks_of(multiples: tuple[int, ...]) -> list[float]:
        ticks, power = [], 10.0 ** math.floor(math.log10(max(low, 1e-12)))
        while power <= high * 10:
            ticks += [m * power for m in multiples if low / 2 <= m * power <= high * 2]
            power *= 10
        return ticks

    coarse = ticks_of((1, 2, 5))
    if sum(low <= t <= high for t in coarse) >= 3:
        return coarse
    return [t for t in ticks_of(tuple(range(1, 10))) if low / 1.5 <= t <= high * 1.5]


def _rounds(sweep: Sweep) -> int:
    return len(next(iter(sweep.timings.values()))[0].times_us)


def speedup_figure(sweep: Sweep, title: str, published: dict[str, tuple[Any, float]] | None = None) -> go.Figure:
    """How many times faster each variant is than the sweep's first one, per value, with provenance.

    Each bar carries its ratio, so a slowdown (0.3x, a sliver on the log axis) reads as plainly as a
    speed-up. ``published`` draws other sources' speed-ups (a PR's own figure) by label as (the swept
    value it was measured at, its ratio): a black mark across that value's bars only, not a line over
    values it never measured.
    """
    baseline, *others = list(sweep.timings)
    fig = go.Figure()
    ratios = []
    marked = {str(at) for at, _ in (published or {}).values()}
    # a bar's ratio above it, but inside it, halfway up, where another source's mark crosses its group
    positions = ["inside" if str(v) in marked else "outside" for v in sweep.values]
    for color, variant in zip(variant_colors(1), others):
        ys = sweep.ratio(baseline, variant)
        ratios += ys
        measured_on = "a CPU" if sweep.provenance.device == "cpu" else sweep.provenance.device
        # each bar runs from 1x (no change) to its ratio, up for a speed-up, down for a slowdown: from the axis's
        # foot, a 0.86x looked nearly as tall as a 1.63x (a learner's reading)
        fig.add_trace(go.Bar(x=[str(v) for v in sweep.values], y=[y - 1 for y in ys], base=[1.0] * len(ys),
                             name=f"{variant} (measured on {measured_on})", customdata=ys,
                             hovertemplate="%{x}: %{customdata:.2f}x<extra></extra>",
                             marker_color=color, text=[f"{y:.2f}x" for y in ys], textposition=positions,
                             insidetextanchor="middle", cliponaxis=False))
    for label, (at, ratio) in (published or {}).items():
        ratios.append(ratio)
        # an open symbol is drawn in the marker's colour: a short black bar across that value's group
        fig.add_trace(go.Scatter(x=[str(at)], y=[ratio], mode="markers", name=f"{label}: {ratio:.2f}x",
                                 marker={"symbol": "line-ew-open", "size": 70, "color": "#222", "line": {"width": 3}}))
    fig.add_hline(y=1.0, line_color="#999")
    ticks = [t for t in (0.125, 0.25, 0.5, 1, 2, 4, 8, 16, 32)
             if min(ratios, default=1) / 2 <= t <= max(ratios, default=1) * 2]
    return _layout(fig, title, f"measured on {sweep.provenance.label}; speed-up over {baseline}",
                   xaxis_title=sweep.parameter, xaxis_type="category", height=420, barmode="group",
                   yaxis={"type": "log", "title": "speed-up (baseline time / time)", "tickvals": ticks,
                          "ticktext": [f"{t:g}x" for t in ticks]})


def before_after_figure(counts: dict[str, dict[str, Sequence[int]]], at: int, title: str,
                        xaxis_title: str = "host-device syncs per call") -> go.Figure:
    """Syncs of each component before and after a change, at one position ``at`` of the counts."""
    names = list(counts)
    fig = go.Figure()
    for color, label in zip(variant_colors(), ("before", "after")):
        xs = [counts[n][label][at] for n in names]
        fig.add_trace(go.Bar(y=names, x=xs, name=label, marker_color=color, orientation="h", text=xs,
                             textposition="outside", cliponaxis=False))
    # horizontal bars: the components' long names read on the y axis instead of running into the legend
    return _layout(fig, title, "counted with synclab.count_syncs (the same on CPU and GPU)",
                   xaxis_title=xaxis_title, barmode="group", height=120 + 60 * len(names),
                   yaxis={"autorange": "reversed", "automargin": True})


def bandwidth_figure(result: dict[str, Any], metric: str, title: str, label: str) -> go.Figure:
    """Host-to-device copies over sizes: ``metric`` "gbps" (bandwidth) or "host_us" (time the host is held)."""
    fig = go.Figure()
    sizes = result["sizes"]
    for color, (variant, ys) in zip(variant_colors(), result[metric].items()):
        fig.add_trace(go.Scatter(x=sizes, y=ys, name=variant, mode="lines+markers", line_color=color))
    axis = "bandwidth (GB/s)" if metric == "gbps" else "host time inside .to() (us)"
    # the sizes themselves, in binary units: plotly's own log ticks print minor digits ("5 10k 2 5 100k")
    xaxis = {"type": "log", "title": "bytes per copy", "tickvals": list(sizes), "ticktext": [_binary_size(n) for n in sizes]}
    return _layout(fig, title, f"measured on {label}", xaxis=xaxis, yaxis_title=axis,
                   yaxis_type="log" if metric == "host_us" else None, height=400)


def _binary_size(n: int) -> str:
    """4096 -> "4 KiB", 268435456 -> "256 MiB": a copy's size as the page names it."""
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:g} {unit}"
        n /= 1024
    return f"{n:g} GiB"


def gpu_loop_figure(result: dict[str, Any], title: str, label: str) -> go.Figure:
    """MEASURED on a GPU (chapter 4's ``gpu_loop``): a real async loop's time per step over the output length, a line
    per scan (error bars: the fastest and slowest round), the forwards' own time per step dashed, and the PR's TPOT
    at the one length it measured, as the PR's own marks. Drawing only: the numbers are the stored run's."""
    fig = go.Figure()
    lengths = list(result["lengths"])
    for color, (scan, ms) in zip(variant_colors(), result["ms_per_step"].items()):
        lows, highs = zip(*result["ms_per_step_range"][scan])
        fig.add_trace(go.Scatter(x=lengths, y=ms, mode="lines+markers", name=f"{scan}: the loop's step",
                                 line={"color": color}, error_y=_spread_bars(ms, lows, highs)))
        fig.add_trace(go.Scatter(x=lengths, y=result["device_ms_per_step"][scan], mode="lines",
                                 name=f"{scan}: its forwards alone", line={"color": color, "dash": "dot"}))
    pr = result["pr_tpot_ms"]
    marks = {k: v for k, v in pr.items() if k != "output tokens"}
    fig.add_trace(go.Scatter(x=[pr["output tokens"]] * len(marks), y=list(marks.values()), mode="markers+text",
                             name="the PR's TPOT (its model and GPU, not this loop's)", text=list(marks),
                             # left of the mark: at the longest length, a label on its right ran off the chart
                             textposition="middle left", marker={"color": "black", "symbol": "x", "size": 10}))
    return _layout(fig, title, f"measured on {label}<br>{result['num_reqs']} requests; each step's forward queued, "
                               "then the last step's placeholders repaired while it runs",
                   xaxis_title="output tokens per request", xaxis_type="log", xaxis_tickformat=",",
                   yaxis_title="ms per step", yaxis_type="log", height=460)


def loop_model_figure(lengths: Sequence[int], tokens_per_s: dict[str, Sequence[float]],
                      published: dict[str, tuple[int, float]], label: str, device_step_us: float,
                      crossings: dict[str, float | None] | None = None) -> go.Figure:
    """MODEL: loop throughput over output length from measured host costs; a variant's line bends at its crossing
    (flat while the device step is the longer), not at the measured length before it.

    ``published`` (name -> (output length, tokens/s)) is what the PR reported, drawn as a black mark at the one
    length it measured, never as a line across lengths it did not. ``crossings`` (variant -> output length, or None
    where it never comes): where the variant's host cost reaches the device step (Exercise 4.2's answer), drawn as a
    dotted line in the variant's colour.
    """
    fig = go.Figure()
    for color, (variant, ys) in zip(variant_colors(), tokens_per_s.items()):
        at = (crossings or {}).get(variant)
        xs, line, sizes = list(lengths), list(ys), [8] * len(ys)
        if at is not None and xs[0] < at < xs[-1]:  # the knee: device-bound (flat) up to the crossing, not from the
            knee = next(i for i, x in enumerate(xs) if x > at)  # last measured length before it
            xs.insert(knee, at)
            line.insert(knee, max(ys))  # the device-bound rate, where host = device step
            sizes.insert(knee, 0)  # a point of the model, not a measurement: no marker
        fig.add_trace(go.Scatter(x=xs, y=line, name=variant, mode="lines+markers", line_color=color,
                                 marker={"size": sizes}))
        if at is not None and at > 0:
            fig.add_vline(x=at, line={"color": color, "dash": "dot"})  # a shape takes the value on a log axis
            fig.add_annotation(x=math.log10(at), y=0.04, yref="paper", xanchor="right", showarrow=False, align="right",
                               text=f"host = device step<br>at about {at:,.0f} tokens (4.2) ",  # an annotation, its log
                               font={"color": color, "size": 12})
    for symbol, (name, (at, value)) in zip(("x", "diamond"), published.items()):
        fig.add_trace(go.Scatter(x=[at], y=[value], mode="markers", name=f"reported by PR #42938: {name}, at {at:,}",
                                 marker={"symbol": symbol, "size": 12, "color": "#000"}))
    # log axes labelled at the lengths measured and at round rates: plotly's own ticks on under two decades print
    # only minor digits ("2 5")
    rates = [v for series in tokens_per_s.values() for v in series] + [v for _, v in published.values()]
    ticks = log_ticks(min(rates), max(rates))
    return _layout(fig, f"MODEL: async decode loop, device step {device_step_us / 1000:.0f} ms",
                   f"host costs measured on {label}; the loop is a model",
                   xaxis={"type": "log", "title": "output tokens per request", "tickvals": list(lengths),
                          "ticktext": [f"{v // 1000:,}k" if v >= 10_000 else f"{v:,}" for v in lengths]},
                   yaxis={"type": "log", "title": "tokens/s", "tickvals": ticks,
                          "ticktext": [f"{t:,g}" for t in ticks]}, height=400)


def per_call_figure(costs: Sweep, title: str) -> go.Figure:
    """Median time of one call per question (x) and variant (bars), the per-round range as error bars."""
    fig = go.Figure()
    for color, (variant, timings) in zip(variant_colors(), costs.timings.items()):
        ys = [t.median_us for t in timings]
        fig.add_trace(go.Bar(x=[str(v) for v in costs.values], y=ys, name=variant, marker_color=color,
                             error_y=_range_bars(timings), text=[f"{y:.2f} us" for y in ys], textposition="outside"))
    return _layout(fig, title, f"measured on {costs.provenance.label}; median of {_rounds(costs)} interleaved rounds",
                   barmode="group", yaxis_title="time per call (us)", height=420)


def ops_figure(rows: list[tuple[str, float, float]], title: str, label: str) -> go.Figure:
    """The torch ops behind one call, from ``profiling.ops_per_call``: self time per call, ops per call as text."""
    fig = go.Figure(go.Bar(
        x=[r[2] for r in rows], y=[r[0] for r in rows], orientation="h", marker_color=VARIANT_COLORS[0],
        text=[f"{r[1]:g} per call" for r in rows], textposition="auto",
    ))
    return _layout(fig, title, f"torch.profiler on {label}; the profiler's overhead inflates the times",
                   xaxis_title="self CPU time per call (us, under the profiler)",
                   yaxis={"autorange": "reversed"}, height=120 + 45 * max(len(rows), 1))


# A MODEL's subtitle line where the host times it is fed came from a busy machine (chapters 5 and 6)
BUSY_MODEL_NOTE = "<b>host times taken on a busy machine: these shares are too low; rerun when it is quiet</b>"


def busy_model_figure(values: Sequence[Any], step_us: dict[str, Sequence[float]], device_steps_us: Sequence[float],
                      label: str, parameter: str, active: int = 0, busy: bool = False) -> go.Figure:
    """MODEL: the device's busy share, device / max(host, device), with a slider over the device step. ``busy``: the
    host times were taken on a busy machine (their rounds far apart), which the subtitle says (chapter 5's lab)."""
    fig = go.Figure()
    for k, device_us in enumerate(device_steps_us):
        for color, (variant, hosts) in zip(variant_colors(), step_us.items()):
            fig.add_trace(go.Scatter(x=[str(v) for v in values], y=[device_us / max(h, device_us) for h in hosts],
                                     name=variant, mode="lines+markers", line_color=color, visible=k == active,
                                     legendgroup=variant, showlegend=True))
    per_step = len(step_us)
    steps = []
    for k, device_us in enumerate(device_steps_us):
        visible = [i // per_step == k for i in range(len(device_steps_us) * per_step)]
        steps.append({"label": f"{device_us / 1000:g} ms", "method": "update", "args": [{"visible": visible}]})
    fig.update_layout(sliders=[{"active": active, "currentvalue": {"prefix": "device step: "}, "steps": steps,
                                "pad": {"t": 60}}])
    return _layout(fig, "MODEL: device busy share of an async loop, step = max(host, device)",
                   _subtitle(f"host: scheduler step measured on {label}; the device step is assumed (slider)",
                             BUSY_MODEL_NOTE if busy else ""),
                   xaxis_title=parameter, yaxis_title="device busy share", yaxis_range=[0, 1.05],
                   yaxis_tickformat=".0%", height=430 + (20 if busy else 0),  # in percent, as the page says it
                   above_plot=15)  # the subtitle's lines above the plot: the busy note ran over the "100%" label


# The parts of a step in chapter 6's host events: the part a fix works on in that fix's colour, the others in greys.
PHASE_FIX = {"schedule": "list_cache", "inputs": "pinned_uploads", "pool": "slice_then_split", "copy": "lazy_stream"}
NO_FIX_GREYS = {"forward": "#6e6e6e", "model": "#6e6e6e", "sample": "#9a9a9a", "collect": "#c4c4c4",
                "loop": "#dcdcdc", "other": "#dcdcdc"}
PHASE_COLORS = {**{phase: FIX_COLORS[fix] for phase, fix in PHASE_FIX.items()}, **NO_FIX_GREYS}
# A grey part whose syncs a fix of another part removes: sampling's logprob uploads are chapter 3's (3.2)
GREY_NOTES = {"sample": "grey: no fix of its own; ch. 3's pinned uploads remove its syncs"}
PLANNED_WAIT = {"symbol": "diamond", "size": 11, "color": "white", "line": {"width": 2, "color": "black"}}
STRAY_SYNC = {"symbol": "x", "size": 11, "color": COLORS["wait"], "line": {"width": 1, "color": "black"}}


def grey_part(part: str) -> str:
    """A legend's words for a part no fix of its own changes (chapter 6's figures)."""
    return GREY_NOTES.get(part, "grey: no fix of its own")


def host_events_figure(rows: dict[str, Sequence[Any]], title: str) -> go.Figure:
    """COUNTED, not timed: each row is one step's host events in order (``synclab.capstone.profiling.HostEvent``).

    The x axis counts the host's torch calls; a bar is a run of calls in one part of the step, a
    red cross a stray sync, an orange diamond the planned wait.
    """
    fig = go.Figure()
    shown: set[str] = set()
    for row, events in rows.items():
        calls, runs = 0, []  # runs: [phase, first call, number of calls]
        syncs: dict[str, list[tuple[int, str, str]]] = {"stray": [], "planned": []}
        for event in events:
            if event.kind != "call":
                syncs[event.kind].append((calls, event.name, event.phase))
                continue
            if runs and runs[-1][0] == event.phase:
                runs[-1][2] += 1
            else:
                runs.append([event.phase, calls, 1])
            calls += 1
        for phase, first, n in runs:
            name = f"{phase} ({PHASE_FIX[phase]})" if phase in PHASE_FIX else f"{phase} ({grey_part(phase)})"
            fig.add_trace(go.Bar(orientation="h", y=[row], x=[n], base=[first], name=name, legendgroup=phase,
                                 marker_color=PHASE_COLORS.get(phase, PHASE_COLORS["other"]),
                                 showlegend=phase not in shown, hovertext=f"{phase}: {n} torch call(s)"))
            shown.add(phase)
        for kind, marker in (("stray", STRAY_SYNC), ("planned", PLANNED_WAIT)):
            if syncs[kind]:
                # each row's count by part in its legend entry: crosses a call or two apart sit on one another, and
                # no reader could count them on the bars
                label = "stray sync" if kind == "stray" else "planned wait"
                parts = Counter(phase for _, _, phase in syncs[kind])
                fig.add_trace(go.Scatter(x=[x for x, _, _ in syncs[kind]], y=[row] * len(syncs[kind]),
                                         mode="markers", marker=marker, legendgroup=label,
                                         name=f"{label}: {len(syncs[kind])} in {row} ("
                                              + ", ".join(f"{phase} {n}" for phase, n in parts.items()) + ")",
                                         hovertext=[f"{phase}: {name}" for _, name, phase in syncs[kind]]))
    # the legend at the figure's foot, the bottom margin sized to its lines (the parts three to a line, then a line
    # per row's syncs): it never runs into the axis title, however many rows have syncs
    lines = -(-len(shown) // 3) + sum(1 for d in fig.data if isinstance(d, go.Scatter))
    fig = _layout(fig, title, _subtitle("COUNTED with count_syncs and the torch calls' order, not timed: the same on "
                                        "any machine", counted_here()),
                  barmode="overlay", xaxis_title="the host's torch calls in the step, in order",
                  height=200 + 60 * len(rows) + 26 * lines, above_plot=10,
                  yaxis={"autorange": "reversed", "automargin": True, "type": "category"},
                  legend={"orientation": "h", "yref": "container", "yanchor": "bottom", "y": 0})
    fig.update_layout(margin={**fig.layout.margin.to_plotly_json(), "b": 70 + 26 * lines})
    return fig


def trace_timeline_figure(traces: dict[str, dict[str, Sequence[Sequence[float]]]], title: str, label: str) -> go.Figure:
    """A real profiler trace, two lanes per configuration: the device's kernels and the host's sync calls.

    ``traces[config]`` holds ``"kernels"`` and ``"syncs"``, ``(begin, end)`` pairs in µs
    (``synclab.capstone.profiling.trace_lanes``).
    """
    fig = go.Figure()
    for lane, color, name in (("kernels", COLORS["device"], "device: kernel"), ("syncs", COLORS["wait"], "host: waiting (sync call)")):
        for i, (config, lanes) in enumerate(traces.items()):
            spans = lanes[lane]
            fig.add_trace(go.Bar(orientation="h", y=[f"{config} · {lane}"] * len(spans), x=[e - b for b, e in spans],
                                 base=[b for b, _ in spans], marker_color=color, name=name, legendgroup=name,
                                 showlegend=i == 0))
    rows = [f"{config} · {lane}" for config in traces for lane in ("syncs", "kernels")]
    return _layout(fig, title, f"a torch.profiler trace measured on {label}", barmode="overlay",
                   xaxis_title="time from the first kernel (us)", height=160 + 50 * len(rows),
                   yaxis={"categoryarray": rows, "categoryorder": "array", "autorange": "reversed", "automargin": True})


def gpu_ablation_figure(result: dict[str, Any], title: str, label: str) -> go.Figure:
    """Tokens/s and the device's idle share per configuration, measured on a GPU: the median, and the range of the
    runs (tokens/s) or of the profiled run's windows (idle share) as error bars."""
    from statistics import median

    from plotly.subplots import make_subplots

    configs = result["configs"]
    fig = make_subplots(rows=1, cols=2, subplot_titles=["tokens per second", "device idle share"])
    for name, c in configs.items():
        for col, (runs, mid, fmt) in enumerate(((c.get("tokens_per_s_runs", [c["tokens_per_s"]]), c["tokens_per_s"], ",.0f"),
                                                (c.get("idle_share_windows", [1 - c["busy_share"]]),
                                                 c.get("idle_share", 1 - c["busy_share"]), ".0%")), start=1):
            mid = median(runs) if runs else mid
            fig.add_trace(go.Bar(x=[fix_label(name)], y=[mid], name=fix_label(name), marker_color=fix_color(name),
                                 showlegend=False, hovertext=name,  # the number at the bar's foot: clear of its whisker
                                 text=[format(mid, fmt)], textposition="inside", insidetextanchor="start",
                                 constraintext="none", cliponaxis=False,
                                 error_y=_spread_bars([mid], [min(runs)], [max(runs)])), row=1, col=col)
    fig.update_yaxes(title_text="tokens per second", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="share of the time the device idled", tickformat=".0%", rangemode="tozero", row=1,
                     col=2)
    fig.update_xaxes(tickangle=-40)  # each panel names its configurations: seven bars, no legend to look up
    runs = result.get("repeats", 1)
    subtitle = _subtitle(f"measured on {label}",
                         f"{result.get('steps', '?')} decode steps per run, median of {runs} run(s), their range as "
                         f"bars; idle share: one profiled run (torch.profiler), the range of its windows as bars",
                         model_words(result))
    return _layout(fig, title, subtitle, height=540 + 20 * subtitle.count("<br>"), above_plot=45)


def model_words(result: dict[str, Any]) -> str:
    """The model a stored run ran, in words (``"model: hidden 1,024, 8 layers, float32"``); ``""`` when unknown.

    ``model_shape`` as the bench stores it, or the ``model`` repr of runs stored before it was (weights were float32
    then: ``ModelConfig`` had no dtype)."""
    import re

    shape = result.get("model_shape")
    if shape is None and isinstance(result.get("model"), str):
        fields = dict(re.findall(r"(\w+)=([\w.]+)", result["model"]))
        if "hidden_size" not in fields:
            return ""
        shape = {"hidden_size": int(fields["hidden_size"]), "num_layers": int(fields["num_layers"]),
                 "dtype": fields.get("dtype", "torch.float32").removeprefix("torch.")}
    if shape is None:
        return ""
    return f"model: hidden {shape['hidden_size']:,}, {shape['num_layers']} layers, {shape['dtype']}"


def gpu_busy_share_figure(result: dict[str, Any], title: str, label: str,
                          repeat: dict[str, Any] | None = None) -> go.Figure:
    """MEASURED on a GPU (chapter 5's ``gpu_loops``): the device's busy share in a real async loop, a bar per
    configuration at each load, its value written on it; ``repeat``, a second run of the same bench, as a mark
    across each bar. Drawing only: the numbers are the stored run's."""
    fig = go.Figure()
    grid = list(result["grid"])
    for color, (variant, runs) in zip(variant_colors(), result["loops"].items()):
        ys = [run["busy_fraction"] for run in runs]
        fig.add_trace(go.Bar(x=grid, y=ys, name=variant, marker_color=color, offsetgroup=variant,
                             text=[f"{y:.1%}" for y in ys], textposition="outside", cliponaxis=False,
                             hovertext=[f"a loop step {run['ms_per_step']:.2f} ms, the forward "
                                        f"{run['device_ms_per_step']:.2f} ms of it" for run in runs]))
    again = (repeat or {}).get("loops", {})
    for i, (variant, runs) in enumerate(again.items()):
        if variant in result["loops"] and list(repeat.get("grid", [])) == grid:
            fig.add_trace(go.Scatter(x=grid, y=[run["busy_fraction"] for run in runs], mode="markers",
                                     offsetgroup=variant, name="the same bench run again, minutes later",
                                     legendgroup="repeat", showlegend=i == 0,
                                     marker={"symbol": "line-ew-open", "size": 28, "color": "#222",
                                             "line": {"width": 3}}))
    return _layout(fig, title, f"measured on {label}<br>a real loop: each step's forward queued, the next step "
                               "scheduled while it runs; busy = the forwards' time (CUDA events) / the loop's time",
                   barmode="group", scattermode="group", xaxis_title="requests x images (decoding)",
                   xaxis_type="category", yaxis_title="device busy share (measured)", yaxis_range=[0, 1.12],
                   yaxis_tickformat=".0%", height=460, margin={"l": 10, "r": 10, "t": 100, "b": 10})


def busy_share_model_figure(shares: dict[str, Sequence[float]], device_steps_us: Sequence[float],
                            host_us: float | None = None, active: int = 0, host_measured_on: str | None = None,
                            busy: bool = False) -> go.Figure:
    """MODEL: a bar per configuration of the device's busy share, one set of bars per device step (slider).

    ``shares[label][k]`` is the modelled share at ``device_steps_us[k]``. ``busy``: the host times fed to it were taken
    on a busy machine, which the subtitle says (a reader looks at the figure, not at the printout above it).
    """
    fig = go.Figure()
    labels = list(shares)
    # a short label on two lines ("list_cache<br>(not written)"), or the labels squeeze the bars flat
    shown = [fix_label(label).replace(" (", "<br>(", 1) for label in labels]
    for k, device_us in enumerate(device_steps_us):
        ys = [shares[label][k] for label in labels]
        fig.add_trace(go.Bar(x=shown, y=ys, visible=k == active, marker_color=[fix_color(label) for label in labels],
                             hovertext=labels, text=[f"{y:.0%}" for y in ys], textposition="outside", cliponaxis=False,
                             showlegend=False))
    steps = [{"label": f"{d / 1000:g} ms", "method": "update",
              "args": [{"visible": [i == k for i in range(len(device_steps_us))]}]}
             for k, d in enumerate(device_steps_us)]
    fig.update_layout(sliders=[{"active": active, "currentvalue": {"prefix": "device work per step: "},
                                "steps": steps, "pad": {"t": 70}}])
    subtitle = _subtitle("stray syncs per step counted on this workload; the device's work (slider) assumed",
                         (f"host time per step measured on {host_measured_on}" if host_measured_on is not None
                          else f"the host's queueing {host_us / 1000:g} ms per step assumed"),
                         "(each configuration's own host work, the network's compute left out)"
                         if host_measured_on is not None else "", unwritten_note(labels),
                         BUSY_MODEL_NOTE if busy else "")
    return _layout(fig, "MODEL: the device's busy share per configuration", subtitle,
                   yaxis_title="device busy share (modelled)", yaxis_range=[0, 1.1], yaxis_tickformat=".0%",
                   xaxis_tickangle=0, height=480 + 20 * subtitle.count("<br>"), above_plot=25)


# The parts of chapter 6's step: the fix that works on each, and its colour; the parts no fix touches in greys.
# A sync fix's part may even grow on a CPU (it removes waits, which a CPU's clock cannot see); a host-work fix's shrinks.
# The parts of chapter 6's measured step: the fix that works on each (its chapter, what it removes), drawn in that
# fix's colour (FIX_COLORS); the parts no fix touches in greys. A sync fix's part may even grow on a CPU (it removes
# waits, which a CPU's clock cannot see); a host-work fix's shrinks.
PART_FIX = {"schedule": ("list_cache", "host work"), "uploads": ("pinned_uploads", "syncs"),
            "pool": ("slice_then_split", "syncs"), "scan": ("reverse_scan", "host work"),
            "copy": ("lazy_stream", "the wait")}
PHASE_STYLE = {**{part: (f"ch. {FIX_CHAPTERS[fix]}, {fix}: {what}", FIX_COLORS[fix])
                  for part, (fix, what) in PART_FIX.items()},
               **{part: ("", NO_FIX_GREYS[part]) for part in ("model", "sample", "collect", "loop")}}


def parts_of_step(per_phase_us: dict[str, float], round_totals_us: Sequence[float]) -> tuple[dict[str, float], float]:
    """Chapter 6's host step and its parts, in µs, so that the parts add up to the step.

    The step is the median over the rounds of each round's median step; a part is its median over the decode steps,
    and medians do not add: the stored parts miss the step by a percent or two. Each part is scaled by the one factor
    that makes them add up (``step / sum(parts)``), returned as ``(parts, factor)``.
    """
    from statistics import median

    step = median(round_totals_us)
    factor = step / sum(per_phase_us.values())
    return {part: us * factor for part, us in per_phase_us.items()}, factor


BUSY_PARTS_OFF = 0.10  # parts that miss their step by more than this were measured on a busy machine (chapter 6)


def host_phases_figure(phases: dict[str, dict[str, Any]], title: str, label: str, model: str = "") -> go.Figure:
    """Stacked bars, one per configuration: the median decode step's host time, split into the parts of the step
    (chapter 6, :func:`parts_of_step`: the parts add up to the step); a marker for the whole step, the range of its
    rounds as error bars. ``phases[config]`` holds ``per_phase_us`` and ``round_totals_us``, as chapter 6's
    measurement stores them; ``model``: the model it ran, in words."""
    from statistics import median

    round_totals_us = {c: row["round_totals_us"] for c, row in phases.items()}
    scaled = {c: parts_of_step(row["per_phase_us"], row["round_totals_us"]) for c, row in phases.items()}
    parts_us = {c: parts for c, (parts, _) in scaled.items()}
    off = max(abs(factor - 1) for _, factor in scaled.values())
    fig = go.Figure()
    configs = list(parts_us)
    shown = [fix_label(c).replace(" (", "<br>(", 1) for c in configs]
    for part in next(iter(parts_us.values())):
        fixed_by, color = PHASE_STYLE.get(part, ("", "#bbbbbb"))
        fig.add_trace(go.Bar(x=shown, y=[parts_us[c][part] / 1000 for c in configs], marker_color=color,
                             name=f"{part} ({fixed_by})" if fixed_by else f"{part} ({grey_part(part)})",
                             hovertemplate=f"{part}: %{{y:.2f}} ms<extra></extra>"))
    mids = [median(round_totals_us[c]) / 1000 for c in configs]
    fig.add_trace(go.Scatter(x=shown, y=mids, mode="markers+text", name="whole step", marker_color="black",
                             text=[f"{m:.1f} ms" for m in mids], textposition="top center",
                             error_y=_spread_bars(mids, [min(round_totals_us[c]) / 1000 for c in configs],
                                                  [max(round_totals_us[c]) / 1000 for c in configs])))
    rounds = len(next(iter(round_totals_us.values())))
    subtitle = _subtitle(f"measured on {label}",
                         f"the median decode step of {rounds} interleaved rounds (its range over them as bars), "
                         f"split into its parts:",
                         (f"each part's median over the steps, adjusted by at most ±{100 * off:.1f}% so the parts "
                          "add up to the step" if off <= BUSY_PARTS_OFF else
                          f"each part's median over the steps: they missed the step by more than {BUSY_PARTS_OFF:.0%}"
                          ", the machine was busy: run it again when it is quiet"), model,
                         unwritten_note(configs))
    return _layout(fig, title, subtitle, barmode="stack", yaxis_title="host time per decode step (ms)",
                   height=560 + 20 * subtitle.count("<br>"), above_plot=40)  # labels turn only where they would touch


# ----------------------------------------------------------------------------- the host/device model


# (state, lane, colour) of the model's intervals. The first three are drawn in every model figure; the others,
# chapter 3's staging copy and the copy engine's copy, only where a run has them.
MODEL_STATES = (("queueing work", "host", COLORS["host"]), ("waiting (sync)", "host", COLORS["wait"]),
                ("staging copy (inside .to())", "host", "#f58518"), ("copy (DMA)", "copy engine", "#9d755d"),
                ("kernel", "device", COLORS["device"]))
_ALWAYS_DRAWN = {"queueing work", "waiting (sync)", "kernel"}
MODEL_LANES = ("host", "copy engine", "device")


def _model_traces(runs: dict[str, ModelRun]) -> list[go.Bar]:
    """A bar trace per state (queueing, waiting, kernel; a staging copy, a copy) over the runs' rows: ``lane``, or
    ``"<label> · lane"``."""
    traces = []
    for state, lane, color in MODEL_STATES:
        picked = [(f"{label} · {lane}" if label else lane, i) for label, run in runs.items()
                  for i in run.intervals if i.state == state]
        if not picked and state not in _ALWAYS_DRAWN:
            continue
        traces.append(go.Bar(
            orientation="h", y=[row for row, _ in picked], x=[i.end_us - i.start_us for _, i in picked],
            base=[i.start_us for _, i in picked], name=f"{lane}: {state}", marker_color=color,
            marker_line={"color": "white", "width": 1}, hovertext=[f"step {i.step}" for _, i in picked],
        ))
    return traces


def _model_caption(run: ModelRun) -> str:
    return (f"host {run.host_us:.0f} us + device {run.device_us:.0f} us per step, {run.syncs} sync(s) per step:<br>"
            f"GPU busy {run.steady_gpu_utilisation:.0%}, {run.step_time_us:.0f} us per step")


def model_figure(run: ModelRun) -> go.Figure:
    """The model's timeline: host lane (queueing / waiting) above the device lane."""
    fig = go.Figure(_model_traces({"": run}))
    return _layout(fig, "MODEL — host and device over a few steps", _model_caption(run), barmode="overlay",
                   xaxis_title="time (us, modelled)", height=340, yaxis={"categoryarray": ["device", "host"]},
                   margin={"l": 10, "r": 10, "t": 90, "b": 10}, legend={"orientation": "h", "yanchor": "top", "y": -0.3})


def before_after_rows(before: ModelRun, after: ModelRun, title: str,
                      labels: tuple[str, str] = ("before", "after")) -> go.Figure:
    """MODEL: the host and device rows of two runs on one time axis, the "why it matters" picture of a chapter.

    Each chapter's page opens with one: ``before`` the pattern (syncs, or host work that outgrows the device's)
    and ``after`` it, played by :func:`synclab.timeline_model.simulate` with costs the page states.
    """
    fig = go.Figure(_model_traces(dict(zip(labels, (before, after)))))
    lanes = [lane for lane in MODEL_LANES if any(i.lane == lane for run in (before, after) for i in run.intervals)]
    rows = [f"{label} · {lane}" for label in labels for lane in lanes]
    summary = "<br>".join(f"{label}: {run.syncs} sync(s) per step, {run.step_time_us:.0f} us per step, "
                          f"GPU busy {run.steady_gpu_utilisation:.0%}{_staging_note(run)}"
                          for label, run in zip(labels, (before, after)))
    return _layout(fig, f"MODEL — {title}", summary, barmode="overlay", xaxis_title="time (us, modelled)",
                   height=380 + 40 * (len(rows) - 4),
                   yaxis={"categoryorder": "array", "categoryarray": rows[::-1], "automargin": True},
                   margin={"l": 10, "r": 10, "t": 110, "b": 10},
                   legend={"orientation": "h", "yanchor": "top", "y": -0.25})


def _staging_note(run: ModelRun) -> str:
    """", N us of it the host's staging copy" for a run that stages its uploads (chapter 3), else ""."""
    staging = sum(i.end_us - i.start_us for i in run.intervals if i.state.startswith("staging copy")) / run.steps
    return f", {staging:.0f} us of it the host's staging copy" if staging else ""


def model_slider_figure(host_us: float, device_us: float, sync_values: Sequence[int] = (0, 1, 2, 4, 8)) -> go.Figure:
    """The model with a slider over syncs per step (works in the static book: no kernel needed)."""
    runs = [simulate(host_us, device_us, s) for s in sync_values]
    x_max = max(r.total_us for r in runs)
    fig = go.Figure(_model_traces({"": runs[0]}))
    fig.frames = [go.Frame(data=_model_traces({"": r}), name=str(s), layout={"title.text": _title_for(r)})
                  for s, r in zip(sync_values, runs)]
    steps = [{"label": str(s), "method": "animate",
              "args": [[str(s)], {"mode": "immediate", "frame": {"duration": 0, "redraw": True},
                                  "transition": {"duration": 0}}]} for s in sync_values]
    fig.update_layout(sliders=[{"active": 0, "currentvalue": {"prefix": "syncs per step: "}, "steps": steps,
                                "pad": {"t": 50}}])
    return _layout(fig, _title_for(runs[0]), barmode="overlay", xaxis={"range": [0, x_max], "title": "time (us, modelled)"},
                   height=440, yaxis={"categoryarray": ["device", "host"]}, margin={"l": 10, "r": 10, "t": 110, "b": 10},
                   # on the left: the right is where plotly's toolbar appears over the plot
                   legend={"orientation": "h", "yanchor": "bottom", "y": 1.01, "xanchor": "left", "x": 0})


def _title_for(run: ModelRun) -> str:
    return f"MODEL — {_model_caption(run)}"


LOOP_COLORS = {"queueing work": COLORS["host"], "waiting (end of step)": COLORS["wait"],
               "waiting (get_output)": "#f58518", "forward": COLORS["device"], "copy": "#9d755d"}


def output_loop_model_figure(runs: dict[str, OutputLoopRun], subtitle: str) -> go.Figure:
    """MODEL (chapter 2): each runner's loop, its host row above its compute and side streams, one time axis."""
    fig = go.Figure()
    rows = [f"{name} · {lane}" for name, run in runs.items()
            for lane in ("host", "compute stream", "side stream") if any(i.lane == lane for i in run.intervals)]
    for state, color in LOOP_COLORS.items():
        picked = [(f"{name} · {i.lane}", i) for name, run in runs.items() for i in run.intervals if i.state == state]
        if picked:
            fig.add_trace(go.Bar(
                orientation="h", y=[row for row, _ in picked], x=[i.end_us - i.start_us for _, i in picked],
                base=[i.start_us for _, i in picked], name=state, marker_color=color,
                marker_line={"color": "white", "width": 1}, hovertext=[f"step {i.step}" for _, i in picked]))
    summary = "<br>".join(f"{name}: {run.steady_step_us:.0f} us per step once the loop is full, the host waiting "
                          f"{run.steady_host_wait_us:.0f} us of it" for name, run in runs.items())
    return _layout(fig, "MODEL — the output copy, with and without the end-of-step wait",
                   f"{subtitle}<br>{summary}", barmode="overlay", xaxis_title="time (us, modelled)",
                   height=250 + 40 * len(rows), yaxis={"categoryorder": "array", "categoryarray": rows[::-1],
                                                       "automargin": True},
                   above_plot=20,
                   legend={"orientation": "h", "yanchor": "top", "y": -0.25})


def utilisation_heatmap(device_us: float, host_values: Sequence[float], sync_values: Sequence[int]) -> go.Figure:
    """GPU utilisation in the model over host work per step x syncs per step."""
    z = [[simulate(h, device_us, s, steps=8).steady_gpu_utilisation for h in host_values] for s in sync_values]
    fig = go.Figure(go.Heatmap(
        x=[str(h) for h in host_values], y=[str(s) for s in sync_values], z=z, zmin=0, zmax=1,
        colorscale="RdYlGn", text=[[f"{v:.0%}" for v in row] for row in z], texttemplate="%{text}",
        # its title to the side and the bar below the top edge: plotly's toolbar sits in the top right corner
        colorbar={"title": {"text": "GPU busy", "side": "right"}, "len": 0.85, "y": 0.42, "yanchor": "middle"},
    ))
    return _layout(fig, f"MODEL — GPU utilisation, device work {device_us:.0f} us per step",
                   "each sync makes the device wait for the host to queue the next piece", height=380,
                   xaxis_title="host work per step (us)", yaxis_title="syncs per step")


def model_explorer(host_us: float = 40.0, device_us: float = 60.0, syncs: int = 0) -> Any:
    """Three sliders (host work, device work, syncs per step) driving :func:`model_figure`.

    Live notebooks only: a static page has no kernel to redraw the figure.
    """
    import ipywidgets as widgets

    host = widgets.IntSlider(value=int(host_us), min=0, max=200, step=5, description="host us/step")
    device = widgets.IntSlider(value=int(device_us), min=5, max=200, step=5, description="device us/step")
    n_syncs = widgets.IntSlider(value=syncs, min=0, max=8, description="syncs/step")
    out = widgets.Output()

    def redraw(_: Any = None) -> None:
        # The figure goes into the widget's outputs directly: no capture of the kernel's display hooks
        # (``with out:``), which a busy kernel can leave waiting on its output stream.
        fig = model_figure(simulate(host.value, device.value, n_syncs.value))
        out.outputs = ({"output_type": "display_data", "data": _PlotlyBundle(fig, {}).bundle, "metadata": {}},)

    for w in (host, device, n_syncs):
        w.observe(redraw, names="value")
    redraw()
    return widgets.VBox([widgets.HBox([host, device, n_syncs]), out])


EVIDENCE_KEY = "synclab_measured"  # output metadata: the measurement a glued figure draws, with its claim


class _PlotlyBundle:
    """Only the plotly JSON mime bundle of a figure (a Figure's own display hook would show it)."""

    def __init__(self, fig: go.Figure, metadata: dict[str, Any]) -> None:
        import plotly.io as pio

        self.bundle = pio.renderers["plotly_mimetype"].to_mimebundle(fig.to_dict())
        self.metadata = metadata

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> tuple[dict[str, Any], dict[str, Any]]:
        return self.bundle, self.metadata


def token_lists_figure(rows: Sequence[tuple[str, Sequence[int], int]], title: str) -> go.Figure:
    """Chapter 4: lists of token ids as rows of boxes, ``(label, ids, history)``: the first ``history`` ids grey
    (tokens out before the step), a placeholder (-1) orange, a token this step brought blue. A row with no history is
    the device's row of sampled ids, where a -1 pads a rejected draft: dark grey, not a placeholder's orange."""
    fig = go.Figure()
    for y, (label, ids, history) in enumerate(rows):
        for x, token in enumerate(ids):
            placeholder = "#ff9800" if history else "#616161"  # a list's placeholder, or the device row's padding
            color = placeholder if token == -1 else ("#bdbdbd" if x < history else "#1f77b4")
            fig.add_shape(type="rect", x0=x, x1=x + 0.9, y0=-y, y1=-y + 0.8, fillcolor=color,
                          line={"color": "white"})
            fig.add_annotation(x=x + 0.45, y=-y + 0.4, text=str(token), showarrow=False,
                               font={"color": "white", "size": 16})
        fig.add_annotation(x=max(len(r[1]) for r in rows) + 0.3, y=-y + 0.4, showarrow=False, xanchor="left",
                           text="<br>".join(textwrap.wrap(label, 40)), align="left", font={"size": 13})  # fits 1280px
    width = max(len(r[1]) for r in rows)
    return _layout(fig, title, "grey: the history · orange: a placeholder (-1) · blue: what this step brought · "
                   "dark grey: padding (-1) in the device's row",
                   xaxis={"visible": False, "range": [-0.2, width + 9]}, height=120 + 70 * len(rows),
                   yaxis={"visible": False, "range": [-len(rows) + 0.6, 1.0]}, showlegend=False)


def encoder_window_figure(computed: int, new: int, items: Sequence[tuple[str, int, int, int]], budget: int,
                          scheduled: Sequence[int], new_after: int, left: int, title: str) -> go.Figure:
    """Chapter 5: one request's tokens, the window offered (``[computed, computed + new)``), its items
    ``(name, offset, length, embeddings)``, and what the loop returns: the items to encode, the window's new end,
    the budget left."""
    fig = go.Figure()
    rows = {"window offered": 2, "items": 1, "window returned": 0}
    fig.add_shape(type="rect", x0=computed, x1=computed + new, y0=1.8, y1=2.3, fillcolor="#c6dbef", line_width=0)
    fig.add_shape(type="rect", x0=computed, x1=computed + new_after, y0=-0.3, y1=0.3, fillcolor="#1f77b4", line_width=0)
    for i, (name, offset, length, embeds) in enumerate(items):
        color = "#2ca02c" if i in scheduled else "#bdbdbd"
        fig.add_shape(type="rect", x0=offset, x1=offset + length, y0=0.75, y1=1.25, fillcolor=color,
                      line={"color": "white"})
        fig.add_annotation(x=offset + length / 2, y=1.55, showarrow=False, font={"size": 11},  # two short lines:
                           text=f"{name}<br>{embeds} embeds")  # side by side, one line each ran into the next
    fig.add_annotation(x=computed + new, y=2, xanchor="left", showarrow=False,
                       text=f"  [{computed}, {computed + new}), encoder budget {budget}")
    fig.add_annotation(x=computed + new_after, y=0, xanchor="left", showarrow=False,
                       text=f"  [{computed}, {computed + new_after}): encode {list(scheduled)}, budget left {left}")
    end = max([computed + new] + [o + n for _, o, n, _ in items])
    return _layout(fig, title, "green: encoded this step · grey: not this step", showlegend=False,
                   xaxis={"title": "token position", "range": [computed - 1, end + 25]},
                   yaxis={"tickvals": list(rows.values()), "ticktext": list(rows), "range": [-0.6, 2.6]},
                   height=300)


def glue_figure(name: str, fig: go.Figure, measured: Sweep | None = None) -> go.Figure:
    """Store ``fig`` under ``name`` for the book page to paste (``{glue:figure}``), and return it.

    A timing figure passes the measurement it draws as ``measured``: it is stored beside the
    figure, with its claim and verdict (:mod:`synclab.claims`), so a test can re-check the
    claim from the stored numbers. myst-nb's ``glue`` would otherwise trigger plotly's
    display hook and show the figure twice.
    """
    from myst_nb import glue

    if measured is not None and measured.claim is None:
        raise ValueError(f"{name}: the measurement it draws declares no claim (synclab.claims.validated)")
    metadata = {EVIDENCE_KEY: measured.to_dict()} if measured is not None else {}
    glue(name, _PlotlyBundle(fig, metadata), display=False)
    return fig
