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
from dataclasses import dataclass
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


# ----------------------------------------------------------------------------- what the PRs themselves measured

PR_REPORTS_PATH = Path(__file__).resolve().parent.parent / "data" / "pr_reports.yaml"


@dataclass(frozen=True)
class PrReport:
    """What a chapter's PR measured, in the PR's own words (``data/pr_reports.yaml``); ``pr`` None: no PR did."""

    chapter: str
    pr: int | None
    bench: dict[str, str]  # figure name -> what `python -m synclab bench chN` draws there on a GPU
    source: str = ""
    measured: str = ""
    setup: str = ""
    rows: tuple[tuple[str, str, str], ...] = ()  # (what, before the PR, after it)
    note: str = ""
    why: str = ""  # why no PR measured this (pr is None)

    def lines(self) -> list[str]:
        """The report as plain text lines: for a lab's output and a terminal."""
        if self.pr is None:
            return [f"No PR measured this: {self.why}"]
        out = [f"Reported by PR #{self.pr} ({self.source}): {self.measured}.", f"  setup: {self.setup}"]
        width = max(len(what) for what, _, _ in self.rows)
        out += [f"  {what:<{width}}  before: {before:<18}  after: {after}" for what, before, after in self.rows]
        return out + ([f"  {self.note}"] if self.note else [])


def pr_reports(path: Path = PR_REPORTS_PATH) -> dict[str, PrReport]:
    """Every chapter's PR report, by chapter (``"ch1"``)."""
    import yaml

    reports = {}
    for entry in yaml.safe_load(path.read_text()):
        entry["rows"] = tuple(tuple(str(cell) for cell in row) for row in entry.get("rows", ()))
        report = PrReport(**entry)
        if report.pr is not None and not report.rows:
            raise ValueError(f"{path.name}: {report.chapter} names PR #{report.pr} but no numbers of it")
        reports[report.chapter] = report
    return reports


def describe_missing(chapter: str, figure: str | None = None) -> str:
    """What a lab shows where no GPU run is recorded: the PR's own numbers, and what a GPU run would add."""
    report = pr_reports()[chapter]
    adds = [report.bench[figure]] if figure else list(report.bench.values())
    return "\n".join(report.lines() + [
        f"No GPU run of this lab is recorded yet. On a machine with a GPU, `python -m synclab bench {chapter}` "
        f"records {'; '.join(a.rstrip('.') for a in adds)} (in data/reference/<device>/{chapter}.json)."])


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
