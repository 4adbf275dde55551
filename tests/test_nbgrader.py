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
from synclab.lab.nbgrader_run import autograde, gradebook_scores, hand_in, release, solved
from synclab.lab.exercises import EXERCISES, lab_version, points_of
from synclab.lab.judge import sandbox_problem
from synclab.lab.nbgrader_source import exercise_points, nbgrader_notebook, points_by_chapter

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

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
    assert "    # Exercise 0.1: YOUR CODE HERE (~8 lines)\n    ### BEGIN SOLUTION 0.1" in answer.source
    check, check_meta = meta["check-0_1"]
    assert check_meta["grade"] and check_meta["locked"] and check_meta["points"] == points_of("0.1")
    assert check.source.endswith(f'graded("0.1", lambda: primer.check_decode_step(decode_step), '
                                 f'points={points_of("0.1")}, lab_version="{lab_version()}")')
    assert check.metadata["synclab"] == {"task": "0.1", "lab_version": lab_version()}
    others = [m for c, m in meta.values() if not (m["solution"] or m["grade"])]
    assert others and all(m["locked"] for m in others)  # everything else is read-only
    assert nb.cells[0].source.startswith("# 0 · Primer lab:")  # titled as the lab is


def test_written_answers_are_manually_graded_for_zero_points():
    solution = _solution("ch3")  # no lab asks for prose today: a written answer as an instructor would add one
    solution.cells.append(nbformat.v4.new_markdown_cell(
        "**Why?** One sentence.\n\n<!-- BEGIN SOLUTION -->\nBecause.\n<!-- END SOLUTION -->"))
    nb = nbgrader_notebook(solution, "solutions/03_pinned_transfers.ipynb")
    written = [c.metadata.nbgrader for c in nb.cells if c.metadata.nbgrader["grade_id"].startswith("written-")]
    assert written and all(m["grade"] and m["solution"] and m["points"] == 0 for m in written)


def test_points_are_the_exercises_and_an_instructor_may_reweight_them():
    points = points_by_chapter(CHAPTERS)
    assert points["ch0"] == {"0.1": 14, "0.2": 6}
    assert set(points) == set(CHAPTERS) and all(sum(tasks.values()) > 0 for tasks in points.values())
    assert points_by_chapter({"ch1": CHAPTERS["ch1"]}, {"1.2": 8})["ch1"] == {"1.1": 20, "1.2": 8}
    nb = nbgrader_notebook(_solution("ch1"), "solutions/01_slice_then_split.ipynb", {"1.1": 30})
    meta = {c.metadata.nbgrader["grade_id"]: c.metadata for c in nb.cells}
    assert meta["check-1_1"].nbgrader["points"] == 30
    # a stretch is 0 in the total; its points are extra credit
    assert meta["check-1_2"].nbgrader["points"] == 0 and meta["check-1_2"].synclab["stretch_points"] == 5


def test_release_notebooks_name_no_folder_students_do_not_have():
    for chapter in CHAPTERS:
        nb = nbgrader_notebook(_solution(chapter), f"solutions/{CHAPTERS[chapter]}.ipynb")
        text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        assert "../book/" not in text and "labs/" not in text, chapter
    nb = nbgrader_notebook(_solution("ch6"), "solutions/06_capstone_engine_step.ipynb")
    assert any('load_fixes("..")' in c.source for c in nb.cells)  # the student's own ch1 ... ch5 folders


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


def test_graded_is_practice_in_the_kernel_and_keeps_stderr_out_of_the_cell(capsys, monkeypatch):
    checks = [Check("9.9", "doubles", _doubles, points=3), Check("9.9", "again", _doubles)]
    assert graded("9.9", lambda: run_checks("9.9", checks, _loud)) == 1.0
    out = capsys.readouterr()
    assert out.err == ""  # nbgrader scores a cell that wrote to stderr 0
    assert "to stderr" in out.out and "UserWarning: a warning from the reader's code" in out.out
    assert "your grade is computed by the grader" in out.out
    half = [Check("9.9", "doubles", _doubles), Check("9.9", "fails", lambda impl, rng: expect(False, "no"))]
    assert graded("9.9", lambda: run_checks("9.9", half, _loud)) == 0.5
    # in the cell's points: nbgrader's Validate calls a cell that earns less than its points "failed"
    assert graded("9.9", lambda: run_checks("9.9", half, _loud), points=14) == 7.0
    assert graded("9.9", lambda: run_checks("9.9", checks, _loud), points=14) == 14.0
    assert "careful: this assignment was generated with lab version old" in (
        graded("9.9", lambda: run_checks("9.9", half, _loud), lab_version="old") is not None
        and capsys.readouterr().out)


def test_no_lab_imports_the_graders_machinery():
    """A lab's check cell runs the checks and nothing else: no lab imports the lab's machinery (it used to import a
    module that read the answer as the grader would and zeroed honest code in the kernel)."""
    for chapter, name in CHAPTERS.items():
        for path in (ROOT / "labs" / f"{name}.ipynb", ROOT / "solutions" / f"{name}.ipynb"):
            code = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
            assert not any("synclab.lab" in source for source in code), (chapter, path.name)


def test_graded_runs_no_check_when_nbgrader_autogrades():
    """Under autograding the grader scores the cell; without the grader configured the cell errs (0, visibly)."""
    import os

    ran = []
    os.environ["NBGRADER_EXECUTION"] = "autograde"
    try:
        with pytest.raises(GradingError, match="autograde_preprocessors"):
            graded("9.9", lambda: ran.append(1))
    finally:
        del os.environ["NBGRADER_EXECUTION"]
    assert not ran
    with pytest.raises(GradingError, match="must return a check report"):
        graded("9.9", lambda: 3.0)


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


def _cheat(nb: nbformat.NotebookNode, lines: str) -> nbformat.NotebookNode:
    """The untouched release with ``lines`` prepended to 0.1's answer cell (what a kernel would run first), or in
    place of its stub where they define ``decode_step`` themselves."""
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "answer-0_1":
            cell.source = lines if "def decode_step(" in lines else lines + cell.source
    return nb


# It ran in the student's kernel before the check cell, and gave full marks before the grader. Every cheat's own
# verdict (a forged log, a reference unwrapped, the rebound _run_one, ...) is in tests/test_judge.py, by the same
# judge nbgrader calls: here one goes through nbgrader's autograde, to show where its review line goes.
CHEATS = {
    "rebinds_graded": "import synclab.lab.grading as g\ng.graded = lambda *a, **k: 14.0\n",
}


def _reads_the_course(nb: nbformat.NotebookNode, course: Path) -> nbformat.NotebookNode:
    """The solution, whose decode_step also tries to copy the course's source notebook next to the gradebook:
    the grader's sandbox refuses the read (the course folder is closed to answers); the answer carries on with its
    own right code and earns what that earns, and the attempt is a review line."""
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "answer-0_1":
            assert "def decode_step(" in cell.source
            cell.source = "import numpy\n\n" + cell.source.replace("def decode_step(", "def _decode_step(") + f"""

def decode_step(*args, **kwargs):
    try:  # numpy reads and writes files: nothing the reading of the answer can tell from honest use
        numpy.fromfile({str(course / "source" / "ch0" / "00_primer.ipynb")!r}, dtype=numpy.uint8).tofile(
            {str(course / "stolen.ipynb")!r})
    except OSError:
        pass  # the grader's user may not read the course: carry on, as a careful cheat would
    return _decode_step(*args, **kwargs)
"""
    return nb


SANDBOX = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]


def _can_sandbox() -> bool:
    """Whether this machine can run the grader's worker as ``nobody`` (root, and util-linux's setpriv)."""
    import os
    import shutil

    return os.geteuid() == 0 and shutil.which("setpriv") is not None


@pytest.mark.slow
def test_autograde_scores_honest_work_and_names_every_cheat_as_grade_json_does(tmp_path, capsys):
    """Full marks, nothing, the planted bugs' share lost; the cheat earns what its code earns (0: a stub with a trick
    beside it) and is named for the instructor in the log, not in the student's feedback; nbgrader and ``grade
    --json`` agree.

    Autograded as the instructors' page says: in parallel, the grader's worker in a sandbox where this machine
    can make one (a user who cannot read the course), the release through the course's own exchange."""
    import json

    from synclab.lab import cli

    chapter, stem = "ch0", CHAPTERS["ch0"]
    released = release(ROOT, tmp_path, chapter, stem)
    # a clone the sandbox's user cannot read (a 0700 home, a mktemp -d folder) is graded unsandboxed here; the
    # grader itself says so before grading (test_judge)
    sandboxed = _can_sandbox() and sandbox_problem(tuple(SANDBOX)) is None
    if sandboxed:
        with open(tmp_path / "nbgrader_config.py", "a") as config:
            config.write(f"c.JudgeChecks.sandbox = {SANDBOX!r}\n")
    solution = solved(tmp_path, chapter, stem, released)
    hand_in(tmp_path, chapter, stem, "solution", solution)
    hand_in(tmp_path, chapter, stem, "untouched", released)
    hand_in(tmp_path, chapter, stem, "planted", _planted_primer(solved(tmp_path, chapter, stem, released)))
    hand_in(tmp_path, chapter, stem, "reads_the_course",
            _reads_the_course(solved(tmp_path, chapter, stem, released), tmp_path))
    for name, lines in CHEATS.items():
        hand_in(tmp_path, chapter, stem, name, _cheat(nbformat.read(tmp_path / "release" / chapter / f"{stem}.ipynb",
                                                                    as_version=4), lines))
    # as an instructor would: the lab's parallel autograde, three students at a time, in the course folder
    assert cli.main(["autograde", chapter, "--course", str(tmp_path), "--jobs", "3"]) == 0
    said = capsys.readouterr()
    assert "[5/5]" in said.err and "autograded 5 of 5" in said.out
    # the right answers were judged for the run, on its one seed, not once per student
    assert len(list((tmp_path / "autograde-logs" / ".right-answers").glob("*.json"))) == 1
    scores = gradebook_scores(tmp_path, chapter, stem)
    # the sandbox refuses reading the course folder, sandboxed user or not: nothing copied, the attempt named
    assert not (tmp_path / "stolen.ipynb").exists()
    full = points_of("0.1"), points_of("0.2")
    assert scores["reads_the_course"]["check-0_1"] == (full[0], full[0])
    log = (tmp_path / "autograde-logs" / chapter / "reads_the_course.log").read_text()
    assert "for the instructor to read: the grader's sandbox refused open: the course's file" in log, log[-3000:]
    assert scores["solution"] == {"check-0_1": (full[0], full[0]), "check-0_2": (full[1], full[1])}
    assert scores["untouched"] == {"check-0_1": (0.0, full[0]), "check-0_2": (0.0, full[1])}
    # one prediction of 0.2's eight off: the other seven earn their share (partial credit per prediction)
    assert scores["planted"] == {"check-0_1": (round(full[0] * 4 / 5, 2), full[0]),
                                 "check-0_2": (round(full[1] * 7 / 8, 2), full[1])}
    for name in CHEATS:
        assert scores[name]["check-0_1"] == (0.0, full[0]), name
        cell = next(c for c in nbformat.read(tmp_path / "autograded" / name / chapter / f"{stem}.ipynb",
                                             as_version=4).cells
                    if c.metadata.get("nbgrader", {}).get("grade_id") == "check-0_1")
        shown = "".join(o.get("data", {}).get("text/plain", "") for o in cell.outputs)
        assert "for the instructor" not in shown, name  # the review lines are the instructor's, in the log
        log = (tmp_path / "autograde-logs" / chapter / f"{name}.log").read_text()
        assert "for the instructor to read" in log, (name, log[-3000:])
    graded_cell = next(c for c in nbformat.read(tmp_path / "autograded" / "planted" / chapter / f"{stem}.ipynb",
                                                as_version=4).cells
                       if c.metadata.get("nbgrader", {}).get("grade_id") == "check-0_1")
    shown = "".join(o.get("data", {}).get("text/plain", "") for o in graded_cell.outputs)
    assert "✗ [0.1] NaN logits raise ValueError before any update: failed" in shown  # the student sees why
    # the other grader, on the same submissions, gives the same points (each cheat's own --json verdict is in
    # tests/test_judge.py: the one cheat here keeps the review line's path through both)
    for student, by_cell in scores.items():
        if student in ("reads_the_course", "untouched"):
            continue  # unsandboxed, reads_the_course would copy the course; untouched scores 0 in both by its stubs
        path = tmp_path / "submitted" / student / chapter / f"{stem}.ipynb"
        cli.main(["grade", str(path), "--json"])
        summary = json.loads(capsys.readouterr().out)
        earned = {f"check-{e['task'].replace('.', '_')}": e["earned"] for e in summary["exercises"]}
        assert earned == {cell: score for cell, (score, _) in by_cell.items()}, student
        assert bool(any(e["review"] for e in summary["exercises"])) == (student in CHEATS), student


@pytest.mark.slow
def test_the_students_side_validates_with_their_config_and_fetches_from_the_exchange(tmp_path):
    """The students' config as the course writes it: Validate passes a finished notebook and names the check cells
    of an unfinished one; the release goes to the course's exchange, not nbgrader's default folder."""
    import shutil
    import subprocess

    from synclab.lab.nbgrader_run import nbgrader

    course, student = tmp_path / "course", tmp_path / "student"
    released = release(ROOT, course, "ch0", CHAPTERS["ch0"])
    student.mkdir()
    shutil.copy(course / "students_nbgrader_config.py", student / "nbgrader_config.py")
    assert "c.Execute.timeout = 600" in (student / "nbgrader_config.py").read_text()
    nbformat.write(solved(course, "ch0", CHAPTERS["ch0"], released), student / "finished.ipynb")
    nbformat.write(_planted_primer(solved(course, "ch0", CHAPTERS["ch0"], released)), student / "planted.ipynb")
    validate = [str(Path(sys.executable).parent / "nbgrader"), "validate"]
    finished = subprocess.run([*validate, "finished.ipynb"], cwd=student, capture_output=True, text=True)
    assert "Success! Your notebook passes all the tests." in finished.stdout, finished.stdout + finished.stderr
    planted = subprocess.run([*validate, "planted.ipynb"], cwd=student, capture_output=True, text=True)
    assert "VALIDATION FAILED ON 2 CELL(S)" in planted.stdout and 'graded("0.1"' in planted.stdout, planted.stdout

    nbgrader(course, "release_assignment", "ch0")
    assert (course / "exchange" / "synclab" / "outbound" / "ch0" / f"{CHAPTERS['ch0']}.ipynb").exists()


def test_autograde_says_what_is_wrong_before_running_anything(tmp_path, capsys):
    from synclab.lab import cli

    assert cli.main(["autograde", "ch0", "--course", str(tmp_path)]) == 2
    assert "not an nbgrader course folder" in capsys.readouterr().err
    (tmp_path / "nbgrader_config.py").write_text("")
    assert cli.main(["autograde", "ch0", "--course", str(tmp_path)]) == 2
    assert "no submissions of ch0" in capsys.readouterr().err
    (tmp_path / "submitted" / "ada" / "ch0").mkdir(parents=True)
    assert cli.main(["autograde", "ch0", "--course", str(tmp_path), "--student", "bob"]) == 2
    assert "no submission of ch0 from bob" in capsys.readouterr().err


@pytest.mark.heavy
@pytest.mark.parametrize("chapter", list(CHAPTERS))
def test_autograde_every_chapter(tmp_path, chapter):
    stem = CHAPTERS[chapter]
    released = release(ROOT, tmp_path, chapter, stem)
    hand_in(tmp_path, chapter, stem, "solution", solved(tmp_path, chapter, stem, released))
    hand_in(tmp_path, chapter, stem, "untouched", released)
    scores = autograde(tmp_path, chapter, stem)
    points = points_by_chapter({chapter: stem})[chapter]
    # a core exercise scores its points out of its points; a stretch is out of 0, its points extra credit
    full = {f"check-{t.replace('.', '_')}": (float(n), 0.0 if EXERCISES[t].stretch else float(n))
            for t, n in points.items()}
    checked = {student: {cell: s for cell, s in by_cell.items() if cell.startswith("check-")}
               for student, by_cell in scores.items()}  # chapter 3's written answers are graded by hand
    assert checked["solution"] == full, checked["solution"]
    assert checked["untouched"] == {cell: (0.0, best) for cell, (_, best) in full.items()}, checked["untouched"]


def test_the_autograde_chain_runs_no_kernel_unless_asked():
    """By default the grader's worker is the only place a submission's code runs; run_kernel adds nbgrader's kernel."""
    from nbgrader.preprocessors import Execute, SaveAutoGrades

    from synclab.lab.nbgrader_judge import JudgeChecks, SaveStretchCredit, autograde_preprocessors

    chain = autograde_preprocessors()
    assert Execute not in chain
    assert chain.index(JudgeChecks) < chain.index(SaveAutoGrades) < chain.index(SaveStretchCredit)
    with_kernel = autograde_preprocessors(run_kernel=True)
    assert with_kernel.index(Execute) + 1 == with_kernel.index(JudgeChecks)
