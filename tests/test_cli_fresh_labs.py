"""``python -m synclab check`` on every fresh lab: it runs top to bottom and names each unfinished exercise.

Files of their own (a kernel per chapter, seconds each), so that the test workers share the slow files evenly: this
one runs chapters 0, 1, 3 and 5, ``test_cli_fresh_labs_more.py`` the others (the suite hands out whole files).
"""

from __future__ import annotations

import nbformat
import pytest

from tests.test_cli import SOLUTIONS, solution_regions, synclab

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)


HERE = [s for s in SOLUTIONS if s.stem[:2] in ("00", "01", "03", "05")]


@pytest.mark.slow
@pytest.mark.parametrize("solution", HERE, ids=[s.stem for s in HERE])
def test_a_fresh_lab_runs_top_to_bottom_naming_the_exercises(solution):
    check_fresh_lab(solution)


def check_fresh_lab(solution):
    """Every cell of every fresh lab runs: the checks say "not implemented", the profiles show the baselines."""
    proc = synclab("check", f"labs/{solution.name}")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    tasks, _ = solution_regions(nbformat.read(solution, as_version=4))
    for task in tasks:
        assert f"not implemented yet (Exercise {task}" in proc.stdout, proc.stdout  # and where, when it can tell
    assert "SOME CHECKS DID NOT PASS" in proc.stdout
    assert "ALL CHECKS PASSED" not in proc.stdout
    assert "Traceback" not in proc.stdout
    assert "stopped at an unfinished exercise" not in proc.stdout, proc.stdout  # no profiling cell raised
    assert "cells that did not finish" not in proc.stdout, proc.stdout
