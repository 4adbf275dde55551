"""``{gpu-reference}``: a chapter's headline figure from ``data/reference/``, beside what its PR itself measured.

The book measures nothing (see _config.yml): a GPU figure is what ``python -m synclab bench chN``
stored on a real GPU, drawn here from that file (``synclab.reference.headline_figures``, which
refuses a stored measurement whose claim does not hold). Beside it, or alone while no GPU run is recorded,
what the chapter's PR measured in its own words (``data/pr_reports.yaml``), and what a GPU run adds. Usage::

    ```{gpu-reference} ch1 timing
    :title: AllPool.forward on a GPU
    ```

Several measurements of one chapter share one report: ``{gpu-reference} ch6 host_time timeline`` with
``:title: A whole run | The first steps`` (one title per measurement, split at ``|``), and optionally
``:caption:`` (how to read each measurement's figure, split the same way), set under its figures. Each figure is
numbered as the page's other figures are (Fig. 1.3), its caption the figure's own title.
"""

from __future__ import annotations

import re
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

from plotly_offline import plotly_node


class GpuReferenceDirective(SphinxDirective):
    required_arguments = 2  # chapter ("ch1"), measurement name ("timing")
    optional_arguments = 4  # more measurements of the same chapter, drawn under one report ("ch6 host_time gpu_ablation")
    option_spec = {"title": directives.unchanged_required, "caption": directives.unchanged_required}

    def run(self) -> list[nodes.Node]:
        from synclab.lab.chapters import import_all
        from synclab.reference import PR_REPORTS_PATH, REFERENCE_DIR, headline_figures, pr_reports

        import_all()  # a stored figure is checked against its chapter's claim

        chapter, *names = self.arguments
        for path in REFERENCE_DIR.glob(f"*/{chapter}.json"):
            self.env.note_dependency(str(path))  # a new reference file rebuilds the page
        self.env.note_dependency(str(PR_REPORTS_PATH))
        report = pr_reports().get(chapter)
        unknown = [name for name in names if report is None or name not in report.bench]
        if unknown:
            return [self.state.document.reporter.warning(
                f"{chapter} {' '.join(unknown)}: no entry in data/pr_reports.yaml (what the PR measured, what a GPU "
                "run adds)", line=self.lineno)]
        titles = [title.strip() for title in self.options.get("title", "").split("|")]  # one per measurement
        if len(titles) != len(names):
            titles = [f"{chapter} {name}" for name in names]
        captions = [caption.strip() for caption in self.options.get("caption", "").split("|")]
        if len(captions) != len(names):
            captions = [""] * len(names)
        from synclab.reference import speedup_table

        drawn: list[nodes.Node] = []
        tables, shown = [], []
        try:
            for name, title, caption in zip(names, titles, captions):
                figures, table = headline_figures(chapter, name, title), speedup_table(chapter, name)
                # how to read the figure, in each GPU's caption (said once after them all, it read as loose text)
                drawn += [self._numbered(figure, caption) for figure in figures]
                tables += [table] if table else []
                shown += [name] if figures or table else []
        except ValueError as exc:
            return [self.state.document.reporter.warning(str(exc), line=self.lineno)]
        box = nodes.container(classes=["synclab-pr-report"])
        said = self.env.temp_data.setdefault("synclab_no_pr_said", set())  # per page: the why once, at its first box
        box += self.parse_text_to_nodes("".join(t + "\n\n" for t in tables)
                                        + _report_markdown(report, names, shown, why=chapter not in said))
        said.add(chapter)
        return drawn + [box]

    def _numbered(self, figure: Any, caption: str = "") -> nodes.figure:
        """``figure`` as a numbered figure of the page (an id makes Sphinx number it), captioned by its title and how to
        read it (``caption``, inline Markdown)."""
        node = nodes.figure(ids=[f"fig-gpu-{self.env.docname.split('/')[-1]}-{self.env.new_serialno('gpu-fig')}"])
        node += plotly_node(figure)
        how, _ = self.state.inline_text(caption, self.lineno) if caption else ([], [])
        node += nodes.caption("", _title_text(figure) + (". " if caption else ""), *how)
        return node


def _title_text(figure: Any) -> str:
    """A plotly figure's title as plain text, its subtitle (the provenance, drawn on the figure) left out."""
    layout = figure["layout"] if isinstance(figure, dict) else figure.layout.to_plotly_json()
    title = layout.get("title", {})
    title = (title.get("text", "") if isinstance(title, dict) else str(title)) or ""
    return " ".join(re.sub(r"<[^>]+>", " ", re.split(r"<br\s*/?>", title)[0]).split())


def _report_markdown(report: Any, names: list[str], shown: list[str], why: bool = True) -> str:
    """The PR's own numbers as a small table, sourced, and what a GPU run of the lab adds (or added) here. Where no
    PR measured the chapter, ``why`` says why (a page's later boxes leave that out: its first said it)."""
    parts: list[str] = []  # paragraphs
    if report.pr is None:
        parts += [f"**No PR measured this.** {report.why[:1].upper()}{report.why[1:]}"] if why else []
    else:
        pr = f"#{report.pr}"
        parts.append(f"**Reported by PR {pr}** ({report.source}): {report.measured}. {report.setup}\n\n"
                     f"| | before {pr} | after {pr} |\n|---|---|---|\n"
                     + "".join(f"| {what} | {before} | {after} |\n" for what, before, after in report.rows)
                     + (f"\n{report.note[0].upper()}{report.note[1:]}" if report.note else ""))
    def adds(which: list[str]) -> str:
        return "; ".join(report.bench[name].rstrip(".") for name in which)

    missing = [name for name in names if name not in shown]
    if shown:
        parts.append(f"Above, from `python -m synclab bench {report.chapter}` on a GPU: {adds(shown)}.")
    held = [name for name in missing if f"{name}_contradicted" in shown]  # drawn above, from a run that failed it
    if held:
        parts.append(f"The {' and '.join(held)} drawn above did not show what was expected of it before the run "
                     "(History says what, and why).")
        missing = [name for name in missing if name not in held]
    if missing:
        what = adds(missing)
        if shown:  # what a later run adds, said as what is missing (a learner read "adds here" as a build note)
            parts.append(f"Not stored yet: {what[0].lower()}{what[1:]}. The GPU runs above were made before the "
                         f"bench measured it; the next run of `python -m synclab bench {report.chapter}` on a machine "
                         "with a GPU stores it, and this page then draws it here.")
        else:
            parts.append(f"*No GPU run of this lab is recorded yet*: a run of `python -m synclab bench "
                         f"{report.chapter}` on a machine with a GPU adds here {what[0].lower()}{what[1:]}.")
    return "\n\n".join(parts)


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("gpu-reference", GpuReferenceDirective)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
