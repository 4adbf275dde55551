"""What an nbgrader check cell runs in the student's kernel: practice, never the grade.

Used by the instructors' page (running the lab for a class with nbgrader). A check cell of an
nbgrader assignment (written by :mod:`synclab.lab.nbgrader_source`) reads::

    graded("6.1", lambda: ch6.check_sync_hunt(clean_runner), lab_version="3f2a...")

While the student works (and when nbgrader's Validate button runs the notebook), it runs the checks in
the kernel and shows the same report as the lab: that is practice, and says so. The grade is computed
by the grader (:mod:`synclab.lab.nbgrader_judge`), which replaces this cell's outputs and value at
autograding with its own verdict, judged from the saved notebook in a process the kernel never touched;
during autograding this cell therefore runs no checks. A course whose nbgrader configuration lacks the
grader gets an error here instead of a grade, so a misconfigured course scores 0, visibly, not full marks.

Two things nbgrader would misread are kept out of the cell: anything written to stderr (a warning from
the student's code) is shown on stdout instead, and the cell's value is always a number.
"""

from __future__ import annotations

import contextlib
import io
import os
import warnings
from typing import Callable

from synclab.checks import CheckReport


class GradingError(RuntimeError):
    """The assignment cannot be graded as configured (no grader in nbgrader's chain, a check cell gone wrong)."""


def graded(task: str, run_check: Callable[[], CheckReport], points: float | None = None,
           lab_version: str = "") -> float:
    """Practice: run exercise ``task``'s checks here, show their report, return what they would earn.

    The value is the cell's ``points`` times the share of checks passed (the share alone without ``points``):
    nbgrader's Validate button compares it with the cell's points and calls a cell that earns less "failed".
    At autograding the grader computes the grade instead, from the saved notebook.
    """
    from IPython.display import display

    from synclab.lab.exercises import lab_version as installed

    if os.environ.get("NBGRADER_EXECUTION") == "autograde":
        raise GradingError(f"Exercise {task} is graded by the grader, not in this kernel: the course's "
                           "nbgrader_config.py must set c.Autograde.autograde_preprocessors = autograde_preprocessors() "
                           "(from synclab.lab.nbgrader_judge)")
    if lab_version and lab_version != installed():
        print(f"careful: this assignment was generated with lab version {lab_version}, but this machine runs "
              f"{installed()}: tell your instructor (the grader runs the assignment's version)")
    stderr = io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stderr(stderr):
        warnings.simplefilter("always")
        report = run_check()
    if not isinstance(report, CheckReport):
        raise GradingError(f"a check cell must return a check report, got {type(report).__name__}")
    display(report)
    noise = stderr.getvalue().strip().splitlines() + [f"{w.category.__name__}: {w.message}" for w in caught]
    if noise:
        print("the code under test wrote (not counted against the grade):\n  " + "\n  ".join(noise[:5]))
    print(f"practice: {report.earned}/{report.points} of Exercise {task}'s checks passed in this kernel; your grade "
          "is computed by the grader from your saved notebook")
    share = report.earned / report.points if report.points else 0.0
    return round(share * points, 2) if points is not None else round(share, 4)
