"""Every known wrong version is caught on every seed: an edge the checks reach only by chance is not a check.

Each chapter's test module lists wrong versions a learner writes, each with the check that must catch it
(``WRONG_N_M``). Here each one runs against that check on 20 seeds, and must fail (or crash) on all of them:
a clause of an exercise's contract is a fixed case, not a random draw that sometimes misses it.
Chapter 3's data-parallel exercise (3.7) is left out: its wrong versions run on a group of processes, and its
cases are fixed already (tests/test_data_parallel.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from synclab import list_caches as ch5
from synclab import pinned_transfers as ch3
from synclab import primer
from synclab import reverse_scan as ch4
from synclab import slice_then_split as ch1
from synclab.checks import Check, run_checks
from synclab.lazy_streams import checks as ch2_checks
from tests import (test_lazy_streams, test_list_caches, test_ngram_bad_words, test_pinned_transfers, test_primer,
                   test_reverse_scan, test_slice_then_split)

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

SEEDS = range(20)

SOURCES: list[tuple[str, list[Check], list[tuple[Any, str]]]] = [
    ("0.1", primer.CHECKS_0_1, test_primer.WRONG_0_1),
    ("1.1", ch1.CHECKS_1_1, test_slice_then_split.WRONG_1_1),
    ("1.2", ch1.CHECKS_1_2, test_slice_then_split.WRONG_1_2),
    ("2.1", ch2_checks.CHECKS_2_1, test_lazy_streams.WRONG_2_1),
    ("3.1", ch3.CHECKS_3_1, test_pinned_transfers.WRONG_3_1),
    ("3.2", ch3.CHECKS_3_2, test_pinned_transfers.WRONG_3_2),
    ("3.3", ch3.CHECKS_3_3, test_pinned_transfers.WRONG_3_3),
    ("3.4", ch3.CHECKS_3_4, test_pinned_transfers.WRONG_3_4),
    ("3.5", ch3.CHECKS_3_5, test_pinned_transfers.WRONG_3_5),
    ("3.8", ch3.CHECKS_3_8, test_ngram_bad_words.WRONG_UPDATE + test_ngram_bad_words.WRONG_BAD_WORDS),
    ("4.1", ch4.CHECKS_4_1, test_reverse_scan.WRONG_4_1),
    ("4.2", ch4.CHECKS_4_2, test_reverse_scan.WRONG_4_2),
    ("5.1", ch5.CHECKS_5_1, test_list_caches.WRONG_5_1),
    ("5.2", ch5.CHECKS_5_2, test_list_caches.WRONG_5_2),
]
CASES = [(task, checks, wrong, name) for task, checks, wrongs in SOURCES for wrong, name in wrongs]


def _name(wrong: Any) -> str:
    return getattr(wrong, "__name__", type(wrong).__name__)


@pytest.mark.parametrize("task, checks, wrong, failing_check", CASES,
                         ids=[f"{t}-{_name(w)}-{c}" for t, _, w, c in CASES])
def test_each_wrong_version_is_caught_on_every_seed(task, checks, wrong, failing_check):
    intended = [check for check in checks if failing_check in check.name]
    assert intended, f"no check of {task} is named like {failing_check!r}"
    missed = []
    for seed in SEEDS:
        report = run_checks(task, intended, wrong, seed=seed)
        if all(o.status not in ("failed", "crashed") for o in report.outcomes):
            missed.append(seed)
        if not any(check.random for check in intended):
            break  # a check that draws no random case gives the same verdict on every seed
    assert not missed, f"{_name(wrong)} passes {failing_check!r} on seeds {missed}"
