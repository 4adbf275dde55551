"""What a lab notebook's cells are: setup, an exercise's answer, its check, or something else (a demo, a profile).

Read by the learner's check (:mod:`synclab.lab.learner_check`) and by the grader (:mod:`synclab.lab.judge`) alike,
from any notebook: a solution, a lab as generated, a lab a reader filled in, an nbgrader submission. An answer cell
is known by its nbgrader grade id, its stub or its markers, or (where the reader replaced the stub) by the names the
exercise defines (:mod:`synclab.lab.exercises`).
"""

from __future__ import annotations

import ast
import re

from nbformat import NotebookNode

from synclab.lab.exercises import EXERCISES, of_chapter

_STUB = re.compile(r'raise NotImplementedError\("(Exercise [\d.]+|not done yet)"\)')


def code(cell: NotebookNode) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def tasks_of(cell: NotebookNode) -> set[str]:
    """The exercises a cell answers, by nbgrader's grade id, the lab's metadata, or its stub."""
    grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
    if grade_id.startswith("answer-"):
        return {t.replace("_", ".") for t in re.findall(r"\d+_\d+", grade_id)}
    found = {m[1].split()[-1] for m in _STUB.finditer(code(cell)) if m[1].startswith("Exercise")}
    return found | set(re.findall(r"### BEGIN SOLUTION (\d+\.\d+)", code(cell)))


def defined_names(source: str) -> set[str]:
    """The functions and classes ``source`` defines at top level (none if it does not parse)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def defines_any(source: str, names: set[str]) -> bool:
    """Whether ``source`` defines one of ``names`` at top level (read from its lines: it may not parse)."""
    return any(re.search(rf"^(async def|def|class) {re.escape(n)}\b", source, re.M) for n in names)


def check_cell_task(cell: NotebookNode, chapter: str) -> str | None:
    """The exercise whose check cell this is (nbgrader's grade id, or the check call in its source)."""
    grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
    if grade_id.startswith("check-"):
        return grade_id[len("check-"):].replace("_", ".")
    source = code(cell)
    return next((e.task for e in of_chapter(chapter) if e.check in source), None)


def chapter_of(nb: NotebookNode) -> str | None:
    """The chapter whose exercises a notebook holds (the one whose check calls it makes)."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            for exercise in EXERCISES.values():
                if exercise.check in code(cell) or cell.get("metadata", {}).get("nbgrader", {}).get(
                        "grade_id", "") == f"check-{exercise.task.replace('.', '_')}":
                    return exercise.chapter
    return None


def first_exercise_cell(nb: NotebookNode, chapter: str) -> int:
    """Where the reader's part begins: the first exercise heading or answer cell (before it: setup cells)."""
    names = {n for e in of_chapter(chapter) for n in e.defines}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and code(cell).lstrip().startswith("## Exercise"):
            return index
        if cell.cell_type == "code" and (tasks_of(cell) or defined_names(code(cell)) & names
                                         or cell.get("metadata", {}).get("nbgrader", {}).get("solution")):
            return index
    return len(nb.cells)


def check_cells(nb: NotebookNode, chapter: str) -> dict[str, int]:
    """Each exercise's check cell, by task: the first cell that calls its check."""
    found: dict[str, int] = {}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and (task := check_cell_task(cell, chapter)) and task not in found:
            found[task] = index
    return found


def answers_of(source: str, chapter: str) -> set[str]:
    """The exercises a reader's cell answers: its stub or markers, or the names it defines."""
    return {e.task for e in of_chapter(chapter) if defines_any(source, set(e.defines))}


def names(source: str) -> tuple[set[str], set[str]] | None:
    """(names a cell binds, names it reads from earlier cells), or None when it does not parse or imports (kept, to
    be safe). A function's parameters and the names its body assigns are its own, not reads of a cell's names."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    if any(isinstance(node, (ast.Import, ast.ImportFrom)) for node in ast.walk(tree)):
        return None  # an import may matter for what it does, not only for the names it binds
    definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    bound: set[str] = set()  # what the cell binds for later cells: its top-level names
    for node in tree.body:
        bound |= {node.name} if isinstance(node, definitions) else _stored(node)
    own: set[str] = set()  # what a function of the cell binds for itself
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            own |= {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)} | _stored(node)
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return bound, read - (own - bound)


def _stored(node: ast.AST) -> set[str]:
    """The names ``node`` assigns or deletes anywhere inside it, and the functions and classes it defines."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))} | \
        {n.name for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def needed(candidates: list[str], reads_from: list[str]) -> list[bool]:
    """For each of ``candidates`` (cells in notebook order), whether the ``reads_from`` cells need it: every import
    cell, and every cell that binds a name they (or a needed cell after it) read."""
    reads: set[str] = set()
    for source in reads_from:
        found = names(source)
        reads |= found[1] if found else set()
    keep = [False] * len(candidates)
    for i in reversed(range(len(candidates))):
        found = names(candidates[i])
        if found is None or found[0] & reads:
            keep[i] = True
            reads |= found[1] if found else set()
    return keep


def with_what_they_read(cells: list[str], answering: list[bool], also_read: list[str] | None = None) -> list[bool]:
    """For each of ``cells`` (in notebook order): whether a check run executes it. The ``answering`` ones (answers,
    the check cells asked for) always; any other only where they, or ``also_read`` (a check call), need it."""
    keep = needed(cells, [c for c, a in zip(cells, answering) if a] + (also_read or []))
    return [a or k for a, k in zip(answering, keep)]
