"""The chapters' registry (synclab/lab/chapters.py) is the one list of chapters: whatever else lists them agrees.

The table of contents (its globs' pages, then solutions, in the registry's order), the pages, labs and solutions on disk, the exercises and their hints,
the stored expected results and GPU references, make gpu-check's bench list and the book test's expected charts.
Each rule is shown to fail on a planted tree.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from synclab.lab.chapters import BY_KEY, CHAPTERS, PACKAGES, REGISTRY, Chapter
from tests.toc import part_files

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

ROOT = Path(__file__).resolve().parents[1]


def registry_problems(root: Path, registry: tuple[Chapter, ...] = REGISTRY) -> list[str]:
    """Every place under ``root`` that lists the chapters otherwise than ``registry`` does, one line each."""
    from synclab.lab.exercises import EXERCISES
    from synclab.lab.hints import HINTS

    stems = [c.stem for c in registry]
    keys = {c.key for c in registry}
    out = []
    if (got := part_files(root, "Chapters")) != [f"book/{s}" for s in stems]:
        out.append(f"_toc.yml's Chapters part lists {got}, the registry {stems}")
    if (got := part_files(root, "Solutions")) != [f"solutions/{s}" for s in stems]:
        out.append(f"_toc.yml's Solutions part lists {got}, the registry {stems}")
    for folder, pattern in (("book", "0*.md"), ("labs", "0*.ipynb"), ("solutions", "0*.ipynb")):
        if (got := sorted(p.stem for p in (root / folder).glob(pattern))) != sorted(stems):
            out.append(f"{folder}/ holds {got}, the registry {stems}")
    for c in registry:
        if c.key != f"ch{c.number}":
            out.append(f"{c.key}: its key does not name its number ({c.stem})")
    for task, exercise in EXERCISES.items():
        if exercise.chapter not in keys:
            out.append(f"exercise {task}: chapter {exercise.chapter} is not in the registry")
        elif not task.startswith(f"{exercise.chapter[2:]}."):
            out.append(f"exercise {task}: its number is not its chapter's ({exercise.chapter})")
    for c in registry:
        if not any(e.chapter == c.key for e in EXERCISES.values()):
            out.append(f"{c.key}: no exercise")
    if unknown := sorted(set(HINTS) - set(EXERCISES)):
        out.append(f"hints for tasks no exercise has: {unknown}")
    for path in sorted((root / "data" / "expected").glob("*.json")):
        if path.stem not in EXERCISES or EXERCISES[path.stem].chapter not in keys:
            out.append(f"{path.relative_to(root)}: no such exercise in a registered chapter")
    for path in sorted((root / "data" / "reference").glob("*/**/ch*.json")):
        if path.stem not in keys:
            out.append(f"{path.relative_to(root)}: {path.stem} is not in the registry")
    script = (root / "tools" / "gpu-check.sh").read_text()
    if "synclab.lab.chapters bench" not in script or " ".join(sorted(keys)[:2]) in script:
        out.append("tools/gpu-check.sh: its bench list is not the registry's (python -m synclab.lab.chapters bench)")
    return out


def test_the_table_of_contents_globs_the_chapters_so_a_new_one_leaves_it_as_it_is(tmp_path: Path) -> None:
    for part in ("_toc.yml", "book", "solutions"):
        source = ROOT / part
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / part)
    n = len(REGISTRY)
    (tmp_path / "book" / f"{n:02d}_new_chapter.md").write_text("# a new chapter\n")
    (tmp_path / "solutions" / f"{n:02d}_new_chapter.ipynb").write_text("{}")
    assert part_files(tmp_path, "Chapters")[-1] == f"book/{n:02d}_new_chapter"
    assert part_files(tmp_path, "Solutions")[-1] == f"solutions/{n:02d}_new_chapter"
    assert part_files(tmp_path, "Teaching") == ["book/instructors"]


def test_everything_that_lists_the_chapters_agrees_with_the_registry() -> None:
    found = registry_problems(ROOT)
    assert not found, "\n".join(found)
    assert list(CHAPTERS) == list(PACKAGES) == [c.key for c in REGISTRY] and set(BY_KEY) == set(CHAPTERS)


def test_a_tree_that_lists_the_chapters_otherwise_is_named(tmp_path: Path) -> None:
    for part in ("_toc.yml", "book", "labs", "solutions", "tools", "data"):
        source = ROOT / part
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / part)
    assert registry_problems(tmp_path) == []
    unregistered = len(REGISTRY)  # the number after the last chapter's
    (tmp_path / "labs" / f"{unregistered:02d}_new_chapter.ipynb").write_text("{}")
    (tmp_path / "data" / "reference" / "nvidia-h200" / f"ch{unregistered}.json").write_text("{}")
    script = tmp_path / "tools" / "gpu-check.sh"
    script.write_text(script.read_text() + "\nfor ch in ch0 ch1 ch2; do bench $ch; done\n")
    (tmp_path / "book" / "02_lazy_streams.md").rename(tmp_path / "book" / "02_lazy_streams_old.md")  # a stem renamed
    found = "\n".join(registry_problems(tmp_path))
    assert "_toc.yml's Chapters part lists" in found and "_toc.yml's Solutions part" not in found
    assert "book/ holds" in found
    assert "labs/ holds" in found and f"{unregistered:02d}_new_chapter" in found
    assert f"nvidia-h200/ch{unregistered}.json: ch{unregistered} is not in the registry" in found
    assert "tools/gpu-check.sh: its bench list is not the registry's" in found
    moved = tuple(Chapter("ch9", c.stem, c.package, c.bench_limit_s, c.page_charts, c.solution_charts)
                  if c.key == "ch3" else c for c in REGISTRY)
    found = "\n".join(registry_problems(ROOT, moved))
    assert "ch9: its key does not name its number" in found and "chapter ch3 is not in the registry" in found


def test_gpu_check_reads_its_benches_and_their_limits_from_the_registry() -> None:
    listed = subprocess.run([sys.executable, "-m", "synclab.lab.chapters", "bench"], capture_output=True, text=True,
                            check=True, cwd=ROOT).stdout.split("\n")
    assert listed[:-1] == [f"{c.key} {c.bench_limit_s}" for c in REGISTRY] and listed[-1] == ""
    wrong = subprocess.run([sys.executable, "-m", "synclab.lab.chapters", "benches"], capture_output=True, text=True,
                           cwd=ROOT)
    assert wrong.returncode == 2 and "usage" in wrong.stderr
