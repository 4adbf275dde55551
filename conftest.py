"""Repository-wide pytest setup: a plain ``pytest --nbval`` runs the way ``make test`` does.

nbval options cannot live in ``addopts`` (``-p no:nbval`` would then break), so the
sanitizer and the kernel choice are set here when ``--nbval`` is on.
"""

import os
from pathlib import Path

import pytest
import torch

from synclab.device import DEVICE_ENV, SIMULATED
from synclab.run_modes import CHECK_SERVER_ENV, NBVAL_ENV, SMOKE_ENV

SANITIZER = Path(__file__).parent / "tests" / "sanitize.cfg"


# Every test under tests/ names the device it tests, with one of two marks (the closest one counts, so a module's
# `pytestmark = pytest.mark.sim` can be overridden by one test's `@pytest.mark.cuda`):
#   sim   the simulated device, on every machine: SYNCLAB_DEVICE=sim hides a GPU from the lab (has_cuda(),
#         pick_device() and count_syncs()'s default then answer as on a CPU-only machine), so that no such
#         test depends on whether the machine has a GPU;
#   cuda  a real GPU; skipped where there is none.
# A test with neither fails on every machine, a CPU-only one included: a test that takes a device-dependent default
# without saying which device it means cannot be committed. The solution notebooks (nbval) run on the machine's own
# device, as a reader's do.
DEVICE_MARKS = ("sim", "cuda")
_ASKED_ENV = "SYNCLAB_DEVICE_ASKED"  # what the person running pytest set SYNCLAB_DEVICE to ("": nothing); xdist's
# workers inherit it from the process that started them, which has already set SYNCLAB_DEVICE=sim for collection


def device_mark(item) -> str | None:
    """``"sim"`` or ``"cuda"``: the test's closest device mark; None when it has none."""
    return next((m.name for m in item.iter_markers() if m.name in DEVICE_MARKS), None)


def _set_device_env(value: str | None) -> None:
    if value is None:
        os.environ.pop(DEVICE_ENV, None)
    else:
        os.environ[DEVICE_ENV] = value


def pytest_runtest_setup(item):
    if not isinstance(item, pytest.Function):  # a solution notebook's cell: the machine's device
        _set_device_env(os.environ.get(_ASKED_ENV) or None)
        return
    mark = device_mark(item)
    if mark is None:
        pytest.fail(f"{item.nodeid} names no device: mark it @pytest.mark.sim (the simulated device, on every "
                    f"machine) or @pytest.mark.cuda (a real GPU, skipped without one); a module may set "
                    f"pytestmark = pytest.mark.sim", pytrace=False)
    if mark == "cuda":
        if not torch.cuda.is_available():
            pytest.skip("needs a CUDA GPU")
        _set_device_env(None)
    else:
        _set_device_env(SIMULATED)


def pytest_runtest_teardown(item, nextitem):
    _set_device_env(SIMULATED)  # collection and module-level code between tests see the simulated device


def pytest_addoption(parser):
    parser.addoption("--refresh-snapshots", action="store_true",
                     help="rewrite the report texts stored under tests/snapshots/ (tests/snapshots.py)")


def pytest_configure(config):
    if config.getoption("--refresh-snapshots", default=False):
        os.environ["SYNCLAB_REFRESH_SNAPSHOTS"] = "1"  # tests.snapshots.REFRESH_ENV, in every worker too
    for name, what in (("sim", "tests the simulated device, on every machine (SYNCLAB_DEVICE=sim hides a GPU)"),
                       ("cuda", "tests a real CUDA GPU; skipped without one")):
        config.addinivalue_line("markers", f"{name}: {what}")
    # Collection (module-level code) sees the simulated device; each test then gets the device its mark names.
    os.environ.setdefault(_ASKED_ENV, os.environ.get(DEVICE_ENV, ""))
    os.environ[DEVICE_ENV] = SIMULATED
    # Timings under test run their whole path as briefly as it allows (synclab.run_modes.smoke_run); the
    # kernels nbval and the CLI start inherit it. Tests assert counts, never times.
    os.environ.setdefault(SMOKE_ENV, "1")
    # Every `check` the suite runs, in a fresh Python: no warm check server outlives the tests (one test starts its
    # own: tests/test_learner_check.py).
    os.environ.setdefault(CHECK_SERVER_ENV, "0")
    # One intra-op thread in every process of the suite (the workers, and the kernels and ranks they start,
    # which read OMP_NUM_THREADS): several workers on two cores, each with a pool of spinning threads, ran
    # some tests twenty times slower than alone.
    if not os.environ.get("OMP_NUM_THREADS", "").strip().isdigit():  # unset, or set to nothing (`OMP_NUM_THREADS=`)
        os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    option = config.option
    # pytest-xdist (3.8) hands out the files with the most tests first unless told not to, whatever the order of
    # the collection: then the few long files (nbgrader, the fresh labs, the capstone's nbval) started last and
    # kept one worker busy for minutes after the others were done. The order of LONGEST_FIRST is kept instead.
    if getattr(option, "loadscopereorder", None):
        option.loadscopereorder = False
    if getattr(option, "nbval", False) or getattr(option, "nbval_lax", False):
        if not option.nbval_sanitize_with and SANITIZER.exists():  # a copy without tests/ sanitizes nothing
            option.nbval_sanitize_with = str(SANITIZER)
        # a lab's check cell that fails raises after its report, so that nbval fails it (synclab.run_modes)
        os.environ[NBVAL_ENV] = "1"
        if not option.nbval_kernel_name:
            option.nbval_current_env = True  # the notebooks run in the interpreter running pytest


FAILURE_LOG_ENV = "SYNCLAB_FAILURE_LOG"  # a file each failure's report is appended to as it happens (make gpu-check)


def pytest_runtest_logreport(report):
    """With SYNCLAB_FAILURE_LOG set, append each failure's report to that file at once: a run cut off at its time
    limit (a GPU machine's budget) prints no summary, and the file still says why each test failed."""
    path = os.environ.get(FAILURE_LOG_ENV)
    if path and report.failed and not os.environ.get("PYTEST_XDIST_WORKER"):  # xdist: the controller writes
        with open(path, "a") as log:
            log.write(f"=== {report.nodeid} ({report.when})\n{report.longreprtext[-6000:]}\n\n")


# The files that take longest, started first: make test hands whole files to its workers in collection order, and
# one of these started last kept the suite running minutes after the others were done. In order of their total
# time in `make test --durations=0` (2026-12-01; a solution notebook's nbval included: they are collected last);
# the files not named here take a few seconds each and fill the gaps at the end.
LONGEST_FIRST = ["tests/test_judge.py", "tests/test_nbgrader.py", "tests/test_book.py",
                 "tests/test_honest_corpus_more.py", "tests/test_judged_apart.py", "tests/test_capstone.py",
                 "tests/test_clauses.py",
                 "tests/test_learner_check.py", "tests/test_data_parallel.py", "tests/test_answer_scan.py",
                 "tests/test_cli_labs.py", "tests/test_honest_corpus.py", "tests/test_cli_fresh_labs.py",
                 "tests/test_cli.py",
                 "tests/test_list_caches.py", "tests/test_slice_then_split.py", "tests/test_wrong_versions.py",
                 "tests/test_cli_fresh_labs_more.py", "solutions/06_capstone_engine_step.ipynb",
                 "tests/test_pinned_transfers.py", "tests/test_notebook_runner.py", "tests/test_nbval_labs.py",
                 "tests/test_checks.py", "tests/test_rank_group.py", "solutions/01_slice_then_split.ipynb",
                 "tests/test_audit.py", "solutions/03_pinned_transfers.ipynb", "tests/test_reverse_scan.py",
                 "solutions/05_list_based_caches.ipynb", "tests/test_lazy_streams.py", "tests/test_torch_api.py",
                 "tests/test_cli_solutions.py", "solutions/02_lazy_streams.ipynb", "tests/test_profiling.py"]


def pytest_collection_modifyitems(session, config, items):
    root = Path(__file__).parent

    def rank(item) -> int:
        path = Path(str(item.fspath))
        name = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items[:] = sorted(items, key=rank)  # stable: each file's own order is kept
