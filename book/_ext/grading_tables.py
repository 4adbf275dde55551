"""``{grading-tables}``: the instructors' page's two tables, read from files, never typed in.

* points: each chapter's exercises and points, from the solutions' stored check reports
  (``synclab.lab.nbgrader_source.points_by_chapter``, the same numbers nbgrader's cells get);
* autograde time per notebook: what ``python -m synclab autograde-times`` stored in
  ``data/grading/autograde.json`` (with the machine, torch version and date), or one line
  saying how to record it.
"""

from __future__ import annotations

import json
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective


def _table(header: list[str], rows: list[list[str | nodes.Node]]) -> nodes.table:
    """A table of ``rows``: a cell is text, or a node (a file name as code, which may break to fit the page)."""
    table = nodes.table()
    group = nodes.tgroup(cols=len(header))
    table += group
    group += [nodes.colspec(colwidth=1) for _ in header]
    head, body = nodes.thead(), nodes.tbody()
    group += [head, body]
    for container, cells in [(head, header)] + [(body, row) for row in rows]:
        row_node = nodes.row()
        for cell in cells:
            entry = nodes.entry()
            entry += nodes.paragraph("", "", cell) if isinstance(cell, nodes.Node) else nodes.paragraph(text=cell)
            row_node += entry
        container += row_node
    return table


class GradingTablesDirective(SphinxDirective):
    def run(self) -> list[nodes.Node]:
        from synclab.lab.cli import CHAPTERS, ROOT
        from synclab.lab.nbgrader_run import GRADING_DIR
        from synclab.lab.nbgrader_source import points_by_chapter
        from synclab.provenance import Provenance

        from synclab.lab.exercises import EXERCISES

        self.env.note_dependency(str(ROOT / "synclab" / "lab" / "exercises.py"))
        stored = GRADING_DIR / "autograde.json"
        self.env.note_dependency(str(stored))
        points = points_by_chapter(CHAPTERS)
        times = json.loads(stored.read_text()) if stored.exists() else None
        rows = []
        for chapter, tasks in points.items():
            timed = (times or {}).get("chapters", {}).get(chapter)
            notebook = f"{CHAPTERS[chapter]}.ipynb"
            core = {t: n for t, n in tasks.items() if not EXERCISES[t].stretch}
            stretch = {t: n for t, n in tasks.items() if EXERCISES[t].stretch}
            rows.append([chapter, nodes.literal(notebook, notebook),
                         ", ".join(f"{task}: {n}" for task, n in core.items()), str(sum(core.values())),
                         ", ".join(f"{task}: {n}" for task, n in stretch.items()) or "none",
                         f"{timed['seconds']:.0f} s" if timed else "not recorded"])
        out: list[nodes.Node] = [_table(["assignment", "notebook", "core exercises: points", "total",
                                         "stretch (extra credit)", "autograde time (one submission)"], rows)]
        note = nodes.paragraph(classes=["synclab-grading-provenance"])
        if times:
            label = Provenance.from_dict(times["provenance"]).label
            note += nodes.Text(f"Autograde times measured by python -m synclab autograde-times with nbgrader "
                               f"{times['nbgrader']} on {label}: each chapter's solution autograded alone, "
                               "kernel start and every cell included.")
        else:
            note += nodes.Text("No autograde times are recorded yet: run python -m synclab autograde-times.")
        return out + [note]


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("grading-tables", GradingTablesDirective)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
