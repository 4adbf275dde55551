"""``python -m synclab check --checks-only`` on a solution: each exercise's checks pass through the CLI, in the
command's own process as the notebook runs them.

The command runs on the primer here; every other chapter's checks run on the same path (``run_here``, which the
command calls) for each exercise's right answers in the honest corpus (tests/test_honest_corpus*.py), and in the
solution notebooks themselves under nbval. On a GPU machine, the grader judges every solution.
"""

from __future__ import annotations

import re

import nbformat
import pytest

from tests.test_cli import ROOT, SOLUTIONS, solution_regions, synclab

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)


THROUGH_THE_CLI = [s for s in SOLUTIONS if s.stem == "00_primer"]


@pytest.mark.slow
@pytest.mark.parametrize("solution", THROUGH_THE_CLI, ids=[s.stem for s in THROUGH_THE_CLI])
def test_check_solution_passes(solution):
    """Every exercise's checks pass through the CLI (profiling cells left out: nbval runs those)."""
    proc = synclab("check", str(solution.relative_to(ROOT)), "--checks-only")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ALL CHECKS PASSED" in proc.stdout
    tasks, _ = solution_regions(nbformat.read(solution, as_version=4))
    for task in tasks:
        assert re.search(rf"Exercise {re.escape(task)} .*: (\d+)/\1 checks passed", proc.stdout), proc.stdout
    assert "cells that raised" not in proc.stdout


@pytest.mark.cuda
@pytest.mark.slow
@pytest.mark.parametrize("solution", SOLUTIONS, ids=[s.stem for s in SOLUTIONS])
def test_on_a_gpu_machine_the_grader_judges_each_solution_on_the_simulated_device(solution):
    """A GPU's owner grades with the GPU in sight (no SYNCLAB_DEVICE): the grader's worker still judges on the
    simulated device, so every check passes as on a CPU, nothing CUDA does is blamed on the answer, and nothing of
    the solutions is listed for the instructor. (The learner's check runs on the GPU, as the notebook does: the
    solutions' check cells under nbval.)"""
    proc = synclab("grade", str(solution.relative_to(ROOT)))
    assert proc.returncode == 0 and "ALL CHECKS PASSED" in proc.stdout, proc.stdout + proc.stderr
    assert "for the instructor to read" not in proc.stdout, proc.stdout
