"""Every exercise of the lab, declared once: its chapter, whether it is core or a stretch, its points, what it defines.

Used by the grader (:mod:`synclab.lab.judge`), ``python -m synclab check`` and the nbgrader course
(the instructors' page). The lab's notebooks name each exercise by its task ID (``1.2``): the book's
heading, the lab's stub, its check and its solution. This table adds what grading needs and the
notebooks do not say:

* **points**: what the exercise is worth; each of its checks earns a share, in proportion to the
  check's weight (:attr:`synclab.checks.Check.points`), so a failed check costs its share of this
  exercise and nothing else;
* **stretch**: a stretch exercise is extra credit, graded apart from the core and worth less than
  every core exercise of its chapter (an instructor may reweight either, see the instructors' page);
* **defines**: the top-level names its answer cells define, which the check call is handed (the grader's stand-ins
  for them, the answer itself running in a process of its own);
* **check**: the call its check cell makes, the one expression the grader evaluates.
"""

from __future__ import annotations

from synclab.lab.chapters import REGISTRY, Exercise

# The registry's order, each chapter's exercises from its module in synclab/lab/course/ (its registry entry's).
# Every answer runs in a process of its own (synclab.lab.judged_apart). An answer that is code the checks run
# (a step, a pooler, a class) is reached through the chapter's runners, named in its exercise.
EXERCISES: dict[str, Exercise] = {e.task: e for chapter in REGISTRY for e in chapter.exercises}


def of_chapter(chapter: str) -> list[Exercise]:
    """The chapter's exercises, in the notebook's order."""
    return [e for e in EXERCISES.values() if e.chapter == chapter]


def chapter_of_task(task: str) -> str:
    return EXERCISES[task].chapter


def stretch_tasks() -> set[str]:
    return {t for t, e in EXERCISES.items() if e.stretch}


def points_of(task: str, overrides: dict[str, int] | None = None) -> int:
    """The exercise's points, or the instructor's (``overrides``: task -> points)."""
    return (overrides or {}).get(task, EXERCISES[task].points)


def lab_version() -> str:
    """A digest of the package's code: the version the students' image and the grader must share.

    The instructors' page says to pin one version on both sides; an assignment records the version it was
    generated with, and the grader refuses to grade one generated with another.
    """
    import hashlib
    from pathlib import Path

    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]
