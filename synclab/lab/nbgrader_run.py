"""Drive the real nbgrader on a course written by :mod:`synclab.lab.nbgrader_source`.

Used by the instructors' page and ``tests/test_nbgrader.py``: generate a chapter's assignment,
hand in submissions (the solution, the untouched release, a planted bug), autograde them and
read each check cell's score from nbgrader's gradebook. ``python -m synclab autograde-times``
records how long autograding one submission of each chapter takes (``data/grading/``).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat

from synclab.lab.nbgrader_source import write_course
from synclab.timing import reader_environment

GRADING_DIR = Path(__file__).resolve().parents[2] / "data" / "grading"
Scores = dict[str, tuple[float, float]]  # grade cell id -> (score, max score)


def nbgrader(course: Path, *args: str, timeout_s: float = 1800) -> subprocess.CompletedProcess:
    """Run ``nbgrader ARGS`` in ``course`` with this Python's tools on PATH (nbgrader calls ``alembic``)."""
    bin_dir = str(Path(sys.executable).parent)
    env = {**reader_environment(), "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    proc = subprocess.run([os.path.join(bin_dir, "nbgrader"), *args], cwd=course, env=env, capture_output=True,
                          text=True, timeout=timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def release(root: Path, course: Path, chapter: str, stem: str) -> nbformat.NotebookNode:
    """Write the chapter's source into ``course``, run ``generate_assignment``; the released notebook."""
    write_course(root, course, {chapter: stem})
    nbgrader(course, "generate_assignment", chapter, "--force")
    return nbformat.read(course / "release" / chapter / f"{stem}.ipynb", as_version=4)


def solved(course: Path, chapter: str, stem: str, released: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The released notebook with every answer cell filled in from the source (the solution)."""
    source = nbformat.read(course / "source" / chapter / f"{stem}.ipynb", as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in source.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    nb = copy.deepcopy(released)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell.source = answers[grade_id]
    return nb


def hand_in(course: Path, chapter: str, stem: str, student: str, nb: nbformat.NotebookNode) -> None:
    folder = course / "submitted" / student / chapter
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / f"{stem}.ipynb")


def autograde(course: Path, chapter: str, stem: str) -> dict[str, Scores]:
    """``nbgrader autograde`` every submission of ``chapter``; each student's score per grade cell."""
    from nbgrader.api import Gradebook

    nbgrader(course, "autograde", chapter, "--force")
    scores: dict[str, Scores] = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for student in sorted(p.name for p in (course / "submitted").iterdir()):
            notebook = gradebook.find_submission_notebook(stem, chapter, student)
            scores[student] = {g.name: (g.score, g.max_score) for g in notebook.grades}
    return scores


def time_autograde(root: Path, course: Path, chapters: dict[str, str]) -> dict:
    """Autograde the solution of each chapter alone; seconds per notebook and the score (full marks expected)."""
    from synclab.provenance import Provenance

    rows = {}
    for chapter, stem in chapters.items():
        released = release(root, course, chapter, stem)
        hand_in(course, chapter, stem, "solution", solved(course, chapter, stem, released))
        started = time.perf_counter()
        scores = autograde(course, chapter, stem)["solution"]
        seconds = time.perf_counter() - started
        score, best = sum(s for s, _ in scores.values()), sum(m for _, m in scores.values())
        if score != best:
            raise RuntimeError(f"{chapter}: the solution scored {score}/{best}: {scores}")
        rows[chapter] = {"notebook": f"{stem}.ipynb", "seconds": round(seconds, 1), "points": best}
        print(f"{chapter}: {seconds:.1f} s, {score:g}/{best:g} points", file=sys.stderr, flush=True)
    import nbgrader as nbgrader_package

    return {"provenance": Provenance.here().to_dict(), "nbgrader": nbgrader_package.__version__, "chapters": rows}


def record_autograde_times(data: dict, out_dir: Path = GRADING_DIR) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "autograde.json"
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path
