"""Load a function or class defined in a notebook, so other code can call the real solution.

Used by the tests of every chapter and by chapter 6 (the capstone), whose engine runs the
fixes of chapters 1-5. A solution notebook is the only place its code is written; everything
else takes it from there.
"""

from __future__ import annotations

import ast
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import nbformat

ROOT = Path(__file__).resolve().parents[2]  # the repository: notebooks are named relative to it


def _defines(source: str, name: str) -> bool:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    return any(isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name for node in tree.body)


def read_notebook(path: str | Path) -> nbformat.NotebookNode:
    """The notebook at ``path``, read once per version of its file (its size and time): chapter 6 reads each of
    chapters 1-5 for every fix it loads, and a lab that has run carries its figures, so a read is not free. The
    notebook returned is shared: read it, do not change it."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return nbformat.read(path, as_version=4)  # which says what is missing, as it always has
    return _read(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=16)
def _read(path: str, mtime_ns: int, size: int) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def load_function(notebook: str, name: str, namespace: dict[str, Any] | None = None) -> Callable[..., Any]:
    """Run the notebook's import lines and the cell that defines ``name``; return that function or class.

    Pass the same ``namespace`` to load a class and then a subclass defined in a later cell.
    """
    nb = read_notebook(ROOT / notebook)
    namespace = {} if namespace is None else namespace
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
        if imports:  # the cell's top-level imports, multi-line ones included
            exec(compile(ast.Module(body=imports, type_ignores=[]), "<imports>", "exec", dont_inherit=True),
                 namespace)
    for cell in nb.cells:
        if cell.cell_type == "code" and _defines(cell.source, name):
            exec(compile(cell.source, "<string>", "exec", dont_inherit=True), namespace)  # as a kernel runs it
            return namespace[name]
    raise LookupError(f"{notebook} defines no function {name!r}")
