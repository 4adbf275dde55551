"""Chapter N (<pattern>): the checks of the chapter's exercises, each a Check that names the reader's fault.

A room of :mod:`synclab.CHAPTER`. It imports the chapter's workloads, never its profiling.
"""

from __future__ import annotations

import random
from typing import Callable

from synclab.CHAPTER.workloads import make_inputs
from synclab.checks import Check, CheckReport, expect_equal, run_checks
from synclab.syncs import count_syncs


def _check_no_sync(impl: Callable, rng: random.Random) -> None:
    case = "8 values"
    with count_syncs() as report:
        impl(make_inputs(8))
    expect_equal(report.count, 0, what="syncs", case=case, hint="name the reader's fault, not the check")


CHECKS_N_1 = [Check("N.1", "0 syncs", _check_no_sync)]


def check_example(impl: Callable, seed: int | None = None) -> CheckReport:
    """Exercise N.1: run every check against the reader's ``impl``."""
    return run_checks("Exercise N.1 — <title>", CHECKS_N_1, impl, seed=seed)
