"""Hints before answers: every exercise has a two-step ladder, on its page and in its lab, and no answer comes first.

The ladders live once, each chapter's in its module in synclab/lab/course/ (synclab/lab/hints.py gathers them).
A page shows one with ``{hints} N.M`` after the
exercise's contract (its body, vLLM's code after the PR, is the last rung); the lab generator puts
the two hints before the exercise's first code cell. Each rule is shown to fail on a planted case.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from synclab.lab.exercises import EXERCISES
from synclab.lab.hints import HINTS, lab_markdown
from synclab.lab.labgen import generate_lab
from tests.notebook_code import ROOT

pytestmark = pytest.mark.sim  # no device involved (conftest.py)

PAGES = {p.stem[:2]: p for p in (ROOT / "book").glob("0*.md")}
_SOLUTION = re.compile(r"### BEGIN SOLUTION[^\n]*\n(.*?)### END SOLUTION", re.DOTALL)


def answers_before_their_exercise(page: str) -> list[str]:
    """Folds that hold an answer and open before the page's exercises ("## The lab")."""
    lab = page.find("\n## The lab")
    head = page if lab < 0 else page[:lab]
    return [line for line in head.splitlines()
            if re.match(r"^`{3,}\{(dropdown|hints)\}", line) and re.search(r"answer|\{hints\}", line)]


def test_every_exercise_has_a_ladder_of_two_hints():
    assert set(HINTS) == set(EXERCISES)
    for task, hints in HINTS.items():
        assert len(hints) == 2 and all(h.title and len(h.text) > 80 for h in hints), task


@pytest.mark.parametrize("task", sorted(EXERCISES))
def test_every_exercise_shows_its_ladder_on_its_page_after_its_contract(task):
    page = PAGES[f"0{task.split('.')[0]}"].read_text()
    assert f"{{hints}} {task}" in page, f"no {{hints}} {task} on its page"
    assert page.index(f"{{hints}} {task}") > page.index("\n## The lab"), f"{task}'s ladder comes before the exercise"


@pytest.mark.parametrize("chapter", sorted(PAGES))
def test_no_answer_comes_before_its_exercise_on_a_page(chapter):
    assert answers_before_their_exercise(PAGES[chapter].read_text()) == []


def test_an_answer_fold_before_the_exercise_is_caught():
    page = ("# P\n\n## The vLLM code\n\n````{dropdown} After the PR: the answer to Exercise 9.1\n```python\nx\n```\n"
            "````\n\n## The lab\n\n**9.1** write it.\n")
    assert answers_before_their_exercise(page) == ["````{dropdown} After the PR: the answer to Exercise 9.1"]


@pytest.mark.parametrize("task", sorted(EXERCISES))
def test_every_lab_shows_the_ladder_before_the_exercises_first_code_cell(task):
    lab = json.loads((ROOT / "labs" / f"{PAGES['0' + task.split('.')[0]].stem}.ipynb").read_text())
    sources = ["".join(c["source"]) for c in lab["cells"]]
    heading = next(i for i, s in enumerate(sources) if re.search(rf"^## Exercise {re.escape(task)}\b", s, re.M))
    first_code = next(i for i in range(heading + 1, len(sources)) if lab["cells"][i]["cell_type"] == "code")
    assert lab_markdown(task) in sources[heading:first_code], f"lab {task}: no hints before its first code cell"


def test_the_generator_places_the_ladder_after_the_whole_contract():
    solution = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "markdown", "id": "a", "metadata": {}, "source": "## Exercise 1.1 — x"},
        {"cell_type": "markdown", "id": "b", "metadata": {}, "source": "more contract"},
        {"cell_type": "code", "id": "c", "metadata": {}, "outputs": [], "execution_count": None,
         "source": "def f():\n    ### BEGIN SOLUTION 1.1\n    return 1\n    ### END SOLUTION\n"}]}
    import nbformat
    lab = generate_lab(nbformat.from_dict(solution), "solutions/x.ipynb")
    from synclab.lab.audit import ANSWER_RULES

    assert [c.source for c in lab.cells][:4] == [ANSWER_RULES, "## Exercise 1.1 — x", "more contract",
                                                 lab_markdown("1.1")]


def pasted_lines(task: str, text: str) -> list[str]:
    """The statements of ``task``'s solution (over 30 characters, comments aside) that ``text`` holds."""
    chapter = PAGES[f"0{task.split('.')[0]}"].stem
    solution = json.loads((ROOT / "solutions" / f"{chapter}.ipynb").read_text())
    lines = {line.split("#")[0].strip() for cell in solution["cells"] if cell["cell_type"] == "code"
             for region in _SOLUTION.findall("".join(cell["source"])) for line in region.splitlines()}
    return sorted(line for line in lines if len(line) > 30 and line in text)


@pytest.mark.parametrize("task", sorted(EXERCISES))
def test_no_hint_holds_a_line_of_the_solution(task):
    """A hint names where the data lives and which operations fit; it never holds an answer's line to paste."""
    assert pasted_lines(task, " ".join(h.text for h in HINTS[task])) == []


def test_a_hint_with_a_pasted_solution_line_is_caught():
    pasted = "Try `buf[num_logits:] = logits_indices[-1]` and see."
    assert pasted_lines("3.4", pasted) == ["buf[num_logits:] = logits_indices[-1]"]
