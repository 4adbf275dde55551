"""Every clause of every contract has its case, its honest mistake and its message (the chapters' ``CLAUSES`` tables).

Each chapter's checks room declares its exercises' clauses (:class:`synclab.checks.Clause`): the contract's words as
the page's *The lab* and the lab's exercise state them, the check and the fixed case that exercise the clause, an
honest mistake (``tests/honest/wrong/``) that breaks it, and the words its failure must hold. Here:

* each clause's words are found in the page's *The lab* and in the lab's exercise (markup and spacing aside);
* each clause has a case, and a wrong version whose ``# fails:`` names the clause's check;
* each wrong version, put into its lab as a learner would, fails the clause's check on the clause's case on every
  seed of :data:`tests.honest.on_seeds.SEEDS`, with the clause's words in the failure, and the failure's whole text
  on the first seed is its stored snapshot (``tests/snapshots/clauses/<clause>.txt``; ``pytest --refresh-snapshots``
  rewrites them): rewording a message touches its checks room (the message and the clause's words) and its snapshot;
  every other check it fails is one the clause names as a consequence (``also``), on the first seed (all checks
  run), the later seeds running the clause's checks alone.

These runs are the learner's-path judgement of the wrong versions they name: ``tests/test_honest_corpus*.py`` leaves
them to this file (:data:`CLAUSED`) and judges the rest.
"""

from __future__ import annotations

import functools
import importlib
import re
from pathlib import Path

import nbformat
import pytest

from synclab.checks import Clause
from synclab.lab.chapters import CHAPTERS, PACKAGES
from synclab.lab.exercises import EXERCISES
from tests.honest.corpus import ROOT, answers
from tests.honest.on_seeds import SEEDS, reports_on_seeds
from tests.snapshots import failure_text, matches_snapshot

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

# the exercises with a clause table: every chapter's (the registry's)
TABLED = tuple(CHAPTERS)
TASKS = [t for t, e in EXERCISES.items() if e.chapter in TABLED]
CLAUSES: list[Clause] = [c for ch in TABLED
                         for c in getattr(importlib.import_module(f"{PACKAGES[ch]}.checks"), "CLAUSES", [])]
WRONG = {a.path.stem: a for a in answers("wrong")}
CLAUSED = frozenset(c.wrong for c in CLAUSES)


def normalised(text: str) -> str:
    """Text as a reader sees it, in lower case: no emphasis or code marks, HTML tags or escapes, one space between
    words."""
    text = re.sub(r"</?[a-zA-Z][^>]*>", " ", text)
    text = re.sub(r"[*`\\]", "", text)
    return re.sub(r"\s+", " ", text).strip().lower()


@functools.cache
def page_contract(chapter: str) -> str:
    """The page's *The lab* section: every exercise's contract, as the page states it."""
    page = (ROOT / "book" / f"{CHAPTERS[chapter]}.md").read_text()
    section = page.split("\n## The lab\n", 1)[1].split("\n## ", 1)[0]
    return normalised(section)


@functools.cache
def lab_contract(task: str) -> str:
    """The lab's exercise ``task``: its cells from its heading to its check cell (the stub's docstring included)."""
    nb = nbformat.read(ROOT / "labs" / f"{CHAPTERS[EXERCISES[task].chapter]}.ipynb", as_version=4)
    start = next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
                 and re.search(rf"^## Exercise {re.escape(task)}\b", c.source, re.M))
    call = EXERCISES[task].check.split("(")[0]
    end = next(i for i, c in enumerate(nb.cells) if i > start and c.cell_type == "code" and call + "(" in c.source)
    return normalised("\n".join(c.source for c in nb.cells[start:end]))


def _ids(clauses: list[Clause]) -> list[str]:
    return [c.id for c in clauses]


def test_every_exercise_has_a_clause_table_of_unique_ids():
    assert {c.task for c in CLAUSES} == set(TASKS), set(TASKS) - {c.task for c in CLAUSES}
    assert len({c.id for c in CLAUSES}) == len(CLAUSES), [c.id for c in CLAUSES]
    assert len(CLAUSED) == len(CLAUSES), "one honest mistake per clause: it breaks that clause, and is judged once"


@pytest.mark.parametrize("clause", CLAUSES, ids=_ids(CLAUSES))
def test_a_clause_is_in_the_contract_on_the_page_and_in_the_lab(clause):
    assert clause.task in EXERCISES and clause.check and clause.case and clause.says, clause
    page = page_contract(EXERCISES[clause.task].chapter)
    assert normalised(clause.phrase) in page, f"the page's The lab does not say {clause.phrase!r}"
    lab_words = normalised(clause.lab or clause.phrase)
    assert lab_words in lab_contract(clause.task), f"the lab's Exercise {clause.task} does not say {lab_words!r}"


@pytest.mark.parametrize("clause", CLAUSES, ids=_ids(CLAUSES))
def test_a_clause_has_a_wrong_version_that_names_its_check(clause):
    wrong = WRONG.get(clause.wrong)
    assert wrong is not None, f"no tests/honest/wrong/{clause.wrong}.py"
    assert wrong.task == clause.task, (wrong.task, clause.task)
    assert wrong.fails == clause.check, (wrong.fails, clause.check)  # both name the check by its id


def _said(outcome) -> str:
    return f"{outcome.message} {outcome.got} {outcome.hint}"


@pytest.mark.parametrize("clause", CLAUSES, ids=_ids(CLAUSES))
def test_a_wrong_version_fails_its_clause_alone_on_every_seed(clause):
    wrong = WRONG[clause.wrong]
    named = (clause.check, *clause.also)
    reports = reports_on_seeds(wrong, SEEDS, only=named)
    for n, (seed, report) in enumerate(reports.items()):
        failed = [o for o in report.outcomes if o.status in ("failed", "crashed", "timed out")]
        mine = [o for o in failed if o.check_id == clause.check]
        if n and not any(o.check_id == clause.check for o in report.outcomes):
            continue  # a check that draws no random case ran on the first seed only: its verdict is the same
        assert mine, f"seed {seed}: {clause.wrong} passes {clause.check!r}\n{report}"
        outcome = mine[0]
        assert clause.case in outcome.case, f"seed {seed}: failed on {outcome.case!r}, not on {clause.case!r}"
        assert clause.says in _said(outcome), f"seed {seed}: the failure does not say {clause.says!r}\n{report}"
        if n == 0:  # the whole text, as the reader gets it, reviewed in its snapshot
            matches_snapshot(f"clauses/{clause.id}", failure_text(outcome))
        others = [o.name for o in failed if o.check_id not in named]
        assert not others, f"seed {seed}: {clause.wrong} also fails {others}, another clause's check\n{report}"
