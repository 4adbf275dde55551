"""The honest corpus: answers written the ways people write code, each put into its lab as a learner would.

``right/<task>-<name>.py`` is a correct answer: the whole answer cell (or cells, one after the other) of Exercise
``<task>``, in any style: imports, module-level constants and loggers, helpers, lambdas, dunders, prints. Each must
earn full marks on every path, with no review line that zeroes it. ``wrong/<task>-<name>.py`` is an honest mistake;
its first line says which check it fails, by the check's id (:attr:`synclab.checks.Check.id`)::

    # fails: one-wait

What that check then tells the reader is stored whole, as a snapshot: ``tests/snapshots/clauses/<clause>.txt`` for a
mistake that breaks a clause of a contract (``tests/test_clauses.py``, where the clause's few words also say which
fault the message must name), ``tests/snapshots/wrong/<file's stem>.txt`` for the others, on seed 0. So a reworded
message touches its check's room and the snapshots it changes, never the corpus.

The answer replaces the solution's answer cell(s) of its task in the solution notebook (the other exercises keep
the solution's answers), so :func:`notebook_with` gives the notebook a learner who wrote it would hand in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode

from synclab.lab.chapters import CHAPTERS
from synclab.lab.exercises import EXERCISES

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@dataclass(frozen=True)
class Answer:
    path: Path
    task: str
    source: str
    fails: str  # the id of the check a wrong answer fails ("" for a right one)

    @property
    def name(self) -> str:
        return f"{self.path.parent.name}/{self.path.stem}"


def answers(kind: str) -> list[Answer]:
    """Every answer of ``kind`` ("right" or "wrong"), in task order."""
    found = []
    for path in sorted((HERE / kind).glob("*.py")):
        task = path.stem.split("-")[0]
        if task not in EXERCISES:
            raise ValueError(f"{path.name}: no exercise {task} (name it <task>-<what>.py)")
        source = path.read_text()
        fails = re.search(r"^# fails: (.+)$", source, re.M)
        if kind == "wrong" and not fails:
            raise ValueError(f"{path.name}: a wrong answer says which check it fails (# fails: ...)")
        if re.search(r"^# says: ", source, re.M):
            raise ValueError(f"{path.name}: what a check says is kept in its snapshot (tests/snapshots/), not here")
        found.append(Answer(path, task, source, fails[1].strip() if fails else ""))
    return found


def solution_of(task: str) -> Path:
    return ROOT / "solutions" / f"{CHAPTERS[EXERCISES[task].chapter]}.ipynb"


def notebook_with(answer: Answer) -> NotebookNode:
    """The solution notebook with ``answer`` in place of its task's answer cell(s): the first of them holds the
    answer, the others are emptied (a learner's lab has them, filled with whatever the learner wrote there). Where
    one cell answers two exercises (3.3 and 3.4), the answer answers both."""
    nb = nbformat.read(solution_of(answer.task), as_version=4)
    marker = f"### BEGIN SOLUTION {answer.task}"
    cells = [c for c in nb.cells if c.cell_type == "code" and marker in c.source]
    if not cells:
        raise ValueError(f"{solution_of(answer.task).name} has no answer cell for {answer.task}")
    cells[0].source = answer.source
    cells[0].outputs = []
    for cell in cells[1:]:
        cell.source = "# (answered in the cell above)\n"
        cell.outputs = []
    return nb


def judged_in_a_namespace(answer: Answer, seed: int = 0) -> Any:
    """``answer``'s check run directly in this process, on ``seed``: the solution's setup cell, the chapter's earlier
    answers (the book's), then the answer, in one namespace, as a learner's notebook holds them when its check cell
    runs (not the grader's path: tests/test_device_process.py compares two devices this way)."""
    nb = nbformat.read(solution_of(answer.task), as_version=4)
    namespace: dict[str, Any] = {}
    exec(compile(nb.cells[1].source, "<setup>", "exec"), namespace)
    order = tuple(map(int, answer.task.split(".")))
    for cell in nb.cells:
        found = re.search(r"### BEGIN SOLUTION (\d+)\.(\d+)", cell.source) if cell.cell_type == "code" else None
        if found and (int(found[1]), int(found[2])) < order:
            exec(compile(cell.source, f"<solution {found[1]}.{found[2]}>", "exec"), namespace)
    exec(compile(answer.source, str(answer.path), "exec"), namespace)
    return eval(EXERCISES[answer.task].check[:-1] + f", seed={seed})", namespace)
