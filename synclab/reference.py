"""Reference results: what ``python -m synclab bench chN`` records, and how chapters load them.

Introduced in chapter 0 (the primer); every chapter's profiling section uses it.

``bench`` re-executes a chapter's solution notebook with ``SYNCLAB_BENCH_DIR`` set;
the notebook's profiling cells hand their measurements to :func:`record`, which
writes them there with their provenance. Only runs on a real GPU are stored
under ``data/reference/<device-slug>/``; a CPU run is kept apart and never
presented as a reference.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synclab.provenance import Provenance

if TYPE_CHECKING:
    from synclab.timing import Sweep

BENCH_DIR_ENV = "SYNCLAB_BENCH_DIR"
REFERENCE_DIR = Path(__file__).resolve().parent.parent / "data" / "reference"


def record(chapter: str, name: str, result: dict[str, Any]) -> None:
    """Hand one measurement (a JSON-able dict) to ``python -m synclab bench``; a no-op otherwise."""
    out_dir = os.environ.get(BENCH_DIR_ENV)
    if not out_dir:
        return
    path = Path(out_dir) / f"{chapter}.json"
    data = json.loads(path.read_text()) if path.exists() else {"provenance": Provenance.here().to_dict(), "results": {}}
    data["results"][name] = result
    path.write_text(json.dumps(data, indent=1))


def load(chapter: str, root: Path = REFERENCE_DIR) -> dict[str, dict[str, Any]]:
    """Every recorded GPU reference for ``chapter``: ``{device slug: {"provenance": ..., "results": ...}}``."""
    found = {}
    for path in sorted(root.glob(f"*/{chapter}.json")):
        data = json.loads(path.read_text())
        if data.get("provenance", {}).get("is_gpu"):  # never show a CPU run as a reference
            found[path.parent.name] = data
    return found


def load_sweeps(chapter: str, name: str, root: Path = REFERENCE_DIR) -> dict[str, "Sweep"]:
    """The sweep ``name`` of every recorded GPU reference for ``chapter``, by device slug."""
    from synclab.timing import Sweep

    return {slug: Sweep.from_dict(data["results"][name])
            for slug, data in load(chapter, root).items() if name in data["results"]}


def describe_missing(chapter: str) -> str:
    return (f"No GPU reference results for {chapter} are recorded yet. On a machine with a GPU, run "
            f"`python -m synclab bench {chapter}` and commit data/reference/<device>/{chapter}.json.")


Y_AXIS = {("ch6", "host_time"): "median time per run (us)"}  # a sweep whose point is not one call


def headline_figures(chapter: str, name: str, title: str, root: Path = REFERENCE_DIR) -> list[dict[str, Any]]:
    """The recorded GPU figures of measurement ``name`` of ``chapter`` (plotly dicts), for the book's headline.

    Drawing only: nothing is measured. A recorded sweep is drawn only when its claim holds on the
    stored numbers (synclab.claims); ``bandwidth`` (chapter 3) is drawn as its two charts, ``timeline``
    (chapter 6) as a profiler trace's lanes and ``gpu_ablation`` as the measured busy share per configuration.
    """
    from synclab import figures
    from synclab.claims import check_stored
    from synclab.timing import Sweep

    drawn = []
    for slug, data in load(chapter, root).items():
        result = data["results"].get(name)
        if result is None:
            continue
        label = Provenance.from_dict(data["provenance"]).label
        if name == "gpu_ablation":
            drawn.append(figures.gpu_ablation_figure(result, f"{title} ({slug})", label).to_dict())
            continue
        if name == "timeline":
            drawn.append(figures.trace_timeline_figure(result, f"{title} ({slug})", label).to_dict())
            continue
        if name == "bandwidth":
            drawn += [figures.bandwidth_figure(result, "gbps", f"{title}: bandwidth", label).to_dict(),
                      figures.bandwidth_figure(result, "host_us", f"{title}: time inside .to()", label).to_dict()]
            continue
        sweep = Sweep.from_dict(result)
        problems = check_stored(sweep)
        if problems:
            raise ValueError(f"data/reference/{slug}/{chapter}.json, {name}: {'; '.join(problems)}")
        numeric = all(isinstance(v, (int, float)) for v in sweep.values)
        drawn.append(figures.sweep_figure(sweep, f"{title} ({slug})", log_x=numeric, log_y=True,
                                          yaxis_title=Y_AXIS.get((chapter, name), "median time per call (us)")).to_dict())
    return drawn
