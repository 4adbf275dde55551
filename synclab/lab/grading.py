"""Grades from the chapters' checks: what nbgrader's autograded cells run.

Used by the instructors' page (running the lab for a class with nbgrader). A check cell of an
nbgrader assignment (written by :mod:`synclab.lab.nbgrader_source`) reads::

    graded(lambda: ch6.check_sync_hunt(clean_runner), points=4)

It shows the reader the same report as the lab, then evaluates to the points earned. nbgrader
takes a grade cell's numeric result as partial credit, so a submission loses exactly the
points of the checks it fails. Two things nbgrader would misread are kept out of the cell:

* anything written to stderr (a warning from the reader's code) makes nbgrader score the cell 0:
  it is caught and shown on stdout instead;
* a result that is not a number makes nbgrader give full marks: the cell's value is always a float.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from typing import Callable

from synclab.checks import CheckReport


class GradingError(RuntimeError):
    """The assignment and the checks disagree (regenerate the assignment)."""


def graded(run_check: Callable[[], CheckReport], points: int) -> float:
    """Run one exercise's checks, show their report, return the points earned (out of ``points``)."""
    from IPython.display import display

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
    if report.points != points:
        raise GradingError(f"this cell was generated for {points} points, but its checks now carry {report.points}: "
                           "regenerate the assignment (python -m synclab labs --nbgrader DIR)")
    return float(report.earned)
