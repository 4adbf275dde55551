"""The reader's cells, run as a kernel runs them: used wherever the grader runs an answer.

Used by the grader's worker (:mod:`synclab.lab.judge_worker`) and by an answer's own process
(:mod:`synclab.lab.answer_process`). A setup cell runs one top-level statement at a time, so that a line needing
what the grader lacks binds nothing and the rest still runs; the reader's cells run whole, and one that raises stops
there, as in a kernel.
"""

from __future__ import annotations

import ast
import linecache


def run_setup(source: str, filename: str, namespace: dict) -> list[tuple[str, set[str]]]:
    """Run a setup cell one top-level statement at a time; per statement that raised, a line and the names it binds.

    A statement that needs what the grader's process lacks (``load_fixes("..")`` reads the student's
    other chapters, which a grader's temp folder does not hold) binds nothing, and the exercises that
    do not use what it binds are judged as usual; one that does meets a ``NameError`` in its checks.
    """
    tree = ast.parse(source, filename)
    failed = []
    for node in tree.body:
        try:
            exec(compile(ast.Module(body=[node], type_ignores=[]), filename, "exec", dont_inherit=True), namespace)
        except Exception as exc:
            text = (ast.get_source_segment(source, node) or type(node).__name__).splitlines()[0][:80]
            failed.append((f"a setup line raised in the grader and was passed over ({type(exc).__name__}): {text}",
                           _bound(node)))
    return failed


def _binds(node: ast.AST) -> set[str]:
    """The names one node binds where it stands: an assignment's target, a def's or class's name, an import."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        return {node.id}
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    return set()


def _bound(node: ast.stmt) -> set[str]:
    """The names a top-level statement binds."""
    return set().union(*map(_binds, ast.walk(node)))


def used_names(sources: list[str]) -> set[str]:
    """The names the sources read without binding them anywhere themselves: what they need from the setup."""
    loads: set[str] = set()
    bound: set[str] = set()
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:  # a source that does not parse reads nothing
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                loads.add(node.id)
            bound |= {node.arg} if isinstance(node, ast.arg) else _binds(node)
    return loads - bound


def load_cells(namespace: dict, cells: list[dict], task: str, notes: list[str]) -> str | None:
    """Run ``cells`` whole in ``namespace``, as the notebook ran them; an error message if the exercise's own answer
    cell does not parse. A cell that raises stops there, as in a kernel, and is named in ``notes``."""
    for n, cell in enumerate(cells, start=1):
        own = task in cell["answers"]
        filename = f"<Exercise {task}, cell {n}>" if own else f"<your cell {n}>"
        # the sync counter quotes the line it names: it reads it where tracebacks do
        linecache.cache[filename] = (len(cell["source"]), None, cell["source"].splitlines(True), filename)
        try:
            code = compile(cell["source"], filename, "exec", dont_inherit=True)  # as a kernel: no future of ours
        except SyntaxError as exc:
            if not own:  # another cell that does not parse defined nothing in the kernel either
                notes.append(f"a cell before the check does not parse: {exc.msg} (line {exc.lineno})")
                continue
            return f"its answer cell does not parse: {exc.msg} (line {exc.lineno})"
        try:
            exec(code, namespace)
        except Exception as exc:  # noqa: BLE001 - as in a kernel: the cell stops, the next one runs
            notes.append(f"{'its answer cell' if own else 'a cell before the check'} raised {type(exc).__name__}: "
                         f"{exc}")
    return None
