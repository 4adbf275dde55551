"""``python -m synclab check`` on the labs: unfinished, one task, JSON with points.

Split from ``test_cli.py`` so that the two halves run on two workers (each test executes a
notebook in a fresh kernel: marked slow).
"""

from __future__ import annotations

import os

import nbformat
import pytest

from tests.test_cli import ROOT, SOLUTIONS, solution_regions, synclab


@pytest.mark.slow
@pytest.mark.parametrize("solution", SOLUTIONS, ids=[s.stem for s in SOLUTIONS])
def test_check_unfinished_lab_fails_naming_the_exercises(solution):
    """Every exercise of every lab (profiling cells left out); the primer's whole lab below."""
    proc = synclab("check", f"labs/{solution.name}", "--checks-only")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    tasks, _ = solution_regions(nbformat.read(solution, as_version=4))
    for task in tasks:
        assert f"not implemented yet (Exercise {task})" in proc.stdout, proc.stdout
    assert "SOME CHECKS DID NOT PASS" in proc.stdout
    assert "ALL CHECKS PASSED" not in proc.stdout
    assert "Traceback" not in proc.stdout


@pytest.mark.slow
def test_check_a_whole_unfinished_lab_fails_without_a_traceback():
    proc = synclab("check", "labs/00_primer.ipynb")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "not implemented yet (Exercise 0.1)" in proc.stdout and "not implemented yet (Exercise 0.2)" in proc.stdout
    assert "SOME CHECKS DID NOT PASS" in proc.stdout and "Traceback" not in proc.stdout


@pytest.mark.slow
def test_check_one_task_runs_only_what_it_needs():
    proc = synclab("check", "solutions/04_reverse_placeholder_scans.ipynb", "--task", "4.1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Exercise 4.1" in proc.stdout and "Exercise 4.2" not in proc.stdout  # 4.2's check cell did not run
    assert "ALL CHECKS PASSED" in proc.stdout


@pytest.mark.slow
def test_check_json_reports_points_per_check_and_scores_a_broken_exercise_zero(tmp_path):
    """0.1 does not even parse (its check cell then fails: 0 of its 5 points), 0.2 is right (1 point)."""
    import json

    lab = nbformat.read(ROOT / "labs" / "00_primer.ipynb", as_version=4)
    solution = nbformat.read(ROOT / "solutions" / "00_primer.ipynb", as_version=4)
    answer_02 = next(c.source for c in solution.cells if "### BEGIN SOLUTION 0.2" in c.source)
    for cell in lab.cells:
        if 'raise NotImplementedError("Exercise 0.1")' in cell.source:
            cell.source = cell.source.replace('raise NotImplementedError("Exercise 0.1")', "return (")
        elif 'raise NotImplementedError("Exercise 0.2")' in cell.source:
            cell.source = answer_02
    path = ROOT / "labs" / f".test_json_{os.getpid()}.ipynb"  # beside the labs: it finds its solution
    nbformat.write(lab, path)
    try:
        proc = synclab("check", str(path.relative_to(ROOT)), "--json")
    finally:
        path.unlink()
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)  # stdout is JSON only
    assert (report["points"], report["earned"], report["passed"]) == (6, 1, False)
    by_task = {}
    for check in report["checks"]:
        assert set(check) == {"task", "name", "status", "passed", "points", "earned", "message"}
        by_task.setdefault(check["task"], []).append(check)
    (missing,) = by_task["0.1"]
    assert (missing["status"], missing["points"], missing["earned"]) == ("not run", 5, 0)
    assert "SyntaxError" in missing["message"]
    (prediction,) = by_task["0.2"]
    assert (prediction["status"], prediction["points"], prediction["earned"]) == ("passed", 1, 1)
    assert report["cells_not_finished"]
