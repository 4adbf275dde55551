"""nbgrader assignments from the same solutions: ``python -m synclab labs --nbgrader DIR``.

Used by the instructors' page (running the lab for a class with nbgrader). Each solution
notebook becomes ``DIR/source/<chapter>/<notebook>.ipynb``, an nbgrader *source* notebook
(``nbgrader generate_assignment <chapter>`` turns it into what students get):

* an exercise cell (``### BEGIN SOLUTION X.Y``) is an **autograded answer**; nbgrader replaces
  the region by its stub, after our hint line ``# Exercise X.Y: YOUR CODE HERE (~N lines)``;
* an exercise's check cell is an **autograder test**, locked, worth the exercise's points
  (:mod:`synclab.lab.exercises`, or the instructor's), rewritten as ``graded("X.Y", lambda: <the check
  call>)`` (:mod:`synclab.lab.grading`: practice in the kernel; the grader scores it,
  :mod:`synclab.lab.nbgrader_judge`); a stretch exercise's cell is worth 0 in the total and its points
  go to the gradebook as extra credit;
* a written answer (``<!-- BEGIN SOLUTION -->`` in markdown) is a **manually graded answer**
  worth 0 points: the lab's checks do not grade prose, so nor does the assignment;
* every other cell is **read-only**; cells tagged ``solution-only`` are left out, as in the lab.

The solution's stored check output must pass (``make solutions``); the points are the exercise's,
so checks may be added or removed without regenerating an assignment. Links to the book and to
``labs/`` become plain text (students have neither folder), or links under ``book_url``.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from synclab.checks import parse_summary
from synclab.lab.exercises import EXERCISES, lab_version, of_chapter, points_of
from synclab.lab.labgen import (_BEGIN, _END, _MD_REGION, SOLUTION_ONLY_TAG, LabgenError, _lab_title, _source,
                            cell_roles, lab_lines, region_task, size_hint)

SCHEMA_VERSION = 3

EXCHANGE = "/srv/nbgrader/exchange"  # where both sides meet unless the instructor says otherwise

CONFIG = '''\
# nbgrader configuration for the Sync Lab course, written by `python -m synclab labs --nbgrader`.
c = get_config()  # noqa: F821 (nbgrader provides it)
c.CourseDirectory.course_id = "synclab"
# The exchange, the same folder in students_nbgrader_config.py: one every user may write to
# (sudo mkdir -p {exchange} && sudo chmod 1777 {exchange}).
c.Exchange.root = "{exchange}"
# Our exercise cells carry their own hint line ("# Exercise X.Y: YOUR CODE HERE (~N lines)").
c.ClearSolutions.code_stub = {{"python": 'raise NotImplementedError("not done yet")'}}
# A chapter's checks may take a minute (each exercise's checks share a 60 s limit); its
# benchmark cells run too. nbgrader's default of 30 s per cell is too short.
c.Execute.timeout = 600
# The grade is the grader's: each exercise judged from the saved notebook in a fresh process. No kernel
# runs the submission (autograde_preprocessors(run_kernel=True) adds one: the feedback then shows every
# cell's run, and the student's code runs in that kernel as your user).
from synclab.lab.nbgrader_judge import autograde_preprocessors  # noqa: E402

c.Autograde.autograde_preprocessors = autograde_preprocessors()
# The grader's worker runs the student's code: run it as a user who can read no course file
# (sudo useradd --system --no-create-home synclab-judge; see the instructors' page).
# c.JudgeChecks.sandbox = ["setpriv", "--reuid=synclab-judge", "--regid=synclab-judge", "--clear-groups", "--"]
'''

STUDENT_CONFIG = '''\
# nbgrader configuration for the students of the Sync Lab course, written by `python -m synclab labs --nbgrader`.
# Put it in the students' image as /etc/jupyter/nbgrader_config.py.
c = get_config()  # noqa: F821 (nbgrader provides it)
c.CourseDirectory.course_id = "synclab"
c.Exchange.root = "{exchange}"  # the instructor's exchange
# The Validate button runs the whole notebook, checks and benchmark cells included: nbgrader's
# default of 30 s per cell is too short for them.
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
            task, unsized = region_task(begin["rest"])
            out.append(f"{begin['indent']}# Exercise {task}: {'YOUR CODE HERE' if unsized else size_hint(region)}")
        out.append(line)
    return "\n".join(out)


def _graded_call(source: str, task: str, where: str, points: float) -> str:
    try:
        ast.parse(source.strip(), mode="eval")
    except SyntaxError:
        raise LabgenError(f"{where}: a check cell must be one expression (the check call) to be graded") from None
    if source.strip() != EXERCISES[task].check:
        raise LabgenError(f"{where}: the check cell of {task} calls {source.strip()!r}, but the grader calls "
                          f"{EXERCISES[task].check!r} (its chapter's module in synclab/lab/course/)")
    return (f'from synclab.lab.grading import graded\n\n'
            f'graded("{task}", lambda: {source.strip()}, points={points:g}, lab_version="{lab_version()}")')


_BOOK_LINK = re.compile(r"\[([^\]]+)\]\(\.\./book/([\w.-]+)\.md\)")


def book_links_as_text(source: str, book_url: str = "") -> str:
    """``source`` with its links to the book's pages pointing under ``book_url``, or as plain text without one."""
    if book_url:
        return _BOOK_LINK.sub(lambda m: f"[{m[1]}]({book_url.rstrip('/')}/book/{m[2]}.html)", source)
    return _BOOK_LINK.sub(lambda m: f"{m[1]} (in the book)", source)


def course_text(source: str, book_url: str = "") -> str:
    """A markdown cell as students of a course read it: no links into folders they do not have."""
    source = book_links_as_text(source, book_url)
    return re.sub(r"`?labs/(\d\d_\w+\.ipynb)`?", r"this notebook", source).replace("`labs/`", "your chapter folders")


def nbgrader_notebook(solution: NotebookNode, source_name: str, points: dict[str, int] | None = None,
                      book_url: str = "") -> NotebookNode:
    """The nbgrader source notebook of ``solution`` (``source_name``: e.g. ``"solutions/06_x.ipynb"``).

    ``points``: the instructor's points per exercise (task -> points), over :mod:`synclab.lab.exercises`'.
    """
    exercise_points(solution, source_name)  # the stored reports must all pass
    roles = cell_roles(solution)
    cells, seen_ids = [], set()
    extra: dict = {}
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
            worth, stretch = points_of(task, points), EXERCISES[task].stretch
            # the cell's own points: Validate compares the practice value with them (a stretch's are 0)
            source = _graded_call(source, task, where, 0 if stretch else worth)
            meta = _meta(f"check-{key}", grade=True, locked=True, points=0 if stretch else worth)
            extra = {"task": task, "lab_version": lab_version(),
                     **({"stretch": True, "stretch_points": worth} if stretch else {})}
        elif cell.cell_type == "markdown" and _MD_REGION.search(source):
            meta = _meta(f"written-{index}", grade=True, solution=True, points=0)
        else:
            if cell.cell_type == "markdown" and not cells:
                source = _lab_title(source)
            if cell.cell_type == "markdown":
                source = course_text(source, book_url)
            if cell.cell_type == "code":
                source = lab_lines(source).replace("load_fixes()", 'load_fixes("..")')  # ../ch1 ... ../ch5
            meta = _meta(f"cell-{cell_id}", locked=True)
        if role == "exercise":  # an exercise may span cells (two methods): answer-3_8, answer-3_8-2, ...
            base, n = meta["grade_id"], 2
            while meta["grade_id"] in seen_ids:
                meta["grade_id"], n = f"{base}-{n}", n + 1
        if meta["grade_id"] in seen_ids:
            raise LabgenError(f"{where}: two cells would share the nbgrader id {meta['grade_id']}")
        seen_ids.add(meta["grade_id"])
        new = {"cell_type": cell.cell_type, "id": cell_id, "source": source,
               "metadata": {"nbgrader": meta, **({"tags": cell.metadata["tags"]} if cell.metadata.get("tags") else {}),
                            **({"synclab": extra} if role == "check" and cell.cell_type == "code" else {})}}
        if cell.cell_type == "code":
            new.update(outputs=[], execution_count=None)
        cells.append(new)
    metadata = {k: solution.metadata[k] for k in ("kernelspec", "language_info") if k in solution.metadata}
    nb = nbformat.from_dict({"nbformat": 4, "nbformat_minor": 5, "metadata": metadata, "cells": cells})
    nbformat.validate(nb)
    return nb


def write_course(root: Path, course_dir: Path, chapters: dict[str, str], points: dict[str, int] | None = None,
                 book_url: str = "", exchange: str = EXCHANGE) -> list[Path]:
    """Write ``course_dir/source/<chapter>/<stem>.ipynb`` for each ``chapter -> stem``, and the two configs
    (the grader's ``nbgrader_config.py``, the students' ``students_nbgrader_config.py``) where there are none."""
    written = []
    for chapter, stem in chapters.items():
        name = f"solutions/{stem}.ipynb"
        nb = nbgrader_notebook(nbformat.read(root / name, as_version=4), name, points, book_url)
        path = course_dir / "source" / chapter / f"{stem}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
        written.append(path)
    for name, text in (("nbgrader_config.py", CONFIG), ("students_nbgrader_config.py", STUDENT_CONFIG)):
        config = course_dir / name
        if not config.exists():  # an instructor's own settings are theirs
            config.write_text(text.format(exchange=exchange))
    return written


def points_by_chapter(chapters: dict[str, str], points: dict[str, int] | None = None) -> dict[str, dict[str, int]]:
    """Each chapter's exercises and their points (what the instructors' page lists)."""
    return {chapter: {e.task: points_of(e.task, points) for e in of_chapter(chapter)} for chapter in chapters}
