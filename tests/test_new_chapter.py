"""``python -m synclab new-chapter``: a chapter's skeleton from templates/, registered, and CONTRIBUTING says it.

The skeleton's files are all the chapter's own, the registry gains one entry and the table of contents is written
from the registry; a slug the command cannot take is refused with what to do. Whether the skeleton passes the suite
is tried in a scratch clone (the session notes report it): here, each file is written whole, its placeholders
filled.
"""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest

from synclab.lab.chapters import REGISTRY
from synclab.lab.new_chapter import NewChapterError, planned_chapter, write_skeleton

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

ROOT = Path(__file__).resolve().parents[1]


def test_the_skeleton_is_the_chapters_own_files_and_one_registry_entry(tmp_path: Path) -> None:
    (tmp_path / "synclab" / "lab").mkdir(parents=True)
    shutil.copy(ROOT / "synclab" / "lab" / "chapters.py", tmp_path / "synclab" / "lab" / "chapters.py")
    written = write_skeleton("throwaway_chapter", "Throwaway chapter", tmp_path)
    n = len(REGISTRY)
    names = sorted(str(p.relative_to(tmp_path)) for p in written)
    assert names == sorted([
        "synclab/lab/chapters.py", f"book/{n:02d}_throwaway_chapter.md",
        f"solutions/{n:02d}_throwaway_chapter.ipynb", "synclab/lab/course/throwaway_chapter.py",
        *(f"synclab/throwaway_chapter/{room}.py" for room in ("__init__", "workloads", "checks", "profiling")),
        f"tests/honest/right/{n}.1-example.py", f"tests/honest/wrong/{n}.1-reads-the-sum-back.py"])
    for path in written:
        text = path.read_text()
        assert "{{" not in text and "}}" not in text.replace("}}}", ""), path  # every placeholder filled
        if path.suffix == ".py":
            ast.parse(text)
    solution = json.loads((tmp_path / "solutions" / f"{n:02d}_throwaway_chapter.ipynb").read_text())
    assert f"### BEGIN SOLUTION {n}.1" in "".join("".join(c["source"]) for c in solution["cells"])
    registry = (tmp_path / "synclab" / "lab" / "chapters.py").read_text()
    entry = f'    Chapter("ch{n}", "{n:02d}_throwaway_chapter", "synclab.throwaway_chapter", 120, 2, 1),\n)\n'
    assert entry in registry and registry.count("    Chapter(") == len(REGISTRY) + 1


@pytest.mark.parametrize("slug, says", [("Throwaway chapter", "a Python name in lower case"),
                                        ("capstone", "is chapter 6 already"),
                                        ("engine", "synclab/engine exists and is no chapter")])
def test_a_slug_the_command_cannot_take_is_refused_with_what_to_do(slug: str, says: str) -> None:
    with pytest.raises(NewChapterError, match=says):
        planned_chapter(slug)


def test_contributing_names_every_file_the_command_writes_and_the_registrys_fields(tmp_path: Path) -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text()
    assert "python -m synclab new-chapter" in text
    for named in ("synclab/<slug>/", "templates/chapter/", "synclab/lab/course/<slug>.py", "templates/course.py",
                  "solutions/NN_<slug>.ipynb", "templates/solution.ipynb", "book/NN_<slug>.md", "templates/page.md",
                  "tests/honest/right/N.1-example.py", "tests/honest/wrong/N.1-reads-the-sum-back.py",
                  "data/expected/N.1.json", "tests/snapshots/clauses/N.1-no-sync.txt", "REGISTRY"):
        assert named in text, named
    for field in ("key `chN`", "stem `NN_<slug>`", "package\n`synclab.<slug>`", "bench time limit", "charts"):
        assert field in text, field
    templates = {p.relative_to(ROOT / "templates").as_posix() for p in (ROOT / "templates").rglob("*")
                 if p.is_file() and "__pycache__" not in p.parts}
    assert templates == {"chapter/__init__.py", "chapter/workloads.py", "chapter/checks.py", "chapter/profiling.py",
                         "course.py", "page.md", "solution.ipynb", "right.py", "wrong.py"}, templates


@pytest.mark.heavy
def test_a_new_chapter_passes_the_chapters_tests_as_written(tmp_path: Path) -> None:
    """The skeleton in a clone of the repository (its committed tree): registered, measured and checked by every test
    that reads the registry's chapters (heavy: about three minutes; the whole suite on it is the session notes')."""
    import os
    import subprocess
    import sys

    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    env = {**os.environ, "PYTHONPATH": str(clone), "OMP_NUM_THREADS": "1"}  # the clone's package, not this one
    made = subprocess.run([sys.executable, "-m", "synclab", "new-chapter", "paged_prefill"], cwd=clone, env=env,
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stdout + made.stderr
    n = len(REGISTRY)
    tests = ["tests/test_registry.py", "tests/test_layout.py", "tests/test_pages.py", "tests/test_hints.py",
             "tests/test_check_ids.py", "tests/test_clauses.py", "tests/test_labgen.py", "tests/test_lab_texts.py",
             "tests/test_honest_corpus_more.py", "tests/test_new_chapter.py", f"solutions/{n:02d}_paged_prefill.ipynb"]
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval", "-m", "not heavy",
                          *tests], cwd=clone, env=env, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout[-4000:]
