"""The students' install: the package, its data and the labs, and no solution notebooks.

``python -m synclab student-image DEST`` writes the tree a class's student image installs
(``pip install --no-deps -e DEST``); the instructors' page (``book/instructors.md``) shows
how. The grader's copy is the full repository: ``solutions/`` is where the labs and the
nbgrader source notebooks come from, and the grader's trusted setup cells.

What goes in, and why:

* ``synclab/`` — the notebooks import it, and it holds the checks (practice reports in the
  student's kernel). Nothing in it reads ``solutions/`` to check, judge or run chapter 6.
* ``data/pr_reports.yaml`` and ``data/reference/`` — the PRs' numbers and the GPU results
  the profiling cells draw.
* ``labs/`` — generated afresh from the solutions, never copied: a clone where someone worked the labs would hand
  out their answers. Their links into ``book/`` become plain text naming the page, as in nbgrader's assignments:
  the book's raw pages are not shipped, since they show every hint's last rung unfolded.
* ``requirements.txt`` and ``pyproject.toml`` — what the image installs.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nbformat

from synclab.lab import labgen
from synclab.lab.nbgrader_source import book_links_as_text

DATA = ("data/pr_reports.yaml", "data/reference")  # what the profiling cells read
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


def write_student_image(root: Path, dest: Path) -> list[Path]:
    """Write the students' install of the checkout at ``root`` into ``dest`` (new or empty); the paths written."""
    if dest.exists() and any(dest.iterdir()):
        raise StudentImageError(f"{dest} is not empty: choose a new folder")
    solutions = sorted((root / "solutions").glob("*.ipynb"))
    if not solutions:
        raise StudentImageError(f"{root / 'solutions'} holds no notebooks: the labs are generated from them")
    dest.mkdir(parents=True, exist_ok=True)
    written = [Path(shutil.copytree(root / "synclab", dest / "synclab", ignore=_NOT_SHIPPED))]
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
    write_student_image(root, dest)
    for folder, _, files in os.walk(dest):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
    return dest
