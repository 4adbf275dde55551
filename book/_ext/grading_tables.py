"""``{grading-tables}``: the instructors' page's two tables, read from files, never typed in.

* points: each chapter's exercises and points, from the solutions' stored check reports
  (``synclab.lab.nbgrader_source.points_by_chapter``, the same numbers nbgrader's cells get);
* autograde time per notebook: what ``python -m synclab autograde-times`` stored in
  ``data/grading/autograde.json`` (with the machine, torch version and date), or one line
  saying how to record it; and from the same file, the hours a class of 200 takes
  (:func:`class_arithmetic`, its formula printed with it).
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

        for course in sorted((ROOT / "synclab" / "lab" / "course").glob("*.py")):  # each chapter's exercises
            self.env.note_dependency(str(course))
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
                               "as the course's configuration does it (the grader's worker, no kernel).")
        else:
            note += nodes.Text("No autograde times are recorded yet: run python -m synclab autograde-times.")
        out.append(note)
        if times and "parallel" in times:
            paragraph = nodes.paragraph(classes=["synclab-class-hours"])
            for n, part in enumerate(class_arithmetic(times, CLASS_SIZE).split("`")):
                paragraph += nodes.literal(part, part) if n % 2 else nodes.Text(part)  # `command` as code
            out.append(paragraph)
        return out


CLASS_SIZE = 200  # the class the issue that asked for this page had in mind


def class_arithmetic(times: dict, students: int, cores: int = 16) -> str:
    """Hours to autograde ``students`` × every chapter, from the stored times, with the formula used."""
    chapters = times["chapters"]
    one_student = sum(row["seconds"] for row in chapters.values())
    parallel = times["parallel"]
    serial_h = students * one_student / 3600
    here_h = serial_h / parallel["speedup"]
    # each job's share of the speedup, per core; above 1 where jobs overlap nbgrader's start-up and waits,
    # which a model for more cores does not count on
    per_core = min(1.0, parallel["speedup"] / parallel["cores"])
    there_h = serial_h / (per_core * cores)
    return (f"A class of {students} handing in all {len(chapters)} chapters makes {students * len(chapters):,} "
            f"submissions. One at a time, at the times above ({one_student:.0f} s for one student's "
            f"{len(chapters)} chapters), that is {students} × {one_student:.0f} s = {serial_h:.1f} hours. "
            f"`python -m synclab autograde CHAPTER --jobs N` grades N at a time: {parallel['submissions']} "
            f"submissions of {parallel['chapter']}, {parallel['jobs']} at a time on {parallel['cores']} cores, went "
            f"{parallel['speedup']:g}× as fast as one at a time, so the class takes {serial_h:.1f} h ÷ "
            f"{parallel['speedup']:g} = {here_h:.1f} hours on that machine. For a bigger grader, count at most one "
            f"core's worth per job (here {parallel['speedup'] / parallel['cores']:.2f} per core, so the model "
            f"counts {per_core:.2f}): with {cores} cores and `--jobs {cores}`, {serial_h:.1f} h ÷ "
            f"({per_core:.2f} × {cores}) = {there_h:.1f} hours.")


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("grading-tables", GradingTablesDirective)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
