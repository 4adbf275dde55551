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


RUN_FILE = "run.yaml"  # beside a device's references: what their files lack (the lab's commit, before it was stored)
REPEAT_DIR = "repeat"  # a second run of the same bench on the same machine: the run-to-run spread


def load(chapter: str, root: Path = REFERENCE_DIR) -> dict[str, dict[str, Any]]:
    """Every recorded GPU reference for ``chapter``: ``{device slug: {"provenance": ..., "results": ...}}``.

    A device's ``run.yaml`` fills in what its files' provenance lacks (``commit: 46d6785``); the files
    themselves stay as the bench wrote them.
    """
    found = {}
    for path in sorted(root.glob(f"*/{chapter}.json")):
        data = json.loads(path.read_text())
        if data.get("provenance", {}).get("is_gpu"):  # never show a CPU run as a reference
            run = path.parent / RUN_FILE
            extra = _run_notes(run) if run.exists() else {}
            data["provenance"] = {**{k: v for k, v in extra.items() if k == "commit"}, **data["provenance"]}
            for result in data.get("results", {}).values():  # each figure's subtitle names the commit too
                if "commit" in extra and isinstance(result, dict) and isinstance(result.get("provenance"), dict):
                    result["provenance"] = {"commit": extra["commit"], **result["provenance"]}
            found[path.parent.name] = data
    return found


def _run_notes(path: Path) -> dict[str, Any]:
    import yaml

    notes = yaml.safe_load(path.read_text()) or {}
    return {k: str(v) for k, v in notes.items()}


def load_repeat(chapter: str, slug: str, root: Path = REFERENCE_DIR) -> dict[str, Any] | None:
    """The results of a second bench run of ``chapter`` on device ``slug`` (``<slug>/repeat/``), if one is kept."""
    path = root / slug / REPEAT_DIR / f"{chapter}.json"
    return json.loads(path.read_text())["results"] if path.exists() else None


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


def _times(ratio: float) -> str:
    return f"{ratio:.2f}×" if ratio < 10 else f"{ratio:,.0f}×"


# What a speed-up table's times are, where the page shows another measure beside it (chapter 6's tokens per second).
TIMED = {"host_phases": "the host's time per decode step (not tokens per second)"}


def speedup_table(chapter: str, name: str, root: Path = REFERENCE_DIR) -> str:
    """The recorded sweep ``name`` as a Markdown table of speed-ups (the baseline's time ÷ each variant's), per
    recorded GPU, with the second run's numbers beside the first where one is kept. "" when nothing is recorded.

    Drawing only, from the stored medians: a ratio under 1 is a fix that costs more than it saves there.
    """
    from synclab.timing import Sweep

    blocks = []
    for slug, data in load(chapter, root).items():
        result = data["results"].get(name)
        if _is_host_blocked(result):
            blocks.append(_host_blocked_table(result, Provenance.from_dict(data["provenance"]).label))
            continue
        if result is None or "timings" not in result:
            continue
        sweep = Sweep.from_dict(result)
        repeat_results = load_repeat(chapter, slug, root) or {}
        repeat = Sweep.from_dict(repeat_results[name]) if name in repeat_results else None
        base = sweep.variants[0]
        # the rows are the variants, the columns the swept values: the parameter's name heads the values, not the rows
        rows = [f"| | {sweep.parameter}: " + " | ".join(str(v) for v in sweep.values) + " |",
                "|---|" + "---|" * len(sweep.values)]
        for variant in sweep.variants[1:]:
            cells = [_times(r) for r in sweep.ratio(base, variant)]
            if repeat is not None and variant in repeat.variants and repeat.values == sweep.values:
                cells = [f"{c} ({_times(r)})" for c, r in zip(cells, repeat.ratio(base, variant))]
            rows.append(f"| {variant} | " + " | ".join(cells) + " |")
        again = " (in brackets: a second run, minutes later)" if repeat is not None else ""
        timed = f", {TIMED[name]}" if name in TIMED else ""
        blocks.append(f"**Measured on the {Provenance.from_dict(data['provenance']).label}**{timed}: how many times "
                      f"faster than {base}{again}; under 1× the fix costs more than it saves.\n\n" + "\n".join(rows))
    return "\n\n".join(blocks)


def _is_host_blocked(result: Any) -> bool:
    """Chapter 2's ``host_blocked``: per runner, the time per step and the host's wait (a table, not a sweep)."""
    runs = result.get("results") if isinstance(result, dict) else None
    return isinstance(runs, dict) and bool(runs) and all(isinstance(r, dict) and "host_waiting_us" in r
                                                         for r in runs.values())


def _host_blocked_table(result: dict[str, Any], label: str) -> str:
    """Chapter 2's ``host_blocked``: per runner, the time per step and the host's share of it spent waiting."""
    rows = ["| runner | time per step | host waiting per step |", "|---|---|---|"]
    rows += [f"| {runner} | {r['step_us']:,.0f} µs | {r['host_waiting_us']:,.0f} µs |"
             for runner, r in result["results"].items()]
    return (f"**Measured on the {label}**, {result['num_reqs']} requests per step (medians of {result['repeats']} "
            f"runs of {result['steps']} steps):\n\n" + "\n".join(rows))


def headline_figures(chapter: str, name: str, title: str, root: Path = REFERENCE_DIR) -> list[dict[str, Any]]:
    """The recorded GPU figures of measurement ``name`` of ``chapter`` (plotly dicts), for the book's headline.

    Drawing only: nothing is measured. A recorded sweep is drawn only when its claim holds on the
    stored numbers (synclab.claims); ``bandwidth`` (chapter 3) is drawn as its two charts, ``timeline``
    (chapter 6) as a profiler trace's lanes, ``gpu_loops`` (chapter 5) as the device's busy share per cache and
    load, ``gpu_loop`` (chapter 4) as a real loop's time per step over the output length, ``ablation`` as tokens/s and the idle share per configuration (and
    ``ablation_contradicted``, a run that contradicted its claim, the same way: the page says what it showed) and
    ``host_phases`` as each configuration's host time per step in its parts.
    """
    from synclab import figures
    from synclab.claims import check_stored
    from synclab.timing import Sweep

    drawn = []
    for slug, data in load(chapter, root).items():
        result = data["results"].get(name)
        if result is None or _is_host_blocked(result):  # a table (speedup_table), not a figure
            continue
        label = Provenance.from_dict(data["provenance"]).label
        if name in ("gpu_ablation", "ablation", "ablation_contradicted"):  # the last: drawn as what the run showed
            drawn.append(figures.gpu_ablation_figure(result, f"{title} ({slug})", label).to_dict())
            continue
        if name == "timeline":
            drawn.append(figures.trace_timeline_figure(result, f"{title} ({slug})", label).to_dict())
            continue
        if name == "gpu_loops":  # chapter 5: the device's busy share in a real loop, the second run's beside it
            repeat = (load_repeat(chapter, slug, root) or {}).get(name)
            drawn.append(figures.gpu_busy_share_figure(result, f"{title} ({slug})", label, repeat).to_dict())
            continue
        if name == "gpu_loop":  # chapter 4: a real loop's step over the output length, the PR's TPOT beside it
            drawn.append(figures.gpu_loop_figure(result, f"{title} ({slug})", label).to_dict())
            continue
        if name == "bandwidth":
            drawn += [figures.bandwidth_figure(result, "gbps", f"{title}: bandwidth ({slug})", label).to_dict(),
                      figures.bandwidth_figure(result, "host_us", f"{title}: time inside .to() ({slug})",
                                               label).to_dict()]
            continue
        sweep = Sweep.from_dict(result)
        problems = check_stored(sweep)
        if problems:
            raise ValueError(f"data/reference/{slug}/{chapter}.json, {name}: {'; '.join(problems)}")
        if name == "host_phases":  # chapter 6: each configuration's step, in its parts, and the model it ran
            drawn.append(figures.host_phases_figure(result["phases"], f"{title} ({slug})", label,
                                                    figures.model_words(_host_phases_model(result))).to_dict())
            continue
        numeric = all(isinstance(v, (int, float)) for v in sweep.values)
        drawn.append(figures.sweep_figure(sweep, f"{title} ({slug})", log_x=numeric, log_y=True,
                                          labelled_ends=True, yaxis_title=_TIMED.get((chapter, name), "median time per call (us)")
                                          ).to_dict())
    return drawn


# What one timed call of a sweep is, where it is not one call of the method the chapter changed.
_TIMED = {("ch2", "loop"): "median time of 8 loop steps (us)", ("ch5", "step_sweep"): "median time per scheduler step (us)"}


def _host_phases_model(result: dict[str, Any]) -> dict[str, Any]:
    """Chapter 6's host_phases as stored, with the model it ran: runs stored before the bench recorded the model
    timed ``capstone_workload()`` with its default model, the lab's small one (``CPU_MODEL``), on every device."""
    if "model_shape" in result:
        return result
    from synclab.engine.tiny_llm import CPU_MODEL

    return {**result, "model_shape": {"hidden_size": CPU_MODEL.hidden_size, "num_layers": CPU_MODEL.num_layers,
                                      "dtype": str(CPU_MODEL.dtype).removeprefix("torch.")}}
