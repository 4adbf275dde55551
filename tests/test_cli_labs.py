"""``python -m synclab check`` on the labs: unfinished, one task, JSON with points.

Split from ``test_cli.py`` so that the two halves run on two workers (each test executes a
notebook in a fresh kernel: marked slow).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from synclab.run_modes import reader_environment
from tests.test_cli import ROOT, synclab

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)


def _lab_with(chapter: str, answers: dict[str, str], tmp_name: str) -> Path:
    """The chapter's fresh lab with the given exercises' stubs replaced by ``answers[task]`` (whole cells)."""
    lab = nbformat.read(ROOT / "labs" / f"{chapter}.ipynb", as_version=4)
    for cell in lab.cells:
        for task, source in answers.items():
            if f'raise NotImplementedError("Exercise {task}")' in cell.source:
                cell.source = source
    path = ROOT / "labs" / f".{tmp_name}_{os.getpid()}.ipynb"  # beside the labs: it finds its solution
    nbformat.write(lab, path)
    return path


def _solution_cell(chapter: str, task: str) -> str:
    solution = nbformat.read(ROOT / "solutions" / f"{chapter}.ipynb", as_version=4)
    source = next(c.source for c in solution.cells if f"### BEGIN SOLUTION {task}" in c.source)
    return "\n".join(line for line in source.splitlines() if "SOLUTION" not in line)


@pytest.mark.slow
def test_a_lab_with_its_core_exercise_done_profiles_without_the_stretch():
    """Chapter 1 with 1.1 done and the stretch 1.2 not: every cell runs; the profile leaves 1.2 out in one line."""
    from synclab.lab.notebook_runner import run_notebook

    path = _lab_with("01_slice_then_split", {"1.1": _solution_cell("01_slice_then_split", "1.1")}, "core_only")
    try:
        run = run_notebook(path, cell_timeout_s=120)
    finally:
        path.unlink()
    errors = [e for e in run.errors]
    assert not errors, errors
    texts = ["".join(o.get("text", "") for o in c.get("outputs", [])) for c in run.notebook.cells]
    assert any("AllPoolNoSync (1.2, since #41433) left out: Exercise 1.2 is not written yet." in t for t in texts), texts
    assert not any("AllPool (1.1, #41163) left out" in t for t in texts)  # 1.1 passed: it is profiled


@pytest.mark.slow
def test_a_hung_exercise_is_waited_for_once_and_not_again_by_the_profiling_cells():
    """0.1 never returns: its checks time out in its check cell (limits scaled to a tenth here), and no later cell
    waits on it: the profiling cells leave it out."""
    hang = "def decode_step(batch):\n    while True:\n        _time.sleep(0.01)\n\nimport time as _time\n"
    path = _lab_with("00_primer", {"0.1": hang}, "hung")
    env_scale = {"SYNCLAB_CHECK_TIME_SCALE": "0.1"}
    try:
        proc = subprocess.run([sys.executable, "-m", "synclab", "check", str(path.relative_to(ROOT))], cwd=ROOT,
                              env={**reader_environment(), **env_scale}, capture_output=True, text=True, timeout=300)
    finally:
        path.unlink()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "[0.1]" in proc.stdout and "timed out" in proc.stdout, proc.stdout
    assert "timed out: ran longer than" not in proc.stdout, proc.stdout  # no cell waited out its own limit
    assert "cells that did not finish" not in proc.stdout, proc.stdout


@pytest.mark.slow
def test_check_one_task_runs_only_what_it_needs():
    proc = synclab("check", "solutions/04_reverse_placeholder_scans.ipynb", "--task", "4.1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Exercise 4.1" in proc.stdout and "Exercise 4.2" not in proc.stdout  # 4.2's check cell did not run
    assert "ALL CHECKS PASSED" in proc.stdout


@pytest.mark.slow
def test_check_json_reports_points_per_check_and_scores_a_broken_exercise_zero(tmp_path):
    """0.1 does not even parse (its check cell then raises, and the parse error is named: 0 of its points), 0.2 is
    right (all of its points)."""
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
    assert (report["points"], report["earned"], report["passed"]) == (20, 6, False)
    by_task = {}
    for check in report["checks"]:
        assert set(check) == {"task", "id", "name", "status", "passed", "points", "earned", "message", "stretch"}
        by_task.setdefault(check["task"], []).append(check)
    (missing,) = by_task["0.1"]
    assert (missing["status"], missing["points"], missing["earned"]) == ("not run", 14, 0)
    # the cause, the answer cell's SyntaxError, not the NameError it leaves the check cell with
    assert missing["message"].startswith("its answer (cell ") and "SyntaxError" in missing["message"], missing
    assert any("SyntaxError" in e for e in report["cells_not_finished"]), report["cells_not_finished"]
    (prediction,) = by_task["0.2"]
    assert (prediction["status"], prediction["points"], prediction["earned"]) == ("passed", 6, 6)
    assert report["cells_not_finished"]


@pytest.mark.slow
def test_a_cell_that_raises_after_the_checks_passed_fails_the_run_and_is_named():
    """0.2 answered right, then a walkthrough cell raises: the checks all pass, yet the run does not (exit 1)."""
    import json

    solution = nbformat.read(ROOT / "solutions" / "00_primer.ipynb", as_version=4)
    setup = next(c.source for c in solution.cells if c.cell_type == "code")
    answer = _solution_cell("00_primer", "0.2")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(setup), nbformat.v4.new_code_cell(answer),
                                         nbformat.v4.new_code_cell("primer.check_predictions(my_predictions)"),
                                         nbformat.v4.new_code_cell("[1, 2, 3][7]  # a walkthrough that breaks")])
    nb.metadata["synclab"] = {"generated_from": "solutions/00_primer.ipynb"}  # as a generated lab records
    path = ROOT / "labs" / f".test_raises_{os.getpid()}.ipynb"
    nbformat.write(nb, path)
    try:
        text, as_json = synclab("check", str(path.relative_to(ROOT))), synclab("check", str(path.relative_to(ROOT)),
                                                                              "--json")
    finally:
        path.unlink()
    assert text.returncode == 1 and as_json.returncode == 1, text.stdout + text.stderr
    assert "1/1 checks passed" in text.stdout and "ALL CHECKS PASSED" not in text.stdout, text.stdout
    assert "cell 3 (after Exercise 0.2) raised IndexError: list index out of range" in text.stdout, text.stdout
    report = json.loads(as_json.stdout)
    assert report["passed"] is False
    assert report["cells_raised"] == [{"cell": 3, "exercise": "after Exercise 0.2",
                                       "error": "IndexError: list index out of range"}]


def test_an_answer_cell_that_does_not_parse_is_named_as_its_exercises(tmp_path):
    """A learner's report: a SyntaxError in 5.1's answer cell was said to be "before the first exercise". The cell
    is known by the names it defines, read from its lines; a cell after it is "after Exercise 5.1"."""
    from synclab.lab.cli import cells_raised

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import torch"),
                                         nbformat.v4.new_code_cell("class ListCachedRange(PlaceholderRange):\n"
                                                                   "    def get_num_embeds(self) -> int\n"),
                                         nbformat.v4.new_code_cell("ch5.check_placeholder_range(ListCachedRange)")])
    nb.metadata["synclab"] = {"generated_from": "solutions/05_list_based_caches.ipynb"}
    path = tmp_path / "05_list_based_caches.ipynb"
    nbformat.write(nb, path)
    raised = cells_raised(path, ["cell 1: SyntaxError: expected ':'",
                                 "cell 2: NameError: name 'ListCachedRange' is not defined"])
    assert [r["exercise"] for r in raised] == ["Exercise 5.1's answer", "after Exercise 5.1"], raised


def test_an_exercise_whose_answer_raised_is_said_to_fail_by_that_error_not_its_checks(tmp_path):
    """A learner's report: a SyntaxError in 3.1's answer cell was listed after the NameError it caused in the check
    cell, which named no fault. The exercise's line names its answer's error; a later exercise's check cell that
    raised by itself keeps its own (the answer cells between the two check cells are 3.2's alone)."""
    from synclab.lab.cli import verdicts_of

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import torch"),
        nbformat.v4.new_code_cell("def async_tensor_h2d(data, device, dtype=None)\n    return data"),
        nbformat.v4.new_code_cell("ch3.check_async_tensor_h2d(async_tensor_h2d)"),
        nbformat.v4.new_code_cell("class PinnedSampler(Sampler):\n    pass"),
        nbformat.v4.new_code_cell("ch3.check_gather_specific_token_logprobs(PinnedSampler)")])
    nb.metadata["synclab"] = {"generated_from": "solutions/03_pinned_transfers.ipynb"}
    path = tmp_path / "03_pinned_transfers.ipynb"
    nbformat.write(nb, path)
    errors = ["cell 1: SyntaxError: expected ':' (line 1)", "cell 2: NameError: name 'async_tensor_h2d' is not defined",
              "cell 4: NameError: name 'Sampler' is not defined"]
    verdicts = verdicts_of(["3.1", "3.2"], {}, errors, {"3.1": 2, "3.2": 4}, path)
    assert verdicts["3.1"].error == "its answer (cell 1) raised SyntaxError: expected ':' (line 1)"
    assert verdicts["3.2"].error == "its check cell raised NameError: name 'Sampler' is not defined"


def test_a_stretch_left_undone_reads_as_a_stretch_and_its_points_come_apart():
    """Chapter 1 with 1.1 passed and the stretch 1.2 not done: the run passes, and says so; graders see 1.2 apart."""
    from synclab.checks import CheckReport, Outcome
    from synclab.lab.cli import json_report, verdict_line
    from synclab.lab.exercises import points_of, stretch_tasks
    from synclab.lab.verdicts import Verdict

    lab = ROOT / "labs" / "01_slice_then_split.ipynb"
    assert {"1.2"} <= stretch_tasks() and "1.1" not in stretch_tasks()
    verdicts = {"1.1": Verdict("1.1", CheckReport("1.1", [Outcome("1.1", f"c{i}", "passed") for i in range(8)])),
                "1.2": Verdict("1.2", CheckReport("1.2", [Outcome("1.2", f"d{i}", "not implemented")
                                                          for i in range(10)]))}
    summary = json_report(lab, verdicts, [], None, 1.0)
    assert summary["passed"] and (summary["points"], summary["earned"]) == (points_of("1.1"), points_of("1.1"))
    assert (summary["stretch_points"], summary["stretch_earned"]) == (points_of("1.2"), 0)
    assert summary["total_earned"] == points_of("1.1")
    assert verdict_line(summary, ok=True) == "core: all passed; stretch 1.2: not done"
    verdicts["1.2"].report.outcomes[0] = Outcome("1.2", "d0", "passed")  # begun: its points, not "not done"
    begun = json_report(lab, verdicts, [], None, 1.0)
    stretch = next(e for e in begun["exercises"] if e["task"] == "1.2")
    assert verdict_line(begun, ok=True) == (f"core: all passed; stretch 1.2: {stretch['earned']:g} of "
                                            f"{stretch['points']:g} points") and stretch["earned"] > 0
    verdicts["1.2"].report.outcomes[0] = Outcome("1.2", "d0", "not implemented")
    verdicts["1.1"].report.outcomes[0] = Outcome("1.1", "c0", "failed")
    failing = json_report(lab, verdicts, [], None, 1.0)
    assert failing["earned"] == round(points_of("1.1") * 7 / 8, 2)
    assert not failing["passed"] and verdict_line(failing, ok=False) == "SOME CHECKS DID NOT PASS"


def test_a_stretch_checked_alone_keeps_its_points_under_stretch():
    """`check --task 1.2 --json` put the stretch's 5 points under `points` (a learner's review): a stretch checked
    alone is still a stretch, its points under `stretch_points`; the run passes on it."""
    from synclab.checks import CheckReport, Outcome
    from synclab.lab.cli import json_report
    from synclab.lab.exercises import points_of
    from synclab.lab.verdicts import Verdict

    lab = ROOT / "labs" / "01_slice_then_split.ipynb"
    passed = {"1.2": Verdict("1.2", CheckReport("1.2", [Outcome("1.2", "d0", "passed")]))}
    summary = json_report(lab, passed, [], "1.2", 1.0)
    assert (summary["points"], summary["earned"]) == (0, 0) and summary["passed"]
    assert (summary["stretch_points"], summary["stretch_earned"], summary["total_earned"]) == (points_of("1.2"),) * 3
    failed = {"1.2": Verdict("1.2", CheckReport("1.2", [Outcome("1.2", "d0", "failed")]))}
    assert not json_report(lab, failed, [], "1.2", 1.0)["passed"]
