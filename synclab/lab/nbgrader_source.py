"""nbgrader assignments from the same solutions: ``python -m synclab labs --nbgrader DIR``.

Used by the instructors' page (running the lab for a class with nbgrader). Each solution
notebook becomes ``DIR/source/<chapter>/<notebook>.ipynb``, an nbgrader *source* notebook
(``nbgrader generate_assignment <chapter>`` turns it into what students get):

* an exercise cell (``### BEGIN SOLUTION X.Y``) is an **autograded answer**; nbgrader replaces
  the region by its stub, after our hint line ``# Exercise X.Y: YOUR CODE HERE (~N lines)``;
* an exercise's check cell is an **autograder test**, locked, worth the points of its checks,
  rewritten as ``graded(lambda: <the check call>, points=N)`` (:mod:`synclab.lab.grading`);
* a written answer (``<!-- BEGIN SOLUTION -->`` in markdown) is a **manually graded answer**
  worth 0 points: the lab's checks do not grade prose, so nor does the assignment;
* every other cell is **read-only**; cells tagged ``solution-only`` are left out, as in the lab.

An exercise's points are read from the solution's stored check output ("5/5 checks passed"),
which ``pytest --nbval`` keeps equal to what the checks report today; a check cell whose
checks later change refuses to grade (:class:`synclab.lab.grading.GradingError`) until the
assignment is regenerated. The regular labs do not change.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from synclab.checks import parse_summary
from synclab.lab.labgen import (_BEGIN, _END, _MD_REGION, SOLUTION_ONLY_TAG, LabgenError, _lab_title, _source,
                            cell_roles, lab_lines, size_hint)

SCHEMA_VERSION = 3

CONFIG = '''\
# nbgrader configuration for the Sync Lab course, written by `python -m synclab labs --nbgrader`.
c = get_config()  # noqa: F821 (nbgrader provides it)
c.CourseDirectory.course_id = "synclab"
# Our exercise cells carry their own hint line ("# Exercise X.Y: YOUR CODE HERE (~N lines)").
c.ClearSolutions.code_stub = {"python": 'raise NotImplementedError("not done yet")'}
# A chapter's checks may take a minute (each exercise's checks share a 60 s limit); its
# benchmark cells run too. nbgrader's default of 30 s per cell is too short.
c.Execute.timeout = 600
'''


def exercise_points(solution: NotebookNode, where: str) -> dict[str, int]:
    """Points of each exercise, from the solution's stored check reports (which must all pass)."""
    points = {}
    roles = cell_roles(solution)
    for cell in solution.cells:
        role, task = roles.get(cell.get("id", ""), ("other", ""))
        if role != "check":
            continue
        texts = [o["data"].get("text/plain", "") for o in cell.get("outputs", []) if o.get("output_type") == "execute_result"]
        found = parse_summary(texts[0]) if texts else None
        if found is None:
            raise LabgenError(f"{where}: the check cell of exercise {task} has no stored report; run `make solutions`")
        passed, total, task_points = found
        if passed != total:
            raise LabgenError(f"{where}: the stored report of exercise {task} does not pass: {passed}/{total} checks")
        points[task] = task_points
    return points


def _meta(grade_id: str, *, grade: bool = False, solution: bool = False, locked: bool = False,
          points: int | None = None) -> dict:
    meta = {"schema_version": SCHEMA_VERSION, "grade": grade, "solution": solution, "locked": locked,
            "task": False, "grade_id": grade_id}
    if points is not None:
        meta["points"] = points
    return meta


def _hinted(source: str) -> str:
    """Each solution region preceded by ``# Exercise X.Y: YOUR CODE HERE (~N lines)`` (nbgrader keeps it)."""
    lines, out = source.split("\n"), []
    for i, line in enumerate(lines):
        begin = _BEGIN.match(line)
        if begin:
            region = []
            for later in lines[i + 1:]:
                if _END.match(later):
                    break
                region.append(later)
            out.append(f"{begin['indent']}# Exercise {begin['rest'].strip()}: {size_hint(region)}")
        out.append(line)
    return "\n".join(out)


def _graded_call(source: str, points: int, where: str) -> str:
    try:
        ast.parse(source.strip(), mode="eval")
    except SyntaxError:
        raise LabgenError(f"{where}: a check cell must be one expression (the check call) to be graded") from None
    return f"from synclab.lab.grading import graded\n\ngraded(lambda: {source.strip()}, points={points})"


def nbgrader_notebook(solution: NotebookNode, source_name: str) -> NotebookNode:
    """The nbgrader source notebook of ``solution`` (``source_name``: e.g. ``"solutions/06_x.ipynb"``)."""
    points = exercise_points(solution, source_name)
    roles = cell_roles(solution)
    cells, seen_ids = [], set()
    for index, cell in enumerate(solution.cells):
        if SOLUTION_ONLY_TAG in cell.get("metadata", {}).get("tags", []):
            continue
        where = f"{source_name}, cell {index}"
        source = _source(cell)
        role, task = roles.get(cell.get("id", ""), ("other", ""))
        cell_id = cell.get("id") or f"cell-{index}"
        key = task.replace(".", "_").replace(",", "-")
        if cell.cell_type == "code" and role == "exercise":
            source, meta = _hinted(source), _meta(f"answer-{key}", solution=True)
        elif cell.cell_type == "code" and role == "check":
            source = _graded_call(source, points[task], where)
            meta = _meta(f"check-{key}", grade=True, locked=True, points=points[task])
        elif cell.cell_type == "markdown" and _MD_REGION.search(source):
            meta = _meta(f"written-{index}", grade=True, solution=True, points=0)
        else:
            if cell.cell_type == "markdown" and not cells:
                source = _lab_title(source)
            if cell.cell_type == "code":
                source = lab_lines(source)
            meta = _meta(f"cell-{cell_id}", locked=True)
        if role == "exercise":  # an exercise may span cells (two methods): answer-3_8, answer-3_8-2, ...
            base, n = meta["grade_id"], 2
            while meta["grade_id"] in seen_ids:
                meta["grade_id"], n = f"{base}-{n}", n + 1
        if meta["grade_id"] in seen_ids:
            raise LabgenError(f"{where}: two cells would share the nbgrader id {meta['grade_id']}")
        seen_ids.add(meta["grade_id"])
        new = {"cell_type": cell.cell_type, "id": cell_id, "source": source,
               "metadata": {"nbgrader": meta, **({"tags": cell.metadata["tags"]} if cell.metadata.get("tags") else {})}}
        if cell.cell_type == "code":
            new.update(outputs=[], execution_count=None)
        cells.append(new)
    metadata = {k: solution.metadata[k] for k in ("kernelspec", "language_info") if k in solution.metadata}
    nb = nbformat.from_dict({"nbformat": 4, "nbformat_minor": 5, "metadata": metadata, "cells": cells})
    nbformat.validate(nb)
    return nb


def write_course(root: Path, course_dir: Path, chapters: dict[str, str]) -> list[Path]:
    """Write ``course_dir/source/<chapter>/<stem>.ipynb`` for each ``chapter -> stem``, and a config if none."""
    written = []
    for chapter, stem in chapters.items():
        name = f"solutions/{stem}.ipynb"
        nb = nbgrader_notebook(nbformat.read(root / name, as_version=4), name)
        path = course_dir / "source" / chapter / f"{stem}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
        written.append(path)
    config = course_dir / "nbgrader_config.py"
    if not config.exists():  # an instructor's own settings are theirs
        config.write_text(CONFIG)
    return written


def points_by_chapter(root: Path, chapters: dict[str, str]) -> dict[str, dict[str, int]]:
    """Each chapter's exercises and their points (what the instructors' page lists)."""
    return {chapter: exercise_points(nbformat.read(root / f"solutions/{stem}.ipynb", as_version=4), stem)
            for chapter, stem in chapters.items()}
