"""A learner's `pytest --nbval` on their lab: a check cell that fails fails its cell; one not written yet does not.

A lab stores no outputs for nbval to compare, so a failing check cell raises under nbval
(:func:`synclab.run_modes.failing_checks_raise`), after its report: a learner who runs nbval on a wrong answer sees a
failed cell, not "passed". An untouched lab passes (its exercises report "not implemented"), as the repository's own
``pytest --nbval`` over ``labs/`` requires.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from synclab.checks import Check, ChecksDidNotPass, expect, run_checks
from synclab.run_modes import NBVAL_ENV

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.sim


def test_a_failing_check_raises_only_where_nbval_runs_a_kernel(monkeypatch):
    import synclab.checks as checks

    def doubles(impl, rng):
        expect(impl(2) == 4, "2 doubled")

    def stub(x):
        raise NotImplementedError("Exercise 9.9")

    cases = [Check("9.9", "doubles", doubles, timeout_s=5)]
    assert not run_checks("9.9", cases, lambda x: x).passed  # outside nbval's kernels: a report, never a raise
    monkeypatch.setattr(checks, "failing_checks_raise", lambda: True)
    with pytest.raises(ChecksDidNotPass, match="0/1 checks passed"):
        run_checks("9.9", cases, lambda x: x)
    assert run_checks("9.9", cases, lambda x: 2 * x).passed
    assert run_checks("9.9", cases, stub).outcomes[0].status == "not implemented"  # not written yet: no raise


def test_nbval_fails_a_labs_wrong_answer_and_passes_its_stub(tmp_path):
    lab = nbformat.read(ROOT / "labs" / "00_primer.ipynb", as_version=4)
    nbformat.write(lab, tmp_path / "untouched.ipynb")
    for cell in lab.cells:
        if cell.cell_type == "code" and "def my_predictions" in cell.source:
            cell.source = "def my_predictions():\n    return {k: 0 for k in primer.SNIPPETS}\n"
    nbformat.write(lab, tmp_path / "wrong.ipynb")
    env = {k: v for k, v in os.environ.items() if k != NBVAL_ENV and not k.startswith("PYTEST_")}

    def nbval(name: str) -> subprocess.CompletedProcess:
        # the repository's conftest as a plugin: what a plain `pytest --nbval` in the checkout loads
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider",
                               "--nbval", str(tmp_path / name)], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=300)

    wrong, untouched = nbval("wrong.ipynb"), nbval("untouched.ipynb")
    assert wrong.returncode != 0 and "ChecksDidNotPass" in wrong.stdout, wrong.stdout[-2000:]
    assert untouched.returncode == 0, untouched.stdout[-2000:]
