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
import secrets
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import nbformat

from synclab.lab.judge import GRADING_SEED_ENV, REFERENCE_CACHE_ENV
from synclab.lab.nbgrader_source import write_course
from synclab.run_modes import reader_environment

GRADING_DIR = Path(__file__).resolve().parents[2] / "data" / "grading"
Scores = dict[str, tuple[float, float]]  # grade cell id -> (score, max score)


def _nbgrader_proc(course: Path, *args: str, timeout_s: float = 1800, threads: int | None = None,
                   extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    bin_dir = str(Path(sys.executable).parent)
    env = {**reader_environment(), "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), **(extra_env or {})}
    if threads is not None:  # torch's intra-op threads in the kernel and the grader's worker it starts
        env["OMP_NUM_THREADS"] = str(threads)
    return subprocess.run([os.path.join(bin_dir, "nbgrader"), *args], cwd=course, env=env, capture_output=True,
                          text=True, timeout=timeout_s)


def nbgrader(course: Path, *args: str, timeout_s: float = 1800) -> subprocess.CompletedProcess:
    """Run ``nbgrader ARGS`` in ``course`` with this Python's tools on PATH (nbgrader calls ``alembic``)."""
    proc = _nbgrader_proc(course, *args, timeout_s=timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def release(root: Path, course: Path, chapter: str, stem: str) -> nbformat.NotebookNode:
    """Write the chapter's source into ``course`` (its exchange inside it), run ``generate_assignment``; the
    released notebook."""
    write_course(root, course, {chapter: stem}, exchange=str(course / "exchange"))
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
    """``nbgrader autograde`` every submission of ``chapter``, one at a time; each student's score per grade cell
    (in parallel: :func:`autograde_students`)."""
    nbgrader(course, "autograde", chapter, "--force")
    return gradebook_scores(course, chapter, stem)


def gradebook_scores(course: Path, chapter: str, stem: str) -> dict[str, Scores]:
    """Each student's score per grade cell of ``chapter``'s notebook ``stem``, as nbgrader's gradebook holds it."""
    from nbgrader.api import Gradebook

    scores: dict[str, Scores] = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for student in submitted_students(course, chapter):
            notebook = gradebook.find_submission_notebook(stem, chapter, student)
            scores[student] = {g.name: (g.score, g.max_score) for g in notebook.grades}
    return scores


@dataclass(frozen=True)
class StudentRun:
    """One ``nbgrader autograde CHAPTER --student S``: whether it finished, how long it took, where its log is."""

    student: str
    ok: bool
    seconds: float
    log: Path


def submitted_students(course: Path, chapter: str) -> list[str]:
    """The students with a submission of ``chapter`` in ``course/submitted/``."""
    folder = course / "submitted"
    return sorted(p.name for p in folder.iterdir() if (p / chapter).is_dir()) if folder.is_dir() else []


def autograde_students(course: Path, chapter: str, students: list[str], jobs: int, force: bool = False,
                       on_done: Callable[[StudentRun], None] | None = None) -> list[StudentRun]:
    """``nbgrader autograde CHAPTER --student S`` for each student, ``jobs`` at a time; one log file per student.

    nbgrader autogrades one submission per process and keeps its gradebook in SQLite, which takes one writer
    at a time: each process writes briefly at its start and end, so a handful of them seldom wait, and one that
    timed out waiting for the lock ("database is locked") is run again once. The gradebook is opened once
    first, so that its tables exist before the processes start. Each process gets its share of the cores
    as torch threads: more threads than cores make torch's workers wait on each other, and a batch of
    chapter 6 ran slower four at a time than one at a time on two cores until they had one thread each.
    """
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}"):
        pass
    threads = max(1, (os.cpu_count() or 1) // max(1, jobs))
    logs = course / "autograde-logs" / chapter
    logs.mkdir(parents=True, exist_ok=True)
    # one seed and one judging of the right answers for the whole run, whichever process comes first
    shared_env = {GRADING_SEED_ENV: str(secrets.randbelow(10**6)),
                  REFERENCE_CACHE_ENV: str(course / "autograde-logs" / ".right-answers")}

    def one(student: str) -> StudentRun:
        log = logs / f"{student}.log"
        started = time.perf_counter()
        for attempt in range(2):
            proc = _nbgrader_proc(course, "autograde", chapter, "--student", student, *(["--force"] if force else []),
                                  threads=threads, extra_env=shared_env)
            log.write_text(proc.stdout + proc.stderr)
            if proc.returncode == 0 or "database is locked" not in proc.stdout + proc.stderr:
                break
        run = StudentRun(student, proc.returncode == 0, time.perf_counter() - started, log)
        if on_done is not None:
            on_done(run)
        return run

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, students))


PARALLEL_BATCH = 8  # submissions in the parallel timing: enough for every job to take several


def _full_marks(chapter: str, stem: str, scores: Scores) -> tuple[float, float]:
    """(core points, extra credit) of a solution's ``scores``; raises unless each check cell got all its points."""
    from synclab.lab.exercises import EXERCISES
    from synclab.lab.nbgrader_source import points_by_chapter

    points = points_by_chapter({chapter: stem})[chapter]
    expected = {f"check-{t.replace('.', '_')}": (float(n), 0.0 if EXERCISES[t].stretch else float(n))
                for t, n in points.items()}
    got = {cell: score for cell, score in scores.items() if cell.startswith("check-")}  # written answers: by hand
    if got != expected:
        raise RuntimeError(f"{chapter}: the solution scored {got}, not {expected}")
    core = sum(best for _, best in expected.values())
    return core, sum(score for score, _ in expected.values()) - core


def time_autograde(root: Path, course: Path, chapters: dict[str, str], jobs: int = 0) -> dict:
    """Autograde the solution of each chapter alone (seconds per notebook, full marks checked), then a batch of
    :data:`PARALLEL_BATCH` solutions of the slowest chapter ``jobs`` at a time (default: one per core)."""
    from synclab.provenance import Provenance

    rows = {}
    for chapter, stem in chapters.items():
        released = release(root, course, chapter, stem)
        hand_in(course, chapter, stem, "solution", solved(course, chapter, stem, released))
        started = time.perf_counter()
        scores = autograde(course, chapter, stem)["solution"]
        seconds = time.perf_counter() - started
        core, extra = _full_marks(chapter, stem, scores)
        rows[chapter] = {"notebook": f"{stem}.ipynb", "seconds": round(seconds, 1), "points": core,
                         "extra_credit": extra}
        print(f"{chapter}: {seconds:.1f} s, {core:g} points (+{extra:g} extra credit)", file=sys.stderr, flush=True)
    slowest = max(rows, key=lambda c: rows[c]["seconds"])
    stem = chapters[slowest]
    jobs = jobs or os.cpu_count() or 1
    released = nbformat.read(course / "release" / slowest / f"{stem}.ipynb", as_version=4)
    students = [f"batch{n}" for n in range(PARALLEL_BATCH)]
    for student in students:
        hand_in(course, slowest, stem, student, solved(course, slowest, stem, released))
    started = time.perf_counter()
    runs = autograde_students(course, slowest, students, jobs, force=True)
    seconds = time.perf_counter() - started
    if not all(run.ok for run in runs):
        raise RuntimeError(f"{slowest}: a parallel autograde failed: {[r.log for r in runs if not r.ok]}")
    for student in students:
        _full_marks(slowest, stem, gradebook_scores(course, slowest, stem)[student])
    parallel = {"chapter": slowest, "submissions": len(students), "jobs": jobs, "cores": os.cpu_count(),
                "seconds": round(seconds, 1), "seconds_per_submission": round(seconds / len(students), 1),
                "speedup": round(rows[slowest]["seconds"] * len(students) / seconds, 2)}
    print(f"{slowest}, {len(students)} submissions {jobs} at a time: {seconds:.1f} s "
          f"({parallel['speedup']}x one at a time)", file=sys.stderr, flush=True)
    import nbgrader as nbgrader_package

    return {"provenance": Provenance.here().to_dict(), "nbgrader": nbgrader_package.__version__, "chapters": rows,
            "parallel": parallel}


def record_autograde_times(data: dict, out_dir: Path = GRADING_DIR) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "autograde.json"
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path
