"""The honest corpus (``tests/honest/``): right answers earn full marks on every path; honest mistakes fail their check.

Each answer is put into its lab as a learner would (:func:`tests.honest.corpus.notebook_with`) and judged twice: on
the learner's path (the lab's check cells run in this process, as ``python -m synclab check --task`` runs them) and
on the grader's (each exercise in a fresh process, verified against the solutions on the same cases, as ``grade
--verify`` and nbgrader's autograding judge it). A right answer, written in any style, earns every point on both and
leaves no review line; an honest mistake fails the check its file names, on both. ``pytest -m heavy
tests/test_nbgrader.py`` adds nbgrader itself. Grow the corpus with every false failure found.
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict

import nbformat
import pytest

from synclab.lab import judge
from synclab.lab.exercises import EXERCISES
from synclab.lab.labgen import generate_lab
from synclab.lab.learner_check import run_here
from synclab.lab.verdicts import Verdict, from_worker
from tests.honest.corpus import ROOT, Answer, answers, notebook_with, solution_of
from tests.honest.on_seeds import reports_on_seeds
from tests.snapshots import failure_text, matches_snapshot

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

RIGHT, WRONG = answers("right"), answers("wrong")
# the learner's path in two files, so that make test's workers share it: chapters 0-3 here, 4-6 in the other
EARLY = ("ch0", "ch1", "ch2", "ch3")
SEED = 20261129  # the grader's seed for this run: the submissions and the right answers see the same cases


def _tasks(answer: Answer) -> list[str]:
    """The exercises an answer's cell answers: one cell holds both 3.3 and 3.4."""
    return ["3.3", "3.4"] if answer.task in ("3.3", "3.4") else [answer.task]


def _ids(found: list[Answer]) -> list[str]:
    return [a.path.stem for a in found]


def test_the_corpus_covers_every_exercise_with_sixty_right_answers():
    assert len(GRADED) == len(ONCE_ZEROED), [a.name for a in GRADED]
    assert len(RIGHT) >= 60, len(RIGHT)
    assert {a.task for a in RIGHT} | {"3.4"} >= set(EXERCISES), set(EXERCISES) - {a.task for a in RIGHT}
    assert {a.task for a in WRONG} | {"3.4"} >= set(EXERCISES), set(EXERCISES) - {a.task for a in WRONG}


# ----------------------------------------------------------------------------- the learner's path


def of_chapters(found: list[Answer], chapters: tuple[str, ...]) -> list[Answer]:
    return [a for a in found if EXERCISES[a.task].chapter in chapters]


def passes_the_learners_check(answer: Answer) -> None:
    run = run_here(notebook_with(answer), _tasks(answer))
    for task in _tasks(answer):
        report = run.reports.get(task)
        assert report is not None, run.errors
        assert report.passed and report.earned == report.points, str(report)


def fails_its_check_on_the_learners_path(answer: Answer) -> None:
    """On seed 0, so that what the check tells the reader is the same each run, and stored whole in its snapshot."""
    report = reports_on_seeds(answer, (0,))[0]
    failed = [o for o in report.outcomes if not o.ok and o.check_id == answer.fails]
    assert failed, (answer.fails, str(report))
    matches_snapshot(f"wrong/{answer.path.stem}", "\n\n".join(failure_text(o) for o in failed))


@pytest.mark.parametrize("answer", of_chapters(RIGHT, EARLY), ids=_ids(of_chapters(RIGHT, EARLY)))
def test_a_right_answer_passes_the_learners_check(answer):
    passes_the_learners_check(answer)


def unclaused(found: list[Answer]) -> list[Answer]:
    """The honest mistakes no clause names: tests/test_clauses.py judges the others on the learner's path, on several
    seeds, with their clause's case and words."""
    from tests.test_clauses import CLAUSED

    return [a for a in found if a.path.stem not in CLAUSED]


@pytest.mark.parametrize("answer", unclaused(of_chapters(WRONG, EARLY)),
                         ids=_ids(unclaused(of_chapters(WRONG, EARLY))))
def test_an_honest_mistake_fails_its_check_on_the_learners_path(answer):
    fails_its_check_on_the_learners_path(answer)


# ----------------------------------------------------------------------------- the grader's path


@functools.lru_cache(maxsize=2)
def _graded(chosen: tuple[Answer, ...]) -> dict[tuple[str, str], Verdict]:
    """``chosen`` judged by the grader, one worker per chapter (each exercise still in a process of its own), and
    verified against the solutions judged once on the same seed: the verdict per (answer, task)."""
    by_chapter: dict[str, list[Answer]] = defaultdict(list)
    for answer in chosen:
        by_chapter[EXERCISES[answer.task].chapter].append(answer)
    verdicts = {}
    for chapter, group in by_chapter.items():
        solution = nbformat.read(solution_of(group[0].task), as_version=4)
        source = f"solutions/{solution_of(group[0].task).name}"
        trusted = generate_lab(solution, source)
        jobs, owners, setup = [], [], []
        for answer in group:
            asked = sorted({*_tasks(answer), *(d for t in _tasks(answer) for d in EXERCISES[t].builds_on)})
            _, exercises, needed, reviews = judge.jobs_for(notebook_with(answer), asked, trusted)
            setup += [cell for cell in needed if cell not in setup]
            for exercise in exercises:
                jobs.append(exercise)
                owners.append((answer, exercise["task"], reviews[exercise["task"]]))
        lines, stderr, token = judge.run_worker(chapter, jobs, setup, True, judge.JUDGE_TIME_LIMIT_S, seed=SEED)
        mine = [json.loads(line[len(token):]) for line in lines if line.startswith(token)]
        assert len(mine) == len(jobs), stderr[-3000:]
        tasks = tuple(sorted({task for _, task, _ in owners}))
        right = judge._reference_verdicts(nbformat.writes(solution), nbformat.writes(trusted), tasks,
                                          judge.JUDGE_TIME_LIMIT_S, (), SEED)
        for (answer, task, review), data in zip(owners, mine):
            verdict = from_worker(data, review)
            judge.verify(verdict, right.get(task))
            verdicts[(answer.name, task)] = verdict
    return verdicts


def _unexpected_review(answer: Answer, lines: list[str]) -> list[str]:
    """The review lines an answer's file does not say it expects (``# review: <a phrase of the line>``): an honest
    answer may test the kind of device, say, which the instructor is shown; any other line is a false alarm."""
    expected = [line.split("# review:", 1)[1].strip() for line in answer.source.splitlines() if "# review:" in line]
    return [line for line in lines if not any(phrase in line for phrase in expected)]


# The grader's path in ``make test``: the answers the grader once zeroed (a worker per chapter and the solutions' own
# run cost seconds each); every answer, right and wrong, with ``-m heavy``.
ONCE_ZEROED = ("0.1-env-debug-dataclass-rowflags", "3.1-lru-cache-numpy-dtype", "4.1-logger-and-constant",
               "4.1-lt-helper-class", "4.1-sys-getattr")


GRADED = [a for a in RIGHT if a.path.stem in ONCE_ZEROED]


@pytest.mark.parametrize("answer", GRADED, ids=_ids(GRADED))
def test_a_right_answer_earns_full_marks_from_the_grader_verified_and_unreviewed(answer):
    _right_from_the_grader(answer, _graded(tuple(GRADED)))


@pytest.mark.heavy
@pytest.mark.parametrize("answer", RIGHT, ids=_ids(RIGHT))
def test_every_right_answer_earns_full_marks_from_the_grader(answer):
    _right_from_the_grader(answer, _graded(tuple(RIGHT + WRONG)))


def _right_from_the_grader(answer: Answer, graded: dict[tuple[str, str], Verdict]) -> None:
    for task in _tasks(answer):
        verdict = graded[(answer.name, task)]
        assert verdict.passed and verdict.share == 1.0, str(verdict)
        assert _unexpected_review(answer, verdict.review) == [], verdict.review


@pytest.mark.heavy
@pytest.mark.parametrize("answer", WRONG, ids=_ids(WRONG))
def test_an_honest_mistake_fails_its_check_in_the_grader_too(answer):
    verdict = _graded(tuple(RIGHT + WRONG))[(answer.name, answer.task)]
    assert verdict.report is not None, verdict
    failed = [o.check_id for o in verdict.report.outcomes if not o.ok]
    assert answer.fails in failed, (answer.fails, str(verdict))


# ----------------------------------------------------------------------------- nbgrader itself (heavy: minutes)


@pytest.mark.heavy
@pytest.mark.parametrize("chapter", sorted({EXERCISES[a.task].chapter for a in RIGHT}))
def test_nbgrader_autograde_gives_every_right_answer_full_marks(tmp_path, chapter):
    """Each right answer of the chapter handed in by a student of its own (the release, solved, with the answer in
    place of its exercise's cells), autograded by nbgrader with the course's configuration."""
    from synclab.lab import cli
    from synclab.lab.chapters import CHAPTERS
    from synclab.lab.nbgrader_run import gradebook_scores, hand_in, release, solved

    stem = CHAPTERS[chapter]
    released = release(ROOT, tmp_path, chapter, stem)
    students = {}
    for n, answer in enumerate(a for a in RIGHT if EXERCISES[a.task].chapter == chapter):
        nb = solved(tmp_path, chapter, stem, released)
        ids = {f"answer-{t.replace('.', '_')}" for t in _tasks(answer)}
        cells = [c for c in nb.cells if any(c.metadata.get("nbgrader", {}).get("grade_id", "").startswith(i)
                                            for i in ids)]
        assert cells, answer.name
        cells[0].source = answer.source
        for cell in cells[1:]:
            cell.source = "# (answered in the cell above)\n"
        students[f"s{n}"] = answer
        hand_in(tmp_path, chapter, stem, f"s{n}", nb)
    assert cli.main(["autograde", chapter, "--course", str(tmp_path), "--jobs", "2"]) == 0
    scores = gradebook_scores(tmp_path, chapter, stem)
    for student, answer in students.items():
        for task in _tasks(answer):
            earned, _ = scores[student][f"check-{task.replace('.', '_')}"]
            assert earned == EXERCISES[task].points, (answer.name, task, scores[student])
