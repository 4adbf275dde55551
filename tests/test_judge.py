"""The grader: honest work scores what its checks earn; every known way to cheat is named for the instructor.

Each submission is a solution notebook with its answer cells changed, judged by ``python -m synclab grade --json``
(the grader's verdicts; nbgrader's autograding uses the same, see test_nbgrader.py). The score is the checks' alone:
what the grader's reading and the answer's process's audit hook find are review lines. Every exercise is judged
apart: the checks run in the grader's process, the answer in its own. Where a cheat still earns what its honest
version would not, the test says so (``GAP``): each is a count, which the answer's process reports (the instructors'
page, "What the grades are good for").
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import sys
from pathlib import Path

import nbformat
import pytest

from synclab.capstone.checks import NO_STRAY
from synclab.lab import cli
from synclab.lab.exercises import EXERCISES, of_chapter, points_of
from synclab.lab.judge import sandbox_problem

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

ROOT = Path(__file__).resolve().parent.parent


def _submission(tmp_path: Path, stem: str, answers: dict[str, str], name: str = "submission") -> Path:
    """The solution ``stem`` with the cells defining each key's exercise replaced by its value."""
    nb = nbformat.read(ROOT / "solutions" / f"{stem}.ipynb", as_version=4)
    for task, source in answers.items():
        names = set(EXERCISES[task].defines)
        cells = [c for c in nb.cells if c.cell_type == "code" and any(
            re.search(rf"^(class {n}\b|def {n}\()", c.source, re.M) for n in names)]
        assert cells, task
        cells[0].source = source
        for extra in cells[1:]:
            extra.source = "pass"
    path = tmp_path / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


def _graded(path: Path, capsys: pytest.CaptureFixture, task: str | None = None) -> dict:
    """``grade --json`` of ``path``: its one exercise ``task`` where a test looks at no other (the others' processes
    cost seconds each and decide nothing there)."""
    cli.main(["grade", str(path), "--json", *(["--task", task] if task else [])])
    return json.loads(capsys.readouterr().out)


def _by_task(summary: dict) -> dict[str, dict]:
    return {e["task"]: e for e in summary["exercises"]}


def _solution_source(stem: str, name: str) -> str:
    """The solution's cell that defines ``name`` (a function or a class) at its top level."""
    nb = nbformat.read(ROOT / "solutions" / f"{stem}.ipynb", as_version=4)
    return next(c.source for c in nb.cells
                if c.cell_type == "code" and re.search(rf"^(class|def) {name}\b", c.source, re.M))


PRIMER = "00_primer"
STUB_0_1 = '''def decode_step(batch):
    raise NotImplementedError("Exercise 0.1")
'''

REBINDS_RUN_ONE = ("import synclab.checks as c\nfrom synclab.checks import Outcome\n"
                   "c._run_one = lambda check, *a: Outcome(check.task, check.name, 'passed')\n")

# Each cheat: (what it does, the answer cell of 0.1, a phrase of its review line, the points it earns today).
CHEATS_0_1 = [
    ("rebinds graded() at top level", "import synclab.lab.grading as g\ng.graded = lambda *a, **k: 14.0\n" + STUB_0_1,
     "names the grader's parts", 0),
    # judged apart: the checks run in the grader's process, the rebinding in the answer's (which holds no check)
    ("rebinds _run_one at top level", REBINDS_RUN_ONE + STUB_0_1, "changes the package's c._run_one", 0),
    ("forges the report log", "import os, json\nlog = os.environ.get('SYNCLAB_CHECK_LOG')\n" + STUB_0_1,
     "names the grader's parts", 0),
    ("calls the reference through __wrapped__",
     "from synclab.primer import checks as pc\ndecode_step = pc._decode_step_reference.__wrapped__\n",
     "names the grader's parts", 0),
]


@pytest.mark.parametrize("what, answer, phrase, earned", CHEATS_0_1, ids=[c[0] for c in CHEATS_0_1])
def test_a_cheat_written_in_an_answer_cell_is_named_for_the_instructor(tmp_path, capsys, what, answer, phrase,
                                                                       earned):
    summary = _graded(_submission(tmp_path, PRIMER, {"0.1": answer}), capsys, "0.1")
    exercise = _by_task(summary)["0.1"]
    assert any(phrase in line for line in exercise["review"]), exercise["review"]
    assert exercise["earned"] == earned, (what, exercise)


CAPSTONE = "06_capstone_engine_step"


def test_the_graders_report_says_whose_word_a_count_is(capsys):
    """The grader compares results itself; what the answer's process counts is its word, and the report says so, in
    its text and its JSON (the instructors' page says the same)."""
    from synclab.lab.cli import COUNTS_ARE_ITS_WORD

    cli.main(["grade", str(ROOT / "solutions" / f"{PRIMER}.ipynb"), "--task", "0.2"])
    assert f"(for the instructor: {COUNTS_ARE_ITS_WORD})" in capsys.readouterr().out
    cli.main(["grade", str(ROOT / "solutions" / f"{PRIMER}.ipynb"), "--task", "0.2", "--json"])
    assert json.loads(capsys.readouterr().out)["counts"] == COUNTS_ARE_ITS_WORD
    page = " ".join((ROOT / "book" / "instructors.md").read_text().split())
    assert "is still that process's word" in page


def test_machinery_rebound_from_inside_the_answers_process_changes_no_verdict(tmp_path, capsys):
    """6.1 judged apart: an answer that rebinds the checks' _run_one in its own process reaches no check (they run in
    the grader's). A right runner earns what its honest version earns, no more and no less; a runner that removes no
    sync earns no more than its honest version either (the sync check); the static reading names importlib."""
    right = _solution_source(CAPSTONE, "clean_runner").replace("def clean_runner(", "def _right_runner(")
    hide = ("\n\nimport importlib\n\ndef _hide():\n"
            "    m = importlib.import_module('synclab.' + 'che' + 'cks')\n"
            "    setattr(m, '_run' + '_one', lambda check, *a: None)\n\n\n")
    answer = right + hide + "def clean_runner():\n    _hide()\n    return _right_runner()\n"
    exercise = _by_task(_graded(_submission(tmp_path, CAPSTONE, {"6.1": answer}), capsys, "6.1"))["6.1"]
    assert exercise["earned"] == points_of("6.1"), exercise
    assert any("imports importlib" in f for f in exercise["review"]), exercise
    lazy = hide + "def clean_runner():\n    _hide()\n    return type('Lazy', (PlantedRunner,), {})\n"
    summary = _graded(_submission(tmp_path, CAPSTONE, {"6.1": lazy}, "lazy"), capsys, "6.1")
    checks = {c["name"]: c for c in summary["checks"] if c["task"] == "6.1"}
    assert not checks[NO_STRAY]["passed"] and "stray sync" in checks[NO_STRAY]["message"], checks


def _dig_out(module: str, reference: str, signature: str, arguments: str = "") -> str:
    """An answer that takes the raw reference out of its guard's closure and calls it (with ``arguments``, else the
    answer's own), naming no grader's part."""
    return (f"from synclab import {module.rsplit('.', 1)[0].split('.', 1)[1]}\n"
            f"import importlib\n\n"
            f"def {signature}:\n"
            f"    guard = getattr(importlib.import_module('{module}'), '{reference[:6]}' + '{reference[6:]}')\n"
            f"    raw = [c.cell_contents for c in getattr(guard, '__clo' + 'sure__') if callable(c.cell_contents)][0]\n"
            f"    return raw({arguments or signature.split('(', 1)[1][:-1]})\n")


DUG_OUT_APART = [("4.2", "synclab.reverse_scan.checks", "_bottleneck_reference",
                  "host_bottleneck_length(costs_us, device_step_us, max_length)", "04_reverse_placeholder_scans"),
                 ("0.1", "synclab.primer.checks", "_decode_step_reference", "decode_step(batch)", PRIMER),
                 ("6.2", "synclab.capstone.checks", "_ablation_row_reference", "ablation_row(config, workload, fixes)",
                  CAPSTONE, "config")]


@pytest.mark.parametrize("task, module, reference, signature, stem, arguments",
                         [(*d, "")[:6] for d in DUG_OUT_APART], ids=[d[0] for d in DUG_OUT_APART])
def test_an_exercise_judged_apart_has_no_reference_to_dig_out(tmp_path, capsys, task, module, reference, signature,
                                                             stem, arguments):
    """The same cheat at an exercise judged apart: its answer's process imports the students' install, where the
    reference's body is not shipped, so the raw function only raises; the checks, in the grader's process, never see
    the reference's answers."""
    answer = _dig_out(module, reference, signature, arguments)
    summary = _graded(_submission(tmp_path, stem, {task: answer}), capsys, task)
    assert _by_task(summary)[task]["earned"] == 0, summary
    checks = [c for c in summary["checks"] if c["task"] == task]
    assert checks and all(c["status"] == "crashed" and "NotShipped" in c["message"] for c in checks), checks


def test_the_guard_hands_out_no_wrapped_function():
    from synclab.primer import checks as pc
    from synclab.reverse_scan import checks as rc

    for guarded in (pc._decode_step_reference, rc._bottleneck_reference):
        assert not hasattr(guarded, "__wrapped__")


def test_a_baseline_handed_in_earns_nothing(tmp_path, capsys):
    """The code before the PR is the checks' own (an answer key, scope="checks"): handed in, each check refuses it."""
    answer = "from synclab.engine.pooler_baseline import AllPoolBaseline\n\nclass AllPool(AllPoolBaseline):\n    pass\n"
    summary = _graded(_submission(tmp_path, "01_slice_then_split", {"1.1": answer}), capsys, "1.1")
    assert _by_task(summary)["1.1"]["earned"] == 0, summary
    checks = [c for c in summary["checks"] if c["task"] == "1.1"]
    assert checks and all("AllPoolBaseline" in c["message"] for c in checks), checks


EXITS = "getattr(os, '_ex' + 'it')(0)"


def test_a_process_that_ends_during_its_checks_earns_nothing_and_is_named(tmp_path, capsys):
    """Judged apart, the answer's own process ends: each check that asks it crashes, saying so (6.2, 0.1)."""
    answer = f"import os\n\ndef ablation_row(config, workload, fixes):\n    {EXITS}\n"
    summary = _graded(_submission(tmp_path, CAPSTONE, {"6.2": answer}), capsys, "6.2")
    checks = [c for c in summary["checks"] if c["task"] == "6.2"]
    assert _by_task(summary)["6.2"]["earned"] == 0 and "the answer's process ended" in checks[0]["message"], checks
    answer = f"import os\n\ndef decode_step(batch):\n    {EXITS}\n"
    summary = _graded(_submission(tmp_path, PRIMER, {"0.1": answer}, "apart"), capsys, "0.1")
    assert _by_task(summary)["0.1"]["earned"] == 0, summary
    checks = [c for c in summary["checks"] if c["task"] == "0.1"]
    assert checks and "the answer's process ended" in checks[0]["message"], checks
    assert not any(c["passed"] for c in checks), checks


def test_an_answer_cell_runs_whole_in_the_grader_as_in_the_notebook(tmp_path, capsys):
    """Issue: an answer that ran in the notebook failed in the grader, which ran only definitions and literal
    constants. Now a module-level logger, a constant computed by a call and a top-level lambda run there too; a
    statement that raises stops its cell as in a kernel, and is said."""
    body = _solution_source(PRIMER, "decode_step")
    answer = ("import logging\n\nlogger = logging.getLogger(__name__)\nTINY = 10 ** -12\nscale = lambda x: x\n"
              "assert scale(TINY) > 0\n\n" + body)
    exercise = _by_task(_graded(_submission(tmp_path, PRIMER, {"0.1": answer}), capsys, "0.1"))["0.1"]
    assert exercise["status"] == "passed" and exercise["earned"] == points_of("0.1"), exercise
    raising = body + "\nraise RuntimeError('a stray line')\n"
    exercise = _by_task(_graded(_submission(tmp_path, PRIMER, {"0.1": raising}, "raising"), capsys, "0.1"))["0.1"]
    assert exercise["status"] == "passed" and exercise["earned"] == points_of("0.1")  # decode_step was defined first
    assert any("its answer cell raised RuntimeError: a stray line" in n for n in exercise["notes"]), exercise


def test_honest_empty_and_buggy_submissions_score_what_they_earn(tmp_path, capsys):
    full = _graded(ROOT / "solutions" / f"{PRIMER}.ipynb", capsys)
    assert full["earned"] == full["points"] == sum(e.points for e in of_chapter("ch0"))
    assert not any(e["review"] for e in full["exercises"]), full
    empty = _graded(ROOT / "labs" / f"{PRIMER}.ipynb", capsys)
    assert empty["earned"] == 0 and empty["points"] == full["points"]
    buggy = _solution_source(PRIMER, "decode_step").replace(
        '    if nan_flag:\n        raise ValueError("NaN in logits")\n', "")
    assert buggy != _solution_source(PRIMER, "decode_step")
    partial = _by_task(_graded(_submission(tmp_path, PRIMER, {"0.1": buggy}), capsys, "0.1"))["0.1"]
    assert partial["earned"] == round(points_of("0.1") * 4 / 5, 2) and not partial["review"]


def test_a_bug_in_1_1_costs_1_1_only(tmp_path, capsys):
    """1.2's class inherits 1.1's forward: with 1.1 broken, 1.2 is judged on the package's 1.1 and keeps its points."""
    nb = nbformat.read(ROOT / "solutions" / "01_slice_then_split.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "class AllPool(" in c.source)
    broken = cell.source.replace("return [ch1.kept_chunk(c, finished=True, first_chunk=True, "
                                 "clone_finished=self.clone_finished)\n                    for c in chunks]",
                                 "return chunks")
    assert broken != cell.source
    summary = _by_task(_graded(_submission(tmp_path, "01_slice_then_split", {"1.1": broken}), capsys))
    assert 0 < summary["1.1"]["earned"] < points_of("1.1")
    assert summary["1.2"]["earned"] == points_of("1.2"), summary["1.2"]
    assert any("judged on the package's 1.1" in n for n in summary["1.2"]["notes"])


def test_stretch_points_are_less_than_every_core_exercise_of_their_chapter():
    for exercise in EXERCISES.values():
        if exercise.stretch:
            core = [e.points for e in of_chapter(exercise.chapter) if not e.stretch]
            assert exercise.points < min(core), exercise


def test_every_solution_check_cell_calls_what_the_grader_calls():
    from synclab.lab.chapters import CHAPTERS
    from synclab.lab.labgen import cell_roles

    for chapter, stem in CHAPTERS.items():
        nb = nbformat.read(ROOT / "solutions" / f"{stem}.ipynb", as_version=4)
        roles = cell_roles(nb)
        calls = {task: c.source.strip() for c in nb.cells for role, task in [roles.get(c.get("id", ""), ("", ""))]
                 if role == "check"}
        assert calls == {e.task: e.check for e in of_chapter(chapter)}, chapter


def test_a_setup_line_the_grader_cannot_run_is_passed_over_and_said(tmp_path):
    """Chapter 6's ``load_fixes("..")`` reads the student's other chapters, which the grader's temp folder lacks:
    the exercises that do not use ``fixes`` are judged as usual, with no note about a line they never read."""
    from synclab.lab.judge import judge_notebook
    from synclab.lab.labgen import generate_lab

    stem = "06_capstone_engine_step"
    solution = nbformat.read(ROOT / "solutions" / f"{stem}.ipynb", as_version=4)
    trusted = generate_lab(solution, f"solutions/{stem}.ipynb")
    for nb in (solution, trusted):
        setup = next(c for c in nb.cells if c.cell_type == "code" and "= load_fixes(" in c.source)
        setup.source = re.sub(r"fixes = load_fixes\(.*", 'fixes = load_fixes("..")  # the course folder',
                              setup.source)
    verdict = judge_notebook(solution, ["6.1"], trusted)["6.1"]  # its cells do not read `fixes`: nothing to say
    assert verdict.report is not None and verdict.report.passed and not verdict.review, verdict
    assert verdict.notes == [], verdict.notes


def test_a_setup_line_that_raised_is_said_to_the_exercises_that_read_what_it_binds():
    from synclab.lab.cell_runner import _bound, run_setup, used_names

    namespace: dict = {}
    failed = run_setup('fixes = load_fixes("..")\nfor config in fixed:\n    pass\nx = 1\n', "<setup>", namespace)
    assert [bound for _, bound in failed] == [{"fixes"}, {"config"}] and namespace["x"] == 1
    reads = used_names(["def ablation_row(config, workload):\n    return run(workload, config, fixes)\n", "ch6.check(f)"])
    assert reads == {"run", "fixes", "ch6", "f"}  # `config` is its own parameter: not the setup's
    assert _bound(__import__("ast").parse("import a.b as c, d.e").body[0]) == {"c", "d"}


@pytest.mark.skipif(not (os.geteuid() == 0 and shutil.which("setpriv")), reason="needs root and util-linux's setpriv")
def test_a_sandboxed_worker_reaches_no_course_file_and_grades_the_same(tmp_path, capsys):
    """The same answer, which also reads a file of the instructor's outside the course's folder (the audit lets it
    read there): unsandboxed it can, and then answers wrongly; as ``nobody`` it cannot, and earns what its code
    earns (the instructors' page: JudgeChecks.sandbox, and grade --sandbox)."""
    from synclab.lab.judge import judge_notebook

    course = tmp_path / "course"
    course.mkdir(mode=0o700)
    (course / "secret.txt").write_text("the answers")
    honest = _solution_source(PRIMER, "decode_step").replace("def decode_step(", "def _decode_step(")
    # numpy reads files too: nothing the reading of the answer can tell from honest use
    answer = "import numpy\n\n" + honest + f'''

def decode_step(*args, **kwargs):
    try:
        numpy.fromfile({str(course / "secret.txt")!r}, dtype=numpy.uint8)
    except OSError:
        return _decode_step(*args, **kwargs)
    raise RuntimeError("it read the instructor's file")
'''
    path = _submission(tmp_path, PRIMER, {"0.1": answer})
    sandbox = "setpriv --reuid=nobody --regid=nogroup --clear-groups --"
    problem = sandbox_problem(tuple(sandbox.split()))
    if problem is not None:  # this clone sits where nobody cannot read it (a 0700 home, a mktemp -d folder)
        pytest.skip(problem)
    assert cli.main(["grade", str(path), "--task", "0.1", "--json", "--sandbox", sandbox]) == 0
    exercise = _by_task(json.loads(capsys.readouterr().out))["0.1"]
    assert exercise["earned"] == points_of("0.1"), exercise
    nb = nbformat.read(path, as_version=4)
    verdict = judge_notebook(nb, ["0.1"])["0.1"]  # the control: the grader's own user reads the file
    assert not verdict.report.passed, verdict


def test_a_sandbox_the_worker_cannot_start_in_is_said_before_grading_and_grades_nothing(tmp_path):
    """A sandbox's user who cannot read the grader's install: every exercise would score 0. The grader says why
    first, on any machine (here a "sandbox" command that fails as such a user's python would)."""
    from synclab.lab.judge import judge_notebook

    unreadable = [sys.executable, "-c", "import sys; sys.exit('PermissionError: /home/grader/course')", "--"]
    nb = nbformat.read(_submission(tmp_path, PRIMER, {}), as_version=4)
    verdicts = judge_notebook(nb, ["0.1", "0.2"], sandbox=unreadable)
    assert set(verdicts) == {"0.1", "0.2"}
    for verdict in verdicts.values():
        assert verdict.report is None and "cannot start under the sandbox" in verdict.error, verdict
        assert "PermissionError: /home/grader/course" in verdict.error and "chmod o+rx" in verdict.error


def test_a_correct_answer_that_reads_or_sets_the_environment_earns_its_points(tmp_path, capsys):
    """Issue: a correct 0.1 with a debug switch read from os.environ was zeroed. Reading the environment leaves no
    review line; setting a variable is seen and named, and the score is still the checks'."""
    source = "import os\n\nDEBUG = os.environ.get('DEBUG_DECODE') == '1'\n\n" + _solution_source(PRIMER, "decode_step")
    row = _by_task(_graded(_submission(tmp_path, PRIMER, {"0.1": source}), capsys, "0.1"))["0.1"]
    assert row["status"] == "passed" and row["earned"] == row["points"] and row["review"] == [], row
    sets = "import os\nos.environ['SYNCLAB_DEVICE'] = 'sim'\n\n" + _solution_source(PRIMER, "decode_step")
    row = _by_task(_graded(_submission(tmp_path, PRIMER, {"0.1": sets}, "sets"), capsys, "0.1"))["0.1"]
    assert row["status"] == "passed" and row["earned"] == row["points"], row
    assert any("os.putenv" in line for line in row["review"]), row


def test_the_worker_imports_a_package_with_no_answer_beside_it(tmp_path):
    """No oracle in the grader's reach: the package's own notebook loader, asked for the solution by the path
    relative to the package, finds the students' tree (labs as generated, no solutions/), and the answer that
    leans on it earns nothing. The audit hook plays no part here (the path is not the course's)."""
    from synclab.lab.judge import answer_install, grading_install, judge_notebook

    install = grading_install()
    assert (install / "synclab" / "__init__.py").exists() and (install / "labs").is_dir()
    assert not (install / "solutions").exists() and not (answer_install() / "solutions").exists()
    answer = ("from synclab.capstone.workloads import load_function\n\n\n"
              "def decode_step(batch):\n"
              "    return load_function('solutions/00_primer.ipynb', 'decode_step', {})(batch)\n")
    nb = nbformat.read(_submission(tmp_path, PRIMER, {"0.1": answer}), as_version=4)
    verdict = judge_notebook(nb, ["0.1"], scan=False)["0.1"]
    assert verdict.report is not None and verdict.report.earned == 0, verdict
    # 0.1 is judged apart: its answer runs in a process of its own, on the install without the answers
    assert "FileNotFoundError" in str(verdict.report), verdict
    assert not any("sandbox" in line for line in verdict.review), verdict


# ----------------------------------------------------------------------------- the verdict, verified


def test_a_report_that_says_passed_without_the_right_results_counts_for_nothing(monkeypatch):
    """The verdict out of the reader's reach: suppose code in an exercise's process reached its channel and its
    token and wrote "every check passed" (as the red team's pickle once did, through frames the audit hook now
    refuses). Unverified, the grader believed it; verified against the solutions judged on the same seed, a check
    counts only where its process saw the right answers' results, which it can give only by computing them."""
    from synclab.lab import judge

    stub = nbformat.read(ROOT / "labs" / f"{PRIMER}.ipynb", as_version=4)  # nothing written: every check a stub
    solution = nbformat.read(ROOT / "solutions" / f"{PRIMER}.ipynb", as_version=4)
    honest = judge.judge_notebook(solution, trusted=stub, seed=7)
    real_worker, calls = judge.run_worker, []

    def forging_worker(chapter, exercises, *args, **kwargs):
        calls.append([e["task"] for e in exercises])
        if len(calls) > 1:  # the solutions' own run: the grader's, untouched
            return real_worker(chapter, exercises, *args, **kwargs)
        token, forged = "a-token-the-forger-found", []  # the channel and its token, reached
        for task, verdict in honest.items():  # the outcomes of a right answer, with no results behind them
            forged.append(token + json.dumps({"task": task, "report": verdict.report.to_dict(), "review": [],
                                              "notes": [], "error": "",
                                              "witnesses": {n: "0" * 20 if w else "" for n, w in
                                                            verdict.witnesses.items()}}))
        return forged, "", token

    monkeypatch.setattr(judge, "run_worker", forging_worker)
    believed = judge.judge_notebook(stub, trusted=stub, seed=7)
    assert all(v.passed for v in believed.values())  # unverified: the channel is the verdict
    calls.clear()
    judge._reference_verdicts.cache_clear()
    verified = judge.judge_notebook(stub, trusted=stub, reference=solution, seed=7)
    assert calls == [["0.1", "0.2"], ["0.1", "0.2"]]  # the submission, then the solutions on the same seed
    for task, verdict in verified.items():
        witnessed = [o for o in honest[task].report.outcomes if honest[task].witnesses.get(o.key)]
        assert witnessed, task  # every exercise of the chapter has a check whose results are verified
        failed = {o.name for o in verdict.report.outcomes if not o.ok}
        assert failed == {o.name for o in witnessed}, (task, failed)
        assert all(judge.VERIFY_FAILED in o.message for o in verdict.report.outcomes if not o.ok)
        assert not verdict.passed


def _reference_key(reference, trusted, tasks, seed):
    from synclab.lab.judge import JUDGE_TIME_LIMIT_S

    return nbformat.writes(reference), nbformat.writes(trusted), tasks, JUDGE_TIME_LIMIT_S, (), seed


def test_a_right_answer_is_verified_as_right_and_the_solutions_run_once(monkeypatch):
    """An honest alternative passes verified: the witnesses are values compared exactly, so every right answer
    gives the same; and one run of the solutions serves every submission of a grading process."""
    from synclab.lab import judge

    from tests.test_primer import packs_three_int64_per_request  # another hand's right answer

    alternative = inspect.getsource(packs_three_int64_per_request).replace(
        "def packs_three_int64_per_request(", "def decode_step(")
    lab = nbformat.read(ROOT / "labs" / f"{PRIMER}.ipynb", as_version=4)
    solution = nbformat.read(ROOT / "solutions" / f"{PRIMER}.ipynb", as_version=4)
    real_worker, calls = judge.run_worker, []

    def counting_worker(*args, **kwargs):
        calls.append(1)
        return real_worker(*args, **kwargs)

    monkeypatch.setattr(judge, "run_worker", counting_worker)
    judge._reference_verdicts.cache_clear()
    submission = nbformat.read(ROOT / "solutions" / f"{PRIMER}.ipynb", as_version=4)
    for cell in submission.cells:
        if cell.cell_type == "code" and "def decode_step(" in cell.source:
            cell.source = alternative
    verdicts = judge.judge_notebook(submission, ["0.1"], trusted=lab, reference=solution, seed=11)
    assert verdicts["0.1"].passed and not verdicts["0.1"].notes, str(verdicts["0.1"])
    assert len(calls) == 2  # the submission, then the solutions
    hits = judge._reference_verdicts.cache_info().hits
    judge.verify(verdicts["0.1"], judge._reference_verdicts(*_reference_key(solution, lab, ("0.1",), 11))["0.1"])
    assert judge._reference_verdicts.cache_info().hits == hits + 1 and len(calls) == 2  # the next submission's


def test_the_worker_judges_on_the_simulated_device_whatever_the_machine(monkeypatch):
    """The grader's verdict never depends on its hardware: the worker's environment names the simulated device even
    where the grader's own does not (a GPU machine), and the person's choice reaches the processes the lab starts."""
    from synclab.device import DEVICE_ENV, SIMULATED
    from synclab.lab.judge import _worker_env
    from synclab.run_modes import reader_environment

    monkeypatch.delenv(DEVICE_ENV, raising=False)
    assert _worker_env()[DEVICE_ENV] == SIMULATED and DEVICE_ENV not in reader_environment()
    monkeypatch.setenv(DEVICE_ENV, SIMULATED)
    assert reader_environment()[DEVICE_ENV] == SIMULATED
    monkeypatch.setenv("SYNCLAB_SOME_MODE", "1")
    assert "SYNCLAB_SOME_MODE" not in reader_environment()  # no mode of ours reaches a reader's run


def test_chapter_5s_right_answers_are_verified_as_right_across_processes():
    """5.2's witnesses (a scheduler's decisions and its cache's state, as data) are the same in the submission's
    process and the right answers' (no address, no hash order in them): the solution judged against itself passes
    verified. The other chapters' witnesses are values and tensors' bytes, the same in any process."""
    from synclab.lab import judge

    name = "05_list_based_caches"
    lab = nbformat.read(ROOT / "labs" / f"{name}.ipynb", as_version=4)
    solution = nbformat.read(ROOT / "solutions" / f"{name}.ipynb", as_version=4)
    verdict = judge.judge_notebook(solution, ["5.2"], trusted=lab, reference=solution, seed=5)["5.2"]
    assert verdict.passed and not verdict.notes, str(verdict)
    assert sum(map(bool, verdict.witnesses.values())) == 4  # every check verified, each confirmed


HIDES_IN_A_DEEPCOPY = '''import copy


class _Memo:  # copy.deepcopy's memo, whose lookup runs whatever it is handed
    def __init__(self, key, fn):
        self.key, self.fn = key, fn

    def get(self, key, default=None):
        return default

    def __contains__(self, key):
        return key == self.key

    def __getitem__(self, key):
        return self.fn() if key == self.key else []

    def __setitem__(self, key, value):
        pass
'''
HIDES_IN_A_DEEPCOPY_0_1 = HIDES_IN_A_DEEPCOPY + '''

def decode_step(batch):
    """The baseline's per-request reads, run inside Tensor.__deepcopy__, whose body the counters set aside."""
    return copy.deepcopy(batch.logits, _Memo(id(batch.logits), lambda: _slow(batch)))
'''


def test_the_readers_code_run_inside_a_torch_function_the_counters_set_aside_is_named(tmp_path):
    """Red team, third round (20 of 20 on 1.1, 12 of 12 on 6.1, 14 of 14 on 4.1): a counting mode runs a torch
    function's own body with the modes set aside, so code a memo runs inside Tensor.__deepcopy__ is counted by
    nothing. At 6.1, whose runner's hooks run on the simulated device inside the counted engine steps, the device is
    set aside with the counters: one hook's planted syncs hidden so cannot run at all, and the sync check crashes.
    GAP, said on the instructors' page: at 0.1, whose baseline reads host data, the trick earns the sync check and no
    review line (a count is the answer process's word, and nothing watches it there)."""
    from synclab.lab.judge import judge_notebook

    right = _solution_source(CAPSTONE, "clean_runner").replace("def clean_runner(", "def _right_runner(")
    planted = "\n\ndef clean_runner():\n    class Hidden(_right_runner()):  # the planted syncs of one hook, hidden\n" \
        "        def _apply_sampling_extras(self, logits, reqs):\n" \
        "            return copy.deepcopy(logits, _Memo(id(logits), " \
        "lambda: PlantedRunner._apply_sampling_extras(self, logits, reqs)))\n\n    return Hidden\n"
    answer = right + "\n" + HIDES_IN_A_DEEPCOPY + planted
    nb = nbformat.read(_submission(tmp_path, CAPSTONE, {"6.1": answer}), as_version=4)
    verdict = judge_notebook(nb, ["6.1"], scan=False)["6.1"]
    assert verdict.report is not None and not verdict.review, verdict
    syncs = next(o for o in verdict.report.outcomes if o.name == NO_STRAY)
    assert syncs.status == "crashed" and "accelerator" in syncs.message, syncs
    slow = _solution_source(PRIMER, "decode_step").replace("def decode_step(", "def _right(")
    answer = slow + "\n\ndef _slow(batch):\n    batch.logits.tolist()\n    return _right(batch)\n\n" + \
        HIDES_IN_A_DEEPCOPY_0_1
    nb = nbformat.read(_submission(tmp_path, PRIMER, {"0.1": answer}, "apart"), as_version=4)
    verdict = judge_notebook(nb, ["0.1"], scan=False)["0.1"]
    assert verdict.report is not None and verdict.report.passed and not verdict.review, verdict


def test_one_warm_worker_serves_a_process_and_no_job_changes_the_next(tmp_path, capsys):
    """The grader's worker is kept warm per process (synclab.lab.worker_server): one server forks every job's worker,
    and a job whose answer rewrites the checks' machinery (in its own process) leaves the next job's as written; a job with
    another environment gets a server of its own, and the seed (a job's own) does not start one."""
    from synclab.lab import worker_server

    rebinds = REBINDS_RUN_ONE + _solution_source(CAPSTONE, "ablation_row")
    cheat = _by_task(_graded(_submission(tmp_path, CAPSTONE, {"6.2": rebinds}, "cheat"), capsys, "6.2"))["6.2"]
    # judged apart: the rebinding is the answer's process's own; the row is right, so it earns what the honest row does
    assert cheat["earned"] == points_of("6.2"), cheat
    def workers() -> dict[str, int]:  # beside them, one answers' server for the exercises judged apart
        return {key: server._proc.pid for key, server in worker_server._SERVERS.items() if "judge_worker" in key}

    servers = workers()
    assert len(servers) == 1, servers
    honest = _by_task(_graded(ROOT / "solutions" / f"{CAPSTONE}.ipynb", capsys, "6.2"))["6.2"]
    assert honest["earned"] == points_of("6.2") and not honest["review"], honest
    assert workers() == servers  # the same one
    from synclab.lab.judge_worker import SEED_ENV

    env = {"A": "1", SEED_ENV: "1"}
    command = [sys.executable, "-c", "import time; time.sleep(60)"]
    first = worker_server.server_for(command, env, (SEED_ENV,))
    assert worker_server.server_for(command, {**env, SEED_ENV: "2"}, (SEED_ENV,)) is first
    assert worker_server.server_for(command, {**env, "A": "2"}, (SEED_ENV,)) is not first
    worker_server.close_all()  # the sleepers; the next grading starts its server again
