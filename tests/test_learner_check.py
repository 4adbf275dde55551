"""The learner's check (``python -m synclab check``): the lab's own check cells, run as the notebook runs them.

A terminal and a notebook must give the same verdict on the same answer, timed checks included: the same cells,
run in the command's process or in a kernel, report check for check the same outcome.
"""

from __future__ import annotations

import nbformat
import pytest

from synclab.checks import REPORT_LOG_ENV
from synclab.lab.learner_check import plan, read_reports, run_here
from synclab.lab.notebook_runner import run_notebook
from tests.honest.corpus import ROOT, answers, notebook_with

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)


def test_a_task_runs_its_setup_its_answers_and_its_check_and_no_profiling_cell():
    nb = nbformat.read(ROOT / "solutions" / "04_reverse_placeholder_scans.ipynb", as_version=4)
    chosen = plan(nb, ["4.2"])
    sources = [source for _, source in chosen.cells]
    assert sources[0].startswith("import math")  # the setup's imports
    assert any("class ReverseScanBatch" in s for s in sources)  # an earlier exercise's answer, as in a kernel
    assert any("def host_bottleneck_length" in s for s in sources)
    assert sources[-1].strip() == "ch4.check_bottleneck_model(host_bottleneck_length)"
    assert not any("cost_sweep" in s or "check_update_async" in s for s in sources)  # 4.1's profile and check
    assert list(chosen.checks.values()) == ["4.2"]


def test_a_walkthrough_before_the_exercises_runs_only_where_the_checks_read_what_it_binds():
    nb = nbformat.read(ROOT / "solutions" / "01_slice_then_split.ipynb", as_version=4)
    sources = [source for _, source in plan(nb, ["1.1"]).cells]
    assert not any(s.startswith("with count_syncs() as report:") for s in sources)  # the demo of the baseline's syncs
    assert sources[-1].strip() == "ch1.check_all_pool(AllPool)"


def test_a_cell_that_raises_is_named_and_the_next_one_runs():
    nb = nbformat.read(ROOT / "solutions" / "04_reverse_placeholder_scans.ipynb", as_version=4)
    answer = next(c for c in nb.cells if c.cell_type == "code" and "def host_bottleneck_length" in c.source)
    answer.source += "\nraise RuntimeError('a stray line')\n"
    run = run_here(nb, ["4.2"])
    assert any("RuntimeError: a stray line" in e for e in run.errors), run.errors
    assert run.reports["4.2"].passed  # the function was defined before the raise, as in a kernel


@pytest.mark.slow
def test_the_terminal_and_the_notebook_give_the_same_verdicts_timed_checks_included(tmp_path):
    """A right 4.1, a right 5.1 and a 5.1 that keeps the tensor cache (right values, no speed-up: its timed clause
    fails) judged by the same cells in this process and in a kernel: the same outcome for every check."""
    right = answers("right")
    chosen = [next(a for a in right if a.task == "4.1"), next(a for a in right if a.task == "5.1"),
              next(a for a in answers("wrong") if a.path.stem == "5.1-tensor-cache-kept")]
    for answer in chosen:
        nb = notebook_with(answer)
        here = run_here(nb, [answer.task]).reports[answer.task]
        cells = [nbformat.v4.new_code_cell(source) for _, source in plan(nb, [answer.task]).cells]
        path, log = tmp_path / f"{answer.path.stem}.ipynb", tmp_path / f"{answer.path.stem}.jsonl"
        nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata=nb.metadata), path)
        run_notebook(path, {REPORT_LOG_ENV: str(log)}, cell_timeout_s=120)
        kernel = read_reports(str(log))[answer.task]
        assert [(o.name, o.status) for o in here.outcomes] == [(o.name, o.status) for o in kernel.outcomes], \
            (answer.name, str(here), str(kernel))
        assert here.passed == (answer.fails == ""), (answer.name, str(here))
