"""``python -m synclab check`` on the fresh labs of chapters 2, 4 and 6 (chapters 0, 1, 3 and 5: test_cli_fresh_labs.py)."""

from __future__ import annotations

import pytest

from tests.test_cli import SOLUTIONS
from tests.test_cli_fresh_labs import HERE, check_fresh_lab

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

REST = [s for s in SOLUTIONS if s not in HERE]


def test_the_two_files_run_every_lab():
    assert REST and sorted(HERE + REST) == SOLUTIONS


@pytest.mark.slow
@pytest.mark.parametrize("solution", REST, ids=[s.stem for s in REST])
def test_a_fresh_lab_runs_top_to_bottom_naming_the_exercises(solution):
    check_fresh_lab(solution)
