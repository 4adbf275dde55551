"""The answers of the public cases, stored for the students' install: ``python -m synclab expected``.

The exercises, all judged apart, ship no answer to students (1.1's, 1.2's, 5.1's and 5.2's reference classes
aside: chapter 5's profile and chapter 6 run them; chapter 1's checks need no stored answer, a pooler's expected rows
being its requests' prompts): their checks there look up ``data/expected/<task>.json``
(:mod:`synclab.answer_keys.stored`). This module writes those files: it runs each such exercise's checks on the
solution's answer, over the public seeds, with every answer of the exercise recorded as the checks call it (its
arguments, its result). A failing solution writes nothing. ``tests/test_judged_apart.py`` writes them again and
compares them with the stored ones.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from synclab.answer_keys import _RAW
from synclab.answer_keys.stored import EXPECTED_DIR
from synclab.lab.chapters import CHAPTERS, PACKAGES
from synclab.lab.exercises import EXERCISES, of_chapter
from synclab.lab.notebook_cells import defines_any
from synclab.lab.notebook_code import ROOT, load_function, read_notebook
from synclab.answer_keys.plain_data import digest, encode

PUBLIC_SEEDS = tuple(range(8))  # the seeds a learner's check in the students' install draws its random cases from


def _answers_of(task: str) -> dict[str, tuple[Any, str]]:
    """The package's answers for ``task`` alone, as loaded: ``module:name`` -> (the module, the attribute)."""
    from synclab.lab.student_image import answers_judged_apart

    package = Path(importlib.import_module("synclab").__file__).resolve().parent
    found = {}
    for name, (_, _, of) in answers_judged_apart(package).items():
        if of == task:
            module, attr = name.split(":")
            found[name] = (importlib.import_module(module), attr)
    return found


@contextmanager
def _recording(task: str, calls: dict[str, dict[str, Any]]) -> Iterator[None]:
    """Each answer of ``task`` replaced, for the block, by one that records its arguments and result."""
    replaced = []
    for name, (module, attr) in _answers_of(task).items():
        guarded = getattr(module, attr)
        raw = _RAW[guarded]
        signature = inspect.signature(raw)

        def recorder(*args: Any, _raw: Any = raw, _signature: Any = signature, _name: str = name,
                     **kwargs: Any) -> Any:
            bound = _signature.bind(*args, **kwargs)
            bound.apply_defaults()
            result = _raw(*args, **kwargs)  # the checks called it, through this recorder
            calls.setdefault(_name, {})[digest(dict(bound.arguments))] = encode(result)
            return result

        setattr(module, attr, recorder)
        replaced.append((module, attr, guarded))
    try:
        yield
    finally:
        for module, attr, guarded in replaced:
            setattr(module, attr, guarded)


@contextmanager
def _unhurried() -> Iterator[None]:
    """The checks' time limits, ten times longer: a busy machine writes the same answers, only later."""
    from synclab.checks import TIME_SCALE_ENV

    before = os.environ.get(TIME_SCALE_ENV)
    os.environ[TIME_SCALE_ENV] = str(10 * float(before or 1))
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(TIME_SCALE_ENV)
        else:
            os.environ[TIME_SCALE_ENV] = before


def _check_call(task: str) -> tuple[Any, list[str]]:
    """The exercise's check function and the names its check cell hands it."""
    call = ast.parse(EXERCISES[task].check, mode="eval").body
    assert isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
    package = importlib.import_module(PACKAGES[EXERCISES[task].chapter])
    return getattr(package, call.func.attr), [a.id for a in call.args if isinstance(a, ast.Name)]


def _earlier_answers_used(notebook: str, task: str) -> list[str]:
    """The names the chapter's other exercises define that ``task``'s answer cells read."""
    own = set(EXERCISES[task].defines)
    read: set[str] = set()
    for cell in read_notebook(ROOT / notebook).cells:
        if cell.cell_type == "code" and defines_any(cell.source, own):
            read |= {node.id for node in ast.walk(ast.parse(cell.source)) if isinstance(node, ast.Name)}
    return [name for exercise in of_chapter(EXERCISES[task].chapter) for name in exercise.defines
            if name in read and name not in own]


def expected_results(task: str, seeds: tuple[int, ...] = PUBLIC_SEEDS) -> dict[str, Any]:
    """The stored answers of ``task``'s public cases: its checks run on the solution's answer, recorded (``seeds``:
    the checks of those seeds only, for a test that compares a part with what is stored)."""
    check, names = _check_call(task)
    notebook = f"solutions/{CHAPTERS[EXERCISES[task].chapter]}.ipynb"
    namespace: dict[str, Any] = {}
    for name in _earlier_answers_used(notebook, task):  # 3.8's update calls 3.1's async_tensor_h2d
        load_function(notebook, name, namespace)
    answers = [load_function(notebook, name, namespace) for name in names]
    calls: dict[str, dict[str, Any]] = {}
    random = False
    with _recording(task, calls), _unhurried():
        for seed in seeds:
            report = check(*answers, seed=seed)
            if not report.passed:
                raise RuntimeError(f"the solution of {task} does not pass its checks (seed {seed}):\n{report}")
            random = any(o.random for o in report.outcomes)
            if not random:
                break  # one run calls every answer it will ever call
    return {"task": task, "seeds": list(PUBLIC_SEEDS) if random else [],
            "answers": {name: dict(sorted(found.items())) for name, found in sorted(calls.items())}}


def _as_json(table: dict[str, Any]) -> str:
    """``table`` as JSON with one stored answer a line: small, and a changed answer is a changed line."""
    compact = {"separators": (",", ":"), "sort_keys": True}
    answers = ",\n".join(
        f"{json.dumps(name)}:{{\n" + ",\n".join(f"{json.dumps(k)}:{json.dumps(v, **compact)}"
                                                for k, v in sorted(found.items())) + "}"
        for name, found in sorted(table["answers"].items()))
    rest = {k: v for k, v in table.items() if k != "answers"}
    return json.dumps(rest, sort_keys=True)[:-1] + ',\n"answers":{\n' + answers + "}}\n"


def write_expected(folder: Path = EXPECTED_DIR, tasks: list[str] | None = None) -> list[Path]:
    """Write ``<task>.json`` into ``folder`` for every exercise whose answers the package holds (or ``tasks``); the
    paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for task in tasks or list(EXERCISES):
        path = folder / f"{task}.json"
        table = expected_results(task)
        if not table["answers"]:  # its answers ship (5.1's and 5.2's reference classes: chapter 6 runs them)
            path.unlink(missing_ok=True)
            continue
        path.write_text(_as_json(table))
        written.append(path)
    return written
