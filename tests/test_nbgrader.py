"""The nbgrader course: source notebooks from the solutions, grades from our checks, the real nbgrader autograding.

The autograde tests run nbgrader itself (a kernel per submission). Chapter 0 runs in every
``make test``; every chapter runs with ``pytest -m heavy tests/test_nbgrader.py`` (minutes).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import nbformat
import pytest

from synclab.lab.cli import CHAPTERS
from synclab.checks import Check, expect, run_checks
from synclab.lab.grading import GradingError, graded
from synclab.lab.labgen import LabgenError
from synclab.lab.nbgrader_run import autograde, hand_in, release, solved
from synclab.lab.nbgrader_source import exercise_points, nbgrader_notebook, points_by_chapter

ROOT = Path(__file__).resolve().parent.parent


def _solution(chapter: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "solutions" / f"{CHAPTERS[chapter]}.ipynb", as_version=4)


# ----------------------------------------------------------------------------- the source notebooks


def test_source_notebook_marks_answers_checks_and_read_only_cells():
    from nbgrader.nbgraderformat import MetadataValidator

    nb = nbgrader_notebook(_solution("ch0"), "solutions/00_primer.ipynb")
    MetadataValidator().validate_nb(nb)  # nbgrader's own schema
    meta = {c.metadata.nbgrader["grade_id"]: (c, c.metadata.nbgrader) for c in nb.cells}
    answer, answer_meta = meta["answer-0_1"]
    assert answer_meta["solution"] and not answer_meta["grade"] and not answer_meta["locked"]
    assert "    # Exercise 0.1: YOUR CODE HERE (~13 lines)\n    ### BEGIN SOLUTION 0.1" in answer.source
    check, check_meta = meta["check-0_1"]
    assert check_meta["grade"] and check_meta["locked"] and check_meta["points"] == 5
    assert check.source.endswith("graded(lambda: primer.check_decode_step(decode_step), points=5)")
    others = [m for c, m in meta.values() if not (m["solution"] or m["grade"])]
    assert others and all(m["locked"] for m in others)  # everything else is read-only
    assert nb.cells[0].source.startswith("# 0 · Primer lab:")  # titled as the lab is


def test_written_answers_are_manually_graded_for_zero_points():
    nb = nbgrader_notebook(_solution("ch3"), "solutions/03_pinned_transfers.ipynb")
    written = [c.metadata.nbgrader for c in nb.cells if c.metadata.nbgrader["grade_id"].startswith("written-")]
    assert written and all(m["grade"] and m["solution"] and m["points"] == 0 for m in written)


def test_points_come_from_the_solutions_stored_reports():
    points = points_by_chapter(ROOT, CHAPTERS)
    assert points["ch0"] == {"0.1": 5, "0.2": 1}
    assert set(points) == set(CHAPTERS) and all(sum(tasks.values()) > 0 for tasks in points.values())


def test_a_solution_whose_stored_report_fails_or_is_missing_is_refused():
    nb = _solution("ch0")
    check_cell = next(c for c in nb.cells if c.source.startswith("primer.check_decode_step"))
    check_cell.outputs[0]["data"]["text/plain"] = "Exercise 0.1 — decode_step: 4/5 checks passed"
    with pytest.raises(LabgenError, match="does not pass: .*4/5"):
        exercise_points(nb, "x")
    check_cell.outputs = []
    with pytest.raises(LabgenError, match="no stored report; run `make solutions`"):
        exercise_points(nb, "x")


def test_a_check_cell_that_is_not_one_expression_is_refused():
    nb = _solution("ch0")
    check_cell = next(c for c in nb.cells if c.source.startswith("primer.check_decode_step"))
    check_cell.source = "report = primer.check_decode_step(decode_step)\nreport"
    with pytest.raises(LabgenError, match="one expression"):
        nbgrader_notebook(nb, "x")


# ----------------------------------------------------------------------------- graded()


def _doubles(impl, rng):
    expect(impl(2) == 4, "2 doubled")


def _loud(x):
    warnings.warn("a warning from the reader's code")
    print("to stderr", file=sys.stderr)
    return 2 * x


def test_graded_returns_the_points_earned_and_keeps_stderr_out_of_the_cell(capsys):
    checks = [Check("9.9", "doubles", _doubles, points=3), Check("9.9", "again", _doubles)]
    assert graded(lambda: run_checks("9.9", checks, _loud), points=4) == 4.0
    out = capsys.readouterr()
    assert out.err == ""  # nbgrader scores a cell that wrote to stderr 0
    assert "to stderr" in out.out and "UserWarning: a warning from the reader's code" in out.out
    assert graded(lambda: run_checks("9.9", checks, lambda x: x), points=4) == 0.0
    half = [Check("9.9", "doubles", _doubles), Check("9.9", "fails", lambda impl, rng: expect(False, "no"))]
    assert graded(lambda: run_checks("9.9", half, _loud), points=2) == 1.0


def test_graded_refuses_points_that_no_longer_match_the_checks():
    with pytest.raises(GradingError, match="generated for 5 points, but its checks now carry 1"):
        graded(lambda: run_checks("9.9", [Check("9.9", "doubles", _doubles)], _loud), points=5)
    with pytest.raises(GradingError, match="must return a check report"):
        graded(lambda: 3.0, points=1)


# ----------------------------------------------------------------------------- the real nbgrader


def _planted_primer(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The solution with two bugs: NaN logits no longer raise (0.1), one prediction off (0.2)."""
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id == "answer-0_1":
            before = cell.source
            cell.source = before.replace('    if nan_flag:\n        raise ValueError("NaN in logits")\n', "")
            assert cell.source != before
        elif grade_id == "answer-0_2":
            before = cell.source
            cell.source = before.replace('"b: x[idx[0]:idx[1]]": 2', '"b: x[idx[0]:idx[1]]": 1')
            assert cell.source != before
    return nb


@pytest.mark.slow
def test_autograde_scores_the_solution_the_release_and_a_planted_bug(tmp_path):
    """Full marks, nothing, and exactly the planted bugs' checks lost: 4/5 on 0.1 and 0/1 on 0.2."""
    chapter, stem = "ch0", CHAPTERS["ch0"]
    released = release(ROOT, tmp_path, chapter, stem)
    solution = solved(tmp_path, chapter, stem, released)
    hand_in(tmp_path, chapter, stem, "solution", solution)
    hand_in(tmp_path, chapter, stem, "untouched", released)
    hand_in(tmp_path, chapter, stem, "planted", _planted_primer(solved(tmp_path, chapter, stem, released)))
    scores = autograde(tmp_path, chapter, stem)
    assert scores["solution"] == {"check-0_1": (5.0, 5.0), "check-0_2": (1.0, 1.0)}
    assert scores["untouched"] == {"check-0_1": (0.0, 5.0), "check-0_2": (0.0, 1.0)}
    assert scores["planted"] == {"check-0_1": (4.0, 5.0), "check-0_2": (0.0, 1.0)}
    graded_cell = next(c for c in nbformat.read(tmp_path / "autograded" / "planted" / chapter / f"{stem}.ipynb",
                                                as_version=4).cells
                       if c.metadata.get("nbgrader", {}).get("grade_id") == "check-0_1")
    shown = "".join(o.get("data", {}).get("text/plain", "") for o in graded_cell.outputs)
    assert "✗ [0.1] NaN logits raise ValueError before any update: failed" in shown  # the student sees why


@pytest.mark.heavy
@pytest.mark.parametrize("chapter", list(CHAPTERS))
def test_autograde_every_chapter(tmp_path, chapter):
    stem = CHAPTERS[chapter]
    released = release(ROOT, tmp_path, chapter, stem)
    hand_in(tmp_path, chapter, stem, "solution", solved(tmp_path, chapter, stem, released))
    hand_in(tmp_path, chapter, stem, "untouched", released)
    scores = autograde(tmp_path, chapter, stem)
    assert all(score == best for score, best in scores["solution"].values()), scores["solution"]
    assert all(score == 0 for score, _ in scores["untouched"].values()), scores["untouched"]
    assert sum(best for _, best in scores["solution"].values()) == sum(points_by_chapter(ROOT, {chapter: stem})[chapter].values())
