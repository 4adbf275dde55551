"""The students' install (``python -m synclab student-image DEST``): no solutions, and everything still works.

The image is written from this checkout, then used as a student's would be: its own ``synclab`` first on the
path, run from its own folder, with no ``solutions/`` anywhere it can see.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from synclab.lab import labgen
from synclab.lab.exercises import points_of
from synclab.lab.student_image import StudentImageError, students_lab, write_student_image
from synclab.run_modes import CHECK_SERVER_ENV

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("image") / "synclab"
    write_student_image(ROOT, dest)
    return dest


def _run(image: Path, *args: str) -> subprocess.CompletedProcess:
    """``python ARGS`` as in the students' image: its synclab first on the path, its folder the working one."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SYNCLAB_", "PYTEST_"))}
    env[CHECK_SERVER_ENV] = os.environ.get(CHECK_SERVER_ENV, "0")  # no warm check server outlives the suite
    env["PYTHONPATH"] = str(image)
    return subprocess.run([sys.executable, *args], cwd=image, env=env, capture_output=True, text=True, timeout=300)


def test_the_image_holds_the_package_its_data_and_fresh_labs_and_no_solutions(image):
    top = sorted(p.name for p in image.iterdir())
    assert top == ["README.md", "data", "labs", "pyproject.toml", "requirements.txt", "synclab"]
    notebooks = sorted(p.relative_to(image).as_posix() for p in image.rglob("*.ipynb"))
    assert notebooks == sorted(f"labs/{p.name}" for p in (ROOT / "solutions").glob("*.ipynb"))
    for path in (image / "labs").glob("*.ipynb"):
        lab = nbformat.read(path, as_version=4)
        assert not labgen.leaked_solution(lab), path.name
        # generated afresh, not copied: a labs/ someone worked in would hand out their answers
        solution = nbformat.read(ROOT / "solutions" / path.name, as_version=4)
        assert lab == students_lab(solution, f"solutions/{path.name}")
        # the book is not shipped (its raw pages show every hint unfolded): no link into it is left dead
        assert not any("../book/" in cell.source for cell in lab.cells if cell.cell_type == "markdown"), path.name
        assert "(in the book)" in lab.cells[0].source
    assert not list(image.rglob("__pycache__")) and (image / "data" / "pr_reports.yaml").exists()
    said = _run(image, "-c", "import synclab.lab.cli as cli; print(cli.ROOT)")
    assert said.stdout.strip() == str(image), said.stderr  # the image's own package, not this checkout's


def test_an_image_is_written_into_a_new_or_empty_folder_only(tmp_path):
    (tmp_path / "work.txt").write_text("a student's work")
    with pytest.raises(StudentImageError, match="not empty"):
        write_student_image(ROOT, tmp_path)
    with pytest.raises(StudentImageError, match="holds no notebooks"):
        write_student_image(tmp_path, tmp_path / "new")


@pytest.mark.slow
def test_a_students_install_grades_without_solutions(image, tmp_path):
    """check --json in the image checks a finished chapter 0 in full (chapter 6's checks without solutions/:
    tests/test_capstone.py; 1.2 on the package's 1.1: tests/test_judge.py)."""
    submission = tmp_path / "00_primer.ipynb"
    submission.write_bytes((ROOT / "solutions" / "00_primer.ipynb").read_bytes())
    proc = _run(image, "-m", "synclab", "check", str(submission), "--checks-only", "--json")
    summary = json.loads(proc.stdout)
    assert proc.returncode == 0, proc.stderr
    assert summary["earned"] == summary["points"] == points_of("0.1") + points_of("0.2")
