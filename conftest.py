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
