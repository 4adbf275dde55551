"""Load a function or class defined in a notebook, so other code can call the real solution.

Used by the tests of every chapter and by chapter 6 (the capstone), whose engine runs the
fixes of chapters 1-5. A solution notebook is the only place its code is written; everything
else takes it from there.
"""

from __future__ import annotations

import ast
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


def load_function(notebook: str, name: str, namespace: dict[str, Any] | None = None) -> Callable[..., Any]:
    """Run the notebook's import lines and the cell that defines ``name``; return that function or class.

    Pass the same ``namespace`` to load a class and then a subclass defined in a later cell.
    """
    nb = nbformat.read(ROOT / notebook, as_version=4)
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
