"""The house plan, read from synclab's own imports: no circle, nothing below a chapter imports one, old paths answer.

Imports are read with ``ast`` (those inside functions too), so an import hidden in a function
still counts as a dependency.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections import defaultdict
from pathlib import Path

import pytest

import synclab
from synclab.lab.chapters import PACKAGES

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

SYNCLAB = Path(synclab.__file__).parent
CHAPTERS = set(PACKAGES.values())
ALLOWED_CIRCLES = [{"synclab.engine.scheduler", "synclab.engine.encoder_cache_manager"}]  # as in vLLM itself
ABOVE_THE_CHAPTERS = {"synclab.__main__", "synclab.lab.cli", "synclab.lab.chapters"}  # they run every chapter


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SYNCLAB.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in SYNCLAB.rglob("*.py")}


def _imports(name: str) -> set[str]:
    """The synclab modules ``name`` imports (a package's ``from pkg import mod`` counts as the submodule)."""
    found = set()
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("synclab"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("synclab"))
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: _imports(name) for name in MODULES}


def _chapter_of(name: str) -> str | None:
    return next((c for c in CHAPTERS if name == c or name.startswith(c + ".")), None)


def _circles() -> list[set[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return groups


def _importers_of_chapters() -> dict[str, set[str]]:
    wrong: dict[str, set[str]] = defaultdict(set)
    for name, imported in GRAPH.items():
        mine = _chapter_of(name)
        for target in imported:
            theirs = _chapter_of(target)
            if theirs is not None and theirs != mine and name not in ABOVE_THE_CHAPTERS:
                wrong[name].add(target)
    return dict(wrong)


def test_no_import_circle_but_the_one_vllm_has():
    assert [c for c in _circles() if c not in ALLOWED_CIRCLES] == []


def test_nothing_below_the_chapters_imports_one_and_no_chapter_imports_another():
    assert _importers_of_chapters() == {}


def test_the_checks_catch_an_upward_import_and_a_circle(monkeypatch):
    monkeypatch.setitem(GRAPH, "synclab.claims", GRAPH["synclab.claims"] | {"synclab.capstone"})
    assert "synclab.claims" in _importers_of_chapters()
    monkeypatch.setitem(GRAPH, "synclab.syncs", GRAPH["synclab.syncs"] | {"synclab.claims"})
    monkeypatch.setitem(GRAPH, "synclab.claims", GRAPH["synclab.claims"] | {"synclab.syncs"})
    assert any({"synclab.syncs", "synclab.claims"} <= c for c in _circles())


def test_the_top_level_is_small_enough_to_read_in_a_minute():
    top = sorted(p.stem for p in SYNCLAB.glob("*.py") if p.stem != "__init__")
    assert len(top) <= 13, top  # 13 with run_modes: the run modes apart from torch, for the grader's processes


TEMPLATE = SYNCLAB.parent / "templates" / "chapter"


def _rooms(package: Path) -> set[str]:
    return {p.stem for p in package.glob("*.py") if p.stem != "__init__"} | \
           {p.name for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists()}


@pytest.mark.parametrize("chapter", sorted(CHAPTERS))
def test_every_chapter_is_a_package_with_the_templates_rooms(chapter):
    package = SYNCLAB.parent / Path(*chapter.split("."))
    assert (package / "__init__.py").exists(), f"{chapter} is not a package"
    assert _rooms(TEMPLATE) <= _rooms(package), f"{chapter} lacks rooms {_rooms(TEMPLATE) - _rooms(package)}"
    assert (importlib.import_module(chapter).__doc__ or "").strip(), f"{chapter}'s __init__ has no docstring"


def test_the_template_is_what_the_recipe_copies():
    assert _rooms(TEMPLATE) == {"workloads", "checks", "profiling"}
    assert "templates/chapter" in (SYNCLAB.parent / "CONTRIBUTING.md").read_text()


def test_the_simulated_device_and_the_lab_machinery_have_rooms_of_their_own():
    assert not list((SYNCLAB / "engine").glob("sim_*.py"))  # engine/ holds vLLM's parts and their baselines
    assert {p.stem for p in (SYNCLAB / "sim").glob("*.py")} >= {"cuda", "pinning"}
    assert {p.stem for p in (SYNCLAB / "lab").glob("*.py")} >= {"cli", "labgen", "notebook_runner", "grading"}


def test_no_import_shim_is_left_for_moved_modules():
    """The modules that moved answer at their new place only: no finder of ours stands in for an old name."""
    import sys

    assert not any(type(finder).__module__.startswith("synclab") for finder in sys.meta_path)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("synclab.engine.sim_cuda")  # synclab.sim.cuda since the simulated device's room


CORE = ("synclab.engine", "synclab.sim", "synclab.answer_keys")  # and the top-level modules: below the lab's machinery


def _core_importers_of_the_lab(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    core = [m for m in graph if m.startswith(CORE) or (m.count(".") == 1 and m != "synclab.__main__")]
    return {m: hits for m in core if (hits := {t for t in graph[m] if t.startswith("synclab.lab")})}


def test_no_core_module_imports_the_labs_machinery(monkeypatch):
    """The checks, the engine and the guard they share sit below synclab.lab (notebooks, grading, the CLI)."""
    assert _core_importers_of_the_lab(GRAPH) == {}
    monkeypatch.setitem(GRAPH, "synclab.checks", GRAPH["synclab.checks"] | {"synclab.lab.grading"})
    assert _core_importers_of_the_lab(GRAPH) == {"synclab.checks": {"synclab.lab.grading"}}  # the test can fail


# The grader's vocabulary: what a module that grades names (its digests, its audit, its verdicts, its tracer).
GRADING_WORDS = ("witness", "audit", "refusal", "verdict", "tracer", "fingerprint", "review")


def _grading_names(source: str) -> set[str]:
    """The identifiers in ``source`` (names, attributes, definitions, imports) that use the grader's vocabulary."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        names = [getattr(node, attr, None) for attr in ("id", "attr", "name", "arg")]
        if isinstance(node, ast.alias):
            names = [node.name, node.asname]
        found |= {n for n in names if isinstance(n, str) and any(w in n.lower() for w in GRADING_WORDS)}
    return found


def _grading_code_outside_the_lab(sources: dict[str, str]) -> dict[str, set[str]]:
    return {m: hits for m, source in sources.items() if not m.startswith("synclab.lab")
            and (hits := _grading_names(source))}


def test_the_graders_code_lives_in_the_lab_and_reaches_the_checks_through_one_hook():
    """Witnesses, the audit, the tracer and the verdicts are synclab.lab's: the checks, the sync counter, the simulated
    device and the chapters name none of them. The grader attaches what it needs with the checks' one hook
    (synclab.checks.attach_observer), which nothing outside the lab and the tests calls."""
    sources = {m: p.read_text(encoding="utf-8") for m, p in MODULES.items()}
    assert _grading_code_outside_the_lab(sources) == {}
    attaching = {m for m, source in sources.items() if "attach_observer(" in source}
    assert attaching <= {"synclab.checks"} | {m for m in MODULES if m.startswith("synclab.lab")}, attaching
    sources["synclab.syncs"] += "\ndef op_running_uncounted(): return _witnessed[-1]\n"  # the test can fail
    assert _grading_code_outside_the_lab(sources) == {"synclab.syncs": {"_witnessed"}}


def test_the_labs_map_names_every_module_of_the_lab():
    """synclab/lab/__init__.py is the map a new maintainer reads first: every module of the lab is on it."""
    lab = SYNCLAB / "lab"
    text = (lab / "__init__.py").read_text()
    modules = [p.stem for p in sorted(lab.glob("*.py")) if p.stem != "__init__"] + \
        [p.name for p in sorted(lab.iterdir()) if (p / "__init__.py").exists()]  # and its packages (course)
    missing = [m for m in modules if f":mod:`.{m}`" not in text]
    assert not missing, f"synclab/lab/__init__.py does not name: {', '.join(missing)}"


def test_every_packages_map_names_its_modules():
    """Each package's docstring is its map: every module and subpackage of it is named there (``__main__`` aside)."""
    unnamed = {}
    for init in sorted(SYNCLAB.rglob("__init__.py")):
        package = init.parent
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        parts = [p.stem for p in package.glob("*.py") if p.stem not in ("__init__", "__main__")] + \
            [p.name for p in package.iterdir() if (p / "__init__.py").exists()]
        if package in (SYNCLAB, SYNCLAB / "lab" / "course"):  # a package or a module per chapter, named by its
            from synclab.lab.chapters import REGISTRY  # slug: the registry is their map

            parts = [m for m in parts if m not in {c.slug for c in REGISTRY}]
        if missing := sorted(m for m in parts if not re.search(rf"\b{re.escape(m)}\b", doc)):
            unnamed[str(package.relative_to(SYNCLAB.parent))] = missing
    assert not unnamed, f"maps that do not name their modules: {unnamed}"


def test_a_page_that_draws_a_model_imports_no_torch():
    """The book's pages run their cells in kernels of their own; the ones that draw the timeline model's figures
    (chapters 0, 1, 3 and 6) need no torch, whose import is most of such a kernel's time (`make book`)."""
    import subprocess
    import sys

    probe = ("import sys; from synclab import figures; from synclab.timeline_model import simulate, "
             "simulate_uploads; print(sorted(m for m in ('torch', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


def test_the_run_modes_and_the_judges_setup_import_no_torch():
    """nbgrader's autograde process only sets up the grader's worker: reading the run modes and building the worker's
    environment must not import torch (2 s of CPU per student, before this module held them)."""
    import subprocess
    import sys

    code = ("import sys; import synclab.run_modes; from synclab.lab.judge import _worker_env; _worker_env(1); "
            "assert 'torch' not in sys.modules, 'torch was imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_readmes_layout_names_every_folder_of_the_repository():
    """README's layout is the map a newcomer reads first: every tracked top-level folder is in it, and so is every
    room of the package that is no chapter."""
    import subprocess

    root = Path(synclab.__file__).resolve().parent.parent
    tracked = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout.split()
    folders = {path.split("/")[0] for path in tracked if "/" in path}
    readme = (root / "README.md").read_text()
    layout = readme[readme.index("## Layout"):readme.index("## Commands")]
    missing = sorted(f for f in folders if f"{f}/" not in layout)
    assert not missing, f"README's layout names no {missing}"
    chapters = {p.split(".")[-1] for p in PACKAGES.values()}
    rooms = {p.name for p in (root / "synclab").iterdir() if (p / "__init__.py").exists()} - chapters
    assert not sorted(r for r in rooms if f"{r}/" not in layout), rooms
