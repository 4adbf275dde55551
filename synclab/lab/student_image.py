"""The students' install: the package, its data and the labs, and no solution notebooks.

``python -m synclab student-image DEST`` writes the tree a class's student image installs
(``pip install --no-deps -e DEST``); the instructors' page (``book/instructors.md``) shows
how. The grader's copy is the full repository: ``solutions/`` is where the labs and the
nbgrader source notebooks come from, and the grader's trusted setup cells.

What goes in, and why:

* ``synclab/`` — the notebooks import it, and it holds the checks (practice reports in the
  student's kernel). Nothing in it reads ``solutions/`` to check, judge or run chapter 6. The answers
  of the exercises judged apart are not shipped: each is a look-up of the stored answers of the public cases.
* ``data/pr_reports.yaml`` and ``data/reference/`` — the PRs' numbers and the GPU results
  the profiling cells draw; ``data/expected/`` — those stored answers (``python -m synclab expected``).
* ``labs/`` — generated afresh from the solutions, never copied: a clone where someone worked the labs would hand
  out their answers. Their links into ``book/`` become plain text naming the page, as in nbgrader's assignments:
  the book's raw pages are not shipped, since they show every hint's last rung unfolded.
* ``requirements.txt`` and ``pyproject.toml`` — what the image installs.
"""

from __future__ import annotations

import ast
import os
import shutil
from pathlib import Path

import nbformat

from synclab.lab import labgen
from synclab.lab.nbgrader_source import book_links_as_text

# what the profiling cells read, and the answers of the public cases of the exercises whose answers are not shipped
DATA = ("data/pr_reports.yaml", "data/reference", "data/expected")
INSTALL_FILES = ("requirements.txt", "pyproject.toml")
_NOT_SHIPPED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".ipynb_checkpoints")

README = """\
# Sync Lab: the students' install

The support package of the Sync Lab notebooks, its data and the labs. No solution notebooks are here.

    python -m pip install -r requirements.txt   # torch, nbgrader, ...
    python -m pip install --no-deps -e .         # synclab: the notebooks import it

`python -m synclab check labs/00_primer.ipynb` runs a lab and reports its checks (practice: in a class
your grade comes from the course's grader).
"""


def students_lab(solution: nbformat.NotebookNode, source_name: str) -> nbformat.NotebookNode:
    """The lab of ``solution`` as a students' install holds it: its links to the book's pages become plain text."""
    lab = labgen.generate_lab(solution, source_name)
    for cell in lab.cells:
        if cell.cell_type == "markdown":
            cell.source = book_links_as_text(cell.source)
    return lab


class StudentImageError(ValueError):
    """The destination is not empty, or the tree to copy is not a full checkout."""


def write_student_image(root: Path, dest: Path, strip: bool = True) -> list[Path]:
    """Write the students' install of the checkout at ``root`` into ``dest`` (new or empty); the paths written.

    ``strip``: the answers of the exercises judged apart are not shipped (:func:`strip_answers_judged_apart`); the
    grader's own copy (:func:`write_grading_install`) keeps them."""
    if dest.exists() and any(dest.iterdir()):
        raise StudentImageError(f"{dest} is not empty: choose a new folder")
    solutions = sorted((root / "solutions").glob("*.ipynb"))
    if not solutions:
        raise StudentImageError(f"{root / 'solutions'} holds no notebooks: the labs are generated from them")
    dest.mkdir(parents=True, exist_ok=True)
    written = [Path(shutil.copytree(root / "synclab", dest / "synclab", ignore=_NOT_SHIPPED))]
    if strip:
        strip_answers_judged_apart(dest / "synclab")
    for name in (*DATA, *INSTALL_FILES):
        source = root / name
        if source.is_dir():
            written.append(Path(shutil.copytree(source, dest / name, ignore=_NOT_SHIPPED)))
        elif source.exists():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            written.append(Path(shutil.copy2(source, dest / name)))
    labs = dest / "labs"
    labs.mkdir()
    for solution in solutions:
        source_name = f"solutions/{solution.name}"
        lab = students_lab(nbformat.read(solution, as_version=4), source_name)
        leaks = labgen.leaked_solution(lab)
        if leaks:  # generate_lab refuses these already; a students' image is the last place to find out
            raise StudentImageError(f"{source_name}: the lab would show a solution: {'; '.join(leaks)}")
        nbformat.write(lab, labs / solution.name)
        written.append(labs / solution.name)
    (dest / "README.md").write_text(README)
    written.append(dest / "README.md")
    return written


def write_grading_install(root: Path, dest: Path) -> Path:
    """What the grader's worker imports: the students' image of ``root`` in ``dest``, readable by every user.

    The worker runs the reader's code beside the package it imports; with the grader's own checkout there, a
    loader that reads ``solutions/`` relative to the package would find the answers. Here it finds the
    students' tree: the package, its data and the labs as generated, no solution anywhere. Readable by all,
    so that a sandboxed worker's user reads it wherever the grader's clone sits (a 0700 home included).
    """
    write_student_image(root, dest, strip=False)
    _readable_by_all(dest)
    return dest


def write_answer_install(grading: Path, dest: Path, keeps: tuple[str, ...] = ()) -> Path:
    """What an answer's process imports (:mod:`synclab.lab.answer_process`): the grading install at ``grading``, with
    the answers of the exercises judged apart not shipped (:func:`strip_answers_judged_apart`), but for those
    ``keeps`` names (an exercise's :attr:`~synclab.lab.exercises.Exercise.answer_process_keeps`: what its runners
    run). The checks that need them run in the grader's worker, which imports the grading install itself."""
    shutil.copytree(grading, dest)
    strip_answers_judged_apart(dest / "synclab", classes=True, keeps=keeps)
    shutil.rmtree(dest / "data" / "expected", ignore_errors=True)  # the public cases' answers: no use to an answer
    _readable_by_all(dest)
    return dest


def _readable_by_all(dest: Path) -> None:
    for folder, _, files in os.walk(dest):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)


def _answer_key_tasks(decorator: ast.expr) -> tuple[set[str], str, str] | None:
    """The tasks, scope and role of an ``@answer_key("N.M", ..., scope=..., role=...)`` decorator; None for another
    decorator."""
    if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Name)
            and decorator.func.id == "answer_key"):
        return None
    tasks = {a.value for a in decorator.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}

    def keyword(name: str, default: str) -> str:
        return next((k.value.value for k in decorator.keywords if k.arg == name and isinstance(k.value, ast.Constant)),
                    default)

    return tasks, keyword("scope", "always"), keyword("role", "reference")


_BEFORE_THE_PR = "vLLM's code before"  # a role: the code a PR changed, which the checks may time (a baseline)


def answers_judged_apart(package: Path, classes: bool = False, keeps: tuple[str, ...] = ()
                         ) -> dict[str, tuple[Path, ast.FunctionDef | ast.AsyncFunctionDef, str]]:
    """Every answer of an exercise judged apart in the package at ``package`` (a function marked ``@answer_key`` for
    such an exercise only, and for no other): by ``module:name``, its file, its definition and its task.

    ``classes``: also every method of a class marked so, and every answer marked ``scope="checks"`` (chapter 6's
    stand-ins for 3.1, 4.1 and 5.1): what an answer's process must not hold; the students' image keeps them (chapter
    6 runs them). vLLM's code before a PR stays everywhere: the answer's process refuses it to the answer while a
    runner of the checks runs (:mod:`synclab.lab.answer_process`), as the notebook's checks do, and a runner may
    time it.

    ``keeps``: modules (``synclab.capstone.chapter_fixes``) and answers (``module:name``) left out of what is found.
    """
    def tasks_of(node: ast.AST) -> set[str] | None:
        keys = [k for k in map(_answer_key_tasks, getattr(node, "decorator_list", [])) if k is not None]
        tasks = set().union(*(t for t, _, _ in keys)) if keys else set()
        stripped = all(scope == "always" or (classes and not role.startswith(_BEFORE_THE_PR))
                       for _, scope, role in keys)
        return tasks if len(tasks) == 1 and stripped else None

    found = {}
    for path in sorted(package.rglob("*.py")):
        source = path.read_text()
        if "answer_key(" not in source:
            continue
        module = path.relative_to(package.parent).with_suffix("").as_posix().replace("/", ".")
        if module in keeps:
            continue
        for node in ast.walk(ast.parse(source)):
            tasks = tasks_of(node)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                    f"{module}:{node.name}" in keeps:
                continue
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and tasks:
                found[f"{module}:{node.name}"] = (path, node, next(iter(tasks)))
            elif isinstance(node, ast.ClassDef) and tasks and classes:
                for method in node.body:
                    if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        found[f"{module}:{node.name}.{method.name}"] = (path, method, next(iter(tasks)))
    return found


def strip_answers_judged_apart(package: Path, classes: bool = False, keeps: tuple[str, ...] = ()) -> list[str]:
    """Replace the body of every answer of an exercise judged apart (:func:`answers_judged_apart`) by a look-up of
    its stored results (:func:`synclab.answer_keys.stored.stored_answer`), in the package copy at ``package``, and
    say so in its ``NOT_SHIPPED``; the answers stripped, as ``module:name``.

    The lines stay where they were (the body's lines become blank), so that every other line the package quotes
    keeps its number."""
    answers = answers_judged_apart(package, classes, keeps)
    by_file: dict[Path, list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef, str]]] = {}
    for name, (path, node, task) in answers.items():
        by_file.setdefault(path, []).append((name, node, task))
    for path, nodes in by_file.items():
        lines = path.read_text().splitlines(keepends=True)
        for name, node, task in nodes:
            first, last = node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno
            indent = " " * node.body[0].col_offset
            lines[first - 1] = (f"{indent}return __import__(\"synclab.answer_keys.stored\", fromlist=[\"_\"])"
                                f".stored_answer({task!r}, {name!r}, locals())  # not shipped: stored\n")
            for n in range(first, last):
                lines[n] = "\n"
        path.write_text("".join(lines))
    stored = package / "answer_keys" / "stored.py"
    tasks = sorted({task for _, _, task in answers.values()})
    source = stored.read_text()
    marker = "NOT_SHIPPED: frozenset[str] = frozenset()\n"
    assert marker in source, "synclab/answer_keys/stored.py no longer says NOT_SHIPPED as the image expects"
    stored.write_text(source.replace(marker, f"NOT_SHIPPED: frozenset[str] = frozenset({set(tasks)!r})\n"))
    return sorted(answers)
