"""Repository-wide pytest setup: a plain ``pytest --nbval`` runs the way ``make test`` does.

nbval options cannot live in ``addopts`` (``-p no:nbval`` would then break), so the
sanitizer and the kernel choice are set here when ``--nbval`` is on.
"""

import os
from pathlib import Path

import torch

from synclab.timing import SMOKE_ENV

SANITIZER = Path(__file__).parent / "tests" / "sanitize.cfg"


def pytest_configure(config):
    # Timings under test run their whole path as briefly as it allows (synclab.timing.smoke_run); the
    # kernels nbval and the CLI start inherit it. Tests assert counts, never times.
    os.environ.setdefault(SMOKE_ENV, "1")
    # One intra-op thread in every process of the suite (the workers, and the kernels and ranks they start,
    # which read OMP_NUM_THREADS): several workers on two cores, each with a pool of spinning threads, ran
    # some tests twenty times slower than alone.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    option = config.option
    if getattr(option, "nbval", False) or getattr(option, "nbval_lax", False):
        if not option.nbval_sanitize_with:
            option.nbval_sanitize_with = str(SANITIZER)
        if not option.nbval_kernel_name:
            option.nbval_current_env = True  # the notebooks run in the interpreter running pytest


# The files that take longest, started first: make test hands whole files to its workers in collection order,
# and one of these started last kept the suite running a minute after the others were done.
LONGEST_FIRST = ["tests/test_book.py", "tests/test_cli_labs.py", "tests/test_nbgrader.py",
                 "tests/test_cli_fresh_labs.py", "tests/test_answer_scan.py", "tests/test_judge.py",
                 "tests/test_cli_solutions.py", "tests/test_wrong_versions.py"]


def pytest_collection_modifyitems(session, config, items):
    root = Path(__file__).parent

    def rank(item) -> int:
        path = Path(str(item.fspath))
        name = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items[:] = sorted(items, key=rank)  # stable: each file's own order is kept
