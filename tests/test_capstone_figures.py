"""Chapter 6's figures speak one language: a fix has one colour in every chart, and every label stays readable.

The palette is ``synclab.figures.FIX_COLORS`` (grey no fix, black all five, a colour per fix). Every figure the
page shows (the solution notebook's glued outputs and the GPU references drawn by ``{gpu-reference}``) is read
back: a bar of a configuration, a part of the step a fix works on and the host's calls in that part carry the
fix's colour; a part no fix touches carries none of the fixes' colours. Drawn with fixes not written yet, the
labels stay short and the colours stay the fixes'.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterator

import pytest

from synclab import figures
from synclab.capstone.host_time import HOST_PHASES
from synclab.engine.engine_core import PATTERNS, Components
from tests.notebook_code import ROOT

pytestmark = pytest.mark.sim  # drawing only, no device (conftest.py)

NOTEBOOK = ROOT / "solutions" / "06_capstone_engine_step.ipynb"
PAGE = ROOT / "book" / "06_capstone_engine_step.md"
FIX_NAMES = sorted(figures.FIX_COLORS, key=len, reverse=True)  # "all fixes" before a shorter name inside it
LONGEST_LABEL = 32  # characters a tick or legend entry may take


def glued_figures() -> dict[str, dict[str, Any]]:
    """The figures the page pastes from the solution notebook ({glue:figure}), by key."""
    nb = json.loads(NOTEBOOK.read_text())
    found = {}
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                found[name] = out["data"]["application/papermill.record/application/vnd.plotly.v1+json"]
    pasted = set(re.findall(r"06_capstone_engine_step\.ipynb::(\w+)", PAGE.read_text()))
    assert pasted <= set(found), f"the page pastes figures the notebook does not store: {pasted - set(found)}"
    return {key: found[key] for key in sorted(pasted)}


def gpu_figures() -> dict[str, dict[str, Any]]:
    """The figures the page's {gpu-reference} draws for chapter 6, from data/reference/."""
    import synclab.capstone  # noqa: F401  (declares the chapter's claims, which drawing a stored sweep checks)
    from synclab.reference import headline_figures

    directive = re.search(r"```\{gpu-reference\} ch6 ([^\n]+)", PAGE.read_text()).group(1).split()
    return {f"{name} ({i})": fig for name in directive for i, fig in enumerate(headline_figures("ch6", name, name))}


def coloured_marks(fig: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(label, colour) of each bar or marked part of a figure: a bar trace's name, or its x labels where its colours
    are a list, or its hover text."""
    for trace in fig["data"]:
        color = (trace.get("marker") or {}).get("color")
        if color is None or trace.get("type") not in ("bar", None):
            continue
        if isinstance(color, list):
            labels = trace.get("hovertext") or trace.get("x")
            yield from zip(labels, color)
        else:
            yield trace.get("name") or trace.get("hovertext") or str(trace.get("x")), color


def fix_in(label: str) -> str | None:
    """The configuration or fix a label names: a configuration's bar, or a part of the step and its fix."""
    label = label.replace("<br>", " ")
    if figures.fix_name(label) in figures.FIX_COLORS:
        return figures.fix_name(label)
    return next((fix for fix in FIX_NAMES if re.search(rf"\b{re.escape(fix)}\b", label)), None)


def palette_problems(fig: dict[str, Any]) -> list[str]:
    problems, fixes_seen = [], 0
    fix_colors = set(figures.FIX_COLORS.values())
    for label, color in coloured_marks(fig):
        fix = fix_in(str(label))
        if fix is None:
            if color in fix_colors:
                problems.append(f"{label!r} names no fix but has a fix's colour {color}")
        elif color != figures.FIX_COLORS[fix]:
            problems.append(f"{label!r} is {color}, not {fix}'s {figures.FIX_COLORS[fix]}")
        else:
            fixes_seen += 1
    if not fixes_seen:
        problems.append("no mark in a fix's colour: the figure does not use figures.FIX_COLORS")
    return problems


def test_the_parts_of_the_step_carry_the_colour_of_the_fix_that_works_on_them():
    """The figures' map of parts to fixes is the measurement's (host_time.HOST_PHASES)."""
    assert {part: fix for part, (fix, _) in figures.PART_FIX.items()} == \
        {part: fix for part, fix in HOST_PHASES.items() if fix is not None}
    for part, (words, color) in figures.PHASE_STYLE.items():
        fix = HOST_PHASES[part]
        assert color == (figures.FIX_COLORS[fix] if fix else figures.NO_FIX_GREYS[part]), part
        assert (fix or "") in words
    assert set(figures.FIX_COLORS) == {"baseline", "all fixes", *PATTERNS}
    assert len(set(figures.FIX_COLORS.values())) == len(figures.FIX_COLORS)
    # none is the model's blue, red or green (host queueing, waiting, kernel), which the page's pictures also use
    assert not set(figures.FIX_COLORS.values()) & set(figures.COLORS.values())


@pytest.mark.parametrize("key", sorted(glued_figures()))
def test_every_figure_of_the_page_colours_each_fix_with_its_one_colour(key):
    assert palette_problems(glued_figures()[key]) == []


def test_every_gpu_figure_of_the_page_colours_each_fix_with_its_one_colour():
    drawn = gpu_figures()
    assert drawn, "the page draws no GPU figure of chapter 6"
    for key, fig in drawn.items():
        assert palette_problems(fig) == [], key


def test_a_palette_slip_is_caught():
    fig = {"data": [{"type": "bar", "name": "reverse_scan", "marker": {"color": figures.FIX_COLORS["list_cache"]}},
                    {"type": "bar", "name": "model", "marker": {"color": figures.FIX_COLORS["pinned_uploads"]}}]}
    assert palette_problems(fig)[:2] == ["'reverse_scan' is #17becf, not reverse_scan's #9467bd",
                                         "'model' names no fix but has a fix's colour #ff7f0e"]
    assert palette_problems({"data": [{"type": "bar", "name": "a", "marker": {"color": "#123456"}}]}) == [
        "no mark in a fix's colour: the figure does not use figures.FIX_COLORS"]


def _labels(fig: dict[str, Any]) -> list[str]:
    """What a reader reads as a configuration's name: tick labels (a bar trace's x) and legend entries."""
    found = []
    for trace in fig["data"]:
        if trace.get("type") in ("bar", None) and trace.get("orientation") != "h":
            found += [str(x) for x in trace.get("x") or []]
        if trace.get("showlegend", True) and trace.get("name"):
            found.append(trace["name"])
    return [part for label in found for part in label.split("<br>")]


def test_with_no_fix_written_the_labels_stay_short_and_the_colours_the_fixes():
    """A fresh lab: every fix runs the code before its PR, and the labels say so in a few words; the whole label
    is in the hover text, and the subtitle says what "not written" means."""
    from synclab.capstone.workloads import ablation_configs

    from dataclasses import fields

    fresh = Components(**{f.name: None for f in fields(Components) if f.name != "unfinished"},
                       unfinished=frozenset(PATTERNS))
    labels = [fresh.label_for(config) for config in ablation_configs()]
    assert max(map(len, labels)) > 100  # what the figures used to print
    counts = {label: {"stray syncs": [3, 4], "torch calls": [400, 410], "history elements read": [480_048, 480_048]}
              for label in labels}
    phases = {label: {"per_phase_us": {part: 100.0 for part in HOST_PHASES}, "round_totals_us": [920.0, 900.0]}
              for label in labels}
    drawn = {
        "counts": figures.step_counts_figure(counts, "t", "count_syncs"),
        "host work": figures.sync_counts_figure("w", ["a", "b"], {label: [1, 2] for label in labels}, "t", by_fix=True),
        "host time": figures.host_phases_figure(phases, "t", "cpu"),
        "busy": figures.busy_share_model_figure({label: [0.5] for label in labels}, [1000], host_measured_on="cpu"),
        "gpu": figures.gpu_ablation_figure({"configs": {label: {"tokens_per_s": 1.0, "busy_share": 0.2}
                                                        for label in labels}}, "t", "gpu"),
    }
    for name, fig in drawn.items():
        fig = fig.to_dict()
        long = [label for label in _labels(fig)
                if figures.fix_name(label) in figures.FIX_COLORS and len(label) > LONGEST_LABEL]
        assert not long, f"{name}: labels too long to read: {long}"
        assert palette_problems(fig) == [], name
        if name != "gpu":  # a GPU run loads the book's fixes: it never draws one not written
            assert figures.NOT_WRITTEN in fig["layout"]["title"]["text"], name
    assert figures.fix_label(labels[-1]) == f"all fixes ({len(PATTERNS)} not written)"
    assert figures.fix_label(labels[1]) == f"{PATTERNS[0]} (not written)"


def test_the_counted_figures_say_where_they_were_counted():
    for key in ("ch6_ablation_counts", "ch6_host_work", "ch6_timeline"):
        title = glued_figures()[key]["layout"]["title"]["text"]
        assert re.search(r"counted on .+ · torch \S+ · \d{4}-\d\d-\d\d", title), key


def test_the_host_steps_parts_add_up_to_the_step():
    parts, factor = figures.parts_of_step({"a": 10.0, "b": 30.0}, [41.0, 39.0, 44.0])
    assert sum(parts.values()) == pytest.approx(41.0) and factor == pytest.approx(41 / 40)
    fig = glued_figures()["ch6_host_phases"]
    bars = [t for t in fig["data"] if t["type"] == "bar"]
    (step,) = [t for t in fig["data"] if t["type"] == "scatter"]
    for i, mid in enumerate(step["y"]):
        assert sum(b["y"][i] for b in bars) == pytest.approx(mid, rel=1e-6)


def test_each_rows_syncs_are_counted_by_part_in_the_legend():
    """Five uploads' syncs a call or two apart drew five crosses on one another: a reader could not count them."""
    from synclab.capstone.profiling import HostEvent

    uploads = [e for i in range(5) for e in (HostEvent("call", "tensor", "inputs"),
                                             HostEvent("stray", f"upload {i}", "inputs"))]
    events = [*uploads, HostEvent("call", "argmax", "sample"), HostEvent("stray", "item", "sample"),
              HostEvent("planned", "wait", "sample")]
    fig = figures.host_events_figure({"baseline · decode step": events}, "t")
    stray = next(d for d in fig.data if d.name.startswith("stray sync"))
    assert stray.name == "stray sync: 6 in baseline · decode step (inputs 5, sample 1)"
    assert list(stray.x) == [1, 2, 3, 4, 5, 6] and stray.hovertext[4] == "inputs: upload 4"
    planned = next(d for d in fig.data if d.name.startswith("planned wait"))
    assert planned.name == "planned wait: 1 in baseline · decode step (sample 1)" and list(planned.x) == [6]
