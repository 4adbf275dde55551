"""The lab generator: ``python -m synclab labs`` turns solutions into labs.

Taught and used in every chapter (see CONTRIBUTING): each chapter is written once,
as a complete solution notebook ``solutions/NN_name.ipynb`` with stored outputs,
and the lab notebook the reader completes, ``labs/NN_name.ipynb``, is generated
from it. Nobody edits a lab by hand except the reader.

Marker syntax, in the solution notebook:

* code cells: the lines from ``### BEGIN SOLUTION X.Y`` to ``### END SOLUTION``
  (``X.Y`` is the task id, e.g. ``1.2``; markers may be indented, several regions
  per cell) become, at the BEGIN line's indentation::

      # YOUR CODE HERE (~N lines)
      raise NotImplementedError("Exercise X.Y")

  where N counts the region's non-blank, non-comment lines (``### BEGIN SOLUTION X.Y unsized``: no count,
  where a count would tell the answer, as chapter 6's stop hooks' one line would);
* markdown cells: ``<!-- BEGIN SOLUTION -->...<!-- END SOLUTION -->`` becomes
  ``*Your answer here.*``;
* any cell tagged ``solution-only`` (in ``metadata.tags``) is dropped;
* each exercise's hints (:mod:`synclab.lab.hints`) are added before its first code cell, in two
  folds: the lab's rungs of the ladder whose last rung, the answer, is the reader's own;
* before the first exercise, what an answer may import and do (:data:`synclab.lab.audit.ANSWER_RULES`);
* a code line ``CODE  ### LAB: OTHER`` runs ``CODE`` in the solution and reads ``OTHER`` in the lab
  (chapter 6's solution loads the book's fixes, its lab the reader's own).

The lab also loses outputs, execution counts and all cell metadata but ``tags``.
Its metadata records the solution it came from and the sha256 of its cells'
``(cell_type, source)`` list. That sha is how we never lose a reader's work:
if a lab's cells no longer hash to the recorded value, the reader edited it, and
regenerating refuses unless forced (and then keeps a backup).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from synclab.lab.audit import ANSWER_RULES
from synclab.lab.hints import HINTS, lab_markdown

SOLUTION_ONLY_TAG = "solution-only"
MARKDOWN_STUB = "*Your answer here.*"
BACKUP_DIR = ".backup"

# Strict markers: exactly what authors are told to write.
_BEGIN = re.compile(r"^(?P<indent>\s*)### BEGIN SOLUTION(?P<rest>.*)$")
_END = re.compile(r"^\s*### END SOLUTION\s*$")
_TASK_ID = re.compile(r"^\d+\.\d+$")
_MD_REGION = re.compile(r"<!-- BEGIN SOLUTION -->.*?<!-- END SOLUTION -->", re.DOTALL)
_LAB_LINE = re.compile(r"^(?P<indent>\s*)\S.*?\s+### LAB: (?P<lab>\S.*)$")
# Loose markers: anything that *looks* like a marker. A typo such as
# "## BEGIN SOLUTION" must not silently ship the solution inside the lab.
_LOOSE_CODE = re.compile(r"^\s*#+\s*(BEGIN|END)\s+SOLUTION\b", re.IGNORECASE)
_LOOSE_MD = re.compile(r"<!--\s*(BEGIN|END)\s+SOLUTION\s*-->", re.IGNORECASE)


class LabgenError(ValueError):
    """A solution notebook has malformed solution markers."""


class LabWouldOverwriteWork(FileExistsError):
    """The lab on disk was edited by the reader; regenerating would lose it."""


# ----------------------------------------------------------------------------
# pure transformation


def _source(cell: NotebookNode) -> str:
    # nbformat.read joins multi-line sources, but a notebook built by hand may not.
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def cells_sha256(nb: NotebookNode) -> str:
    """sha256 of the notebook's ``(cell_type, source)`` list: what a reader edits."""
    pairs = [[cell.cell_type, _source(cell)] for cell in nb.cells]
    return hashlib.sha256(json.dumps(pairs, ensure_ascii=False).encode("utf-8")).hexdigest()


def region_task(rest: str) -> tuple[str, bool]:
    """What follows ``### BEGIN SOLUTION``: the task id, and whether its stub leaves out the line count
    (``X.Y unsized``)."""
    rest = rest.strip()
    return rest.removesuffix(" unsized"), rest.endswith(" unsized")


def size_hint(region: list[str]) -> str:
    """``YOUR CODE HERE (~N lines)``: N counts the region's non-blank, non-comment lines."""
    n = max(1, sum(1 for r in region if r.strip() and not r.strip().startswith("#")))
    return f"YOUR CODE HERE (~{n} line{'s' if n > 1 else ''})"


def lab_lines(source: str) -> str:
    """Each ``CODE  ### LAB: OTHER`` line of a code cell as the lab reads it: ``OTHER``, at the same indentation."""
    out = []
    for line in source.split("\n"):
        found = _LAB_LINE.match(line)
        out.append(f"{found['indent']}{found['lab']}" if found else line)
    return "\n".join(out)


def _stub_code(source: str, where: str) -> str:
    """Replace each BEGIN/END SOLUTION region of a code cell by a two-line stub."""
    out: list[str] = []
    region: list[str] | None = None  # lines of the open region, None when outside
    indent = task = ""
    unsized = False
    for lineno, line in enumerate(source.split("\n"), start=1):
        begin, end = _BEGIN.match(line), _END.match(line)
        if begin:
            if region is not None:
                raise LabgenError(f"{where}, line {lineno}: nested '### BEGIN SOLUTION' "
                                  f"(the region opened for task {task} is not closed)")
            task, unsized = region_task(begin["rest"])
            if not _TASK_ID.match(task):
                raise LabgenError(f"{where}, line {lineno}: '### BEGIN SOLUTION' needs a "
                                  f"task id like '### BEGIN SOLUTION 1.2', got {line.strip()!r}")
            indent, region = begin["indent"], []
        elif end:
            if region is None:
                raise LabgenError(f"{where}, line {lineno}: '### END SOLUTION' without "
                                  f"a matching '### BEGIN SOLUTION X.Y'")
            out.append(f"{indent}# {'YOUR CODE HERE' if unsized else size_hint(region)}")
            out.append(f'{indent}raise NotImplementedError("Exercise {task}")')
            region = None
        elif _LOOSE_CODE.match(line):
            raise LabgenError(f"{where}, line {lineno}: {line.strip()!r} looks like a "
                              f"solution marker but is not '### BEGIN SOLUTION X.Y' / "
                              f"'### END SOLUTION'")
        elif region is not None:
            region.append(line)
        else:
            out.append(line)
    if region is not None:
        raise LabgenError(f"{where}: '### BEGIN SOLUTION {task}' is never closed "
                          f"by '### END SOLUTION'")
    return "\n".join(out)


def _stub_markdown(source: str, where: str) -> str:
    """Replace each ``<!-- BEGIN/END SOLUTION -->`` region of a markdown cell."""
    stubbed = _MD_REGION.sub(MARKDOWN_STUB, source)
    # Whatever marker survives the substitution is unpaired (or nested, or misspelt).
    left = _LOOSE_MD.search(stubbed)
    if left:
        raise LabgenError(f"{where}: unpaired or malformed marker {left.group(0)!r} "
                          f"(use '<!-- BEGIN SOLUTION -->' ... '<!-- END SOLUTION -->')")
    return stubbed


def _lab_title(source: str) -> str:
    """The notebook's title, ``# N · Name solution: ...`` in the solution, reads ``... lab: ...`` in the lab.

    The book's sidebar shows the solution notebooks under their own title: it must not say "lab".
    """
    first, sep, rest = source.partition("\n")
    if first.startswith("# "):
        first = re.sub(r"\bsolution\b", "lab", first, count=1)
    return first + sep + rest


def _tags(cell: NotebookNode) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def generate_lab(solution: NotebookNode, source_name: str) -> NotebookNode:
    """The lab for ``solution``; ``source_name`` is e.g. ``"solutions/01_x.ipynb"``."""
    cells = []
    for index, cell in enumerate(solution.cells):
        tags = _tags(cell)
        if SOLUTION_ONLY_TAG in tags:
            continue
        where = f"{source_name}, cell {index}"
        source = _source(cell)
        if cell.cell_type == "code":
            source = lab_lines(_stub_code(source, where))
        elif cell.cell_type == "markdown":
            source = _stub_markdown(source, where)
            if not cells or all(c["cell_type"] != "markdown" for c in cells):
                source = _lab_title(source)
        # Keep the solution's cell ids so regeneration is deterministic; a pre-4.5
        # notebook has none, so derive one from the position instead of random.
        cell_id = cell.get("id") or hashlib.sha256(f"{source_name}:{index}".encode()).hexdigest()[:8]
        new = {"cell_type": cell.cell_type, "id": cell_id,
               "metadata": {"tags": tags} if tags else {}, "source": source}
        if cell.cell_type == "code":
            new.update(outputs=[], execution_count=None)
        elif "attachments" in cell:  # images the markdown refers to
            new["attachments"] = cell.attachments
        cells.append(new)

    cells = _with_hints(cells, source_name)
    first = next((i for i, c in enumerate(cells) if c["cell_type"] == "markdown"
                  and _EXERCISE_HEADING.search(c["source"])), None)
    if first is not None:  # said once, before the first exercise: what an answer may import and do
        rules_id = hashlib.sha256(f"{source_name}:answer rules".encode()).hexdigest()[:8]
        cells.insert(first, {"cell_type": "markdown", "id": rules_id, "metadata": {}, "source": ANSWER_RULES})
    # Only what Jupyter needs to pick a kernel: widget state, authors' settings etc.
    # would make labs differ for reasons the reader cannot see.
    metadata = {k: solution.metadata[k] for k in ("kernelspec", "language_info")
                if k in solution.metadata}
    lab = nbformat.from_dict({"nbformat": 4, "nbformat_minor": 5,
                              "metadata": metadata, "cells": cells})
    lab.metadata["synclab"] = {"generated_from": source_name, "source_sha256": cells_sha256(lab)}
    nbformat.validate(lab)
    return lab


_EXERCISE_HEADING = re.compile(r"^## Exercise (?P<task>\d+\.\d+)\b", re.MULTILINE)


def _with_hints(cells: list[dict], source_name: str) -> list[dict]:
    """The lab's cells with each exercise's hint ladder (:mod:`synclab.lab.hints`) before its first code cell.

    The ladder comes after the whole contract (the heading's cell and any markdown after it), where the
    reader has read what must hold and is about to write.
    """
    out: list[dict] = []
    pending: list[str] = []  # exercises whose heading was read, ladder not yet placed
    for cell in cells:
        if cell["cell_type"] == "markdown":
            pending += [m.group("task") for m in _EXERCISE_HEADING.finditer(cell["source"])
                        if m.group("task") in HINTS]
        elif pending:
            for task in pending:
                cell_id = hashlib.sha256(f"{source_name}:hints {task}".encode()).hexdigest()[:8]
                out.append({"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": lab_markdown(task)})
            pending = []
        out.append(cell)
    return out


def leaked_solution(lab: NotebookNode) -> list[str]:
    """Problems that would reveal the solution: markers left, stored outputs."""
    problems = []
    for index, cell in enumerate(lab.cells):
        source = _source(cell)
        if cell.cell_type == "code":
            for lineno, line in enumerate(source.split("\n"), start=1):
                if _LOOSE_CODE.match(line):
                    problems.append(f"cell {index}, line {lineno}: solution marker left: {line.strip()!r}")
            if cell.get("outputs"):
                problems.append(f"cell {index}: stored outputs")
        elif cell.cell_type == "markdown":
            for marker in _LOOSE_MD.findall(source):
                problems.append(f"cell {index}: solution marker left: {marker} SOLUTION")
    return problems


# ----------------------------------------------------------------------------
# files


def cell_roles(solution: NotebookNode) -> dict[str, tuple[str, str]]:
    """Each code cell's role, by cell id: ``("setup", "")``, ``("exercise", task)``, ``("check", task)``, ``("other", "")``.

    Setup cells come before the first exercise. An exercise cell holds ``### BEGIN SOLUTION task``;
    its check cell is the first later code cell that calls a ``check_...`` function, before the
    next section. ``python -m synclab check --task`` runs only what one exercise needs.
    """
    roles: dict[str, tuple[str, str]] = {}
    awaiting: list[str] = []  # the exercises whose check cells come next, in order
    seen_exercise = False
    for cell in solution.cells:
        source = _source(cell)
        if cell.cell_type == "markdown":
            if source.startswith("## ") and not source.startswith("## Exercise"):
                awaiting = []
            continue
        if cell.cell_type != "code":
            continue
        tasks = [region_task(m.group("rest"))[0] for line in source.split("\n") if (m := _BEGIN.match(line))]
        if tasks:  # one cell may hold several exercises (two methods of one class)
            role, seen_exercise, awaiting = ("exercise", ",".join(tasks)), True, tasks
        elif awaiting and "check_" in source:
            role, awaiting = ("check", awaiting[0]), awaiting[1:]
        else:
            role = ("other", "") if seen_exercise else ("setup", "")
        roles[cell.get("id", "")] = role
    return roles


def lab_path_for(solution_path: Path, labs_dir: Path) -> Path:
    """``solutions/NN_name.ipynb`` -> ``labs/NN_name.ipynb``."""
    return Path(labs_dir) / Path(solution_path).name


def _source_name(solution_path: Path) -> str:
    # Relative and with forward slashes: an absolute path would make the lab
    # depend on where the repository is checked out.
    return f"{solution_path.parent.name}/{solution_path.name}"


def _render(nb: NotebookNode) -> bytes:
    buf = io.StringIO()
    nbformat.write(nb, buf)  # adds the trailing newline
    return buf.getvalue().encode("utf-8")


def _generate(solution_path: Path) -> bytes:
    solution = nbformat.read(solution_path, as_version=4)
    return _render(generate_lab(solution, _source_name(solution_path)))


def _is_untouched(lab_bytes: bytes) -> bool:
    """Whether the reader left the lab's cells as generated (outputs don't count)."""
    try:
        lab = nbformat.reads(lab_bytes.decode("utf-8"), as_version=4)
        recorded = lab.metadata.get("synclab", {}).get("source_sha256")
        return recorded is not None and cells_sha256(lab) == recorded
    except Exception:  # unreadable: we cannot prove it holds no work, so keep it
        return False


def _generated_from_same_solution(lab_bytes: bytes, new_bytes: bytes) -> bool:
    """Whether the lab was generated from the solution as it is now: regenerating would bring nothing new."""
    try:
        recorded = nbformat.reads(lab_bytes.decode("utf-8"), as_version=4).metadata["synclab"]["source_sha256"]
        return recorded == nbformat.reads(new_bytes.decode("utf-8"), as_version=4).metadata["synclab"]["source_sha256"]
    except Exception:
        return False


def _same_cells(a: bytes, b: bytes) -> bool:
    try:
        return (cells_sha256(nbformat.reads(a.decode("utf-8"), as_version=4))
                == cells_sha256(nbformat.reads(b.decode("utf-8"), as_version=4)))
    except Exception:
        return False


def _has_outputs(lab_bytes: bytes) -> bool:
    try:
        lab = nbformat.reads(lab_bytes.decode("utf-8"), as_version=4)
    except Exception:
        return True
    return any(cell.get("outputs") for cell in lab.cells)


def _backup(lab_path: Path) -> Path:
    backup_dir = lab_path.parent / BACKUP_DIR
    backup_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    backup = backup_dir / f"{lab_path.stem}.{stamp}.ipynb"
    n = 1
    while backup.exists():  # two forced runs in the same second
        n += 1
        backup = backup_dir / f"{lab_path.stem}.{stamp}-{n}.ipynb"
    shutil.copy2(lab_path, backup)
    return backup


def _write_atomic(path: Path, data: bytes) -> None:
    # Write-then-rename: an interrupted run never leaves a half-written lab.
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_lab(solution_path: Path, labs_dir: Path, force: bool = False) -> str:
    """(Re)generate the lab of ``solution_path`` under ``labs_dir``; say what happened."""
    solution_path, labs_dir = Path(solution_path), Path(labs_dir)
    data = _generate(solution_path)
    lab_path = lab_path_for(solution_path, labs_dir)
    backup = None
    if lab_path.exists():
        current = lab_path.read_bytes()
        if current == data:
            return "unchanged"
        if _is_untouched(current) and _same_cells(current, data):
            return "unchanged (your outputs kept)"  # only executed: nothing new to give, outputs to lose
        if _is_untouched(current) and _has_outputs(current):
            backup = _backup(lab_path)  # executed, and the solution changed: the outputs go to the backup
        elif not _is_untouched(current):
            if not force and _generated_from_same_solution(current, data):
                return "kept (you edited it; its solution has not changed)"
            if not force:
                raise LabWouldOverwriteWork(
                    f"refusing to overwrite {lab_path}: it was edited since it was generated. "
                    f"To keep your work, rename it (e.g. to {lab_path.stem}.mine.ipynb) and "
                    f"run again; to discard it, run `make labs-force` (or `python -m synclab labs "
                    f"--force`; a backup goes to {labs_dir / BACKUP_DIR}/).")
            backup = _backup(lab_path)
    labs_dir.mkdir(parents=True, exist_ok=True)
    _write_atomic(lab_path, data)
    return "written" if backup is None else f"written (backup: {backup})"


def check_lab_fresh(solution_path: Path, labs_dir: Path) -> str | None:
    """None when the lab is exactly what ``write_lab`` would write, else why not."""
    solution_path = Path(solution_path)
    lab_path = lab_path_for(solution_path, labs_dir)
    if not lab_path.exists():
        return f"missing: {lab_path} (run `python -m synclab labs`)"
    data = _generate(solution_path)
    current = lab_path.read_bytes()
    if current == data:
        return None
    what = "outputs or metadata differ" if _same_cells(current, data) else "cells differ"
    return f"stale: {lab_path} does not match {_source_name(solution_path)} ({what})"


# ----------------------------------------------------------------------------
# command line


def main(argv: list[str] | None = None, root: Path = Path(".")) -> int:
    """``python -m synclab labs [--check] [--force] [--solutions DIR] [--labs DIR]``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["labs"]:  # accept being handed the subcommand too
        argv = argv[1:]
    parser = argparse.ArgumentParser(prog="python -m synclab labs",
                                     description="Generate lab notebooks from solution notebooks.")
    parser.add_argument("--check", action="store_true",
                        help="only report missing or stale labs; exit 1 if any")
    parser.add_argument("--force", action="store_true",
                        help="overwrite edited labs (a backup is kept in LABS/.backup/)")
    parser.add_argument("--solutions", default="solutions", help="default: solutions/")
    parser.add_argument("--labs", default="labs", help="default: labs/")
    args = parser.parse_args(argv)
    solutions_dir, labs_dir = Path(root) / args.solutions, Path(root) / args.labs
    if not solutions_dir.is_dir():
        print(f"no solutions directory: {solutions_dir}", file=sys.stderr)
        return 2

    failed = False
    # One bad notebook must not stop the others: report it and carry on.
    for solution_path in sorted(solutions_dir.glob("*.ipynb")):
        try:
            if args.check:
                reason = check_lab_fresh(solution_path, labs_dir)
                if reason is not None:
                    print(reason)
                    failed = True
            else:
                print(f"{lab_path_for(solution_path, labs_dir)}: "
                      f"{write_lab(solution_path, labs_dir, force=args.force)}")
        except (LabgenError, LabWouldOverwriteWork) as err:
            print(err)
            failed = True
    if args.check and not failed:
        print("labs are fresh")
    return 1 if failed else 0
