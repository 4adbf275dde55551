"""Tests for ``python -m synclab`` (check, labs) and for the generated labs themselves.

The command-line tests execute notebooks in a fresh kernel (about 10 s each): marked slow.
The static checks of labs/ against solutions/ are fast and always run.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat import v4

from synclab.run_modes import reader_environment

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))


def synclab(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = reader_environment()
    return subprocess.run([sys.executable, "-m", "synclab", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


# ----------------------------------------------------------------------------- python -m synclab check


@pytest.mark.slow
def test_check_runs_a_whole_solution_and_passes():
    proc = synclab("check", "solutions/00_primer.ipynb")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ALL CHECKS PASSED" in proc.stdout and "profiling cells left out" not in proc.stderr


@pytest.mark.slow
def test_check_notebook_without_checks_fails(tmp_path):
    nb = v4.new_notebook()
    nb.cells = [v4.new_code_cell("x = 1 + 1\nprint(x)")]
    path = tmp_path / "no_checks.ipynb"
    nbformat.write(nb, path)
    proc = synclab("check", str(path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "no checks ran" in proc.stdout
    assert "ALL CHECKS PASSED" not in proc.stdout


@pytest.mark.slow
def test_check_missing_notebook_exits_2(tmp_path):
    missing = tmp_path / "nope.ipynb"
    proc = synclab("check", str(missing))
    assert proc.returncode == 2
    assert f"no such notebook: {missing}" in proc.stderr


@pytest.mark.slow
def test_labs_are_fresh():
    proc = synclab("labs", "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "labs are fresh" in proc.stdout


# ----------------------------------------------------------------------------- labs vs solutions (static)

_BEGIN = re.compile(r"^\s*### BEGIN SOLUTION\s+(\d+\.\d+)(?: unsized)?\s*$")
_END = re.compile(r"^\s*### END SOLUTION\s*$")


def solution_regions(nb) -> tuple[set[str], list[str]]:
    """Task ids and the non-blank, non-comment lines between the solution markers of code cells.

    A line the solution also writes outside every region (chapter 6's scaffold hands the reader a loop the
    answer writes again) is given to the reader anyway, so it is not a solution line."""
    tasks, lines, given, inside = set(), [], set(), False
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for line in cell.source.splitlines():
            if m := _BEGIN.match(line):
                tasks.add(m.group(1))
                inside = True
            elif _END.match(line):
                inside = False
            elif line.strip() and not line.strip().startswith("#"):
                (lines.append if inside else given.add)(line.strip())
    given_code = {_code_part(line) for line in given}
    return tasks, [line for line in lines if _code_part(line) not in given_code]


def _code_part(line: str) -> str:
    """The line without a trailing comment (good enough for solution lines: no '#' in their strings)."""
    return line.split("  #")[0].strip()


def pairs():
    return [pytest.param(s, ROOT / "labs" / s.name, id=s.stem) for s in SOLUTIONS]


def test_there_are_solutions():
    assert SOLUTIONS, "no solutions/*.ipynb found"


@pytest.mark.parametrize("solution, lab", pairs())
def test_lab_contains_no_solution_code(solution, lab):
    assert lab.exists(), f"{lab} is missing: run `python -m synclab labs`"
    _, secret = solution_regions(nbformat.read(solution, as_version=4))
    assert secret, f"{solution.name} has no solution lines"
    # Code cells only: the prose may quote the given baseline (`raise ValueError("NaN in logits")`),
    # which the solution legitimately shares.
    lab_code = [c.source for c in nbformat.read(lab, as_version=4).cells if c.cell_type == "code"]
    lab_lines = {line.strip() for source in lab_code for line in source.splitlines()}
    lab_code_parts = {_code_part(line) for line in lab_lines}
    lab_text = "\n".join(lab_code)
    for line in secret:
        assert line not in lab_lines, f"solution line leaked into {lab.name}: {line!r}"
        code = _code_part(line)
        assert code not in lab_code_parts, f"solution code leaked into {lab.name}: {code!r}"
        if len(code) >= 20:  # long enough to be unmistakable inside another line too
            assert code not in lab_text, f"solution code leaked into {lab.name}: {code!r}"


@pytest.mark.parametrize("solution, lab", pairs())
def test_lab_has_no_stored_outputs(solution, lab):
    lab_nb = nbformat.read(lab, as_version=4)
    code_cells = [c for c in lab_nb.cells if c.cell_type == "code"]
    assert code_cells
    for i, cell in enumerate(code_cells):
        assert cell.get("outputs", []) == [], f"code cell {i} of {lab.name} has stored outputs"
        assert cell.get("execution_count") is None, f"code cell {i} of {lab.name} has an execution count"


@pytest.mark.parametrize("solution, lab", pairs())
def test_lab_stubs_every_task(solution, lab):
    tasks, _ = solution_regions(nbformat.read(solution, as_version=4))
    assert tasks, f"{solution.name} has no '### BEGIN SOLUTION X.Y' markers"
    lab_text = "\n".join(c.source for c in nbformat.read(lab, as_version=4).cells if c.cell_type == "code")
    for task in sorted(tasks):
        assert f'raise NotImplementedError("Exercise {task}")' in lab_text, f"{lab.name}: no stub for {task}"
    assert "### BEGIN SOLUTION" not in lab_text and "### END SOLUTION" not in lab_text


# ----------------------------------------------------------------------------- python -m synclab bench


def test_bench_keeps_what_was_recorded_around_a_failing_cell(tmp_path, capsys):
    """A GPU half hour is too short to lose: every record is written, the failure listed, the exit non-zero."""
    import json

    from synclab.lab.cli import bench_notebook
    from synclab.provenance import Provenance

    nb = v4.new_notebook(cells=[
        v4.new_code_cell('from synclab.reference import record\nrecord("ch9", "first", {"value": 1})'),
        v4.new_code_cell('raise RuntimeError("the GPU ran out of something")'),
        v4.new_code_cell('record("ch9", "after", {"value": 2})'),  # the other cells still run
    ])
    notebook = tmp_path / "ch9.ipynb"
    nbformat.write(nb, notebook)
    status = bench_notebook("ch9", notebook, timeout=120, out_root=tmp_path / "out")
    out = capsys.readouterr()
    written = tmp_path / "out" / Provenance.here().slug / "ch9.json"
    assert status == 1
    assert f"wrote {written}" in out.out and "first" in out.out  # the path and what it holds
    data = json.loads(written.read_text())
    assert list(data["results"]) == ["first", "after"] and data["provenance"]["device"] == Provenance.here().device
    assert len(data["errors"]) == 1 and "the GPU ran out of something" in data["errors"][0]
    assert "1 cell(s) failed" in out.err


def test_the_bench_logs_each_cell_as_it_runs_with_what_it_printed_and_displayed(tmp_path, capsys):
    """A GPU log must say where a run was and why a figure lost a variant: each cell as it starts, then its time and
    the end of what it printed or displayed (a check's report is displayed, not printed)."""
    from synclab.lab.cli import bench_notebook

    nb = v4.new_notebook(cells=[
        v4.new_code_cell('from synclab.reference import record\nrecord("ch9", "first", {"value": 1})\nprint("ran")'),
        v4.new_code_cell('from IPython.display import display\ndisplay("2.1: 7/8 checks passed")'),
    ])
    notebook = tmp_path / "ch9.ipynb"
    nbformat.write(nb, notebook)
    assert bench_notebook("ch9", notebook, timeout=120, out_root=tmp_path / "out") == 0
    log = capsys.readouterr().out
    started, printed, next_one = (log.index(line) for line in ("[cell 0] from synclab.reference import record",
                                                                   "    ran", "[cell 1] from"))
    assert started < printed < next_one
    assert "    '2.1: 7/8 checks passed'" in log and re.search(r"\[cell 1\] \d+\.\d s", log)


def test_a_bench_stopped_at_its_limit_keeps_what_the_cells_before_recorded(tmp_path):
    """``timeout`` kills a GPU step at its limit: the cells that ran keep their records, the stop is named."""
    import json
    import signal
    import subprocess
    import sys
    import time

    from synclab.provenance import Provenance

    nb = v4.new_notebook(cells=[
        v4.new_code_cell('from synclab.reference import record\nrecord("ch9", "first", {"value": 1})'),
        v4.new_code_cell("import time\ntime.sleep(60)"),
    ])
    notebook = tmp_path / "ch9.ipynb"
    nbformat.write(nb, notebook)
    code = (f"from pathlib import Path; from synclab.lab.cli import bench_notebook; "  # as python -m synclab runs it:
            f"from synclab.lab.notebook_runner import stop_on_signals\n"  # a signal stops the run, finally blocks run
            f"with stop_on_signals(): bench_notebook('ch9', Path({str(notebook)!r}), timeout=120, "
            f"out_root=Path({str(tmp_path / 'out')!r}))")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    lines = []
    for line in proc.stdout:  # the log says the sleeping cell started: then stop the run as timeout does
        lines.append(line)
        if line.startswith("[cell 1]"):
            time.sleep(0.5)
            proc.send_signal(signal.SIGTERM)
            break
    lines += proc.stdout.readlines()
    assert proc.wait(timeout=60) != 0
    data = json.loads((tmp_path / "out" / Provenance.here().slug / "ch9.json").read_text())
    assert list(data["results"]) == ["first"]
    assert data["errors"] == ["stopped by SIGTERM in cell 1: the cells after it did not run"]


def test_bench_with_nothing_recorded_fails_and_writes_nothing(tmp_path, capsys):
    from synclab.lab.cli import bench_notebook

    notebook = tmp_path / "ch9.ipynb"
    nbformat.write(v4.new_notebook(cells=[v4.new_code_cell("x = 1")]), notebook)
    assert bench_notebook("ch9", notebook, timeout=120, out_root=tmp_path / "out") == 1
    assert "recorded no results" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- python -m synclab check --task


def test_check_an_unknown_task_names_the_real_ones():
    proc = synclab("check", "labs/04_reverse_placeholder_scans.ipynb", "--task", "4.7")
    assert proc.returncode == 2
    assert "no exercise 4.7 in this lab; its exercises: 4.1, 4.2" in proc.stderr


def test_a_terminal_learner_gets_their_profile_as_one_offline_page(tmp_path):
    """The figures a lab's run drew, with the tables printed beside them, in one HTML file that fetches nothing."""
    import nbformat

    from synclab.lab.profile_html import write_profile_html

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("## Exercise 9.1 — a check"),
        nbformat.v4.new_code_cell("check()", outputs=[nbformat.v4.new_output("stream", name="stdout", text="passed\n")]),
        nbformat.v4.new_markdown_cell("## Profile: time per call\n\nExpect: **one** call per step."),
        nbformat.v4.new_code_cell("fig", outputs=[
            nbformat.v4.new_output("stream", name="stdout", text="n  before  after\n"),
            nbformat.v4.new_output("display_data", data={"application/vnd.plotly.v1+json": {
                "data": [{"type": "bar", "x": [1], "y": [2]}], "layout": {"title": {"text": "a </script> title"}}}})]),
    ])
    page = tmp_path / "lab.profile.html"
    assert write_profile_html(nb, page, "Your profile: lab.ipynb") == 1
    text = page.read_text()
    assert "<h2>Profile: time per call</h2>" in text and "n  before  after" in text
    assert "<p>Expect: <strong>one</strong> call per step.</p>" in text  # the section's words, beside its figure
    assert "Exercise 9.1" not in text  # a section without a figure is left out
    assert "a <\\/script> title" in text and "http" not in text.split("<body>")[1]  # inlined, nothing fetched
    # the mode bar in a margin of its own at the right edge, as the book draws it (it hid a title and labels)
    assert '"modebar": {"orientation": "v"}' in text and '"margin": {"r": 50}' in text
    nb.cells = nb.cells[:2]
    assert write_profile_html(nb, page, "t") == 0 and "finish an exercise" in page.read_text()


def profile_page_problems(nb) -> list[str]:
    """What would show badly on a lab's profile page: a printed dict, a line wider than the page's tables."""
    from synclab.lab.profile_html import _section_outputs

    problems = []
    for heading, outputs in _section_outputs(nb):
        for kind, value in outputs:
            for line in value.splitlines() if kind == "text" else []:
                if re.search(r"\{'[^']*': ", line):
                    problems.append(f"{heading}: a raw dict: {line[:60]}")
                elif len(line) > 130 and "  " in line.strip():  # a table's row, which cannot wrap
                    problems.append(f"{heading}: a table row of {len(line)} characters")
    return problems


@pytest.mark.parametrize("solution", SOLUTIONS, ids=lambda p: p.stem)
def test_profile_pages_show_tables_and_figures_never_raw_dicts(solution):
    assert profile_page_problems(nbformat.read(solution, as_version=4)) == []


def test_a_printed_dict_on_a_profile_page_is_caught():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("## What the profile shows"),
        nbformat.v4.new_code_cell(outputs=[
            nbformat.v4.new_output("stream", name="stdout", text="syncs: {'baseline': [2, 2]}\n"),
            nbformat.v4.new_output("display_data", data={"application/vnd.plotly.v1+json": {"data": []}})])])
    assert profile_page_problems(nb) == ["What the profile shows: a raw dict: syncs: {'baseline': [2, 2]}"]
