"""Tests for synclab.lab.labgen: solution notebooks -> lab notebooks, never losing work."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbformat import v4

from synclab.lab import labgen
from synclab.lab.labgen import (LabgenError, LabWouldOverwriteWork, check_lab_fresh, generate_lab,
                            lab_path_for, leaked_solution, main, write_lab)

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

SOLUTION_CODE = """\
import torch

def scale(x):
    \"\"\"Scale x.\"\"\"
    ### BEGIN SOLUTION 1.1
    # a comment does not count

    y = x * 2
    return y + 1  # SECRET_LINE_A
    ### END SOLUTION

### BEGIN SOLUTION 1.2
z = scale(torch.ones(3))  # SECRET_LINE_B
### END SOLUTION
print(z)"""

SOLUTION_MD = ("Why does `.item()` sync?\n\n<!-- BEGIN SOLUTION -->\n"
               "Because the host SECRET_PROSE waits.\n<!-- END SOLUTION -->\n\nNext.")


def make_solution(code: str = SOLUTION_CODE) -> nbformat.NotebookNode:
    nb = v4.new_notebook()
    nb.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                   "language_info": {"name": "python"}, "widgets": {"state": "noise"}}
    code_cell = v4.new_code_cell(code, execution_count=7,
                                 outputs=[v4.new_output("stream", name="stdout", text="tensor(3.)\n")])
    code_cell.metadata = {"tags": ["task"], "execution": {"iopub": 1}, "collapsed": True, "scrolled": True}
    hidden = v4.new_markdown_cell("The answer is SECRET_HIDDEN.", metadata={"tags": ["solution-only"]})
    hidden_code = v4.new_code_cell("assert SECRET_HIDDEN_CODE", metadata={"tags": ["solution-only"]})
    nb.cells = [v4.new_markdown_cell("# Chapter 1"), code_cell, hidden,
                v4.new_markdown_cell(SOLUTION_MD), hidden_code]
    # Fixed ids: v4.new_*_cell draws random ones.
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i}"
    return nb


def write_solution(root: Path, name: str = "01_scale.ipynb", nb=None) -> Path:
    path = root / "solutions" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb if nb is not None else make_solution(), path)
    return path


def lab_text(lab: nbformat.NotebookNode) -> str:
    return "\n".join(cell.source for cell in lab.cells)


# ---------------------------------------------------------------------------- generate_lab


def test_code_regions_become_stubs_with_line_counts_and_indentation():
    lab = generate_lab(make_solution(), "solutions/01_scale.ipynb")
    code = lab.cells[1].source
    assert code == (
        "import torch\n\ndef scale(x):\n    \"\"\"Scale x.\"\"\"\n"
        "    # YOUR CODE HERE (~2 lines)\n"
        "    raise NotImplementedError(\"Exercise 1.1\")\n"
        "\n"
        "# YOUR CODE HERE (~1 line)\n"
        "raise NotImplementedError(\"Exercise 1.2\")\n"
        "print(z)")


def test_lab_contains_no_solution_line():
    text = lab_text(generate_lab(make_solution(), "solutions/01_scale.ipynb"))
    for secret in ("SECRET_LINE_A", "SECRET_LINE_B", "SECRET_PROSE", "SECRET_HIDDEN", "y = x * 2"):
        assert secret not in text
    assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text


def test_markdown_region_and_solution_only_cells():
    lab = generate_lab(make_solution(), "solutions/01_scale.ipynb")
    assert [c.id for c in lab.cells] == ["cell-0", "cell-1", "cell-3"]  # both solution-only dropped
    assert lab.cells[2].source == "Why does `.item()` sync?\n\n*Your answer here.*\n\nNext."


def test_outputs_and_metadata_cleared():
    lab = generate_lab(make_solution(), "solutions/01_scale.ipynb")
    code = lab.cells[1]
    assert code.outputs == [] and code.execution_count is None
    assert code.metadata == {"tags": ["task"]}
    assert set(lab.metadata) == {"kernelspec", "language_info", "synclab"}
    assert lab.metadata.synclab.generated_from == "solutions/01_scale.ipynb"
    assert lab.metadata.synclab.source_sha256 == labgen.cells_sha256(lab)
    assert leaked_solution(lab) == []


def test_empty_region_counts_at_least_one_line():
    nb = make_solution("### BEGIN SOLUTION 0.1\n# only a comment\n\n### END SOLUTION")
    assert generate_lab(nb, "s.ipynb").cells[1].source == (
        "# YOUR CODE HERE (~1 line)\nraise NotImplementedError(\"Exercise 0.1\")")


def test_an_unsized_region_stubs_without_a_count():
    """A count that would tell the answer (chapter 6's one-line stop hook) is left out: ``X.Y unsized``."""
    nb = make_solution("### BEGIN SOLUTION 0.1 unsized\nreturn set()\n### END SOLUTION")
    assert generate_lab(nb, "s.ipynb").cells[1].source == (
        "# YOUR CODE HERE\nraise NotImplementedError(\"Exercise 0.1\")")


@pytest.mark.parametrize("code, expected", [
    ("### BEGIN SOLUTION\nx = 1\n### END SOLUTION", "needs a task id"),
    ("### BEGIN SOLUTION 1.1\nx = 1", "never closed"),
    ("### BEGIN SOLUTION 1.1\n### BEGIN SOLUTION 1.2\n### END SOLUTION\n### END SOLUTION", "nested"),
    ("x = 1\n### END SOLUTION", "without a matching"),
    ("## BEGIN SOLUTION 1.1\nx = 1\n## END SOLUTION", "looks like a solution marker"),
])
def test_malformed_code_markers_name_notebook_and_cell(code, expected):
    with pytest.raises(LabgenError, match=expected) as info:
        generate_lab(make_solution(code), "solutions/01_scale.ipynb")
    assert "solutions/01_scale.ipynb, cell 1" in str(info.value)


def test_unpaired_markdown_marker_raises():
    nb = make_solution()
    nb.cells[3].source = "<!-- BEGIN SOLUTION -->\nthe answer"
    with pytest.raises(LabgenError, match="solutions/x.ipynb, cell 3: unpaired"):
        generate_lab(nb, "solutions/x.ipynb")


def test_leaked_solution_flags_markers_and_outputs():
    lab = generate_lab(make_solution(), "s.ipynb")
    lab.cells[1].source += "\n    ### END SOLUTION"
    lab.cells[1].outputs = [v4.new_output("stream", name="stdout", text="3\n")]
    lab.cells[2].source += "<!-- END SOLUTION -->"
    problems = leaked_solution(lab)
    assert len(problems) == 3
    assert any("### END SOLUTION" in p for p in problems)
    assert any("stored outputs" in p for p in problems)


# ---------------------------------------------------------------------------- files


def test_write_is_byte_identical_and_fresh(tmp_path):
    solution = write_solution(tmp_path)
    labs = tmp_path / "labs"
    lab = lab_path_for(solution, labs)
    assert lab == labs / "01_scale.ipynb"
    assert check_lab_fresh(solution, labs).startswith("missing")
    assert write_lab(solution, labs) == "written"
    first = lab.read_bytes()
    assert first.endswith(b"}\n")
    assert write_lab(solution, labs) == "unchanged"
    lab.unlink()
    assert write_lab(solution, labs) == "written"
    assert lab.read_bytes() == first
    assert check_lab_fresh(solution, labs) is None
    assert leaked_solution(nbformat.read(lab, as_version=4)) == []


def test_stale_after_solution_changes_then_untouched_lab_is_overwritten(tmp_path):
    solution = write_solution(tmp_path)
    labs = tmp_path / "labs"
    write_lab(solution, labs)
    nb = make_solution()
    nb.cells[0].source = "# Chapter 1, revised"
    nbformat.write(nb, solution)
    assert check_lab_fresh(solution, labs).startswith("stale")
    assert write_lab(solution, labs) == "written"
    assert check_lab_fresh(solution, labs) is None


def test_an_executed_lab_keeps_its_outputs_or_gets_a_backup(tmp_path):
    solution = write_solution(tmp_path)
    labs = tmp_path / "labs"
    write_lab(solution, labs)
    lab_path = labs / "01_scale.ipynb"
    lab = nbformat.read(lab_path, as_version=4)
    lab.cells[1].outputs = [v4.new_output("stream", name="stdout", text="ran\n")]
    lab.cells[1].execution_count = 1
    nbformat.write(lab, lab_path)
    assert "outputs or metadata differ" in check_lab_fresh(solution, labs)  # the repository's labs stay pristine
    assert write_lab(solution, labs) == "unchanged (your outputs kept)"  # nothing new to give: keep the run
    assert nbformat.read(lab_path, as_version=4).cells[1].outputs[0]["text"] == "ran\n"
    nb = make_solution()
    nb.cells[0].source = "# Chapter 1, revised"
    nbformat.write(nb, solution)
    status = write_lab(solution, labs)  # the solution changed: regenerated, the executed copy backed up
    assert status.startswith("written (backup: ")
    backup = Path(status.removeprefix("written (backup: ").removesuffix(")"))
    assert nbformat.read(backup, as_version=4).cells[1].outputs[0]["text"] == "ran\n"
    assert check_lab_fresh(solution, labs) is None


def edit_lab(lab_path: Path) -> None:
    lab = nbformat.read(lab_path, as_version=4)
    lab.cells[1].source = lab.cells[1].source.replace("raise NotImplementedError(\"Exercise 1.2\")",
                                                      "z = READER_WORK")
    nbformat.write(lab, lab_path)


def test_refuses_to_overwrite_edited_lab(tmp_path):
    solution = write_solution(tmp_path)
    labs = tmp_path / "labs"
    write_lab(solution, labs)
    edit_lab(labs / "01_scale.ipynb")
    before = (labs / "01_scale.ipynb").read_bytes()
    assert write_lab(solution, labs) == "kept (you edited it; its solution has not changed)"  # nothing to give
    nb = make_solution()
    nb.cells[0].source = "# Chapter 1, revised"
    nbformat.write(nb, solution)
    with pytest.raises(LabWouldOverwriteWork, match="--force") as info:
        write_lab(solution, labs)
    assert "rename" in str(info.value)
    assert (labs / "01_scale.ipynb").read_bytes() == before
    assert "cells differ" in check_lab_fresh(solution, labs)


def test_force_keeps_backup_of_edited_lab(tmp_path):
    solution = write_solution(tmp_path)
    labs = tmp_path / "labs"
    write_lab(solution, labs)
    edit_lab(labs / "01_scale.ipynb")
    result = write_lab(solution, labs, force=True)
    assert result.startswith("written (backup: ")
    (backup,) = (labs / ".backup").glob("01_scale.*.ipynb")
    assert str(backup) in result
    assert "READER_WORK" in backup.read_text()
    assert "READER_WORK" not in (labs / "01_scale.ipynb").read_text()
    assert check_lab_fresh(solution, labs) is None


def test_unreadable_lab_counts_as_work(tmp_path):
    solution = write_solution(tmp_path)
    (tmp_path / "labs").mkdir()
    (tmp_path / "labs" / "01_scale.ipynb").write_text("my notes, not json")
    with pytest.raises(LabWouldOverwriteWork):
        write_lab(solution, tmp_path / "labs")


# ---------------------------------------------------------------------------- CLI


def test_main_generates_checks_and_refuses(tmp_path, capsys):
    write_solution(tmp_path, "00_a.ipynb")
    write_solution(tmp_path, "01_b.ipynb")
    assert main(["--check"], root=tmp_path) == 1
    assert capsys.readouterr().out.count("missing") == 2

    assert main([], root=tmp_path) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and all(line.endswith(": written") for line in out)
    assert main(["labs", "--check"], root=tmp_path) == 0
    assert "labs are fresh" in capsys.readouterr().out

    edit_lab(tmp_path / "labs" / "00_a.ipynb")
    assert main([], root=tmp_path) == 0  # edited, but its solution is unchanged: kept, not an error
    assert "00_a.ipynb: kept" in capsys.readouterr().out
    revised = make_solution()
    revised.cells[0].source = "# Chapter 1, revised"
    write_solution(tmp_path, "00_a.ipynb", revised)
    write_solution(tmp_path, "01_b.ipynb", make_solution("### BEGIN SOLUTION 2.1\nx = 2\n### END SOLUTION"))
    assert main([], root=tmp_path) == 1  # 00_a refused, 01_b still regenerated
    out = capsys.readouterr().out
    assert "refusing to overwrite" in out and "01_b.ipynb: written" in out
    assert main(["--force"], root=tmp_path) == 0
    assert "backup" in capsys.readouterr().out
    assert main(["--check"], root=tmp_path) == 0


def test_the_title_says_solution_in_the_solution_and_lab_in_the_lab():
    """The book's sidebar lists the solution notebooks by their title: a reader who clicks "lab" must not get answers."""
    solution = make_solution()
    solution.cells[0].source = "# 1 · Scale solution: the whole method\n\nIntro, about the solution below."
    lab = generate_lab(solution, "solutions/01_scale.ipynb")
    assert lab.cells[0].source == "# 1 · Scale lab: the whole method\n\nIntro, about the solution below."


@pytest.mark.parametrize("path", sorted(Path(__file__).resolve().parent.parent.glob("solutions/*.ipynb")),
                         ids=lambda p: p.stem)
def test_every_solution_is_titled_a_solution(path):
    nb = nbformat.read(path, as_version=4)
    title = next(c.source for c in nb.cells if c.cell_type == "markdown").split("\n")[0]
    assert title.startswith("# ") and " solution" in title and " lab" not in title, title


@pytest.mark.parametrize("path", sorted(Path(__file__).resolve().parent.parent.glob("solutions/*.ipynb")),
                         ids=lambda p: p.stem)
def test_every_exercise_has_its_check_cell(path):
    """`python -m synclab check --task X.Y` finds each exercise's cells and its check."""
    roles = labgen.cell_roles(nbformat.read(path, as_version=4))
    exercises = {t for role, tasks in roles.values() if role == "exercise" for t in tasks.split(",")}
    checks = [t for role, t in roles.values() if role == "check"]
    assert exercises and sorted(checks) == sorted(exercises)


